"""How often the paired comparison's intervals hold the true difference, per cell.

Run A's tasks get a true success rate from a Beta(0.7, 1.5) (most tasks hard, some easy);
run B's rate of the same task is A's moved by a logit shift of 0.5 (the plan's model of a
better policy, ``agentenvs.eval.plan.shifted``). Each task's n = 16 samples per run succeed
at its rate. The true difference of the population's pass@k and pass^k at each K is an
integral over the Beta, computed by quadrature; each simulated pair of runs gets the
report's paired intervals (``agentenvs.eval.paired.paired_comparison``: percentile
bootstrap over tasks, 95%), which cover the truth or not. Prints a Markdown table: cell,
nominal, measured coverage, simulations. ``python benchmarks/paired_ci_coverage.py``
(a few minutes; ``--reps 100`` for a quick look).
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import integrate, stats

from agentenvs.eval.paired import paired_comparison
from agentenvs.eval.plan import shifted, true_metric

N, KS, N_BOOT, A, B, SHIFT, TASKS = 16, [1, 4, 16], 400, 0.7, 1.5, 0.5, (10, 20, 50, 200)


def true_difference(k: int, metric: str) -> float:
    def gap(p: float) -> float:
        q = shifted(np.array([p]), SHIFT)
        return float(true_metric(q, k, metric)[0] - true_metric(np.array([p]), k, metric)[0])

    value, _ = integrate.quad(lambda p: gap(p) * stats.beta.pdf(p, A, B), 0, 1, limit=200)
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--reps", type=int, default=1000, help="simulated pairs of runs per task count"
    )
    reps = parser.parse_args().reps
    rng = np.random.default_rng(0)
    metrics = ("pass@k", "pass^k")
    truth = {m: np.array([true_difference(k, m) for k in KS]) for m in metrics}
    print(f"n={N} samples per task, K={KS}, logit shift {SHIFT}, {N_BOOT} bootstrap resamples")
    print("| tasks | cell | true difference | nominal | measured coverage | simulations |")
    print("|---|---|---|---|---|---|")
    for n_tasks in TASKS:
        hits = {m: np.zeros(len(KS)) for m in metrics}
        for rep in range(reps):
            p_a = rng.beta(A, B, size=n_tasks)
            p_b = shifted(p_a, SHIFT)
            counts_a = rng.binomial(N, p_a)[:, None]
            counts_b = rng.binomial(N, p_b)[:, None]
            result = paired_comparison(counts_a, N, counts_b, N, KS, [1], n_boot=N_BOOT, seed=rep)
            for m in metrics:
                low, high = result.metrics[m].low[:, 0], result.metrics[m].high[:, 0]
                hits[m] += (low <= truth[m]) & (truth[m] <= high)
        for m in metrics:
            for i, k in enumerate(KS):
                name = f"{m.replace('k', str(k))}"
                print(
                    f"| {n_tasks} | {name} | {truth[m][i]:+.4f} | 0.95 | "
                    f"{hits[m][i] / reps:.3f} | {reps} |"
                )


if __name__ == "__main__":
    main()
