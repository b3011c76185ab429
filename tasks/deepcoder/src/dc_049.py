ID = "dc-049"
KIND = "function"
DIFFICULTY = "medium"
FUNC_NAME = "spiral"
STARTER = "def spiral(grid: list[list[int]]) -> list[int]:\n    "

STATEMENT = """\
# Snail Reading

Read the entries of a rectangular table in clockwise spiral order: start at the
top-left corner, go right along the top row, then down the right column, left
along the bottom row, up the left column, and continue inwards in the same way
until every entry has been read exactly once.

Implement `spiral(grid)` returning the entries in that order.

**Constraints**

- `1 <= rows, columns <= 100`
- `-10^6 <= entry <= 10^6`
"""

REFERENCE = r'''
def spiral(grid: list[list[int]]) -> list[int]:
    top, bottom, left, right = 0, len(grid) - 1, 0, len(grid[0]) - 1
    out = []
    while top <= bottom and left <= right:
        for j in range(left, right + 1):
            out.append(grid[top][j])
        for i in range(top + 1, bottom + 1):
            out.append(grid[i][right])
        if top < bottom:
            for j in range(right - 1, left - 1, -1):
                out.append(grid[bottom][j])
        if left < right:
            for i in range(bottom - 1, top, -1):
                out.append(grid[i][left])
        top, bottom, left, right = top + 1, bottom - 1, left + 1, right - 1
    return out
'''

WRONG = r'''
def spiral(grid: list[list[int]]) -> list[int]:
    top, bottom, left, right = 0, len(grid) - 1, 0, len(grid[0]) - 1
    out = []
    while top <= bottom and left <= right:
        for j in range(left, right + 1):
            out.append(grid[top][j])
        for i in range(top + 1, bottom + 1):
            out.append(grid[i][right])
        for j in range(right - 1, left - 1, -1):
            out.append(grid[bottom][j])
        for i in range(bottom - 1, top, -1):
            out.append(grid[i][left])
        top, bottom, left, right = top + 1, bottom - 1, left + 1, right - 1
    return out
'''


def inputs(rng):
    cases = [
        [[1, 2, 3], [4, 5, 6], [7, 8, 9]],
        [[5]],
        [[1, 2, 3, 4]],
        [[1], [2], [3]],
        [[1, 2], [3, 4]],
        [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]],
        [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12], [13, 14, 15]],
    ]
    for r, c in ((4, 7), (9, 2), (20, 20), (25, 31)):
        cases.append([[rng.randint(-99, 99) for _ in range(c)] for _ in range(r)])
    return [[g] for g in cases]
