ID = "dc-010"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Run-Length Encoding

Compress a string by replacing every maximal block of equal consecutive
characters with the character followed by the length of the block. For example
`aaabccddddd` becomes `a3b1c2d5`. Blocks of length one still get the count `1`.

**Input**

A single line containing a non-empty string of lowercase letters.

**Output**

Print the encoded string.

**Constraints**

- The string has between `1` and `10^5` characters.
"""

REFERENCE = r'''
import sys
s = sys.stdin.readline().strip()
out = []
i = 0
while i < len(s):
    j = i
    while j < len(s) and s[j] == s[i]:
        j += 1
    out.append(s[i] + str(j - i))
    i = j
print("".join(out))
'''

WRONG = r'''
import sys
s = sys.stdin.readline().strip()
out = []
count = 1
for i in range(1, len(s)):
    if s[i] == s[i - 1]:
        count += 1
    else:
        out.append(s[i - 1] + str(count))
        count = 1
print("".join(out))
'''


def inputs(rng):
    cases = ["aaabccddddd", "z", "abc", "qqqqqqqqqqqq", "aabbaa", "abbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbc"]
    for n, alpha in ((10, "ab"), (100, "abc"), (1000, "ab"), (5000, "xyz")):
        cases.append("".join(rng.choice(alpha) for _ in range(n)))
    cases.append("k" * 5000)
    return [s + "\n" for s in cases]
