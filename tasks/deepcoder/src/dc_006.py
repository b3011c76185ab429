ID = "dc-006"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Runner-Up Score

Given the scores of a contest, print the second largest *distinct* score. If all
scores are equal there is no runner-up score; print `-1` in that case.

**Input**

The first line contains `n`. The second line contains `n` integer scores.

**Output**

Print the second largest distinct score, or `-1` if it does not exist.

**Constraints**

- `1 <= n <= 10^5`
- `0 <= score <= 10^9`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
vals = sorted(set(map(int, data[1:1 + n])), reverse=True)
print(vals[1] if len(vals) >= 2 else -1)
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
vals = sorted(map(int, data[1:1 + n]), reverse=True)
print(vals[1] if len(vals) >= 2 else -1)
'''


def inputs(rng):
    cases = [
        [40, 75, 75, 60, 10],
        [5],
        [3, 3, 3],
        [0, 1000000000],
        [9, 9, 8],
        [1, 2],
        [0, 0, 0, 1],
    ]
    for n in (10, 100, 1000):
        cases.append([rng.randint(0, 20) for _ in range(n)])
    m = rng.randint(10**8, 10**9)
    cases.append([m, m] + [rng.randint(0, m - 1) for _ in range(1000)])
    return [f"{len(c)}\n{' '.join(map(str, c))}\n" for c in cases]
