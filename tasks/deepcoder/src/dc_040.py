ID = "dc-040"
KIND = "method"
DIFFICULTY = "easy"
FUNC_NAME = "mergeSorted"
STARTER = "class Solution:\n    def mergeSorted(self, a: list[int], b: list[int]) -> list[int]:\n        "

STATEMENT = """\
# Merge Two Queues

Two sorted (non-decreasing) lists `a` and `b` of integers are given. Return a
single non-decreasing list containing all elements of both lists (duplicates are
kept).

Implement `Solution.mergeSorted(a, b)`. An O(len(a) + len(b)) solution is
expected.

**Constraints**

- `0 <= len(a), len(b) <= 5 * 10^4`
- `-10^9 <= element <= 10^9`
"""

REFERENCE = r'''
class Solution:
    def mergeSorted(self, a: list[int], b: list[int]) -> list[int]:
        i = j = 0
        out = []
        while i < len(a) and j < len(b):
            if a[i] <= b[j]:
                out.append(a[i])
                i += 1
            else:
                out.append(b[j])
                j += 1
        out.extend(a[i:])
        out.extend(b[j:])
        return out
'''

WRONG = r'''
class Solution:
    def mergeSorted(self, a: list[int], b: list[int]) -> list[int]:
        i = j = 0
        out = []
        while i < len(a) and j < len(b):
            if a[i] <= b[j]:
                out.append(a[i])
                i += 1
            else:
                out.append(b[j])
                j += 1
        out.extend(a[i:])
        return out
'''


def inputs(rng):
    cases = [
        ([1, 4, 9], [2, 3, 10, 12]),
        ([], []),
        ([], [5, 6]),
        ([1, 2], []),
        ([3, 3, 3], [3, 3]),
        ([-5, 0, 5], [-10, 10]),
        ([1, 2, 3], [4, 5, 6]),
        ([4, 5, 6], [1, 2, 3]),
    ]
    for n in (20, 150, 400):
        cases.append((sorted(rng.randint(-10**9, 10**9) for _ in range(n)),
                      sorted(rng.randint(-10**9, 10**9) for _ in range(n // 2 + 1))))
    return [list(c) for c in cases]
