ID = "dc-050"
KIND = "method"
DIFFICULTY = "medium"
FUNC_NAME = "cheapestPath"
STARTER = "class Solution:\n    def cheapestPath(self, grid: list[list[int]]) -> int:\n        "

STATEMENT = """\
# Toll Grid

A city is a grid of blocks; `grid[i][j]` is the toll (a non-negative integer) for
entering block `(i, j)`. A driver starts at the top-left block and must reach the
bottom-right block, moving only right or down. The cost of a route is the sum of
the tolls of all blocks on it, including the first and the last block. Return the
minimum cost.

Implement `Solution.cheapestPath(grid)`.

**Constraints**

- `1 <= rows, columns <= 200`
- `0 <= grid[i][j] <= 1000`
"""

REFERENCE = r'''
class Solution:
    def cheapestPath(self, grid: list[list[int]]) -> int:
        r, c = len(grid), len(grid[0])
        dp = [0] * c
        for i in range(r):
            for j in range(c):
                if i == 0 and j == 0:
                    dp[j] = grid[0][0]
                elif i == 0:
                    dp[j] = dp[j - 1] + grid[i][j]
                elif j == 0:
                    dp[j] = dp[j] + grid[i][j]
                else:
                    dp[j] = min(dp[j], dp[j - 1]) + grid[i][j]
        return dp[-1]
'''

WRONG = r'''
class Solution:
    def cheapestPath(self, grid: list[list[int]]) -> int:
        r, c = len(grid), len(grid[0])
        i = j = 0
        total = grid[0][0]
        while (i, j) != (r - 1, c - 1):
            if i == r - 1:
                j += 1
            elif j == c - 1:
                i += 1
            elif grid[i][j + 1] <= grid[i + 1][j]:
                j += 1
            else:
                i += 1
            total += grid[i][j]
        return total
'''


def inputs(rng):
    cases = [
        [[1, 3, 1], [1, 5, 1], [4, 2, 1]],
        [[7]],
        [[1, 2, 3]],
        [[1], [2], [3]],
        [[0, 0], [0, 0]],
        [[1, 1, 1000], [1000, 1, 1000], [1000, 1, 1]],
        [[5, 1, 100], [2, 100, 100], [1, 1, 1]],
    ]
    for r, c, hi in ((4, 5, 9), (10, 10, 100), (30, 20, 1000), (40, 40, 9)):
        cases.append([[rng.randint(0, hi) for _ in range(c)] for _ in range(r)])
    return [[g] for g in cases]
