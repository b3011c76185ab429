ID = "dc-007"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Parking Fee

A car park charges as follows for a stay of `m` minutes:

- the first `30` minutes are free;
- after that, every started hour (block of `60` minutes) costs `p` coins.

So a stay of `31` minutes costs `p`, a stay of `90` minutes costs `p`, and a stay
of `91` minutes costs `2p`. Compute the fee for several stays.

**Input**

The first line contains `q` and `p`. Each of the next `q` lines contains `m`.

**Output**

For each stay, print the fee on its own line.

**Constraints**

- `1 <= q <= 10^4`
- `1 <= p <= 1000`
- `0 <= m <= 10^6`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
q, p = int(data[0]), int(data[1])
out = []
for s in data[2:2 + q]:
    m = int(s)
    extra = max(0, m - 30)
    out.append(str(((extra + 59) // 60) * p))
print("\n".join(out))
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
q, p = int(data[0]), int(data[1])
out = []
for s in data[2:2 + q]:
    m = int(s)
    extra = max(0, m - 30)
    out.append(str((extra // 60 + (1 if extra else 0)) * p))
print("\n".join(out))
'''


def inputs(rng):
    cases = [
        (5, [31, 90, 91, 10, 200]),
        (1, [0]),
        (7, [30]),
        (3, [150, 151, 149]),
        (1000, [1000000]),
        (2, [60, 61, 89, 210, 211]),
    ]
    for q in (10, 100, 300, 600):
        cases.append((rng.randint(1, 1000), [rng.randint(0, 10**6 if q > 100 else 500) for _ in range(q)]))
    cases.append((4, [30 + 60 * k for k in range(1, 40)]))
    return [f"{len(ms)} {p}\n" + "\n".join(map(str, ms)) + "\n" for p, ms in cases]
