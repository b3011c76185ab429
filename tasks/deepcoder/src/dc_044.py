ID = "dc-044"
KIND = "method"
DIFFICULTY = "easy"
FUNC_NAME = "recordHighs"
STARTER = "class Solution:\n    def recordHighs(self, readings: list[int]) -> list[int]:\n        "

STATEMENT = """\
# Record Highs

For a list of readings, return the list whose `i`-th element is the maximum of
the first `i + 1` readings (the record high so far). Readings may be negative.

Implement `Solution.recordHighs(readings)`; an empty list gives an empty list.

**Constraints**

- `0 <= len(readings) <= 10^5`
- `-10^9 <= reading <= 10^9`
"""

REFERENCE = r'''
class Solution:
    def recordHighs(self, readings: list[int]) -> list[int]:
        out = []
        for x in readings:
            out.append(x if not out or x > out[-1] else out[-1])
        return out
'''

WRONG = r'''
class Solution:
    def recordHighs(self, readings: list[int]) -> list[int]:
        out = []
        best = 0
        for x in readings:
            best = max(best, x)
            out.append(best)
        return out
'''


def inputs(rng):
    cases = [
        [3, 1, 4, 1, 5, 9, 2, 6],
        [],
        [0],
        [5, 5, 5],
        [10, 9, 8],
        [1, 2, 3],
        [-1000000000, 1000000000],
    ]
    cases.append([-5, -3, -4, -1])
    cases.append([rng.randint(-10**9, -1) for _ in range(40)])
    cases.append([rng.randint(-100, 100) for _ in range(200)])
    cases.append([rng.randint(-1000, 1000) for _ in range(600)])
    return [[c] for c in cases]
