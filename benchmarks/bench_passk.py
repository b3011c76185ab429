"""Speed of the Pass@(K,T) estimator: 10,000 tasks x n=64 x T=1..32 x K=1..64.

Times the vectorized surface (point estimate, then 1,000 bootstrap resamples) and a
naive loop over tasks, budgets and K with ``math.comb``. The naive loop is measured on
a subset of the tasks and extrapolated linearly to all of them (it is linear in tasks).
"""

from __future__ import annotations

import math
import time

import numpy as np

from agentenvs.eval.passk import estimate_surface, pass_at_k_t, success_counts

N_TASKS, N, T_MAX, N_BOOT, NAIVE_TASKS = 10_000, 64, 32, 1000, 100


def naive(first: np.ndarray, budgets: list[int], ks: list[int]) -> np.ndarray:
    out = np.zeros((len(ks), len(budgets)))
    for row in first:
        for j, t in enumerate(budgets):
            c = int(np.sum((row >= 1) & (row <= t)))
            for i, k in enumerate(ks):
                out[i, j] += 1 - math.comb(N - c, k) / math.comb(N, k)
    return out / len(first)


def main() -> None:
    rng = np.random.default_rng(0)
    # per task a success rate and a turn profile, so counts vary across tasks and budgets
    rate = rng.beta(0.7, 1.5, size=(N_TASKS, 1))
    turns = rng.geometric(0.15, size=(N_TASKS, N))
    first = np.where(rng.random((N_TASKS, N)) < rate, turns, 0)
    budgets, ks = list(range(1, T_MAX + 1)), list(range(1, N + 1))

    start = time.perf_counter()
    counts = success_counts(first, budgets)
    mean = pass_at_k_t(counts, N, ks)
    point_s = time.perf_counter() - start

    start = time.perf_counter()
    surface = estimate_surface(counts, N, ks, budgets, n_boot=N_BOOT, seed=0)
    boot_s = time.perf_counter() - start
    assert np.allclose(surface.mean, mean)

    start = time.perf_counter()
    slow = naive(first[:NAIVE_TASKS], budgets, ks)
    naive_s = (time.perf_counter() - start) * N_TASKS / NAIVE_TASKS
    fast_subset = pass_at_k_t(success_counts(first[:NAIVE_TASKS], budgets), N, ks)
    assert np.allclose(slow, fast_subset, atol=1e-12)

    print(f"grid: {N_TASKS} tasks x n={N} x T=1..{T_MAX} x K=1..{N}")
    print(f"vectorized point estimate:          {point_s * 1e3:8.1f} ms")
    print(f"point estimate + {N_BOOT} bootstrap CIs: {boot_s * 1e3:8.1f} ms")
    print(
        f"naive math.comb loop (measured on {NAIVE_TASKS} tasks, extrapolated to "
        f"{N_TASKS}): {naive_s:8.1f} s"
    )
    print(f"speed-up of the point estimate over the naive loop: {naive_s / point_s:,.0f}x")


if __name__ == "__main__":
    main()
