ID = "dc-029"
KIND = "stdin"
DIFFICULTY = "hard"

STATEMENT = """\
# Out of Order

A list of `n` exam scores was supposed to be sorted in non-decreasing order. To
measure how unsorted it is, count the *inversions*: pairs of positions `i < j`
with `a_i > a_j` (equal values are not an inversion).

**Input**

The first line contains `n`. The second line contains `a_1 ... a_n`.

**Output**

Print the number of inversions.

**Constraints**

- `1 <= n <= 10^5`
- `0 <= a_i <= 10^9`

An `O(n log n)` solution is expected.
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
a = list(map(int, data[1:1 + n]))
ranks = {v: i + 1 for i, v in enumerate(sorted(set(a)))}
size = len(ranks)
tree = [0] * (size + 1)
inv = 0
seen = 0
for x in a:
    r = ranks[x]
    # count earlier values <= x
    i, le = r, 0
    while i > 0:
        le += tree[i]
        i -= i & -i
    inv += seen - le
    i = r
    while i <= size:
        tree[i] += 1
        i += i & -i
    seen += 1
print(inv)
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
a = list(map(int, data[1:1 + n]))
ranks = {v: i + 1 for i, v in enumerate(sorted(set(a)))}
size = len(ranks)
tree = [0] * (size + 1)
inv = 0
seen = 0
for x in a:
    r = ranks[x] - 1
    i, lt = r, 0
    while i > 0:
        lt += tree[i]
        i -= i & -i
    inv += seen - lt
    i = r + 1
    while i <= size:
        tree[i] += 1
        i += i & -i
    seen += 1
print(inv)
'''


def inputs(rng):
    cases = [
        [3, 1, 2, 5, 4],
        [7],
        [1, 2, 3],
        [3, 2, 1],
        [2, 2, 2, 2],
        [1000000000, 0],
        [4, 4, 1, 1],
    ]
    cases.append([rng.randint(0, 10) for _ in range(50)])
    cases.append([rng.randint(0, 10**9) for _ in range(2000)])
    cases.append([rng.randint(0, 100) for _ in range(5000)])
    cases.append(list(range(8000, 0, -1)))
    return [f"{len(c)}\n{' '.join(map(str, c))}\n" for c in cases]
