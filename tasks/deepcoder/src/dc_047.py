ID = "dc-047"
KIND = "function"
DIFFICULTY = "medium"
FUNC_NAME = "top_k_frequent"
STARTER = "def top_k_frequent(nums: list[int], k: int) -> list[int]:\n    "

STATEMENT = """\
# Trending Tags

Tags are represented by integers. Given the list `nums` of tag occurrences,
return the `k` most frequent distinct tags, ordered by decreasing frequency;
tags with equal frequency are ordered by increasing value. If there are fewer
than `k` distinct tags, return all of them in that order.

Implement `top_k_frequent(nums, k)`.

**Constraints**

- `0 <= len(nums) <= 10^5`
- `1 <= k <= 10^5`
- `-10^9 <= nums[i] <= 10^9`
"""

REFERENCE = r'''
def top_k_frequent(nums: list[int], k: int) -> list[int]:
    counts = {}
    for x in nums:
        counts[x] = counts.get(x, 0) + 1
    return sorted(counts, key=lambda x: (-counts[x], x))[:k]
'''

WRONG = r'''
def top_k_frequent(nums: list[int], k: int) -> list[int]:
    counts = {}
    for x in nums:
        counts[x] = counts.get(x, 0) + 1
    return sorted(counts, key=lambda x: (counts[x], x), reverse=True)[:k]
'''


def inputs(rng):
    cases = [
        ([4, 1, 1, 2, 2, 2, 3, 3], 2),
        ([], 3),
        ([7], 1),
        ([5, 6], 1),
        ([3, 3, 1, 1, 2], 5),
        ([-1, -1, 2, 2, 0], 2),
        ([9, 8, 7, 9, 8, 9], 3),
    ]
    for n, hi, k in ((30, 5, 2), (300, 30, 10), (1000, 100, 25), (1500, 10**9, 5)):
        cases.append(([rng.randint(-hi, hi) for _ in range(n)], k))
    return [list(c) for c in cases]
