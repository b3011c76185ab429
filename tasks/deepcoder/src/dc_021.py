ID = "dc-021"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Conference Rooms

A company schedules `n` meetings; meeting `i` uses a room during the half-open
time interval `[s_i, e_i)` (so a meeting ending at time `10` and one starting at
time `10` can use the same room). What is the minimum number of rooms needed so
that no two meetings in the same room overlap?

**Input**

The first line contains `n`. Each of the next `n` lines contains `s_i` and `e_i`.

**Output**

Print the minimum number of rooms.

**Constraints**

- `1 <= n <= 10^5`
- `0 <= s_i < e_i <= 10^9`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
events = []
for i in range(n):
    s, e = int(data[1 + 2 * i]), int(data[2 + 2 * i])
    events.append((s, 1))
    events.append((e, -1))
events.sort()
cur = best = 0
for _, d in events:
    cur += d
    best = max(best, cur)
print(best)
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
events = []
for i in range(n):
    s, e = int(data[1 + 2 * i]), int(data[2 + 2 * i])
    events.append((s, -1))
    events.append((e, 1))
events.sort()
cur = best = 0
for _, d in events:
    cur -= d
    best = max(best, cur)
print(best)
'''


def _rand(rng, n, hi, span):
    out = []
    for _ in range(n):
        s = rng.randint(0, hi)
        out.append((s, s + rng.randint(1, span)))
    return out


def inputs(rng):
    cases = [
        [(0, 30), (5, 10), (15, 20), (10, 15)],
        [(1, 2)],
        [(1, 5), (5, 10)],
        [(1, 5), (4, 10)],
        [(0, 1000000000), (0, 1000000000), (0, 1000000000)],
        [(10, 20), (20, 30), (30, 40), (15, 25)],
        [(3, 4), (1, 2), (2, 3), (1, 4)],
    ]
    for n, hi, span in ((10, 20, 5), (100, 200, 30), (500, 10**6, 10**4), (800, 100, 10)):
        cases.append(_rand(rng, n, hi, span))
    cases.append([(i, i + 1) for i in range(300)])
    return [f"{len(c)}\n" + "\n".join(f"{s} {e}" for s, e in c) + "\n" for c in cases]
