ID = "dc-045"
KIND = "function"
DIFFICULTY = "easy"
FUNC_NAME = "is_monotone"
STARTER = "def is_monotone(values: list[int]) -> bool:\n    "

STATEMENT = """\
# One-Way Trend

A sequence is *monotone* if it never decreases (each element is at least the one
before it) or never increases (each element is at most the one before it).
Sequences with zero or one element are monotone.

Implement `is_monotone(values)` returning `True` for a monotone sequence and
`False` otherwise.

**Constraints**

- `0 <= len(values) <= 10^5`
- `-10^9 <= value <= 10^9`
"""

REFERENCE = r'''
def is_monotone(values: list[int]) -> bool:
    up = all(values[i] <= values[i + 1] for i in range(len(values) - 1))
    down = all(values[i] >= values[i + 1] for i in range(len(values) - 1))
    return up or down
'''

WRONG = r'''
def is_monotone(values: list[int]) -> bool:
    return all(values[i] <= values[i + 1] for i in range(len(values) - 1))
'''


def inputs(rng):
    cases = [
        [1, 2, 2, 3],
        [],
        [5],
        [3, 3, 3],
        [6, 5, 4, 4],
        [1, 3, 2],
        [2, 1, 2],
        [1, 1, 0],
    ]
    cases.append(sorted(rng.randint(-10**9, 10**9) for _ in range(300)))
    cases.append(sorted((rng.randint(-100, 100) for _ in range(500)), reverse=True))
    x = sorted(rng.randint(0, 1000) for _ in range(400))
    x[200], x[201] = x[201] + 1, x[200]
    cases.append(x)
    return [[c] for c in cases]
