ID = "dc-035"
KIND = "function"
DIFFICULTY = "easy"
FUNC_NAME = "longest_lit_run"
STARTER = "def longest_lit_run(lamps: list[int]) -> int:\n    "

STATEMENT = """\
# Longest Lit Run

A row of street lamps is described by a list of `0`s (off) and `1`s (on). Return
the length of the longest run of consecutive lamps that are all on (`0` if no
lamp is on).

Implement `longest_lit_run(lamps)`.

**Constraints**

- `0 <= len(lamps) <= 10^5`
- every element is `0` or `1`
"""

REFERENCE = r'''
def longest_lit_run(lamps: list[int]) -> int:
    best = cur = 0
    for x in lamps:
        cur = cur + 1 if x == 1 else 0
        best = max(best, cur)
    return best
'''

WRONG = r'''
def longest_lit_run(lamps: list[int]) -> int:
    best = cur = 0
    for x in lamps:
        if x == 1:
            cur += 1
        else:
            best = max(best, cur)
            cur = 0
    return best
'''


def inputs(rng):
    cases = [
        [1, 1, 0, 1, 1, 1, 0, 1],
        [],
        [0],
        [1],
        [0, 0, 0],
        [1, 1, 1, 1],
        [1, 0, 1, 1],
        [0, 1, 1, 0, 1],
    ]
    for n in (20, 1000):
        cases.append([rng.randint(0, 1) for _ in range(n)])
    cases.append([1 if rng.random() < 0.9 else 0 for _ in range(4000)])
    return [[c] for c in cases]
