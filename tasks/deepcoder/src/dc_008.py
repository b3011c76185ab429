ID = "dc-008"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Mirror Matrix

A square matrix is *symmetric* when the entry in row `i`, column `j` equals the
entry in row `j`, column `i` for every `i` and `j`. Decide whether a given matrix
is symmetric.

**Input**

The first line contains `n`. Each of the next `n` lines contains `n` integers,
one row of the matrix.

**Output**

Print `YES` if the matrix is symmetric and `NO` otherwise.

**Constraints**

- `1 <= n <= 200`
- `-10^9 <= entry <= 10^9`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
a = [data[1 + i * n:1 + (i + 1) * n] for i in range(n)]
ok = all(int(a[i][j]) == int(a[j][i]) for i in range(n) for j in range(i + 1, n))
print("YES" if ok else "NO")
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
n = int(data[0])
a = [data[1 + i * n:1 + (i + 1) * n] for i in range(n)]
ok = all(int(a[0][j]) == int(a[j][0]) for j in range(n))
print("YES" if ok else "NO")
'''


def _sym(rng, n, lo, hi):
    a = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            a[i][j] = a[j][i] = rng.randint(lo, hi)
    return a


def _fmt(a):
    return f"{len(a)}\n" + "\n".join(" ".join(map(str, r)) for r in a) + "\n"


def inputs(rng):
    cases = [
        [[1, 2, 3], [2, 5, 6], [3, 6, 9]],
        [[7]],
        [[1, 2], [3, 1]],
        [[1, 2, 3], [2, 5, 4], [3, 6, 9]],
        [[-1000000000, 1000000000], [1000000000, -1000000000]],
        [[0, 0], [0, 0]],
    ]
    for n in (4, 10, 25):
        cases.append(_sym(rng, n, -9, 9))
    b = _sym(rng, 30, 0, 100)
    b[17][23] += 1
    cases.append(b)
    c = _sym(rng, 20, -10**9, 10**9)
    cases.append(c)
    d = _sym(rng, 60, -5, 5)
    d[59][58] = d[58][59] + 1
    cases.append(d)
    return [_fmt(a) for a in cases]
