ID = "dc-055"
KIND = "function"
DIFFICULTY = "medium"
FUNC_NAME = "min_flash_photos"
STARTER = "def min_flash_photos(visits: list[list[int]]) -> int:\n    "

STATEMENT = """\
# Gallery Photos

Each visitor of a gallery stays during the closed time interval
`visits[i] = [arrive, leave]`. A photographer takes instant photos; a photo taken
at time `t` shows every visitor with `arrive <= t <= leave`. What is the minimum
number of photos needed so that every visitor appears on at least one photo?

Implement `min_flash_photos(visits)` (return `0` for an empty list).

**Constraints**

- `0 <= len(visits) <= 10^5`
- `0 <= arrive <= leave <= 10^9`
"""

REFERENCE = r'''
def min_flash_photos(visits: list[list[int]]) -> int:
    photos = 0
    last = None
    for a, b in sorted(visits, key=lambda v: v[1]):
        if last is None or a > last:
            photos += 1
            last = b
    return photos
'''

WRONG = r'''
def min_flash_photos(visits: list[list[int]]) -> int:
    photos = 0
    last = None
    for a, b in sorted(visits):
        if last is None or a > last:
            photos += 1
            last = b
    return photos
'''


def _rand(rng, n, hi, span):
    out = []
    for _ in range(n):
        a = rng.randint(0, hi)
        out.append([a, a + rng.randint(0, span)])
    return out


def inputs(rng):
    cases = [
        [[1, 6], [2, 8], [7, 12], [10, 16]],
        [],
        [[5, 5]],
        [[1, 2], [3, 4]],
        [[1, 2], [2, 3]],
        [[1, 100], [2, 3], [5, 6]],
        [[0, 1000000000], [1000000000, 1000000000]],
    ]
    for n, hi, span in ((10, 30, 5), (100, 1000, 50), (500, 10**6, 10**4), (800, 500, 20)):
        cases.append(_rand(rng, n, hi, span))
    return [[c] for c in cases]
