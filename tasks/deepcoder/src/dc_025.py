ID = "dc-025"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Counting-Out Game

`n` children, numbered `1` to `n`, stand in a circle in increasing order. Starting
from child `1`, they count `1, 2, ..., k` going around the circle; the child who
says `k` leaves the circle, and counting restarts at `1` from the next remaining
child. This repeats until everyone has left. Print the order in which the
children leave.

**Input**

One line with `n` and `k`.

**Output**

Print `n` integers separated by spaces: the children in the order they leave.

**Constraints**

- `1 <= n <= 5000`
- `1 <= k <= 10^9`
"""

REFERENCE = r'''
import sys
n, k = map(int, sys.stdin.read().split())
circle = list(range(1, n + 1))
idx = 0
out = []
while circle:
    idx = (idx + k - 1) % len(circle)
    out.append(circle.pop(idx))
print(" ".join(map(str, out)))
'''

WRONG = r'''
import sys
n, k = map(int, sys.stdin.read().split())
circle = list(range(1, n + 1))
idx = 0
out = []
while circle:
    idx = (idx + k) % len(circle)
    out.append(circle.pop(idx))
print(" ".join(map(str, out)))
'''


def inputs(rng):
    cases = [(7, 3), (1, 1), (1, 1000000000), (5, 1), (2, 2), (6, 6), (10, 1000000000)]
    cases.append((50, rng.randint(2, 9)))
    cases.append((300, rng.randint(10, 1000)))
    cases.append((1000, 2))
    cases.append((2000, rng.randint(10**8, 10**9)))
    return [f"{n} {k}\n" for n, k in cases]
