ID = "dc-031"
KIND = "stdin"
DIFFICULTY = "hard"

STATEMENT = """\
# Island Bridges

An archipelago has `n` islands numbered `1..n` and no bridges yet. Process `q`
operations in order:

- `B a b`: build a bridge between islands `a` and `b`;
- `Q a b`: answer `YES` if one can walk from island `a` to island `b` using the
  bridges built so far, and `NO` otherwise (an island is always reachable from
  itself).

After all operations, also report the number of groups of mutually reachable
islands.

**Input**

The first line contains `n` and `q`. Each of the next `q` lines holds one
operation.

**Output**

Print the answer to every `Q` operation on its own line, then one final line with
the number of groups.

**Constraints**

- `1 <= n <= 10^5`, `1 <= q <= 2 * 10^5`
- `1 <= a, b <= n`
"""

REFERENCE = r'''
import sys
data = sys.stdin.read().split()
n, q = int(data[0]), int(data[1])
parent = list(range(n + 1))
size = [1] * (n + 1)

def find(x):
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:
        parent[x], x = root, parent[x]
    return root

groups = n
out = []
pos = 2
for _ in range(q):
    op, a, b = data[pos], int(data[pos + 1]), int(data[pos + 2])
    pos += 3
    ra, rb = find(a), find(b)
    if op == "B":
        if ra != rb:
            if size[ra] < size[rb]:
                ra, rb = rb, ra
            parent[rb] = ra
            size[ra] += size[rb]
            groups -= 1
    else:
        out.append("YES" if ra == rb else "NO")
out.append(str(groups))
print("\n".join(out))
'''

WRONG = r'''
import sys
data = sys.stdin.read().split()
n, q = int(data[0]), int(data[1])
parent = list(range(n + 1))

def find(x):
    while parent[x] != x:
        x = parent[x]
    return x

groups = n
out = []
pos = 2
for _ in range(q):
    op, a, b = data[pos], int(data[pos + 1]), int(data[pos + 2])
    pos += 3
    if op == "B":
        if find(a) != find(b):
            parent[a] = b
            groups -= 1
    else:
        out.append("YES" if find(a) == find(b) else "NO")
out.append(str(groups))
print("\n".join(out))
'''


def _rand(rng, n, q, p_build):
    ops = []
    for _ in range(q):
        op = "B" if rng.random() < p_build else "Q"
        ops.append((op, rng.randint(1, n), rng.randint(1, n)))
    return n, ops


def inputs(rng):
    cases = [
        (5, [("B", 1, 2), ("Q", 1, 3), ("B", 2, 3), ("Q", 1, 3), ("Q", 4, 5)]),
        (1, [("Q", 1, 1)]),
        (3, [("B", 1, 1), ("Q", 1, 2)]),
        (4, [("B", 1, 2), ("B", 3, 4), ("B", 2, 3), ("Q", 1, 4), ("B", 4, 1)]),
        (2, [("Q", 2, 1), ("B", 2, 1), ("Q", 1, 2)]),
        (6, [("B", 1, 2), ("B", 3, 1), ("B", 4, 5), ("Q", 2, 3), ("Q", 3, 5)]),
    ]
    for n, q, p in ((10, 20, 0.5), (100, 300, 0.4), (1000, 1200, 0.5), (2000, 1800, 0.6)):
        cases.append(_rand(rng, n, q, p))
    cases.append((1201, [("B", i, i + 1) for i in range(1, 1201)] + [("Q", 1, 1201)] * 5))
    return [f"{n} {len(ops)}\n" + "".join(f"{o} {a} {b}\n" for o, a, b in ops) for n, ops in cases]
