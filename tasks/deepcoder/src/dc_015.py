ID = "dc-015"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Counting Lakes

A satellite map is a grid of `r` rows and `c` columns; `#` marks water and `.`
marks land. Two water cells belong to the same lake if they share a side
(up, down, left or right; diagonal contact does not join lakes). Count the lakes.

**Input**

The first line contains `r` and `c`. Each of the next `r` lines is a string of
`c` characters, each `#` or `.`.

**Output**

Print the number of lakes.

**Constraints**

- `1 <= r, c <= 300`
"""

REFERENCE = r'''
import sys
from collections import deque
data = sys.stdin.read().split()
r, c = int(data[0]), int(data[1])
g = data[2:2 + r]
seen = [[False] * c for _ in range(r)]
lakes = 0
for i in range(r):
    for j in range(c):
        if g[i][j] == "#" and not seen[i][j]:
            lakes += 1
            seen[i][j] = True
            dq = deque([(i, j)])
            while dq:
                x, y = dq.popleft()
                for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                    if 0 <= nx < r and 0 <= ny < c and g[nx][ny] == "#" and not seen[nx][ny]:
                        seen[nx][ny] = True
                        dq.append((nx, ny))
print(lakes)
'''

WRONG = r'''
import sys
from collections import deque
data = sys.stdin.read().split()
r, c = int(data[0]), int(data[1])
g = data[2:2 + r]
seen = [[False] * c for _ in range(r)]
lakes = 0
for i in range(r):
    for j in range(c):
        if g[i][j] == "#" and not seen[i][j]:
            lakes += 1
            seen[i][j] = True
            dq = deque([(i, j)])
            while dq:
                x, y = dq.popleft()
                for dx in (-1, 0, 1):
                    for dy in (-1, 0, 1):
                        nx, ny = x + dx, y + dy
                        if 0 <= nx < r and 0 <= ny < c and g[nx][ny] == "#" and not seen[nx][ny]:
                            seen[nx][ny] = True
                            dq.append((nx, ny))
print(lakes)
'''


def _rand(rng, r, c, p):
    return ["".join("#" if rng.random() < p else "." for _ in range(c)) for _ in range(r)]


def inputs(rng):
    cases = [
        ["##..#", "#...#", "..#..", "....#"],
        ["."],
        ["#"],
        ["#.", ".#"],
        ["###", "#.#", "###"],
        ["#.#.#", ".#.#.", "#.#.#"],
    ]
    for r, c, p in ((5, 8, 0.4), (20, 20, 0.45), (40, 60, 0.5), (80, 100, 0.35)):
        cases.append(_rand(rng, r, c, p))
    cases.append(["." * 100 for _ in range(50)])
    cases.append(["#" * 120 for _ in range(60)])
    return [f"{len(g)} {len(g[0])}\n" + "\n".join(g) + "\n" for g in cases]
