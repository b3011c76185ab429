ID = "dc-054"
KIND = "method"
DIFFICULTY = "medium"
FUNC_NAME = "longestMirror"
STARTER = "class Solution:\n    def longestMirror(self, s: str) -> int:\n        "

STATEMENT = """\
# Longest Mirror Piece

Return the length of the longest contiguous substring of `s` that is a
palindrome (reads the same forwards and backwards).

Implement `Solution.longestMirror(s)`.

**Constraints**

- `1 <= len(s) <= 3000`
- `s` consists of lowercase letters
"""

REFERENCE = r'''
class Solution:
    def longestMirror(self, s: str) -> int:
        n = len(s)
        best = 1
        for center in range(2 * n - 1):
            l = center // 2
            r = l + center % 2
            while l >= 0 and r < n and s[l] == s[r]:
                l -= 1
                r += 1
            best = max(best, r - l - 1)
        return best
'''

WRONG = r'''
class Solution:
    def longestMirror(self, s: str) -> int:
        n = len(s)
        best = 1
        for center in range(n):
            l = r = center
            while l >= 0 and r < n and s[l] == s[r]:
                l -= 1
                r += 1
            best = max(best, r - l - 1)
        return best
'''


def inputs(rng):
    cases = ["forgeeksskeegfor", "a", "ab", "aa", "abcba", "abccbx", "racecarxyz", "abcd", "aaaabaaa"]
    cases.append("".join(rng.choice("ab") for _ in range(200)))
    half = "".join(rng.choice("abcdef") for _ in range(700))
    cases.append("".join(rng.choice("xyz") for _ in range(300)) + half + half[::-1] + "q")
    cases.append("".join(rng.choice("abc") for _ in range(3000)))
    return [[s] for s in cases]
