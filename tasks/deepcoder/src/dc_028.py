ID = "dc-028"
KIND = "stdin"
DIFFICULTY = "hard"

STATEMENT = """\
# Rising Skyline

Walking along a street you see `n` buildings with heights `h_1 ... h_n`. Choose as
many buildings as possible, keeping their order along the street, such that each
chosen building is **strictly** taller than the previously chosen one. Print how
many buildings you can choose.

**Input**

The first line contains `n`. The second line contains `h_1 ... h_n`.

**Output**

Print the length of the longest strictly increasing subsequence.

**Constraints**

- `1 <= n <= 10^5`
- `1 <= h_i <= 10^9`

An `O(n log n)` solution is expected.
"""

REFERENCE = r'''
import sys
from bisect import bisect_left
data = sys.stdin.read().split()
n = int(data[0])
tails = []
for x in map(int, data[1:1 + n]):
    i = bisect_left(tails, x)
    if i == len(tails):
        tails.append(x)
    else:
        tails[i] = x
print(len(tails))
'''

WRONG = r'''
import sys
from bisect import bisect_right
data = sys.stdin.read().split()
n = int(data[0])
tails = []
for x in map(int, data[1:1 + n]):
    i = bisect_right(tails, x)
    if i == len(tails):
        tails.append(x)
    else:
        tails[i] = x
print(len(tails))
'''


def inputs(rng):
    cases = [
        [3, 1, 4, 1, 5, 9, 2, 6],
        [42],
        [5, 5, 5, 5],
        [9, 8, 7, 6],
        [1, 2, 3, 4, 5],
        [2, 2, 3, 3, 4],
        [1000000000, 1, 1000000000],
    ]
    cases.append([rng.randint(1, 20) for _ in range(60)])
    cases.append([rng.randint(1, 1000) for _ in range(2000)])
    cases.append([rng.randint(1, 10**9) for _ in range(3000)])
    cases.append(sorted(rng.randint(1, 3000) for _ in range(6000)))
    return [f"{len(c)}\n{' '.join(map(str, c))}\n" for c in cases]
