ID = "dc-064"
KIND = "method"
DIFFICULTY = "hard"
FUNC_NAME = "windowPeaks"
STARTER = "class Solution:\n    def windowPeaks(self, nums: list[int], k: int) -> list[int]:\n        "

STATEMENT = """\
# Sliding Peaks

A window of width `k` slides over `nums` from left to right, one position at a
time. For every position of the window (there are `len(nums) - k + 1` of them)
report the maximum inside the window.

Implement `Solution.windowPeaks(nums, k)`. An `O(n)` solution is expected.

**Constraints**

- `1 <= k <= len(nums) <= 10^5`
- `-10^9 <= nums[i] <= 10^9`
"""

REFERENCE = r'''
from collections import deque

class Solution:
    def windowPeaks(self, nums: list[int], k: int) -> list[int]:
        dq = deque()
        out = []
        for i, x in enumerate(nums):
            while dq and nums[dq[-1]] <= x:
                dq.pop()
            dq.append(i)
            if dq[0] <= i - k:
                dq.popleft()
            if i >= k - 1:
                out.append(nums[dq[0]])
        return out
'''

WRONG = r'''
from collections import deque

class Solution:
    def windowPeaks(self, nums: list[int], k: int) -> list[int]:
        dq = deque()
        out = []
        for i, x in enumerate(nums):
            while dq and nums[dq[-1]] <= x:
                dq.pop()
            dq.append(i)
            if dq[0] < i - k:
                dq.popleft()
            if i >= k - 1:
                out.append(nums[dq[0]])
        return out
'''


def inputs(rng):
    cases = [
        ([1, 3, -1, -3, 5, 3, 6, 7], 3),
        ([4], 1),
        ([2, 1], 2),
        ([1, 2, 3], 1),
        ([5, 4, 3, 2, 1], 2),
        ([-1000000000, -1000000000], 1),
        ([9, 1, 1, 1, 1], 3),
    ]
    cases.append(([rng.randint(-10, 10) for _ in range(50)], 5))
    cases.append(([rng.randint(-10**9, 10**9) for _ in range(1000)], 37))
    cases.append((list(range(3000, 0, -1)), 2000))
    cases.append(([rng.randint(0, 100) for _ in range(4000)], 2000))
    return [list(c) for c in cases]
