ID = "dc-004"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Vowel Tally

For each of several lines of text, count its vowels. The vowels are `a`, `e`,
`i`, `o`, `u` in either lower or upper case; `y` is not a vowel.

**Input**

The first line contains `q`, the number of text lines. Each of the next `q` lines
is a non-empty string of printable ASCII characters (letters, digits, punctuation
and spaces).

**Output**

Print `q` lines: the number of vowels in each text line.

**Constraints**

- `1 <= q <= 1000`
- Each line has at most `200` characters.
"""

REFERENCE = r'''
import sys
lines = sys.stdin.read().split("\n")
q = int(lines[0])
out = []
for line in lines[1:1 + q]:
    out.append(str(sum(1 for c in line if c in "aeiouAEIOU")))
print("\n".join(out))
'''

WRONG = r'''
import sys
lines = sys.stdin.read().split("\n")
q = int(lines[0])
out = []
for line in lines[1:1 + q]:
    out.append(str(sum(1 for c in line if c in "aeiou")))
print("\n".join(out))
'''


def inputs(rng):
    cases = [
        ["Hello World", "rhythm", "AEIOU aeiou"],
        ["x"],
        ["Y is not a vowel, yes?"],
        ["ALL CAPS SENTENCE"],
        ["12345 !!!", "a"],
        ["Queueing Up In Order", "  spaced   out  "],
    ]
    alphabet = "abcdefghijklmnopqrstuvwxyzAEIOUBCDXY 0123456789.,!?"
    for q, ln in ((5, 20), (20, 60), (60, 100), (100, 200)):
        cases.append(["".join(rng.choice(alphabet) for _ in range(rng.randint(1, ln))).strip() or "z" for _ in range(q)])
    cases.append(["bcdfg"] * 10)
    return [f"{len(c)}\n" + "\n".join(c) + "\n" for c in cases]
