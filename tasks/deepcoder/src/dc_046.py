ID = "dc-046"
KIND = "method"
DIFFICULTY = "medium"
FUNC_NAME = "groupAnagrams"
STARTER = "class Solution:\n    def groupAnagrams(self, words: list[str]) -> list[list[str]]:\n        "

STATEMENT = """\
# Anagram Families

Two words are anagrams if one can be obtained by rearranging the letters of the
other (using every letter exactly as many times). Group the given words into
families of anagrams.

Implement `Solution.groupAnagrams(words)` returning the list of families, where

- each family is sorted lexicographically (duplicates in the input stay
  duplicates in the family), and
- the families are sorted lexicographically by their first word.

**Constraints**

- `0 <= len(words) <= 10^4`
- every word has `1` to `8` lowercase letters
"""

REFERENCE = r'''
class Solution:
    def groupAnagrams(self, words: list[str]) -> list[list[str]]:
        groups = {}
        for w in words:
            groups.setdefault("".join(sorted(w)), []).append(w)
        return sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])
'''

WRONG = r'''
class Solution:
    def groupAnagrams(self, words: list[str]) -> list[list[str]]:
        groups = {}
        for w in words:
            groups.setdefault("".join(sorted(set(w))), []).append(w)
        return sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])
'''


def inputs(rng):
    cases = [
        ["listen", "silent", "enlist", "google", "gogole", "cat", "act", "tac"],
        [],
        ["a"],
        ["ab", "ba", "ab"],
        ["aab", "abb", "bab", "aba"],
        ["abc", "def", "ghi"],
        ["z", "zz", "zzz"],
    ]
    for n, L, alpha in ((20, 3, "abc"), (200, 4, "abcd"), (250, 5, "aabbc"), (300, 3, "xyz")):
        cases.append(["".join(rng.choice(alpha) for _ in range(rng.randint(1, L))) for _ in range(n)])
    return [[c] for c in cases]
