ID = "dc-057"
KIND = "function"
DIFFICULTY = "medium"
FUNC_NAME = "next_warmer"
STARTER = "def next_warmer(temps: list[int]) -> list[int]:\n    "

STATEMENT = """\
# Next Warmer Day

For each day `i`, find the first later day `j > i` whose temperature is strictly
higher than that of day `i`, and report the waiting time `j - i`; report `0` if
no later day is warmer.

Implement `next_warmer(temps)` returning the list of waiting times. An `O(n)`
solution is expected.

**Constraints**

- `0 <= len(temps) <= 10^5`
- `-100 <= temps[i] <= 100`
"""

REFERENCE = r'''
def next_warmer(temps: list[int]) -> list[int]:
    out = [0] * len(temps)
    stack = []
    for i, t in enumerate(temps):
        while stack and temps[stack[-1]] < t:
            j = stack.pop()
            out[j] = i - j
        stack.append(i)
    return out
'''

WRONG = r'''
def next_warmer(temps: list[int]) -> list[int]:
    out = [0] * len(temps)
    stack = []
    for i, t in enumerate(temps):
        while stack and temps[stack[-1]] <= t:
            j = stack.pop()
            out[j] = i - j
        stack.append(i)
    return out
'''


def inputs(rng):
    cases = [
        [73, 74, 75, 71, 69, 72, 76, 73],
        [],
        [5],
        [3, 3, 3],
        [5, 4, 3, 2],
        [1, 2, 3],
        [-100, 100, -100, 100],
    ]
    cases.append([rng.randint(-5, 5) for _ in range(40)])
    cases.append([rng.randint(-100, 100) for _ in range(500)])
    cases.append([rng.randint(0, 3) for _ in range(1200)])
    return [[c] for c in cases]
