ID = "dc-038"
KIND = "method"
DIFFICULTY = "easy"
FUNC_NAME = "countPairs"
STARTER = "class Solution:\n    def countPairs(self, colors: list[str]) -> int:\n        "

STATEMENT = """\
# Sock Drawer

A drawer holds single socks; `colors[i]` is the colour of the `i`-th sock. Two
socks of the same colour make a pair, and each sock can be in at most one pair.
Return the largest number of pairs that can be formed.

Implement `Solution.countPairs(colors)`.

**Constraints**

- `0 <= len(colors) <= 10^5`
- every colour is a non-empty string of lowercase letters of length at most `8`
"""

REFERENCE = r'''
class Solution:
    def countPairs(self, colors: list[str]) -> int:
        counts = {}
        for c in colors:
            counts[c] = counts.get(c, 0) + 1
        return sum(v // 2 for v in counts.values())
'''

WRONG = r'''
class Solution:
    def countPairs(self, colors: list[str]) -> int:
        counts = {}
        for c in colors:
            counts[c] = counts.get(c, 0) + 1
        return sum(1 for v in counts.values() if v >= 2)
'''


def inputs(rng):
    cases = [
        ["red", "blue", "red", "green", "red", "blue"],
        [],
        ["red"],
        ["red", "red"],
        ["a", "b", "c"],
        ["x", "x", "x", "x", "x"],
        ["grey", "navy", "grey", "navy", "navy", "navy"],
    ]
    palette = ["red", "blue", "green", "black", "white", "pink", "teal", "olive"]
    for n in (10, 100, 300):
        cases.append([rng.choice(palette) for _ in range(n)])
    cases.append([rng.choice(palette[:3]) for _ in range(500)])
    return [[c] for c in cases]
