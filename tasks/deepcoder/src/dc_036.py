ID = "dc-036"
KIND = "method"
DIFFICULTY = "easy"
FUNC_NAME = "tickTock"
STARTER = "class Solution:\n    def tickTock(self, n: int) -> list[str]:\n        "

STATEMENT = """\
# Tick and Tock

Count from `1` to `n`. For each number `i` produce a label:

- `"TickTock"` if `i` is divisible by both `3` and `7`;
- otherwise `"Tick"` if `i` is divisible by `3`;
- otherwise `"Tock"` if `i` is divisible by `7`;
- otherwise the decimal representation of `i`.

Implement `Solution.tickTock(n)` returning the list of the `n` labels (an empty
list for `n = 0`).

**Constraints**

- `0 <= n <= 10^4`
"""

REFERENCE = r'''
class Solution:
    def tickTock(self, n: int) -> list[str]:
        out = []
        for i in range(1, n + 1):
            if i % 21 == 0:
                out.append("TickTock")
            elif i % 3 == 0:
                out.append("Tick")
            elif i % 7 == 0:
                out.append("Tock")
            else:
                out.append(str(i))
        return out
'''

WRONG = r'''
class Solution:
    def tickTock(self, n: int) -> list[str]:
        out = []
        for i in range(1, n + 1):
            if i % 3 == 0:
                out.append("Tick")
            elif i % 7 == 0:
                out.append("Tock")
            elif i % 21 == 0:
                out.append("TickTock")
            else:
                out.append(str(i))
        return out
'''


def inputs(rng):
    ns = [15, 0, 1, 3, 7, 21, 22, 42, 100, rng.randint(200, 999), 800]
    return [[n] for n in ns]
