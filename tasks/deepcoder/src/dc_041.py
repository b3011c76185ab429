ID = "dc-041"
KIND = "function"
DIFFICULTY = "easy"
FUNC_NAME = "add_binary"
STARTER = "def add_binary(a: str, b: str) -> str:\n    "

STATEMENT = """\
# Binary Adder

Two non-negative integers are given as binary strings `a` and `b` (without
leading zeros, except for the number zero itself, which is `"0"`). Return their
sum as a binary string in the same form.

Implement `add_binary(a, b)` without converting the whole strings to integers.

**Constraints**

- `1 <= len(a), len(b) <= 10^4`
"""

REFERENCE = r'''
def add_binary(a: str, b: str) -> str:
    i, j, carry = len(a) - 1, len(b) - 1, 0
    out = []
    while i >= 0 or j >= 0 or carry:
        s = carry
        if i >= 0:
            s += ord(a[i]) - 48
            i -= 1
        if j >= 0:
            s += ord(b[j]) - 48
            j -= 1
        out.append(chr(48 + (s & 1)))
        carry = s >> 1
    return "".join(reversed(out))
'''

WRONG = r'''
def add_binary(a: str, b: str) -> str:
    i, j, carry = len(a) - 1, len(b) - 1, 0
    out = []
    while i >= 0 or j >= 0:
        s = carry
        if i >= 0:
            s += ord(a[i]) - 48
            i -= 1
        if j >= 0:
            s += ord(b[j]) - 48
            j -= 1
        out.append(chr(48 + (s & 1)))
        carry = s >> 1
    return "".join(reversed(out))
'''


def _bin(rng, n):
    return "1" + "".join(rng.choice("01") for _ in range(n - 1))


def inputs(rng):
    cases = [
        ("1011", "110"),
        ("0", "0"),
        ("1", "1"),
        ("0", "101"),
        ("111", "1"),
        ("1111", "1111"),
        ("100", "11"),
    ]
    for n, m in ((10, 3), (64, 64), (300, 200)):
        cases.append((_bin(rng, n), _bin(rng, m)))
    cases.append(("1" * 2000, "1"))
    return [list(c) for c in cases]
