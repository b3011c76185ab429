ID = "dc-009"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Counting Leap Years

In the Gregorian calendar a year is a leap year if it is divisible by `4`,
except that years divisible by `100` are not leap years, except that years
divisible by `400` are leap years again. For several ranges of years, count the
leap years in the range.

**Input**

The first line contains `q`. Each of the next `q` lines contains two integers
`a` and `b`.

**Output**

For each range print the number of leap years `y` with `a <= y <= b`.

**Constraints**

- `1 <= q <= 10^4`
- `1 <= a <= b <= 10^9`
"""

REFERENCE = r'''
import sys
def upto(y):
    return y // 4 - y // 100 + y // 400
data = sys.stdin.read().split()
q = int(data[0])
out = []
for i in range(q):
    a, b = int(data[1 + 2 * i]), int(data[2 + 2 * i])
    out.append(str(upto(b) - upto(a - 1)))
print("\n".join(out))
'''

WRONG = r'''
import sys
def upto(y):
    return y // 4 - y // 100
data = sys.stdin.read().split()
q = int(data[0])
out = []
for i in range(q):
    a, b = int(data[1 + 2 * i]), int(data[2 + 2 * i])
    out.append(str(upto(b) - upto(a - 1)))
print("\n".join(out))
'''


def inputs(rng):
    cases = [
        [(1990, 2010), (1900, 1900), (2000, 2000)],
        [(1, 1)],
        [(4, 4)],
        [(1, 1000000000)],
        [(2001, 2003)],
        [(1600, 2400), (1700, 1800)],
    ]
    for q, hi in ((10, 3000), (100, 10**6), (150, 10**9), (250, 10**9)):
        rows = []
        for _ in range(q):
            a = rng.randint(1, hi)
            rows.append((a, rng.randint(a, min(hi, a + rng.choice([3, 50, 1000, hi])))))
        cases.append(rows)
    cases.append([(y, y) for y in range(1896, 1906)])
    return [f"{len(c)}\n" + "\n".join(f"{a} {b}" for a, b in c) + "\n" for c in cases]
