ID = "dc-063"
KIND = "function"
DIFFICULTY = "hard"
FUNC_NAME = "gentlest_climb"
STARTER = "def gentlest_climb(heights: list[list[int]]) -> int:\n    "

STATEMENT = """\
# Gentlest Climb

A hiker crosses a terrain map `heights` (rows x columns of integers) from the
top-left cell to the bottom-right cell, moving between cells that share a side.
The *effort* of a route is the largest absolute height difference between two
consecutive cells on it. Return the minimum possible effort (`0` for a single
cell).

Implement `gentlest_climb(heights)`.

**Constraints**

- `1 <= rows, columns <= 100`
- `0 <= heights[i][j] <= 10^6`
"""

REFERENCE = r'''
import heapq

def gentlest_climb(heights: list[list[int]]) -> int:
    r, c = len(heights), len(heights[0])
    INF = float("inf")
    best = [[INF] * c for _ in range(r)]
    best[0][0] = 0
    pq = [(0, 0, 0)]
    while pq:
        e, x, y = heapq.heappop(pq)
        if (x, y) == (r - 1, c - 1):
            return e
        if e > best[x][y]:
            continue
        for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if 0 <= nx < r and 0 <= ny < c:
                ne = max(e, abs(heights[nx][ny] - heights[x][y]))
                if ne < best[nx][ny]:
                    best[nx][ny] = ne
                    heapq.heappush(pq, (ne, nx, ny))
    return best[r - 1][c - 1]
'''

WRONG = r'''
def gentlest_climb(heights: list[list[int]]) -> int:
    r, c = len(heights), len(heights[0])
    dp = [[0] * c for _ in range(r)]
    for i in range(r):
        for j in range(c):
            if i == 0 and j == 0:
                continue
            opts = []
            if i > 0:
                opts.append(max(dp[i - 1][j], abs(heights[i][j] - heights[i - 1][j])))
            if j > 0:
                opts.append(max(dp[i][j - 1], abs(heights[i][j] - heights[i][j - 1])))
            dp[i][j] = min(opts)
    return dp[r - 1][c - 1]
'''


def inputs(rng):
    cases = [
        [[1, 2, 2], [3, 8, 2], [5, 3, 5]],
        [[42]],
        [[1, 1000000]],
        [[1], [5], [2]],
        [[1, 2, 1, 1, 1], [1, 2, 1, 2, 1], [1, 2, 1, 2, 1], [1, 2, 1, 2, 1], [1, 1, 1, 2, 1]],
        [[5, 5], [5, 5]],
        [[1, 9, 1], [1, 9, 1], [1, 1, 1]],
    ]
    for r, c, hi in ((6, 6, 20), (20, 30, 1000), (50, 50, 100)):
        cases.append([[rng.randint(0, hi) for _ in range(c)] for _ in range(r)])
    maze = [[rng.randint(0, 3) for _ in range(60)] for _ in range(60)]
    for i in range(1, 60, 2):
        gap = 59 if i % 4 == 1 else 0
        for j in range(60):
            if j != gap:
                maze[i][j] = 900000 + rng.randint(0, 99999)
    cases.append(maze)
    return [[g] for g in cases]
