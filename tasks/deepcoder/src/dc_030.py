ID = "dc-030"
KIND = "stdin"
DIFFICULTY = "hard"

STATEMENT = """\
# Weakest Link Total

A chain has `n` links with strengths `a_1 ... a_n`. The strength of a contiguous
piece of chain `a_l ... a_r` is the strength of its weakest link,
`min(a_l, ..., a_r)`. Compute the sum of the strengths of all `n(n+1)/2`
contiguous pieces, modulo `1000000007`.

**Input**

The first line contains `n`. The second line contains `a_1 ... a_n`.

**Output**

Print the sum modulo `10^9 + 7`.

**Constraints**

- `1 <= n <= 10^5`
- `1 <= a_i <= 10^9`

An `O(n)` or `O(n log n)` solution is expected.
"""

REFERENCE = r'''
import sys
MOD = 10**9 + 7
data = sys.stdin.read().split()
n = int(data[0])
a = list(map(int, data[1:1 + n]))
left = [0] * n   # previous index with value < a[i]
right = [0] * n  # next index with value <= a[i]
st = []
for i in range(n):
    while st and a[st[-1]] >= a[i]:
        st.pop()
    left[i] = st[-1] if st else -1
    st.append(i)
st = []
for i in range(n - 1, -1, -1):
    while st and a[st[-1]] > a[i]:
        st.pop()
    right[i] = st[-1] if st else n
    st.append(i)
total = 0
for i in range(n):
    total += a[i] * (i - left[i]) * (right[i] - i)
print(total % MOD)
'''

WRONG = r'''
import sys
MOD = 10**9 + 7
data = sys.stdin.read().split()
n = int(data[0])
a = list(map(int, data[1:1 + n]))
left = [0] * n
right = [0] * n
st = []
for i in range(n):
    while st and a[st[-1]] > a[i]:
        st.pop()
    left[i] = st[-1] if st else -1
    st.append(i)
st = []
for i in range(n - 1, -1, -1):
    while st and a[st[-1]] > a[i]:
        st.pop()
    right[i] = st[-1] if st else n
    st.append(i)
total = 0
for i in range(n):
    total += a[i] * (i - left[i]) * (right[i] - i)
print(total % MOD)
'''


def inputs(rng):
    cases = [
        [3, 1, 2, 4],
        [5],
        [2, 2],
        [1, 2, 3, 4, 5],
        [5, 4, 3, 2, 1],
        [1000000000, 1000000000, 1000000000],
        [3, 3, 1, 3, 3],
    ]
    cases.append([rng.randint(1, 5) for _ in range(40)])
    cases.append([rng.randint(1, 10**9) for _ in range(2000)])
    cases.append([rng.randint(1, 100) for _ in range(3000)])
    cases.append([rng.randint(1, 10**9) for _ in range(3000)])
    return [f"{len(c)}\n{' '.join(map(str, c))}\n" for c in cases]
