"""How often each step-quality interval holds the true value, by figure and task count.

A simulated analysis has tasks with unequal numbers of states. From each state both
policies sample 16 actions; an action is good or bad (a pass or a fail, an optimal move
or not), A's with the state's chance ``g_a`` and B's with ``g_b``. Both come from a
logit: the task's level (tasks differ a lot, so many states are all-good or all-bad for
both policies: ties) plus the state's own noise, and B's is A's raised by a shift (B a
little better, as in the paper's ordinary states). The pairs of one state give P(A
better) = k_a (16 - k_b) / 256 and so on, exactly as ``compare_scores`` counts them.

Each figure is a ratio of sums over states: P(A better), P(B better), P(tie) and the
A − B difference over the number of states, A's share of decided pairs over A-better +
B-better. The true value of each is that ratio over the population, computed from the
exact per-state chances of 200,000 simulated tasks. Each simulated analysis gets two
95% intervals over tasks from the same resamples: ``before``, the percentile bootstrap
the summary used to print (``bootstrap_ratio``), and ``after``, the expanded percentile
one it prints now (``agentenvs.eval.step_quality.ratio_interval``). Prints a Markdown table:
regime, tasks, figure, true value, coverage and mean width of each.

Regimes (ties are the share of all pairs):

- ``moderate``: about 60% ties, 1 + Poisson(4) states per task;
- ``heavy``: about 77% ties, 1 + Geometric(1/5) states per task (most tasks a few, some 20);
- ``heavier``: about 85% ties, 1 + Geometric(1/8) states per task.

``python benchmarks/step_quality_ci_coverage.py`` (about 80 seconds on 2 cores);
``--quick`` (a few seconds) for a look at 10 and 20 tasks.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from agentenvs.eval.passk import bootstrap_weights
from agentenvs.eval.step_quality import bootstrap_ratio, ratio_interval

N_ACTIONS = 16
TASKS = (10, 20, 50, 100, 200)
FIGURES = ("a_better", "b_better", "ties", "a_minus_b", "a_share_of_decided")
BOUNDS = {"a_minus_b": (-1.0, 1.0)}


@dataclass(frozen=True)
class Regime:
    """Tasks' spread of logits, states' own noise, B's logit shift and states per task."""

    name: str
    task_sd: float
    state_sd: float
    shift: float
    sizes: str  # "poisson" (1 + Poisson(mean - 1)) or "geometric" (1 + Geometric(1/(mean - 1)))
    mean_states: float


REGIMES = {
    r.name: r
    for r in (
        Regime("moderate", 1.2, 0.7, 0.3, "poisson", 5.0),
        Regime("heavy", 3.0, 1.0, 0.35, "geometric", 6.0),
        Regime("heavier", 4.5, 0.8, 0.35, "geometric", 9.0),
    )
}


def simulate(regime: Regime, n_tasks: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(task of each state, g_a, g_b): the states of ``n_tasks`` tasks."""
    if regime.sizes == "poisson":
        sizes = 1 + rng.poisson(regime.mean_states - 1, size=n_tasks)
    else:
        sizes = 1 + rng.geometric(1 / (regime.mean_states - 1), size=n_tasks)
    task = np.repeat(np.arange(n_tasks), sizes)
    level = rng.normal(0.0, regime.task_sd, size=n_tasks)
    logit_a = level[task] + rng.normal(0.0, regime.state_sd, size=task.size)
    logit_b = logit_a + regime.shift + rng.normal(0.0, 0.5, size=task.size)
    return task, 1 / (1 + np.exp(-logit_a)), 1 / (1 + np.exp(-logit_b))


def figure_totals(
    task: np.ndarray, a_better: np.ndarray, b_better: np.ndarray, n_tasks: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each figure as (numerator, denominator) per-task sums."""

    def per_task(values: np.ndarray) -> np.ndarray:
        return np.bincount(task, weights=values, minlength=n_tasks)

    a, b = per_task(a_better), per_task(b_better)
    states = per_task(np.ones_like(a_better))
    return {
        "a_better": (a, states),
        "b_better": (b, states),
        "ties": (states - a - b, states),
        "a_minus_b": (a - b, states),
        "a_share_of_decided": (a, a + b),
    }


def true_values(regime: Regime, seed: int = 12345, n_tasks: int = 200_000) -> dict[str, float]:
    task, g_a, g_b = simulate(regime, n_tasks, np.random.default_rng(seed))
    totals = figure_totals(task, g_a * (1 - g_b), g_b * (1 - g_a), n_tasks)
    return {name: float(num.sum() / den.sum()) for name, (num, den) in totals.items()}


def coverage(
    regime: Regime,
    n_tasks: int,
    reps: int,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    truth: dict[str, float] | None = None,
) -> dict[str, dict[str, float]]:
    """Per figure: ``before``/``after`` coverage and mean width over ``reps`` simulated
    analyses of ``n_tasks`` tasks, and the mean share of tied pairs (``ties_seen``)."""
    truth = truth or true_values(regime)
    rng = np.random.default_rng([seed, n_tasks])
    hits = {(f, m): 0 for f in FIGURES for m in ("before", "after")}
    width = dict.fromkeys(hits, 0.0)
    ties_seen = 0.0
    for _ in range(reps):
        task, g_a, g_b = simulate(regime, n_tasks, rng)
        k_a = rng.binomial(N_ACTIONS, g_a)
        k_b = rng.binomial(N_ACTIONS, g_b)
        pairs = N_ACTIONS**2
        a_better, b_better = k_a * (N_ACTIONS - k_b) / pairs, k_b * (N_ACTIONS - k_a) / pairs
        ties_seen += 1 - float(np.mean(a_better + b_better))
        weights = bootstrap_weights(n_tasks, n_boot, rng)
        for name, (num, den) in figure_totals(task, a_better, b_better, n_tasks).items():
            bounds = BOUNDS.get(name, (0.0, 1.0))
            for method, interval in (
                ("before", bootstrap_ratio(num, den, weights)),
                ("after", ratio_interval(num, den, weights, bounds=bounds)),
            ):
                if "low" not in interval:
                    continue  # no interval counts as not covering
                hits[name, method] += interval["low"] <= truth[name] <= interval["high"]
                width[name, method] += interval["high"] - interval["low"]
    out: dict[str, dict[str, float]] = {}
    for name in FIGURES:
        out[name] = {"truth": truth[name], "ties_seen": ties_seen / reps}
        for method in ("before", "after"):
            out[name][method] = hits[name, method] / reps
            out[name][f"{method}_width"] = width[name, method] / reps
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="simulated analyses per cell")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--regimes", default=",".join(REGIMES), help="comma-separated")
    parser.add_argument(
        "--quick", action="store_true", help="40 analyses per cell, 200 resamples, 10 and 20 tasks"
    )
    args = parser.parse_args()
    reps, n_boot, tasks = args.reps, args.n_boot, TASKS
    if args.quick:
        reps, n_boot, tasks = 40, 200, (10, 20)
    started = time.perf_counter()
    print(
        f"{N_ACTIONS} actions per policy per state, {reps} simulated analyses per cell, "
        f"{n_boot} resamples of tasks, 95% nominal"
    )
    print(
        "| regime | tasks | ties | figure | true value | before: coverage | before: width "
        "| after: coverage | after: width |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for regime_name in args.regimes.split(","):
        regime = REGIMES[regime_name]
        truth = true_values(regime)
        for n_tasks in tasks:
            cells = coverage(regime, n_tasks, reps, n_boot=n_boot, truth=truth)
            for name, c in cells.items():
                print(
                    f"| {regime.name} | {n_tasks} | {c['ties_seen']:.2f} | {name} | "
                    f"{c['truth']:.4f} | {c['before']:.3f} | {c['before_width']:.3f} | "
                    f"{c['after']:.3f} | {c['after_width']:.3f} |"
                )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
