ID = "dc-039"
KIND = "function"
DIFFICULTY = "easy"
FUNC_NAME = "first_unique"
STARTER = "def first_unique(s: str) -> int:\n    "

STATEMENT = """\
# First Lonely Letter

Return the index (0-based) of the first character of `s` that occurs exactly
once in `s`. If every character occurs more than once, or `s` is empty, return
`-1`.

Implement `first_unique(s)`.

**Constraints**

- `0 <= len(s) <= 10^5`
- `s` consists of lowercase letters
"""

REFERENCE = r'''
def first_unique(s: str) -> int:
    counts = {}
    for c in s:
        counts[c] = counts.get(c, 0) + 1
    for i, c in enumerate(s):
        if counts[c] == 1:
            return i
    return -1
'''

WRONG = r'''
def first_unique(s: str) -> int:
    counts = {}
    for c in s:
        counts[c] = counts.get(c, 0) + 1
    for i in range(len(s) - 1, -1, -1):
        if counts[s[i]] == 1:
            return i
    return -1
'''


def inputs(rng):
    cases = ["swiss", "", "a", "aabb", "abcabcd", "xxyzz", "leetcodeisfun", "zz"]
    body = "".join(rng.choice("abcdefgh") for _ in range(500))
    cases.append(body + body)
    cases.append(body + body + "q")
    big = "".join(rng.choice("abcdefghijklmnopqrstuvwxy") for _ in range(2000))
    cases.append(big + "z" + big[::-1] + "m")
    return [[s] for s in cases]
