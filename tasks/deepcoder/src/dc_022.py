ID = "dc-022"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Distinct Window

Find the length of the longest contiguous substring of `s` in which no character
appears twice.

**Input**

A single line containing the string `s`, made of lowercase letters.

**Output**

Print the length of the longest substring with all characters distinct.

**Constraints**

- `1 <= len(s) <= 10^5`
"""

REFERENCE = r'''
import sys
s = sys.stdin.readline().strip()
last = {}
start = best = 0
for i, ch in enumerate(s):
    if ch in last and last[ch] >= start:
        start = last[ch] + 1
    last[ch] = i
    best = max(best, i - start + 1)
print(best)
'''

WRONG = r'''
import sys
s = sys.stdin.readline().strip()
last = {}
start = best = 0
for i, ch in enumerate(s):
    if ch in last:
        start = last[ch] + 1
    last[ch] = i
    best = max(best, i - start + 1)
print(best)
'''


def inputs(rng):
    cases = ["abcabcbb", "a", "bbbbb", "abba", "pwwkew", "abcdefghijklmnopqrstuvwxyz", "dvdf", "tmmzuxt"]
    for n, alpha in ((50, "abcdef"), (1000, "abcdefghijkl"), (5000, "abcdefghijklmnopqrstuvwxyz")):
        cases.append("".join(rng.choice(alpha) for _ in range(n)))
    cases.append("abcdefghijklmnopqrstuvwxyz" * 100 + "zyxwvutsrqponmlkjihgfedcba")
    return [s + "\n" for s in cases]
