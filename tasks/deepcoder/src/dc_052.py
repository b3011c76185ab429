ID = "dc-052"
KIND = "method"
DIFFICULTY = "medium"
FUNC_NAME = "minHops"
STARTER = "class Solution:\n    def minHops(self, stones: list[int]) -> int:\n        "

STATEMENT = """\
# Stepping Stones

A frog stands on stone `0` of a row of stones. From stone `i` it can hop forward
to any stone `i + 1, ..., i + stones[i]` (a value of `0` means it cannot hop from
there). Return the minimum number of hops needed to reach the last stone, or
`-1` if the last stone cannot be reached. If there is only one stone, the answer
is `0`.

Implement `Solution.minHops(stones)`.

**Constraints**

- `1 <= len(stones) <= 10^5`
- `0 <= stones[i] <= 10^5`
"""

REFERENCE = r'''
class Solution:
    def minHops(self, stones: list[int]) -> int:
        n = len(stones)
        hops = 0
        end = 0
        far = 0
        for i in range(n - 1):
            if i > far:
                return -1
            far = max(far, i + stones[i])
            if i == end:
                if far <= i:
                    return -1
                hops += 1
                end = far
                if end >= n - 1:
                    return hops
        return hops if end >= n - 1 else -1
'''

WRONG = r'''
class Solution:
    def minHops(self, stones: list[int]) -> int:
        n = len(stones)
        i = 0
        hops = 0
        while i < n - 1:
            if stones[i] == 0:
                return -1
            i += stones[i]
            hops += 1
        return hops
'''


def inputs(rng):
    cases = [
        [2, 3, 1, 1, 4],
        [0],
        [1, 0, 5],
        [1, 1, 1, 1],
        [5, 0, 0, 0, 0, 0],
        [2, 0, 0],
        [3, 2, 1, 0, 4],
        [1, 4, 1, 1, 1, 0, 0],
    ]
    cases.append([rng.randint(0, 4) for _ in range(30)])
    cases.append([rng.randint(1, 6) for _ in range(500)])
    cases.append([rng.randint(0, 3) for _ in range(2000)])
    cases.append([1] * 2000)
    return [[c] for c in cases]
