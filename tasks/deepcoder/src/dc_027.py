ID = "dc-027"
KIND = "stdin"
DIFFICULTY = "hard"

STATEMENT = """\
# Courier Routes

A courier company serves `n` towns numbered `1..n`, joined by `m` two-way roads;
road `i` connects towns `u_i` and `v_i` and takes `w_i` minutes in either
direction. Several roads may join the same pair of towns. Compute the shortest
travel time from town `1` to every town.

**Input**

The first line contains `n` and `m`. Each of the next `m` lines contains `u_i`,
`v_i` and `w_i`.

**Output**

Print `n` integers separated by spaces: the shortest time from town `1` to towns
`1, 2, ..., n`, using `-1` for towns that cannot be reached.

**Constraints**

- `1 <= n <= 10^5`, `0 <= m <= 2 * 10^5`
- `1 <= u_i, v_i <= n`, `1 <= w_i <= 10^9`
"""

REFERENCE = r'''
import sys, heapq
data = sys.stdin.read().split()
n, m = int(data[0]), int(data[1])
adj = [[] for _ in range(n + 1)]
pos = 2
for _ in range(m):
    u, v, w = int(data[pos]), int(data[pos + 1]), int(data[pos + 2])
    pos += 3
    adj[u].append((v, w))
    adj[v].append((u, w))
INF = float("inf")
dist = [INF] * (n + 1)
dist[1] = 0
pq = [(0, 1)]
while pq:
    d, u = heapq.heappop(pq)
    if d > dist[u]:
        continue
    for v, w in adj[u]:
        nd = d + w
        if nd < dist[v]:
            dist[v] = nd
            heapq.heappush(pq, (nd, v))
print(" ".join(str(d) if d != INF else "-1" for d in dist[1:]))
'''

WRONG = r'''
import sys, heapq
data = sys.stdin.read().split()
n, m = int(data[0]), int(data[1])
adj = [[] for _ in range(n + 1)]
pos = 2
for _ in range(m):
    u, v, w = int(data[pos]), int(data[pos + 1]), int(data[pos + 2])
    pos += 3
    adj[u].append((v, w))
INF = float("inf")
dist = [INF] * (n + 1)
dist[1] = 0
pq = [(0, 1)]
while pq:
    d, u = heapq.heappop(pq)
    if d > dist[u]:
        continue
    for v, w in adj[u]:
        nd = d + w
        if nd < dist[v]:
            dist[v] = nd
            heapq.heappush(pq, (nd, v))
print(" ".join(str(d) if d != INF else "-1" for d in dist[1:]))
'''


def _rand(rng, n, m, hi):
    edges = []
    for v in range(2, n + 1):
        if rng.random() < 0.95:
            edges.append((rng.randint(1, v - 1), v, rng.randint(1, hi)) if rng.random() < 0.5 else (v, rng.randint(1, v - 1), rng.randint(1, hi)))
    while len(edges) < m:
        edges.append((rng.randint(1, n), rng.randint(1, n), rng.randint(1, hi)))
    rng.shuffle(edges)
    return n, edges


def inputs(rng):
    cases = [
        (5, [(1, 2, 4), (1, 3, 1), (3, 2, 2), (2, 4, 5)]),
        (1, []),
        (2, []),
        (3, [(2, 1, 7), (3, 2, 1000000000)]),
        (3, [(1, 2, 10), (1, 2, 3), (2, 2, 1)]),
        (4, [(4, 3, 1), (3, 2, 1), (2, 1, 1), (1, 4, 5)]),
    ]
    for n, m, hi in ((10, 15, 20), (100, 300, 1000), (600, 1200, 10**9), (1200, 1800, 100)):
        cases.append(_rand(rng, n, m, hi))
    cases.append((200, [(i, i + 1, 1000000000) for i in range(1, 200)]))
    return [f"{n} {len(es)}\n" + "".join(f"{u} {v} {w}\n" for u, v, w in es) for n, es in cases]
