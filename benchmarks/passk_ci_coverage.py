"""How often the Pass@(K,T) bootstrap intervals hold the true value, by task count.

Tasks get a true success rate from a Beta(0.7, 1.5) (most tasks hard, some easy); each
task's n=16 samples succeed with that rate. The true Pass@K of the task population is
known in closed form (the mean of 1 - (1-p)^K over the Beta), so each simulated run's
95% percentile interval over tasks either covers it or not. Prints the coverage over
``REPS`` runs per task count, and its lowest value over the K grid: intervals from few
tasks cover less than 95%, which is why reports flag them (``MIN_TASKS_FOR_CI``).
Run: ``python benchmarks/passk_ci_coverage.py`` (about a minute).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from agentenvs.eval.passk import estimate_surface

N, KS, REPS, N_BOOT, A, B = 16, [1, 4, 16], 400, 400, 0.7, 1.5


def true_pass_at_k(k: int) -> float:
    # E[(1-p)^k] for p ~ Beta(a, b) is B(a, b + k) / B(a, b)
    return 1.0 - float(np.exp(special.betaln(A, B + k) - special.betaln(A, B)))


def main() -> None:
    rng = np.random.default_rng(0)
    truth = np.array([true_pass_at_k(k) for k in KS])
    print(f"n={N} samples per task, K={KS}, {REPS} simulated runs per task count")
    for n_tasks in (10, 20, 40, 100, 200):
        hits = np.zeros(len(KS))
        for rep in range(REPS):
            rates = rng.beta(A, B, size=n_tasks)
            counts = rng.binomial(N, rates)[:, None]
            surface = estimate_surface(counts, N, KS, [1], n_boot=N_BOOT, seed=rep)
            hits += (surface.low[:, 0] <= truth) & (truth <= surface.high[:, 0])
        coverage = hits / REPS
        print(f"{n_tasks:4d} tasks: 95% intervals cover {coverage.mean():.3f} "
              f"(lowest over K: {coverage.min():.3f})")


if __name__ == "__main__":
    main()
