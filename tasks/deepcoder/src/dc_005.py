ID = "dc-005"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Digital Root

Take a non-negative integer and replace it by the sum of its decimal digits;
repeat until a single digit remains. That digit is the *digital root* of the
number. For example `9875 -> 29 -> 11 -> 2`.

**Input**

The first line contains `q`. Each of the next `q` lines contains one
non-negative integer `x`.

**Output**

For each `x`, print its digital root on its own line.

**Constraints**

- `1 <= q <= 10^4`
- `0 <= x <= 10^18`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
q = int(data[0])
out = []
for s in data[1:1 + q]:
    x = int(s)
    while x >= 10:
        x = sum(int(c) for c in str(x))
    out.append(str(x))
print("\n".join(out))
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
q = int(data[0])
out = []
for s in data[1:1 + q]:
    x = int(s)
    if x >= 10:
        x = sum(int(c) for c in str(x))
    out.append(str(x))
print("\n".join(out))
'''


def inputs(rng):
    cases = [
        [9875, 0, 7],
        [0],
        [10],
        [999999999999999999],
        [10 ** 18],
        [18, 19, 99, 100],
        [38, 123456789],
    ]
    for q, hi in ((10, 1000), (100, 10**9), (200, 10**18), (250, 10**18)):
        cases.append([rng.randint(0, hi) for _ in range(q)])
    return [f"{len(c)}\n" + "\n".join(map(str, c)) + "\n" for c in cases]
