ID = "dc-043"
KIND = "function"
DIFFICULTY = "easy"
FUNC_NAME = "transpose"
STARTER = "def transpose(grid: list[list[int]]) -> list[list[int]]:\n    "

STATEMENT = """\
# Turn the Table

A table with `r` rows and `c` columns is given as a list of `r` rows, each a list
of `c` integers. Return its transpose: a table with `c` rows and `r` columns in
which row `j`, column `i` holds the original row `i`, column `j`.

Implement `transpose(grid)`.

**Constraints**

- `1 <= r, c <= 100`
- `-10^9 <= entry <= 10^9`
"""

REFERENCE = r'''
def transpose(grid: list[list[int]]) -> list[list[int]]:
    r, c = len(grid), len(grid[0])
    return [[grid[i][j] for i in range(r)] for j in range(c)]
'''

WRONG = r'''
def transpose(grid: list[list[int]]) -> list[list[int]]:
    n = len(grid)
    return [[grid[i][j] for i in range(n)] for j in range(n)]
'''


def inputs(rng):
    cases = [
        [[1, 2, 3], [4, 5, 6]],
        [[7]],
        [[1, 2], [3, 4]],
        [[1], [2], [3]],
        [[1, 2, 3, 4]],
        [[-1000000000, 1000000000]],
    ]
    for r, c in ((3, 5), (6, 2), (10, 10), (30, 7), (12, 40)):
        cases.append([[rng.randint(-99, 99) for _ in range(c)] for _ in range(r)])
    return [[g] for g in cases]
