ID = "dc-062"
KIND = "method"
DIFFICULTY = "hard"
FUNC_NAME = "cheapestNetwork"
STARTER = "class Solution:\n    def cheapestNetwork(self, n: int, cables: list[list[int]]) -> int:\n        "

STATEMENT = """\
# Village Network

`n` villages numbered `0..n-1` want to be connected by fibre. `cables[i] = [u, v,
cost]` means a cable between villages `u` and `v` can be laid for `cost`. Choose
cables so that every village can reach every other village through the network,
at minimum total cost. Return that cost, or `-1` if it is impossible. A single
village needs no cable (cost `0`).

Implement `Solution.cheapestNetwork(n, cables)`.

**Constraints**

- `1 <= n <= 10^5`, `0 <= len(cables) <= 2 * 10^5`
- `0 <= u, v < n`, `0 <= cost <= 10^6`
"""

REFERENCE = r'''
class Solution:
    def cheapestNetwork(self, n: int, cables: list[list[int]]) -> int:
        parent = list(range(n))

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        total = 0
        used = 0
        for u, v, c in sorted(cables, key=lambda e: e[2]):
            ru, rv = find(u), find(v)
            if ru != rv:
                parent[ru] = rv
                total += c
                used += 1
        return total if used == n - 1 else -1
'''

WRONG = r'''
class Solution:
    def cheapestNetwork(self, n: int, cables: list[list[int]]) -> int:
        parent = list(range(n))

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        total = 0
        for u, v, c in sorted(cables, key=lambda e: e[2]):
            ru, rv = find(u), find(v)
            if ru != rv:
                parent[ru] = rv
                total += c
        return total
'''


def _rand(rng, n, m, hi, connected=True):
    edges = []
    if connected:
        for v in range(1, n):
            edges.append([rng.randrange(v), v, rng.randint(0, hi)])
    while len(edges) < m:
        edges.append([rng.randrange(n), rng.randrange(n), rng.randint(0, hi)])
    rng.shuffle(edges)
    return [n, edges]


def inputs(rng):
    cases = [
        [4, [[0, 1, 1], [1, 2, 4], [0, 2, 3], [2, 3, 2]]],
        [1, []],
        [2, []],
        [2, [[0, 1, 1000000], [1, 0, 7]]],
        [3, [[0, 0, 1], [1, 2, 5]]],
        [3, [[0, 1, 0], [1, 2, 0]]],
        [5, [[0, 1, 2], [1, 2, 2], [2, 0, 2], [3, 4, 1]]],
    ]
    cases.append(_rand(rng, 20, 40, 100))
    cases.append(_rand(rng, 300, 900, 10**6))
    cases.append(_rand(rng, 600, 900, 1000, connected=False))
    cases.append(_rand(rng, 1000, 1400, 10**6))
    return cases
