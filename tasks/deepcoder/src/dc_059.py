ID = "dc-059"
KIND = "function"
DIFFICULTY = "hard"
FUNC_NAME = "shortest_cover"
STARTER = "def shortest_cover(text: str, need: str) -> int:\n    "

STATEMENT = """\
# Shortest Covering Window

Return the length of the shortest contiguous substring of `text` that contains
every character of `need` at least as many times as it occurs in `need` (for
example, if `need = "aab"` the window must contain at least two `a` and one `b`).
Return `0` if no such substring exists.

Implement `shortest_cover(text, need)`. An `O(len(text) + len(need))` solution
is expected.

**Constraints**

- `1 <= len(text), len(need) <= 10^5`
- both strings consist of lowercase letters
"""

REFERENCE = r'''
def shortest_cover(text: str, need: str) -> int:
    want = {}
    for c in need:
        want[c] = want.get(c, 0) + 1
    missing = len(need)
    have = {}
    best = 0
    left = 0
    for right, c in enumerate(text):
        if c in want:
            have[c] = have.get(c, 0) + 1
            if have[c] <= want[c]:
                missing -= 1
        while missing == 0:
            size = right - left + 1
            if best == 0 or size < best:
                best = size
            d = text[left]
            if d in want:
                have[d] -= 1
                if have[d] < want[d]:
                    missing += 1
            left += 1
    return best
'''

WRONG = r'''
def shortest_cover(text: str, need: str) -> int:
    want = set(need)
    have = {}
    best = 0
    left = 0
    for right, c in enumerate(text):
        if c in want:
            have[c] = have.get(c, 0) + 1
        while all(have.get(x, 0) > 0 for x in want):
            size = right - left + 1
            if best == 0 or size < best:
                best = size
            d = text[left]
            if d in want:
                have[d] -= 1
            left += 1
    return best
'''


def inputs(rng):
    cases = [
        ("adobecodebanc", "abc"),
        ("a", "a"),
        ("a", "b"),
        ("a", "aa"),
        ("baab", "aab"),
        ("abcabc", "cba"),
        ("zzzzqzzzz", "qz"),
        ("aaabbbccc", "abc"),
    ]
    cases.append(("".join(rng.choice("abcd") for _ in range(100)), "aabd"))
    cases.append(("".join(rng.choice("abcdefghij") for _ in range(3000)), "aabbjj"))
    cases.append(("".join(rng.choice("ab") for _ in range(20000)) + "c" + "ab" * 3000, "c" + "a" * 2000 + "b" * 2000))
    cases.append(("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10000)), "zzyyxx"))
    return [list(c) for c in cases]
