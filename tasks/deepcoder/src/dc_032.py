ID = "dc-032"
KIND = "stdin"
DIFFICULTY = "hard"

STATEMENT = """\
# Build Order

A project has `n` tasks numbered `1..n` and `m` dependencies; a dependency
`a b` means task `a` must be done before task `b`. Find an order in which all
tasks can be done. If several orders are possible, output the lexicographically
smallest one (at every position, the smallest-numbered task that is available).
If no order exists because the dependencies form a cycle, print `IMPOSSIBLE`.

**Input**

The first line contains `n` and `m`. Each of the next `m` lines contains `a` and
`b`.

**Output**

Print the `n` task numbers separated by spaces, or `IMPOSSIBLE`.

**Constraints**

- `1 <= n <= 10^5`, `0 <= m <= 2 * 10^5`
- `1 <= a, b <= n`, `a != b`; a dependency may be listed more than once
"""

REFERENCE = r'''
import sys, heapq
data = sys.stdin.read().split()
n, m = int(data[0]), int(data[1])
adj = [[] for _ in range(n + 1)]
indeg = [0] * (n + 1)
for i in range(m):
    a, b = int(data[2 + 2 * i]), int(data[3 + 2 * i])
    adj[a].append(b)
    indeg[b] += 1
heap = [v for v in range(1, n + 1) if indeg[v] == 0]
heapq.heapify(heap)
order = []
while heap:
    u = heapq.heappop(heap)
    order.append(u)
    for v in adj[u]:
        indeg[v] -= 1
        if indeg[v] == 0:
            heapq.heappush(heap, v)
print(" ".join(map(str, order)) if len(order) == n else "IMPOSSIBLE")
'''

WRONG = r'''
import sys
from collections import deque
data = sys.stdin.read().split()
n, m = int(data[0]), int(data[1])
adj = [[] for _ in range(n + 1)]
indeg = [0] * (n + 1)
for i in range(m):
    a, b = int(data[2 + 2 * i]), int(data[3 + 2 * i])
    adj[a].append(b)
    indeg[b] += 1
dq = deque(v for v in range(1, n + 1) if indeg[v] == 0)
order = []
while dq:
    u = dq.popleft()
    order.append(u)
    for v in adj[u]:
        indeg[v] -= 1
        if indeg[v] == 0:
            dq.append(v)
print(" ".join(map(str, order)) if len(order) == n else "IMPOSSIBLE")
'''


def _dag(rng, n, m, cycle=False):
    perm = list(range(1, n + 1))
    rng.shuffle(perm)
    edges = []
    for _ in range(m):
        i, j = sorted(rng.sample(range(n), 2))
        edges.append((perm[i], perm[j]))
    if cycle:
        i, j = sorted(rng.sample(range(n), 2))
        edges.append((perm[i], perm[j]))
        edges.append((perm[j], perm[i]))
    rng.shuffle(edges)
    return n, edges


def inputs(rng):
    cases = [
        (5, [(3, 1), (1, 2), (5, 2), (4, 3)]),
        (1, []),
        (3, []),
        (2, [(1, 2), (2, 1)]),
        (3, [(2, 1), (2, 1), (3, 1)]),
        (4, [(4, 1), (3, 2)]),
        (3, [(1, 2), (2, 3), (3, 1)]),
    ]
    for n, m, cyc in ((10, 12, False), (300, 600, False), (1000, 1500, False), (1000, 1200, True)):
        cases.append(_dag(rng, n, m, cyc))
    cases.append((1500, [(i + 1, i) for i in range(1, 1500)]))
    return [f"{n} {len(es)}\n" + "".join(f"{a} {b}\n" for a, b in es) for n, es in cases]
