ID = "dc-061"
KIND = "function"
DIFFICULTY = "hard"
FUNC_NAME = "largest_banner"
STARTER = "def largest_banner(heights: list[int]) -> int:\n    "

STATEMENT = """\
# Largest Banner

A skyline consists of adjacent buildings of width `1` and heights
`heights[0..n-1]`. A rectangular banner may be hung flat against a contiguous
group of buildings: its height cannot exceed the shortest building in the group,
and its width is the number of buildings in the group. Return the largest
possible banner area (`0` if there are no buildings).

Implement `largest_banner(heights)`. An `O(n)` solution is expected.

**Constraints**

- `0 <= n <= 10^5`
- `0 <= heights[i] <= 10^9`
"""

REFERENCE = r'''
def largest_banner(heights: list[int]) -> int:
    stack = []
    best = 0
    for i, h in enumerate(heights + [0]):
        start = i
        while stack and stack[-1][1] >= h:
            j, hj = stack.pop()
            best = max(best, hj * (i - j))
            start = j
        stack.append((start, h))
    return best
'''

WRONG = r'''
def largest_banner(heights: list[int]) -> int:
    stack = []
    best = 0
    for i, h in enumerate(heights):
        start = i
        while stack and stack[-1][1] >= h:
            j, hj = stack.pop()
            best = max(best, hj * (i - j))
            start = j
        stack.append((start, h))
    return best
'''


def inputs(rng):
    cases = [
        [2, 1, 5, 6, 2, 3],
        [],
        [7],
        [0, 0],
        [1, 2, 3, 4, 5],
        [5, 4, 3, 2, 1],
        [3, 3, 3],
        [1000000000, 1000000000],
    ]
    cases.append([rng.randint(0, 10) for _ in range(60)])
    cases.append([rng.randint(0, 10**9) for _ in range(1500)])
    cases.append([rng.randint(0, 1000) for _ in range(6000)])
    cases.append(list(range(1, 5001)))
    return [[c] for c in cases]
