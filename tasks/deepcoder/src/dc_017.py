ID = "dc-017"
KIND = "stdin"
DIFFICULTY = "medium"

STATEMENT = """\
# Bracket Inspector

A string of brackets is *well formed* if every opening bracket `(`, `[` or `{`
is closed by the matching closing bracket `)`, `]` or `}` in the correct order
(for example `([]{})` is well formed, but `([)]` and `((` are not). Check several
strings.

**Input**

The first line contains `q`. Each of the next `q` lines contains a non-empty
string of the characters `()[]{}`.

**Output**

For each string print `YES` if it is well formed and `NO` otherwise.

**Constraints**

- `1 <= q <= 1000`
- every string has at most `10^4` characters; their total length is at most `10^5`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
q = int(data[0])
pair = {")": "(", "]": "[", "}": "{"}
out = []
for s in data[1:1 + q]:
    st = []
    ok = True
    for ch in s:
        if ch in "([{":
            st.append(ch)
        elif not st or st.pop() != pair[ch]:
            ok = False
            break
    out.append("YES" if ok and not st else "NO")
print("\n".join(out))
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
q = int(data[0])
out = []
for s in data[1:1 + q]:
    ok = True
    for o, c in ("()", "[]", "{}"):
        bal = 0
        for ch in s:
            if ch == o:
                bal += 1
            elif ch == c:
                bal -= 1
            if bal < 0:
                ok = False
        if bal != 0:
            ok = False
    out.append("YES" if ok else "NO")
print("\n".join(out))
'''


def _wf(rng, n):
    if n == 0:
        return ""
    k = rng.randrange(0, n)
    o, c = rng.choice(["()", "[]", "{}"])
    return o + _wf(rng, k) + c + _wf(rng, n - 1 - k)


def inputs(rng):
    cases = [
        ["([]{})", "([)]", "(("],
        ["()"],
        [")("],
        ["{"],
        ["[{()}]", "[{(})]", "}{"],
        ["()()()", "(()", "())"],
    ]
    for q, n in ((10, 4), (50, 10), (100, 30)):
        rows = []
        for _ in range(q):
            s = _wf(rng, n)
            if rng.random() < 0.5:
                i, j = rng.randrange(len(s)), rng.randrange(len(s))
                s = list(s)
                s[i], s[j] = s[j], s[i]
                s = "".join(s)
            rows.append(s)
        cases.append(rows)
    cases.append(["(" * 1500 + ")" * 1500, "[" * 1500 + ")" * 1500])
    cases.append(["([)]" * 500])
    return [f"{len(c)}\n" + "\n".join(c) + "\n" for c in cases]
