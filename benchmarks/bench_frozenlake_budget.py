"""FrozenLake's first step under a long budget: the oracle that stops at its fixed point
against the obvious alternative, finite-horizon tables built all the way to the budget.

For each budget T (in moves, on the 8x8 slippery map), a fresh oracle answers the first
step's regret query at horizon T: ours computes backups until the values stop changing
(2,358 backups on this map, whatever T), the alternative computes T backups and keeps T
tables, as the oracle did before. Prints both times, the memory of the tables and the
ratio; the alternative is skipped past 10**5 (it needs T * 2.5 kB and seconds per 10**5).
"""

from __future__ import annotations

import time

import numpy as np

from agentenvs.envs.frozenlake.maps import FIXED_MAPS
from agentenvs.envs.frozenlake.oracle import FrozenLakeOracle, lake_model

BUDGETS = (10**3, 10**4, 10**5, 10**6, 10**18)
ALTERNATIVE_UP_TO = 10**5


def ours(t: int) -> tuple[float, int]:
    oracle = FrozenLakeOracle(lake_model(FIXED_MAPS["8x8"]))
    start = time.perf_counter()
    oracle.regret(0, 1, t)
    return time.perf_counter() - start, oracle.nbytes


def full_tables(t: int) -> tuple[float, int]:
    """Q_0..Q_T and V_0..V_T, every one computed and kept (no fixed point)."""
    oracle = FrozenLakeOracle(lake_model(FIXED_MAPS["8x8"]))
    n = oracle.model.n_states
    start = time.perf_counter()
    q = np.zeros((t + 1, n, 4))
    v = np.zeros((t + 1, n))
    for i in range(1, t + 1):
        q[i] = oracle._backup(v[i - 1])
        v[i] = q[i].max(axis=1)
    float(v[t, 0] - q[t, 0, 1])
    return time.perf_counter() - start, q.nbytes + v.nbytes


def main() -> None:
    print("first-step regret at horizon T on 8x8 slippery (fresh oracle each time)")
    for t in BUDGETS:
        mine, mine_bytes = ours(t)
        line = f"T={t:<20,} fixed point: {mine * 1e3:8.1f} ms {mine_bytes / 2**20:7.2f} MiB"
        if t <= ALTERNATIVE_UP_TO:
            theirs, their_bytes = full_tables(t)
            line += (
                f" | full tables: {theirs * 1e3:9.1f} ms {their_bytes / 2**20:8.2f} MiB"
                f" | ratio {theirs / mine:6.1f}x"
            )
        else:
            line += " | full tables: skipped (too big)"
        print(line)


if __name__ == "__main__":
    main()
