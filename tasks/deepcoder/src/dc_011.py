ID = "dc-011"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Trimmed Mean

A panel of judges gives integer scores. To reduce the effect of a single biased
judge, one highest score and one lowest score are removed (exactly one copy of
each, even if the value occurs several times), and the remaining scores are
averaged.

**Input**

The first line contains `n`. The second line contains `n` integer scores.

**Output**

Print the average of the remaining `n - 2` scores with exactly two digits after
the decimal point (rounded half up on the exact value, e.g. `2.125` prints as
`2.13`).

**Constraints**

- `3 <= n <= 10^5`
- `0 <= score <= 100`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
a = list(map(int, data[1:1 + n]))
total = sum(a) - max(a) - min(a)
cnt = n - 2
# exact rounding half up in hundredths: round(total * 100 / cnt)
num = total * 100
q, r = divmod(num, cnt)
if 2 * r >= cnt:
    q += 1
print(f"{q // 100}.{q % 100:02d}")
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
a = list(map(int, data[1:1 + n]))
hi, lo = max(a), min(a)
rest = [x for x in a if x != hi and x != lo]
num = sum(rest) * 100
cnt = max(1, len(rest))
q, r = divmod(num, cnt)
if 2 * r >= cnt:
    q += 1
print(f"{q // 100}.{q % 100:02d}")
'''


def inputs(rng):
    cases = [
        [7, 9, 10, 6, 8],
        [1, 2, 3],
        [5, 5, 5],
        [10, 10, 0, 0, 7],
        [0, 100, 1, 2, 2, 3, 3, 3, 4],
        [100, 100, 100, 99],
        [3, 2, 2, 2, 1, 2, 2, 2, 1, 3],
    ]
    for n in (10, 100, 1000, 3000):
        cases.append([rng.randint(0, 100) for _ in range(n)])
    cases.append([rng.choice([0, 100, 50]) for _ in range(501)])
    return [f"{len(c)}\n{' '.join(map(str, c))}\n" for c in cases]
