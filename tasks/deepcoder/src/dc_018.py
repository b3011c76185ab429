ID = "dc-018"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Matching Weights

A shop has `n` weights with masses `a_1 ... a_n`. Count the pairs of distinct
positions `i < j` with `a_i + a_j = k`. Positions matter: equal masses at
different positions form different pairs.

**Input**

The first line contains `n` and `k`. The second line contains `a_1 ... a_n`.

**Output**

Print the number of pairs.

**Constraints**

- `1 <= n <= 10^5`
- `-10^9 <= a_i, k <= 10^9`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
n, k = int(data[0]), int(data[1])
seen = {}
pairs = 0
for x in map(int, data[2:2 + n]):
    pairs += seen.get(k - x, 0)
    seen[x] = seen.get(x, 0) + 1
print(pairs)
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
n, k = int(data[0]), int(data[1])
seen = {}
pairs = 0
for x in map(int, data[2:2 + n]):
    seen[x] = seen.get(x, 0) + 1
    pairs += seen.get(k - x, 0)
print(pairs)
'''


def inputs(rng):
    cases = [
        (6, [1, 5, 3, 3, 2, 4]),
        (2, [1]),
        (4, [2, 2, 2, 2]),
        (0, [-3, 3, 0, 0, 5]),
        (7, [1, 2, 3]),
        (2000000000 - 2000000000, [1000000000, -1000000000, 1000000000]),
        (10, [5, 5]),
    ]
    for n, hi in ((20, 10), (200, 50), (1000, 1000)):
        cases.append((rng.randint(-hi, hi), [rng.randint(-hi, hi) for _ in range(n)]))
    cases.append((8, [4] * 500))
    return [f"{len(a)} {k}\n{' '.join(map(str, a))}\n" for k, a in cases]
