ID = "dc-053"
KIND = "function"
DIFFICULTY = "medium"
FUNC_NAME = "rumor_minutes"
STARTER = "def rumor_minutes(office: list[list[int]]) -> int:\n    "

STATEMENT = """\
# Office Rumor

An open-plan office is a grid of desks: `0` is an empty desk, `1` is a worker who
has not heard a rumor yet and `2` is a worker who already knows it. Every minute,
each worker who knows the rumor tells all workers at desks sharing a side with
theirs (empty desks do not pass anything on). Return the number of minutes until
every worker knows the rumor, `0` if nobody needs to be told, or `-1` if some
worker will never hear it.

Implement `rumor_minutes(office)`.

**Constraints**

- `1 <= rows, columns <= 100`
- every cell is `0`, `1` or `2`
"""

REFERENCE = r'''
from collections import deque

def rumor_minutes(office: list[list[int]]) -> int:
    r, c = len(office), len(office[0])
    dist = [[-1] * c for _ in range(r)]
    dq = deque()
    for i in range(r):
        for j in range(c):
            if office[i][j] == 2:
                dist[i][j] = 0
                dq.append((i, j))
    best = 0
    while dq:
        x, y = dq.popleft()
        for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if 0 <= nx < r and 0 <= ny < c and office[nx][ny] == 1 and dist[nx][ny] < 0:
                dist[nx][ny] = dist[x][y] + 1
                best = max(best, dist[nx][ny])
                dq.append((nx, ny))
    for i in range(r):
        for j in range(c):
            if office[i][j] == 1 and dist[i][j] < 0:
                return -1
    return best
'''

WRONG = r'''
from collections import deque

def rumor_minutes(office: list[list[int]]) -> int:
    r, c = len(office), len(office[0])
    dist = [[-1] * c for _ in range(r)]
    dq = deque()
    for i in range(r):
        for j in range(c):
            if office[i][j] == 2:
                dist[i][j] = 0
                dq.append((i, j))
    best = 0
    while dq:
        x, y = dq.popleft()
        for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if 0 <= nx < r and 0 <= ny < c and office[nx][ny] == 1 and dist[nx][ny] < 0:
                dist[nx][ny] = dist[x][y] + 1
                best = max(best, dist[nx][ny])
                dq.append((nx, ny))
    return best
'''


def _rand(rng, r, c, p0, p2):
    g = []
    for _ in range(r):
        row = []
        for _ in range(c):
            u = rng.random()
            row.append(0 if u < p0 else 2 if u < p0 + p2 else 1)
        g.append(row)
    return g


def inputs(rng):
    cases = [
        [[2, 1, 1], [1, 1, 0], [0, 1, 1]],
        [[0]],
        [[1]],
        [[2]],
        [[2, 1, 0, 1]],
        [[2, 2], [2, 2]],
        [[1, 1, 1], [1, 2, 1], [1, 1, 1]],
    ]
    for r, c, p0, p2 in ((5, 5, 0.2, 0.1), (12, 15, 0.1, 0.02), (30, 30, 0.05, 0.002), (20, 40, 0.3, 0.05)):
        cases.append(_rand(rng, r, c, p0, p2))
    big = [[1] * 50 for _ in range(50)]
    big[0][0] = 2
    cases.append(big)
    return [[g] for g in cases]
