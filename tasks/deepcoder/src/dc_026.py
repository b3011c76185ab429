ID = "dc-026"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Making Change

A vending machine has coins of `m` distinct denominations, with an unlimited
supply of each. In how many ways can it pay exactly `x`? Two ways are the same if
they use the same number of coins of every denomination (the order of the coins
does not matter). Print the answer modulo `1000000007`.

**Input**

The first line contains `m` and `x`. The second line contains the `m`
denominations.

**Output**

Print the number of ways modulo `10^9 + 7`. (Paying `0` can be done in exactly
one way.)

**Constraints**

- `1 <= m <= 100`
- `0 <= x <= 10^4`
- `1 <= denomination <= 10^4`
"""

REFERENCE = r'''
import sys
MOD = 10**9 + 7
data = sys.stdin.read().split()
m, x = int(data[0]), int(data[1])
coins = list(map(int, data[2:2 + m]))
ways = [0] * (x + 1)
ways[0] = 1
for c in coins:
    for v in range(c, x + 1):
        ways[v] = (ways[v] + ways[v - c]) % MOD
print(ways[x])
'''

WRONG = r'''
import sys
MOD = 10**9 + 7
data = sys.stdin.read().split()
m, x = int(data[0]), int(data[1])
coins = list(map(int, data[2:2 + m]))
ways = [0] * (x + 1)
ways[0] = 1
for v in range(1, x + 1):
    for c in coins:
        if c <= v:
            ways[v] = (ways[v] + ways[v - c]) % MOD
print(ways[x])
'''


def inputs(rng):
    cases = [
        (5, [1, 2, 5]),
        (0, [3]),
        (3, [2]),
        (10, [10]),
        (7, [2, 4, 6]),
        (4, [1, 2, 3]),
        (100, [1, 5, 10, 25, 50]),
    ]
    cases.append((rng.randint(50, 200), rng.sample(range(1, 30), 6)))
    cases.append((2000, rng.sample(range(1, 200), 20)))
    cases.append((10000, rng.sample(range(1, 10000), 40)))
    cases.append((10000, list(range(1, 31))))
    return [f"{len(cs)} {x}\n{' '.join(map(str, cs))}\n" for x, cs in cases]
