ID = "dc-058"
KIND = "method"
DIFFICULTY = "hard"
FUNC_NAME = "trappedWater"
STARTER = "class Solution:\n    def trappedWater(self, heights: list[int]) -> int:\n        "

STATEMENT = """\
# Rain Between Towers

A row of towers of unit width has heights `heights[0..n-1]`. After heavy rain,
water collects above the towers: above tower `i` the water level is
`min(max(heights[0..i]), max(heights[i..n-1]))`, and the amount of water above it
is that level minus `heights[i]`. Return the total amount of trapped water.

Implement `Solution.trappedWater(heights)`. An `O(n)` solution is expected.

**Constraints**

- `0 <= n <= 10^5`
- `0 <= heights[i] <= 10^9`
"""

REFERENCE = r'''
class Solution:
    def trappedWater(self, heights: list[int]) -> int:
        l, r = 0, len(heights) - 1
        lmax = rmax = 0
        water = 0
        while l < r:
            if heights[l] <= heights[r]:
                lmax = max(lmax, heights[l])
                water += lmax - heights[l]
                l += 1
            else:
                rmax = max(rmax, heights[r])
                water += rmax - heights[r]
                r -= 1
        return water
'''

WRONG = r'''
class Solution:
    def trappedWater(self, heights: list[int]) -> int:
        water = 0
        for i in range(1, len(heights) - 1):
            level = min(heights[i - 1], heights[i + 1])
            if level > heights[i]:
                water += level - heights[i]
        return water
'''


def inputs(rng):
    cases = [
        [0, 1, 0, 2, 1, 0, 1, 3, 2, 1, 2, 1],
        [],
        [5],
        [3, 0, 3],
        [1, 2, 3, 4],
        [4, 2, 0, 3, 2, 5],
        [1000000000, 0, 0, 1000000000],
    ]
    cases.append([rng.randint(0, 10) for _ in range(50)])
    cases.append([rng.randint(0, 10**9) for _ in range(1500)])
    cases.append([rng.randint(0, 1000) for _ in range(6000)])
    mountain = list(range(0, 3000)) + list(range(3000, 0, -1))
    cases.append([v if i % 7 else 0 for i, v in enumerate(mountain)])
    return [[c] for c in cases]
