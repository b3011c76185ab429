ID = "dc-016"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Booked Slots

A meeting room has `n` bookings; booking `i` occupies the closed time interval
`[s_i, e_i]`. Merge the bookings into the smallest set of disjoint intervals
covering exactly the same times. Intervals that overlap **or touch** (one ends at
the time the next one starts, e.g. `[1, 3]` and `[3, 5]`) are merged.

**Input**

The first line contains `n`. Each of the next `n` lines contains `s_i` and `e_i`.

**Output**

On the first line print `k`, the number of merged intervals. Then print the `k`
intervals, one per line as `s e`, in increasing order of start.

**Constraints**

- `1 <= n <= 10^5`
- `0 <= s_i <= e_i <= 10^9`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
iv = sorted((int(data[1 + 2 * i]), int(data[2 + 2 * i])) for i in range(n))
merged = []
for s, e in iv:
    if merged and s <= merged[-1][1]:
        merged[-1][1] = max(merged[-1][1], e)
    else:
        merged.append([s, e])
print(len(merged))
print("\n".join(f"{s} {e}" for s, e in merged))
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
iv = sorted((int(data[1 + 2 * i]), int(data[2 + 2 * i])) for i in range(n))
merged = []
for s, e in iv:
    if merged and s < merged[-1][1]:
        merged[-1][1] = max(merged[-1][1], e)
    else:
        merged.append([s, e])
print(len(merged))
print("\n".join(f"{s} {e}" for s, e in merged))
'''


def _rand(rng, n, hi, span):
    out = []
    for _ in range(n):
        s = rng.randint(0, hi)
        out.append((s, min(10**9, s + rng.randint(0, span))))
    return out


def inputs(rng):
    cases = [
        [(1, 3), (8, 10), (2, 6), (15, 18), (6, 7)],
        [(5, 5)],
        [(1, 3), (3, 5)],
        [(0, 1000000000), (5, 6)],
        [(4, 4), (4, 4), (1, 2)],
        [(10, 20), (1, 2), (3, 4)],
        [(1, 10), (2, 3), (4, 5)],
    ]
    for n, hi, span in ((10, 50, 5), (100, 1000, 20), (300, 10**9, 10**7), (500, 2000, 3)):
        cases.append(_rand(rng, n, hi, span))
    cases.append([(2 * i, 2 * i + 2) for i in range(100)])
    return [f"{len(c)}\n" + "\n".join(f"{s} {e}" for s, e in c) + "\n" for c in cases]
