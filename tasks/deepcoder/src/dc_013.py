ID = "dc-013"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Longest Streak

Given a string, find the longest block of equal consecutive characters. If there
are several blocks of the maximum length, report the one that starts first.

**Input**

A single line with a non-empty string of lowercase letters.

**Output**

Print the character of the block, a space, and the length of the block.

**Constraints**

- The string has between `1` and `10^5` characters.
"""

REFERENCE = r'''
import sys
s = sys.stdin.readline().strip()
best_c, best_len = s[0], 1
i = 0
while i < len(s):
    j = i
    while j < len(s) and s[j] == s[i]:
        j += 1
    if j - i > best_len:
        best_c, best_len = s[i], j - i
    i = j
print(best_c, best_len)
'''

WRONG = r'''
import sys
s = sys.stdin.readline().strip()
best_c, best_len = s[0], 1
i = 0
while i < len(s):
    j = i
    while j < len(s) and s[j] == s[i]:
        j += 1
    if j - i >= best_len:
        best_c, best_len = s[i], j - i
    i = j
print(best_c, best_len)
'''


def inputs(rng):
    cases = ["abbcccdd", "q", "xyz", "aabb", "mmmmm", "abbbaaaccc", "zzzyyyyxxxx"]
    for n, alpha in ((20, "ab"), (500, "abc"), (5000, "ab")):
        cases.append("".join(rng.choice(alpha) for _ in range(n)))
    cases.append("".join(rng.choice("abcdefghij") for _ in range(8000)))
    return [s + "\n" for s in cases]
