ID = "dc-033"
KIND = "function"
DIFFICULTY = "easy"
FUNC_NAME = "is_clean_palindrome"
STARTER = "def is_clean_palindrome(s: str) -> bool:\n    "

STATEMENT = """\
# Clean Palindrome

A sentence is a *clean palindrome* if, after removing every character that is not
a letter or a digit and turning all letters to lower case, it reads the same
forwards and backwards. An empty cleaned string counts as a palindrome.

Implement `is_clean_palindrome(s)` that returns `True` if `s` is a clean
palindrome and `False` otherwise.

**Constraints**

- `0 <= len(s) <= 10^5`
- `s` consists of printable ASCII characters.
"""

REFERENCE = r'''
def is_clean_palindrome(s: str) -> bool:
    t = [c.lower() for c in s if c.isalnum()]
    return t == t[::-1]
'''

WRONG = r'''
def is_clean_palindrome(s: str) -> bool:
    t = [c for c in s if c.isalnum()]
    return t == t[::-1]
'''


def inputs(rng):
    cases = [
        "Step on no pets!",
        "",
        "a",
        "ab",
        "Was it a car or a cat I saw?",
        "...,,,!!!",
        "No lemon, no melon",
        "12321",
        "123 21x",
        "Abc, cbA",
    ]
    half = "".join(rng.choice("abcXYZ019 ,.") for _ in range(5000))
    cases.append(half + half[::-1].swapcase())
    cases.append(half + "Q" + half[::-1] + "q" )
    return [[s] for s in cases]
