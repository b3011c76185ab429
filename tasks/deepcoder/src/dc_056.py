ID = "dc-056"
KIND = "method"
DIFFICULTY = "medium"
FUNC_NAME = "canSplit"
STARTER = "class Solution:\n    def canSplit(self, text: str, words: list[str]) -> bool:\n        "

STATEMENT = """\
# Lost Spaces

The spaces were lost from a sentence. Decide whether `text` can be split into a
sequence of one or more words, each taken from the dictionary `words` (a word may
be used any number of times).

Implement `Solution.canSplit(text, words)` returning `True` or `False`.

**Constraints**

- `1 <= len(text) <= 2000`
- `1 <= len(words) <= 500`, each word has `1` to `20` lowercase letters
- `text` consists of lowercase letters
"""

REFERENCE = r'''
class Solution:
    def canSplit(self, text: str, words: list[str]) -> bool:
        vocab = set(words)
        lengths = sorted({len(w) for w in vocab})
        n = len(text)
        ok = [False] * (n + 1)
        ok[0] = True
        for i in range(1, n + 1):
            for L in lengths:
                if L > i:
                    break
                if ok[i - L] and text[i - L:i] in vocab:
                    ok[i] = True
                    break
        return ok[n]
'''

WRONG = r'''
class Solution:
    def canSplit(self, text: str, words: list[str]) -> bool:
        vocab = set(words)
        lengths = sorted({len(w) for w in vocab}, reverse=True)
        i = 0
        while i < len(text):
            for L in lengths:
                if text[i:i + L] in vocab:
                    i += L
                    break
            else:
                return False
        return True
'''


def inputs(rng):
    cases = [
        ("applepenapple", ["apple", "pen"]),
        ("a", ["a"]),
        ("a", ["b"]),
        ("catsandog", ["cats", "dog", "sand", "and", "cat"]),
        ("aaaaaaa", ["aaaa", "aaa"]),
        ("abcd", ["a", "abc", "b", "cd"]),
        ("goalspecial", ["go", "goal", "goals", "special"]),
    ]
    vocab = ["".join(rng.choice("ab") for _ in range(rng.randint(1, 5))) for _ in range(12)]
    cases.append(("".join(rng.choice(vocab) for _ in range(30)), vocab))
    v2 = ["".join(rng.choice("abc") for _ in range(rng.randint(2, 6))) for _ in range(40)]
    cases.append(("".join(rng.choice(v2) for _ in range(300)) + "c", v2))
    cases.append(("a" * 1999 + "b", ["a", "aa", "aaa", "aaaa"]))
    cases.append(("ab" * 1000, ["aba", "b", "ab"]))
    return [list(c) for c in cases]
