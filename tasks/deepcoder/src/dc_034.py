ID = "dc-034"
KIND = "method"
DIFFICULTY = "easy"
FUNC_NAME = "findMissing"
STARTER = "class Solution:\n    def findMissing(self, nums: list[int]) -> int:\n        "

STATEMENT = """\
# The Missing Ticket

Tickets for an event were numbered `0, 1, ..., n` (that is `n + 1` tickets).
Exactly one ticket was lost; the list `nums` holds the remaining `n` ticket
numbers in arbitrary order. Return the number of the lost ticket.

Implement `Solution.findMissing(nums)`.

**Constraints**

- `0 <= n = len(nums) <= 10^5`
- The values in `nums` are distinct and lie in `[0, n]`.
"""

REFERENCE = r'''
class Solution:
    def findMissing(self, nums: list[int]) -> int:
        n = len(nums)
        return n * (n + 1) // 2 - sum(nums)
'''

WRONG = r'''
class Solution:
    def findMissing(self, nums: list[int]) -> int:
        n = len(nums)
        return (n + 1) * (n + 2) // 2 - sum(nums)
'''


def _case(rng, n):
    vals = list(range(n + 1))
    vals.pop(rng.randrange(n + 1))
    rng.shuffle(vals)
    return vals


def inputs(rng):
    cases = [[3, 0, 1], [], [0], [1], [1, 2, 3, 4], [0, 1, 2, 3], [2, 0]]
    for n in (10, 100, 1000, 2500):
        cases.append(_case(rng, n))
    return [[c] for c in cases]
