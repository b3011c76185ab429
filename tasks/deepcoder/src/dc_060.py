ID = "dc-060"
KIND = "method"
DIFFICULTY = "hard"
FUNC_NAME = "bestLoad"
STARTER = "class Solution:\n    def bestLoad(self, weights: list[int], values: list[int], capacity: int) -> int:\n        "

STATEMENT = """\
# Cargo Drone

A drone can carry a total weight of at most `capacity`. There are `n` parcels;
parcel `i` weighs `weights[i]` and pays `values[i]` on delivery. Each parcel can be
taken at most once. Return the maximum total pay of a set of parcels whose total
weight does not exceed `capacity`.

Implement `Solution.bestLoad(weights, values, capacity)`.

**Constraints**

- `1 <= n <= 100`
- `1 <= weights[i] <= 10^4`, `0 <= values[i] <= 10^9`
- `0 <= capacity <= 10^4`
"""

REFERENCE = r'''
class Solution:
    def bestLoad(self, weights: list[int], values: list[int], capacity: int) -> int:
        best = [0] * (capacity + 1)
        for w, v in zip(weights, values):
            for c in range(capacity, w - 1, -1):
                cand = best[c - w] + v
                if cand > best[c]:
                    best[c] = cand
        return best[capacity]
'''

WRONG = r'''
class Solution:
    def bestLoad(self, weights: list[int], values: list[int], capacity: int) -> int:
        best = [0] * (capacity + 1)
        for w, v in zip(weights, values):
            for c in range(w, capacity + 1):
                cand = best[c - w] + v
                if cand > best[c]:
                    best[c] = cand
        return best[capacity]
'''


def inputs(rng):
    cases = [
        ([1, 3, 4, 5], [1, 4, 5, 7], 7),
        ([5], [10], 4),
        ([5], [10], 5),
        ([2, 2, 2], [3, 3, 3], 0),
        ([1], [1000000000], 10000),
        ([3, 4, 5], [30, 50, 60], 8),
        ([2, 3], [5, 1], 6),
    ]
    for n, wmax, cap in ((10, 20, 50), (40, 200, 1000), (60, 1000, 5000), (80, 3000, 6000)):
        cases.append(([rng.randint(1, wmax) for _ in range(n)], [rng.randint(0, 10**9) for _ in range(n)], cap))
    return [list(c) for c in cases]
