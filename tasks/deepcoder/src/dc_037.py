ID = "dc-037"
KIND = "function"
DIFFICULTY = "easy"
FUNC_NAME = "rotate_left"
STARTER = "def rotate_left(nums: list[int], k: int) -> list[int]:\n    "

STATEMENT = """\
# Rotate Left

Return a new list equal to `nums` rotated to the left by `k` positions: the first
`k` elements move, in order, to the end. `k` may be larger than the length of the
list (rotating by the length gives the list back). Rotating an empty list gives
an empty list.

Implement `rotate_left(nums, k)`.

**Constraints**

- `0 <= len(nums) <= 10^5`
- `0 <= k <= 10^9`
"""

REFERENCE = r'''
def rotate_left(nums: list[int], k: int) -> list[int]:
    if not nums:
        return []
    k %= len(nums)
    return nums[k:] + nums[:k]
'''

WRONG = r'''
def rotate_left(nums: list[int], k: int) -> list[int]:
    return nums[k:] + nums[:k]
'''


def inputs(rng):
    cases = [
        ([1, 2, 3, 4, 5], 2),
        ([], 3),
        ([9], 1000000000),
        ([1, 2, 3], 0),
        ([1, 2, 3], 3),
        ([1, 2, 3], 4),
        ([4, 5], 1),
        ([7, 7, 8], 5),
    ]
    cases.append(([rng.randint(-100, 100) for _ in range(50)], 49))
    cases.append(([rng.randint(-100, 100) for _ in range(300)], 123456789))
    cases.append(([rng.randint(-10**6, 10**6) for _ in range(600)], 599))
    return [list(c) for c in cases]
