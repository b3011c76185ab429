"""How many tasks and samples a paired comparison needs: power by simulation, per cell.

``agentenvs plan`` answers, before the runs: with ``m`` samples per task, how many tasks
must two runs share for ``report --compare`` to call a true difference of ``delta`` in
pass@k (or pass^k) at a (K, budget) cell, at level ``alpha`` with power ``1 - beta``?

The method, for each cell and each ``m``:

1. **The task population** is the pilot's: each task's success rate at that budget,
   ``(c + 0.5) / (n + 1)`` from ``c`` of its ``n`` pilot samples (a task that never, or
   always, succeeded in the pilot keeps a rate that a better policy can still move), or
   the rates given on the command line as they are. These smoothed rates sit above the
   raw ``c / n`` that ``agentenvs report`` prints (0.5 / (n + 1) above it for a task
   that never succeeded), so the plan's table prints both, raw first. A pilot with no
   success at all has nothing to scale from (every task's smoothed rate would be the
   same made-up 0.5 / (n + 1)): ``pilot_from_run`` refuses it, and a budget at which the
   pilot never succeeded is left out of the plan (``PlanCell.skipped``).
2. **The alternative**: run A has those rates, run B has every task's rate moved by one
   common shift on the logit scale, ``p_B = expit(logit(p_A) + theta)``, with ``theta``
   solved (bisection) so that the population's mean metric rises by exactly ``delta``.
   Easy tasks then move little and hard ones more, as a policy's gains do; a ``delta``
   beyond what any shift reaches is reported as unreachable.
3. **One simulated experiment** with ``N`` tasks: ``N`` tasks drawn with replacement from
   the population, ``c_A ~ Binomial(m, p_A)`` and ``c_B ~ Binomial(m, p_B)`` per task, the
   per-task unbiased estimates and their differences ``d``, and the comparison's two-sided
   interval at level ``alpha``. It detects the difference when the interval lies above 0.
   The interval is the normal one, ``mean(d) ± z * sd(d) / sqrt(N)``, which the report's
   paired percentile bootstrap matches once N is past a few dozen tasks, at a cost of
   O(N) per experiment rather than O(N * n_boot) (``tests/eval/test_plan.py`` checks the
   answer against simulations through the bootstrap itself).
4. **Power** is the share of ``sims`` seeded experiments that detect the difference;
   ``N`` is the fewest tasks whose power reaches ``1 - beta`` (doubling, then bisection;
   every N draws its experiments from its own seed, so the answer is reproducible).

Beside it the closed form of the normal approximation, ``N = (z_{1-alpha/2} + z_{1-beta})^2
Var(d) / delta^2``, with ``Var(d)`` computed exactly from the binomial model (the spread of
the estimates within each task plus the spread of the true differences across tasks); at
K = 1 and m = 1 on tasks of one rate it is the textbook two-proportion sample size.

Trajectories per run are tasks × m in derive mode, and that many per budget in rerun mode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agentenvs.eval.paired import METRICS, budget_label
from agentenvs.eval.passk import MIN_TASKS_FOR_CI, pass_at_k, pass_hat_k

#: the most tasks a plan searches up to (beyond it: "more than MAX_TASKS")
MAX_TASKS = 100_000


@dataclass
class Pilot:
    """Per-task success rates ``rates[task, budget]`` that a plan starts from."""

    rates: np.ndarray
    budgets: list[int]
    unit: str = "turns"
    source: str = "given rates"
    #: pilot samples per task (None: rates given, not estimated)
    n: int | None = None
    #: the raw rates ``c / n`` of a pilot run (None: rates given, the same as ``rates``)
    raw: np.ndarray | None = None

    @property
    def raw_rates(self) -> np.ndarray:
        """Per-task rates as observed (``c / n``; the given rates with ``--rates``)."""
        return self.rates if self.raw is None else self.raw

    def has_success(self, j: int) -> bool:
        """Whether any task succeeded at budget index ``j`` (a given rate above 0)."""
        return bool(np.any(self.raw_rates[:, j] > 0))


def pilot_from_rates(rates: Sequence[float]) -> Pilot:
    """Assumed per-task success rates (one budget)."""
    values = np.asarray(rates, dtype=np.float64)
    if values.ndim != 1 or values.size == 0 or np.any(values < 0) or np.any(values > 1):
        raise ValueError(f"rates must be a non-empty list of numbers in [0, 1], got {rates!r}")
    if not np.any(values > 0):
        raise NoSuccessError(
            "cannot plan: every given rate is 0, so there is nothing to scale a difference "
            "from; give the rates you expect of the weaker policy (e.g. --rates 0.05,0.1,0.3)"
        )
    return Pilot(rates=values[:, None], budgets=[0])


class NoSuccessError(ValueError):
    """A pilot without a single success: no plan can be scaled from it."""


def pilot_from_run(run_dir: str | Path, budgets: Sequence[int] | None = None) -> Pilot:
    """Per-task rates of a pilot run, ``(c + 0.5) / (n + 1)`` at each budget (and the raw
    ``c / n`` beside them). Refused (``NoSuccessError``) where no trajectory of the pilot
    succeeded at any of the budgets."""
    from agentenvs.eval.report import load_run, success_count_matrix

    data = load_run(run_dir)
    chosen = list(budgets) if budgets else data.budgets
    unknown = sorted(set(chosen) - set(data.budgets))
    if unknown:
        raise ValueError(f"{run_dir} has no budget(s) {unknown} (its budgets: {data.budgets})")
    counts, n = success_count_matrix(data, data.task_ids(), chosen)
    keep = n > 0
    if not keep.any():
        raise ValueError(f"{run_dir}: no finished trajectories to plan from")
    counts, n = counts[keep], n[keep]
    if not counts.any():
        where = "at any budget" if len(chosen) > 1 else f"at budget {chosen[0]}"
        raise NoSuccessError(
            f"cannot plan from {run_dir}: none of its {int(n.sum())} trajectories per budget "
            f"({data.label}) succeeded {where}, so there is no rate to scale a difference "
            "from; pilot a policy that succeeds sometimes (or larger budgets), or give the "
            "rates you expect with --rates"
        )
    rates = (counts + 0.5) / (n[:, None] + 1.0)
    raw = counts / n[:, None]
    source = f"{run_dir} ({data.label}, {int(keep.sum())} tasks, n = {int(n.min())})"
    return Pilot(rates, chosen, data.unit, source, int(n.min()), raw)


def true_metric(p: np.ndarray, k: int, metric: str) -> np.ndarray:
    """pass@k ``1 - (1 - p)^k`` or pass^k ``p^k`` of tasks with success rate p."""
    return 1.0 - (1.0 - p) ** k if metric == "pass@k" else p**k


def shifted(p: np.ndarray, theta: float) -> np.ndarray:
    """``expit(logit(p) + theta)``, with 0 and 1 kept where they are."""
    with np.errstate(divide="ignore"):
        logit = np.log(p) - np.log1p(-p)
    return 1.0 / (1.0 + np.exp(-(logit + theta)))


def solve_shift(p: np.ndarray, k: int, metric: str, delta: float) -> float | None:
    """The logit shift that raises the mean metric of tasks ``p`` by ``delta`` (None when
    no shift reaches it)."""
    base = true_metric(p, k, metric).mean()

    def gain(theta: float) -> float:
        return float(true_metric(shifted(p, theta), k, metric).mean() - base)

    high = 1.0
    while gain(high) < delta:
        high *= 2
        if high > 64:
            return None
    low = 0.0
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if gain(mid) < delta else (low, mid)
    return (low + high) / 2


def estimate_table(m: int, k: int, metric: str) -> np.ndarray:
    """The unbiased estimate for c = 0..m successes of m samples."""
    c = np.arange(m + 1)
    return (pass_at_k if metric == "pass@k" else pass_hat_k)(m, c, k)


def simulated_power(
    p_a: np.ndarray,
    p_b: np.ndarray,
    k: int,
    m: int,
    n_tasks: int,
    *,
    metric: str = "pass@k",
    alpha: float = 0.05,
    sims: int = 1000,
    seed: int = 0,
) -> float:
    """The share of ``sims`` simulated experiments of ``n_tasks`` tasks (drawn from the
    population ``p_a``/``p_b``) whose interval at level ``alpha`` lies above 0."""
    from scipy.stats import norm

    z = float(norm.ppf(1 - alpha / 2))
    table = estimate_table(m, k, metric)
    rng = np.random.default_rng([seed, n_tasks, m, k])
    hits = 0
    block = max(1, (1 << 21) // n_tasks)
    for start in range(0, sims, block):
        rows = min(block, sims - start)
        tasks = rng.integers(len(p_a), size=(rows, n_tasks))
        d = table[rng.binomial(m, p_b[tasks])] - table[rng.binomial(m, p_a[tasks])]
        mean = d.mean(axis=1)
        sd = d.std(axis=1, ddof=1) if n_tasks > 1 else np.zeros(rows)
        hits += int(np.sum(mean - z * sd / math.sqrt(n_tasks) > 0))
    return hits / sims


def difference_variance(p_a: np.ndarray, p_b: np.ndarray, k: int, m: int, metric: str) -> float:
    """Var(d) of one task's estimated difference, the task drawn from the population:
    the binomial spread of both estimates within a task plus the spread of its true
    difference across tasks (exact, no simulation)."""
    from scipy.stats import binom

    table = estimate_table(m, k, metric)
    c = np.arange(m + 1)

    def moments(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pmf = binom.pmf(c[None, :], m, p[:, None])
        return pmf @ table, pmf @ table**2

    mean_a, second_a = moments(p_a)
    mean_b, second_b = moments(p_b)
    within = (second_a - mean_a**2) + (second_b - mean_b**2)
    return float(within.mean() + np.var(mean_b - mean_a))


def normal_tasks(
    p_a: np.ndarray,
    p_b: np.ndarray,
    k: int,
    m: int,
    delta: float,
    alpha: float,
    power: float,
    metric: str = "pass@k",
) -> int:
    """Tasks needed by the normal approximation, ``(z_a + z_b)^2 Var(d) / delta^2``."""
    from scipy.stats import norm

    z = float(norm.ppf(1 - alpha / 2) + norm.ppf(power))
    return max(2, math.ceil(z * z * difference_variance(p_a, p_b, k, m, metric) / delta**2))


def tasks_needed(
    p_a: np.ndarray,
    p_b: np.ndarray,
    k: int,
    m: int,
    *,
    power: float,
    metric: str = "pass@k",
    alpha: float = 0.05,
    sims: int = 1000,
    seed: int = 0,
    max_tasks: int = MAX_TASKS,
) -> tuple[int | None, float]:
    """The fewest tasks whose simulated power reaches ``power`` and that power, or
    ``(None, power at max_tasks)`` when even ``max_tasks`` falls short."""

    def reach(n_tasks: int) -> float:
        return simulated_power(
            p_a, p_b, k, m, n_tasks, metric=metric, alpha=alpha, sims=sims, seed=seed
        )

    low, high = 1, 2
    found = reach(high)
    while found < power:
        if high >= max_tasks:
            return None, found
        low, high = high, min(2 * high, max_tasks)
        found = reach(high)
    while high - low > 1:
        mid = (low + high) // 2
        at_mid = reach(mid)
        if at_mid >= power:
            high, found = mid, at_mid
        else:
            low = mid
    return high, found


@dataclass
class PlanCell:
    """The answer for one (K, budget, samples per task)."""

    k: int
    budget: int
    samples: int
    tasks: int | None
    power: float
    normal_tasks: int | None
    shift: float | None
    #: the mean metric of the smoothed rates the plan starts from
    base: float
    #: the same of the pilot's raw rates (what ``agentenvs report`` prints)
    raw_base: float | None = None
    #: why the cell was not planned ("" when it was)
    skipped: str = ""


@dataclass
class Plan:
    """A plan: what was asked, and a cell per (K, budget, samples per task)."""

    pilot: Pilot
    delta: float
    alpha: float
    power: float
    metric: str
    sims: int
    seed: int
    cells: list[PlanCell] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pilot": self.pilot.source,
            "budget_unit": self.pilot.unit,
            "delta": self.delta,
            "alpha": self.alpha,
            "power": self.power,
            "metric": self.metric,
            "sims": self.sims,
            "seed": self.seed,
            "rates_planned_with": "given" if self.pilot.raw is None else "(c + 0.5) / (n + 1)",
            "cells": [vars(c) for c in self.cells],
        }


def make_plan(
    pilot: Pilot,
    *,
    delta: float,
    ks: Sequence[int],
    samples: Sequence[int],
    alpha: float = 0.05,
    power: float = 0.8,
    metric: str = "pass@k",
    sims: int = 1000,
    seed: int = 0,
    max_tasks: int = MAX_TASKS,
) -> Plan:
    """Tasks needed per (K, budget, samples per task) with K <= samples (method: module
    docstring)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha} and {power}")
    if sims < 10:
        raise ValueError(f"sims must be at least 10, got {sims}")
    plan = Plan(pilot, delta, alpha, power, metric, sims, seed)
    for j, budget in enumerate(pilot.budgets):
        p_a = pilot.rates[:, j]
        empty = not pilot.has_success(j)
        for k in ks:
            theta = None if empty else solve_shift(p_a, k, metric, delta)
            base = float(true_metric(p_a, k, metric).mean())
            raw_base = float(true_metric(pilot.raw_rates[:, j], k, metric).mean())
            for m in samples:
                if k > m:
                    continue
                if empty:
                    plan.cells.append(
                        PlanCell(k, budget, m, None, 0.0, None, None, base, raw_base,
                                 "no success in the pilot at this budget")
                    )
                    continue
                if theta is None:
                    plan.cells.append(PlanCell(k, budget, m, None, 0.0, None, None, base, raw_base))
                    continue
                p_b = shifted(p_a, theta)
                needed, reached = tasks_needed(
                    p_a,
                    p_b,
                    k,
                    m,
                    power=power,
                    metric=metric,
                    alpha=alpha,
                    sims=sims,
                    seed=seed,
                    max_tasks=max_tasks,
                )
                closed = normal_tasks(p_a, p_b, k, m, delta, alpha, power, metric)
                plan.cells.append(
                    PlanCell(k, budget, m, needed, reached, closed, theta, base, raw_base)
                )
    return plan


def plan_markdown(plan: Plan) -> str:
    """The plan as a Markdown table, with what it assumed: the pilot's raw metric (as
    ``agentenvs report`` prints it) beside the smoothed one the plan scales from."""
    given = plan.pilot.raw is None
    column = "budget" if plan.pilot.budgets == [0] else budget_label(plan.pilot.unit)
    if given:
        rates = (
            f"The population is the given rates as they are; the table's pilot {plan.metric} "
            "is theirs."
        )
        header = f"pilot {plan.metric}"
    else:
        rates = (
            f"Two pilot {plan.metric} columns: *raw*, from each task's c successes of n "
            "samples as `agentenvs report` prints it, and *smoothed*, from (c + 0.5) / (n + 1) "
            "per task, which the plan scales from: a task the pilot never (or always) solved "
            "keeps a rate a better policy can still move, where its raw 0 (or 1) would never "
            "change under any logit shift. Smoothing moves each task's rate by at most "
            f"0.5 / (n + 1) = {0.5 / ((plan.pilot.n or 1) + 1):.3f} (up where it is below "
            "one half), and pass@k of K > 1 magnifies that, so on hard tasks the smoothed "
            "column sits above the raw one."
        )
        header = f"pilot {plan.metric}, raw | pilot {plan.metric}, smoothed (planned with)"
    lines = [
        f"### Tasks needed to detect a {plan.metric} difference of {plan.delta:g}",
        "",
        f"Pilot: {plan.pilot.source}. Level alpha = {plan.alpha:g} (two-sided), power "
        f"{plan.power:g}; {plan.sims} simulated paired experiments per task count (seed "
        f"{plan.seed}); the second run's rates are the pilot's shifted on the logit scale "
        f"so that the mean {plan.metric} rises by {plan.delta:g}. {rates}",
        "",
        f"| K | {column} | {header} | samples per task | tasks | power there "
        "| tasks, normal approx. | trajectories per run |",
        "|---|---|---|" + ("" if given else "---|") + "---|---|---|---|---|",
    ]
    skipped = False
    for c in plan.cells:
        budget = "given" if plan.pilot.budgets == [0] else str(c.budget)
        if c.skipped:
            skipped = True
            tasks, power, closed, total = f"not planned: {c.skipped}", "-", "-", "-"
        elif c.shift is None:
            tasks, power, closed, total = "unreachable", "-", "-", "-"
        elif c.tasks is None:
            tasks, power, closed, total = (
                f"> {MAX_TASKS}",
                f"{c.power:.2f}",
                str(c.normal_tasks),
                "-",
            )
        else:
            tasks, power = str(c.tasks), f"{c.power:.3f}"
            closed, total = str(c.normal_tasks), str(c.tasks * c.samples)
        pilot = f"{c.base:.3f}" if given else f"{c.raw_base:.3f} | {c.base:.3f}"
        lines.append(
            f"| {c.k} | {budget} | {pilot} | {c.samples} | {tasks} | {power} | {closed} "
            f"| {total} |"
        )
    lines += [
        "",
        "Trajectories per run: tasks × samples in derive mode, that many per budget in "
        "rerun mode. Tasks are drawn from the pilot's population: a benchmark with fewer "
        "tasks than a cell needs cannot reach its power with that many samples per task.",
    ]
    if skipped:
        lines += [
            "",
            "Not planned: at that budget no task of the pilot succeeded, so a shift of its "
            "rates would rest on the smoothing alone; plan from larger budgets or a pilot "
            "that succeeds there.",
        ]
    few = [c.tasks for c in plan.cells if c.tasks is not None and c.tasks < MIN_TASKS_FOR_CI]
    if few:
        lines += [
            "",
            f"`agentenvs report --compare` gives no verdict below {MIN_TASKS_FOR_CI} tasks "
            "(its paired intervals cover less than their level there, docs/comparisons.md): "
            f"a cell planned with fewer (here as few as {min(few)}) needs "
            f"{MIN_TASKS_FOR_CI} tasks for a verdict.",
        ]
    return "\n".join(lines) + "\n"
