ID = "dc-014"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Rainfall Ledger

A farm records the rainfall of `n` consecutive days. Answer `q` questions of the
form "how much rain fell from day `l` to day `r`, both inclusive?" (days are
numbered from `1`).

**Input**

The first line contains `n` and `q`. The second line contains `n` integers
`a_1 ... a_n`. Each of the next `q` lines contains two integers `l` and `r`.

**Output**

For each question print the total rainfall of days `l..r` on its own line.

**Constraints**

- `1 <= n, q <= 10^5`
- `0 <= a_i <= 10^9`
- `1 <= l <= r <= n`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
n, q = int(data[0]), int(data[1])
pre = [0] * (n + 1)
for i in range(n):
    pre[i + 1] = pre[i] + int(data[2 + i])
out = []
pos = 2 + n
for _ in range(q):
    l, r = int(data[pos]), int(data[pos + 1])
    pos += 2
    out.append(str(pre[r] - pre[l - 1]))
print("\n".join(out))
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
n, q = int(data[0]), int(data[1])
pre = [0] * (n + 1)
for i in range(n):
    pre[i + 1] = pre[i] + int(data[2 + i])
out = []
pos = 2 + n
for _ in range(q):
    l, r = int(data[pos]), int(data[pos + 1])
    pos += 2
    out.append(str(pre[r - 1] - pre[l - 1]))
print("\n".join(out))
'''


def _case(a, qs):
    return f"{len(a)} {len(qs)}\n{' '.join(map(str, a))}\n" + "\n".join(f"{l} {r}" for l, r in qs) + "\n"


def _rand(rng, n, q, hi):
    a = [rng.randint(0, hi) for _ in range(n)]
    qs = []
    for _ in range(q):
        l = rng.randint(1, n)
        qs.append((l, rng.randint(l, n)))
    return a, qs


def inputs(rng):
    cases = [
        ([3, 0, 5, 2, 7], [(1, 3), (2, 2), (1, 5), (4, 5)]),
        ([9], [(1, 1)]),
        ([0, 0, 0], [(1, 3), (2, 3)]),
        ([1000000000] * 4, [(1, 4), (2, 3)]),
        ([1, 2], [(2, 2), (1, 1), (1, 2)]),
    ]
    for n, q, hi in ((10, 10, 9), (100, 50, 100), (200, 150, 10**9), (400, 200, 50), (200, 300, 5)):
        cases.append(_rand(rng, n, q, hi))
    cases.append(([7] * 200, [(i, i) for i in range(1, 201)]))
    return [_case(a, qs) for a, qs in cases]
