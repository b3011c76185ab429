ID = "dc-001"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Temperature Swings

A weather station logs one temperature reading per day. The *swing* between two
consecutive days is the absolute difference of their readings. Report the largest
swing in the log. A log with a single day has no swings; report `0` for it.

**Input**

The first line contains an integer `n`, the number of days. The second line
contains `n` integers `t_1 ... t_n`, the readings in order.

**Output**

Print one integer: the largest absolute difference between readings of two
consecutive days, or `0` if `n = 1`.

**Constraints**

- `1 <= n <= 10^5`
- `-10^9 <= t_i <= 10^9`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
t = list(map(int, data[1:1 + n]))
best = 0
for i in range(1, n):
    best = max(best, abs(t[i] - t[i - 1]))
print(best)
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
t = list(map(int, data[1:1 + n]))
best = 0
for i in range(1, n):
    best = max(best, t[i] - t[i - 1])
print(best)
'''


def _case(t):
    return f"{len(t)}\n{' '.join(map(str, t))}\n"


def inputs(rng):
    cases = [
        [12, 15, 9, 10, 20],
        [5],
        [30, 20, 10, 0],
        [-5, -5, -5],
        [-1000000000, 1000000000],
        [1000000000, -1000000000, 1000000000],
        [7, 8],
    ]
    for n in (10, 100, 1000):
        cases.append([rng.randint(-50, 50) for _ in range(n)])
    cases.append(sorted((rng.randint(-10**9, 10**9) for _ in range(200)), reverse=True))
    cases.append([rng.randint(-10**9, 10**9) for _ in range(600)])
    return [_case(t) for t in cases]
