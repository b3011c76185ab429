ID = "dc-048"
KIND = "method"
DIFFICULTY = "medium"
FUNC_NAME = "countSegments"
STARTER = "class Solution:\n    def countSegments(self, nums: list[int], target: int) -> int:\n        "

STATEMENT = """\
# Balanced Segments

Count the contiguous non-empty segments `nums[l..r]` whose sum equals `target`.
The numbers may be negative, zero or positive.

Implement `Solution.countSegments(nums, target)`. An `O(n)` expected-time solution
is expected.

**Constraints**

- `1 <= len(nums) <= 10^5`
- `-10^4 <= nums[i] <= 10^4`
- `-10^9 <= target <= 10^9`
"""

REFERENCE = r'''
class Solution:
    def countSegments(self, nums: list[int], target: int) -> int:
        seen = {0: 1}
        pre = 0
        count = 0
        for x in nums:
            pre += x
            count += seen.get(pre - target, 0)
            seen[pre] = seen.get(pre, 0) + 1
        return count
'''

WRONG = r'''
class Solution:
    def countSegments(self, nums: list[int], target: int) -> int:
        count = 0
        left = 0
        total = 0
        for right, x in enumerate(nums):
            total += x
            while total > target and left <= right:
                total -= nums[left]
                left += 1
            if total == target and left <= right:
                count += 1
        return count
'''


def inputs(rng):
    cases = [
        ([1, 2, 3, -2, 2], 3),
        ([5], 5),
        ([5], 0),
        ([0, 0, 0], 0),
        ([1, 1, 1], 2),
        ([-1, -1, 1], 0),
        ([3, -3, 3, -3], 0),
    ]
    for n, hi in ((20, 3), (300, 10), (1000, 100)):
        cases.append(([rng.randint(-hi, hi) for _ in range(n)], rng.randint(-hi, hi)))
    cases.append(([rng.randint(1, 5) for _ in range(1000)], 12))
    return [list(c) for c in cases]
