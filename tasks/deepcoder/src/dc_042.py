ID = "dc-042"
KIND = "method"
DIFFICULTY = "easy"
FUNC_NAME = "countPrefixed"
STARTER = "class Solution:\n    def countPrefixed(self, words: list[str], prefix: str) -> int:\n        "

STATEMENT = """\
# Prefix Count

Return how many strings in `words` start with the string `prefix`. A word
starts with `prefix` if its first `len(prefix)` characters are exactly `prefix`
(so a word shorter than the prefix never counts, and every word starts with the
empty prefix).

Implement `Solution.countPrefixed(words, prefix)`.

**Constraints**

- `0 <= len(words) <= 10^4`
- `0 <= len(prefix) <= 10`, every word has `1` to `10` lowercase letters
"""

REFERENCE = r'''
class Solution:
    def countPrefixed(self, words: list[str], prefix: str) -> int:
        return sum(1 for w in words if w[:len(prefix)] == prefix)
'''

WRONG = r'''
class Solution:
    def countPrefixed(self, words: list[str], prefix: str) -> int:
        return sum(1 for w in words if prefix in w)
'''


def inputs(rng):
    cases = [
        (["apple", "apply", "ape", "bapple", "app"], "app"),
        ([], "a"),
        (["a"], ""),
        (["ab", "ba", "aab"], "ab"),
        (["cat"], "cats"),
        (["zz", "zzz", "z"], "zz"),
        (["tree", "street", "treetop"], "tree"),
    ]
    for n, p in ((20, "a"), (300, "ab"), (600, "ba"), (600, "c")):
        cases.append(([("".join(rng.choice("abc") for _ in range(rng.randint(1, 6)))) for _ in range(n)], p))
    return [list(c) for c in cases]
