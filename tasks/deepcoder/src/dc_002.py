ID = "dc-002"
KIND = "stdin"
DIFFICULTY = "easy"

STATEMENT = """\
# Most Common Word

A line of text consists of lowercase words separated by single spaces. Find the
word that occurs most often. If several words share the highest count, choose
the one that comes first in alphabetical (lexicographic) order.

**Input**

A single line with at least one word. Every word consists of the letters `a`-`z`.

**Output**

Print the most common word, then a space, then its number of occurrences.

**Constraints**

- The line has between `1` and `10^4` words.
- Every word has between `1` and `10` letters.
"""

REFERENCE = r'''
import sys
words = sys.stdin.read().split()
counts = {}
for w in words:
    counts[w] = counts.get(w, 0) + 1
best = min(counts, key=lambda w: (-counts[w], w))
print(best, counts[best])
'''

WRONG = r'''
import sys
words = sys.stdin.read().split()
counts = {}
for w in words:
    counts[w] = counts.get(w, 0) + 1
best = max(counts, key=lambda w: counts[w])
print(best, counts[best])
'''


def inputs(rng):
    lines = [
        "the cat and the dog and the bird",
        "hello",
        "zeta alpha zeta alpha",
        "b a c",
        "x x x y y y y",
        "pear apple pear apple fig fig",
    ]
    vocab = ["".join(rng.choice("abcde") for _ in range(rng.randint(1, 4))) for _ in range(30)]
    for n in (8, 50, 300, 600):
        lines.append(" ".join(rng.choice(vocab) for _ in range(n)))
    lines.append(" ".join(["q", "m", "m", "q", "k"] * 40))
    lines.append(" ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 10))) for _ in range(1500)))
    return [s + "\n" for s in lines]
