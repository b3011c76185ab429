ID = "dc-023"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Unlucky Numbers

A city considers a house number unlucky if it is divisible by at least one of
`k` given unlucky primes. Count the unlucky house numbers among `1, 2, ..., n`.

**Input**

The first line contains `n` and `k`. The second line contains `k` distinct
primes `p_1 ... p_k`.

**Output**

Print the number of integers in `[1, n]` divisible by at least one `p_i`.

**Constraints**

- `1 <= n <= 10^18`
- `1 <= k <= 12`
- `2 <= p_i <= 100`, all `p_i` are distinct primes
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
n, k = int(data[0]), int(data[1])
ps = list(map(int, data[2:2 + k]))
total = 0
for mask in range(1, 1 << k):
    prod = 1
    bits = 0
    for i in range(k):
        if mask >> i & 1:
            prod *= ps[i]
            bits += 1
    if prod <= n:
        total += n // prod if bits % 2 else -(n // prod)
print(total)
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
n, k = int(data[0]), int(data[1])
ps = list(map(int, data[2:2 + k]))
total = 0
for i in range(k):
    for j in range(k):
        if i < j:
            total -= n // (ps[i] * ps[j])
    total += n // ps[i]
print(total)
'''

PRIMES = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97]


def inputs(rng):
    cases = [
        (30, [2, 3, 5]),
        (1, [2]),
        (10, [7]),
        (6, [2, 3]),
        (10**18, [97]),
        (100, [2, 3, 5, 7]),
        (1, [2, 3, 5]),
    ]
    for n, k in ((1000, 3), (10**6, 5), (10**12, 8), (10**18, 12)):
        cases.append((n, rng.sample(PRIMES, k)))
    cases.append((10**18, PRIMES[:12]))
    return [f"{n} {len(ps)}\n{' '.join(map(str, ps))}\n" for n, ps in cases]
