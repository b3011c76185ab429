ID = "dc-019"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Warehouse Robot

A robot moves in a warehouse drawn as a grid of `r` rows and `c` columns. `.` is
free floor, `#` is a shelf, `S` is the robot's start and `E` is the exit (both
free cells). In one step the robot moves to a free cell sharing a side with its
current cell (no diagonal moves). Find the minimum number of steps from `S` to
`E`, or report that the exit cannot be reached.

**Input**

The first line contains `r` and `c`. Each of the next `r` lines is a row of the
grid. There is exactly one `S` and exactly one `E`.

**Output**

Print the minimum number of steps, or `-1` if `E` is unreachable.

**Constraints**

- `1 <= r, c <= 500`, `r * c >= 2`
"""

REFERENCE = r'''
import sys
from collections import deque
data = sys.stdin.read().split()
r, c = int(data[0]), int(data[1])
g = data[2:2 + r]
for i in range(r):
    for j in range(c):
        if g[i][j] == "S":
            s = (i, j)
        elif g[i][j] == "E":
            e = (i, j)
dist = [[-1] * c for _ in range(r)]
dist[s[0]][s[1]] = 0
dq = deque([s])
while dq:
    x, y = dq.popleft()
    if (x, y) == e:
        break
    for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
        if 0 <= nx < r and 0 <= ny < c and g[nx][ny] != "#" and dist[nx][ny] < 0:
            dist[nx][ny] = dist[x][y] + 1
            dq.append((nx, ny))
print(dist[e[0]][e[1]])
'''

WRONG = r'''
import sys
from collections import deque
data = sys.stdin.read().split()
r, c = int(data[0]), int(data[1])
g = data[2:2 + r]
for i in range(r):
    for j in range(c):
        if g[i][j] == "S":
            s = (i, j)
        elif g[i][j] == "E":
            e = (i, j)
dist = [[-1] * c for _ in range(r)]
dist[s[0]][s[1]] = 0
dq = deque([s])
while dq:
    x, y = dq.popleft()
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            nx, ny = x + dx, y + dy
            if 0 <= nx < r and 0 <= ny < c and g[nx][ny] != "#" and dist[nx][ny] < 0:
                dist[nx][ny] = dist[x][y] + 1
                dq.append((nx, ny))
print(dist[e[0]][e[1]])
'''


def _rand(rng, r, c, p):
    g = [["#" if rng.random() < p else "." for _ in range(c)] for _ in range(r)]
    cells = rng.sample([(i, j) for i in range(r) for j in range(c)], 2)
    g[cells[0][0]][cells[0][1]] = "S"
    g[cells[1][0]][cells[1][1]] = "E"
    return ["".join(row) for row in g]


def inputs(rng):
    cases = [
        ["S..#", ".#..", "...E"],
        ["SE"],
        ["S#E"],
        ["S", ".", "E"],
        ["S.#", "##.", "..E"],
        ["S...", "###.", "E..."],
        [".S.", "...", ".E."],
    ]
    for r, c, p in ((6, 6, 0.25), (15, 20, 0.3), (40, 40, 0.3), (60, 80, 0.2)):
        cases.append(_rand(rng, r, c, p))
    snake = []
    for i in range(21):
        if i % 2 == 0:
            snake.append("." * 40)
        elif i % 4 == 1:
            snake.append("#" * 39 + ".")
        else:
            snake.append("." + "#" * 39)
    snake[0] = "S" + snake[0][1:]
    snake[20] = snake[20][:-1] + "E"
    cases.append(snake)
    return [f"{len(g)} {len(g[0])}\n" + "\n".join(g) + "\n" for g in cases]
