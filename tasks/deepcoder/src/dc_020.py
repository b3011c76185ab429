ID = "dc-020"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Pocket Calculator

Evaluate arithmetic expressions made of non-negative integers, the binary
operators `+`, `-`, `*` and parentheses. Multiplication binds tighter than
addition and subtraction; operators of the same precedence are evaluated from
left to right. There is no unary minus. Spaces may appear anywhere between
tokens.

**Input**

The first line contains `q`. Each of the next `q` lines holds one expression.

**Output**

For each expression print its exact integer value (it may be negative or very
large; print it in full).

**Constraints**

- `1 <= q <= 100`
- every expression has at most `1000` characters and is well formed
- every number in the input is at most `10^9`
"""

REFERENCE = r'''
import sys

def evaluate(s):
    toks = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch.isdigit():
            j = i
            while j < len(s) and s[j].isdigit():
                j += 1
            toks.append(int(s[i:j]))
            i = j
        elif ch in "+-*()":
            toks.append(ch)
            i += 1
        else:
            i += 1
    pos = 0

    def expr():
        nonlocal pos
        v = term()
        while pos < len(toks) and toks[pos] in ("+", "-"):
            op = toks[pos]
            pos += 1
            t = term()
            v = v + t if op == "+" else v - t
        return v

    def term():
        nonlocal pos
        v = atom()
        while pos < len(toks) and toks[pos] == "*":
            pos += 1
            v *= atom()
        return v

    def atom():
        nonlocal pos
        t = toks[pos]
        pos += 1
        if t == "(":
            v = expr()
            pos += 1
            return v
        return t

    return expr()

lines = sys.stdin.read().split("\n")
q = int(lines[0])
print("\n".join(str(evaluate(lines[1 + i])) for i in range(q)))
'''

WRONG = r'''
import sys

def evaluate(s):
    toks = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch.isdigit():
            j = i
            while j < len(s) and s[j].isdigit():
                j += 1
            toks.append(int(s[i:j]))
            i = j
        elif ch in "+-*()":
            toks.append(ch)
            i += 1
        else:
            i += 1
    pos = 0

    def expr():
        nonlocal pos
        v = atom()
        while pos < len(toks) and toks[pos] in ("+", "-", "*"):
            op = toks[pos]
            pos += 1
            t = atom()
            v = v + t if op == "+" else v - t if op == "-" else v * t
        return v

    def atom():
        nonlocal pos
        t = toks[pos]
        pos += 1
        if t == "(":
            v = expr()
            pos += 1
            return v
        return t

    return expr()

lines = sys.stdin.read().split("\n")
q = int(lines[0])
print("\n".join(str(evaluate(lines[1 + i])) for i in range(q)))
'''


def _gen(rng, depth):
    if depth == 0 or rng.random() < 0.3:
        return str(rng.randint(0, rng.choice([9, 100, 10**9])))
    kind = rng.random()
    if kind < 0.2:
        return "(" + _gen(rng, depth - 1) + ")"
    op = rng.choice(["+", "-", "*"])
    sp = rng.choice(["", " "])
    return _gen(rng, depth - 1) + sp + op + sp + _gen(rng, depth - 1)


def inputs(rng):
    cases = [
        ["2 + 3 * 4", "(2 + 3) * 4", "10 - 4 - 3"],
        ["7"],
        ["0 * 5 + 0"],
        ["1 - 2 * 3"],
        ["((((42))))", "2*(3+4)*5 - 6"],
        ["1000000000 * 1000000000 * 1000000000"],
        ["8 - (3 - 2) - 1", "3*3*3 - 3*3"],
    ]
    for q, d in ((5, 3), (20, 5), (40, 7)):
        rows = []
        while len(rows) < q:
            e = _gen(rng, d)
            if len(e) <= 1000:
                rows.append(e)
        cases.append(rows)
    cases.append(["+".join(["2*3"] * 150)])
    return [f"{len(c)}\n" + "\n".join(c) + "\n" for c in cases]
