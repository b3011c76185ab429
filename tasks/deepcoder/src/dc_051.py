ID = "dc-051"
KIND = "function"
DIFFICULTY = "medium"
FUNC_NAME = "count_decodings"
STARTER = "def count_decodings(code: str) -> int:\n    "

STATEMENT = """\
# Secret Message

A message of capital letters was encoded by replacing `A` with `1`, `B` with
`2`, ..., `Z` with `26` and concatenating the numbers. For example `"ABZ"` becomes
`"1226"`. Given the digit string `code`, count how many letter messages encode to
it. Numbers never have leading zeros, so `"06"` is not a valid code for `F`, and a
lone `0` cannot be decoded. Return the count modulo `1000000007`.

Implement `count_decodings(code)`.

**Constraints**

- `1 <= len(code) <= 10^4`
- `code` consists of digits
"""

REFERENCE = r'''
def count_decodings(code: str) -> int:
    MOD = 10**9 + 7
    prev2, prev1 = 1, 1 if code[0] != "0" else 0
    for i in range(1, len(code)):
        cur = 0
        if code[i] != "0":
            cur += prev1
        two = int(code[i - 1:i + 1])
        if 10 <= two <= 26:
            cur += prev2
        prev2, prev1 = prev1, cur % MOD
    return prev1 % MOD
'''

WRONG = r'''
def count_decodings(code: str) -> int:
    MOD = 10**9 + 7
    prev2, prev1 = 1, 1
    for i in range(1, len(code)):
        cur = prev1
        two = int(code[i - 1:i + 1])
        if 10 <= two <= 26:
            cur += prev2
        prev2, prev1 = prev1, cur % MOD
    return prev1 % MOD
'''


def inputs(rng):
    cases = ["1226", "0", "7", "10", "100", "06", "2626", "27", "1111111111", "301"]
    cases.append("".join(rng.choice("0123456789") for _ in range(40)))
    cases.append("".join(rng.choice("12") for _ in range(3000)))
    cases.append("".join(rng.choice("1234567891026") for _ in range(2000)))
    return [[s] for s in cases]
