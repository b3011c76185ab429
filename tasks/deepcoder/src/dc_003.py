ID = "dc-003"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Lowest Balance

A bank account starts with a balance of `0`. Then `n` transactions are applied in
order; a positive amount is a deposit and a negative amount is a withdrawal (the
bank allows the balance to go negative). What is the lowest balance the account
ever has, counting the starting balance of `0`?

**Input**

The first line contains `n`. The second line contains `n` integers, the
transaction amounts in order.

**Output**

Print the lowest balance, counting the initial `0`.

**Constraints**

- `1 <= n <= 10^5`
- `-10^9 <= amount <= 10^9`, amounts are non-zero
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
bal = 0
low = 0
for x in data[1:1 + n]:
    bal += int(x)
    low = min(low, bal)
print(low)
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
bal = 0
low = None
for x in data[1:1 + n]:
    bal += int(x)
    low = bal if low is None else min(low, bal)
print(low)
'''


def _case(a):
    return f"{len(a)}\n{' '.join(map(str, a))}\n"


def _nz(rng, lo, hi):
    while True:
        v = rng.randint(lo, hi)
        if v:
            return v


def inputs(rng):
    cases = [
        [50, -80, 20, -10, 100],
        [5, 3, 2],
        [-7],
        [10],
        [-1000000000] * 5,
        [1, -1, 1, -1],
        [3, -2, -2, 4, -6],
    ]
    for n in (10, 100, 1000):
        cases.append([_nz(rng, -100, 120) for _ in range(n)])
    cases.append([_nz(rng, -10**9, 10**9) for _ in range(800)])
    cases.append([_nz(rng, 1, 10**9) for _ in range(300)])
    return [_case(a) for a in cases]
