"""Paired comparisons of two runs: per-task differences of pass@k and pass^k, bootstrapped.

Two runs of the same tasks are compared task by task: for every cell (K, budget) each task
gets its unbiased estimate under each run, and the difference ``B - A`` (the second run
minus the first) is averaged over the tasks both runs have. Tasks differ far more from
one another than the runs do, so pairing removes the between-task spread from the
comparison; an unpaired interval would carry it.

- **pass@k**: the chance that at least one of K samples succeeds within the budget,
  ``1 - C(n - c, K)/C(n, K)`` per task (``agentenvs.eval.passk.pass_at_k``).
- **pass^k**: the chance that all K succeed, ``C(c, K)/C(n, K)`` per task
  (``agentenvs.eval.passk.pass_hat_k``): what a user who needs the agent to succeed
  every time cares about. At K = 1 both are the success rate.

The interval of each cell is a percentile bootstrap over tasks of the mean difference:
``n_boot`` resamples of the tasks with replacement (``bootstrap_weights`` with
``np.random.default_rng(seed)``), each the same draw for both runs, so the resampled
difference is ``weights @ d / n_tasks`` for the per-task differences ``d``. Each cell's
verdict is "B better" or "A better" only where that interval, as printed, excludes 0
(``agentenvs.eval.printing.printed_excludes_zero``), else "no clear difference". With
fewer than ``MIN_TASKS_FOR_CI`` tasks the intervals cover less than their nominal level
(``benchmarks/paired_ci_coverage.py`` measures it; docs/comparisons.md gives the table),
so the tables and the JSON print no verdict there: "too few tasks for a verdict (N < 50)"
(``PairedComparison.verdicts``; the interval's own reading stays in
``MetricComparison.verdicts`` and, in the JSON, ``interval_verdict``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentenvs.eval.passk import (
    MIN_TASKS_FOR_CI,
    bootstrap_weights,
    pass_at_k,
    pass_hat_k,
    percentile_bounds,
)
from agentenvs.eval.printing import (
    ZERO_WIDTH_NOTE,
    decimals_for,
    format_number,
    printed_excludes_zero,
)

METRICS = ("pass@k", "pass^k")
VERDICTS = ("A better", "B better", "no clear difference")


def per_task(counts: Any, n: Any, ks: Sequence[int], metric: str) -> np.ndarray:
    """Each task's unbiased estimate of ``metric`` for every (K, budget):
    ``(tasks, len(ks), budgets)`` from ``counts[task, budget]`` and ``n[task]``."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    counts_arr = np.asarray(counts, dtype=np.int64)
    n_arr = np.broadcast_to(np.asarray(n, dtype=np.int64), (counts_arr.shape[0],))
    ks_arr = np.asarray(ks, dtype=np.int64)
    if ks_arr.size == 0 or ks_arr.max() > n_arr.min():
        raise ValueError(f"every K must be at most the fewest samples of a task ({n_arr.min()})")
    estimate = pass_at_k if metric == "pass@k" else pass_hat_k
    return estimate(n_arr[:, None, None], counts_arr[:, None, :], ks_arr[None, :, None])


def paired_bootstrap(
    differences: np.ndarray, *, n_boot: int, seed: int, confidence: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over tasks (axis 0) of ``differences`` and its percentile bootstrap interval:
    ``(mean, low, high)``, each of the shape of one task's cells."""
    d = np.asarray(differences, dtype=np.float64)
    n_tasks = d.shape[0]
    mean = d.mean(axis=0)
    weights = bootstrap_weights(n_tasks, n_boot, np.random.default_rng(seed))
    boot = (weights.astype(np.float64) @ d.reshape(n_tasks, -1)) / n_tasks
    low, high = percentile_bounds(boot.reshape(n_boot, *d.shape[1:]), confidence)
    return mean, low, high


@dataclass
class MetricComparison:
    """One metric of a paired comparison, each array ``[k_index, budget_index]``."""

    a: np.ndarray
    b: np.ndarray
    diff: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @property
    def decimals(self) -> int:
        """The table's decimals (the reports' one precision rule)."""
        return decimals_for([self.a, self.b, self.diff, self.low, self.high], self.high - self.low)

    def verdicts(self) -> np.ndarray:
        """Per cell: "B better" / "A better" where the printed interval excludes 0."""
        out = np.full(self.diff.shape, VERDICTS[2], dtype=object)
        for index in np.ndindex(self.diff.shape):
            low, high = self.low[index], self.high[index]
            if printed_excludes_zero(low, high, self.decimals):
                out[index] = VERDICTS[1] if low > 0 else VERDICTS[0]
        return out


@dataclass
class PairedComparison:
    """pass@k and pass^k of two runs over the tasks both have, their difference ``B - A``
    and its paired bootstrap interval, per (K, budget)."""

    ks: np.ndarray
    budgets: np.ndarray
    n_tasks: int
    confidence: float
    metrics: dict[str, MetricComparison] = field(default_factory=dict)
    unit: str = "turns"

    @property
    def verdict_withheld(self) -> str:
        """Why no cell gets a verdict ("" when they may): too few tasks for the interval."""
        if self.n_tasks < MIN_TASKS_FOR_CI:
            return f"too few tasks for a verdict ({self.n_tasks} < {MIN_TASKS_FOR_CI})"
        return ""

    def verdicts(self, metric: str) -> np.ndarray:
        """The printed verdict of each cell of ``metric``: the interval's
        (``MetricComparison.verdicts``), or ``verdict_withheld`` below the task count at
        which the interval is known to under-cover."""
        found = self.metrics[metric].verdicts()
        if self.verdict_withheld:
            found[:] = self.verdict_withheld
        return found

    def to_dict(self) -> dict[str, Any]:
        cells = []
        for metric, m in self.metrics.items():
            verdicts = self.verdicts(metric)
            by_interval = m.verdicts()
            for i, k in enumerate(self.ks):
                for j, t in enumerate(self.budgets):
                    cells.append(
                        {
                            "metric": metric,
                            "k": int(k),
                            "budget": int(t),
                            "a": float(m.a[i, j]),
                            "b": float(m.b[i, j]),
                            "diff": float(m.diff[i, j]),
                            "low": float(m.low[i, j]),
                            "high": float(m.high[i, j]),
                            "verdict": str(verdicts[i, j]),
                            "interval_verdict": str(by_interval[i, j]),
                        }
                    )
        return {
            "ks": self.ks.tolist(),
            "budgets": self.budgets.tolist(),
            "budget_unit": self.unit,
            "n_tasks": self.n_tasks,
            "confidence": self.confidence,
            "few_tasks": self.n_tasks < MIN_TASKS_FOR_CI,
            "min_tasks_for_verdict": MIN_TASKS_FOR_CI,
            "cells": cells,
        }


def paired_comparison(
    counts_a: Any,
    n_a: Any,
    counts_b: Any,
    n_b: Any,
    ks: Sequence[int],
    budgets: Sequence[int],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    unit: str = "turns",
) -> PairedComparison:
    """Compare run B with run A on the same tasks (row t of each is task t)."""
    counts_a, counts_b = np.asarray(counts_a), np.asarray(counts_b)
    if counts_a.shape != counts_b.shape or counts_a.shape[1] != len(budgets):
        raise ValueError(
            f"both runs need counts (tasks, budgets) of one shape, got {counts_a.shape} "
            f"and {counts_b.shape} for {len(budgets)} budgets"
        )
    if counts_a.shape[0] == 0:
        raise ValueError("no tasks in common")
    if n_boot < 1:
        raise ValueError("a paired comparison needs n_boot >= 1")
    result = PairedComparison(
        ks=np.asarray(ks, dtype=np.int64),
        budgets=np.asarray(budgets, dtype=np.int64),
        n_tasks=int(counts_a.shape[0]),
        confidence=confidence,
        unit=unit,
    )
    for metric in METRICS:
        a = per_task(counts_a, n_a, ks, metric)
        b = per_task(counts_b, n_b, ks, metric)
        diff, low, high = paired_bootstrap(b - a, n_boot=n_boot, seed=seed, confidence=confidence)
        result.metrics[metric] = MetricComparison(a.mean(0), b.mean(0), diff, low, high)
    return result


def budget_label(unit: str) -> str:
    """The budget's column name in the tables: T for turns, B (tokens) / B (seconds)."""
    return "T" if unit == "turns" else f"B ({unit})"


def paired_markdown(comparison: PairedComparison, label_a: str, label_b: str) -> str:
    """The paired tables, one per metric: a row per (K, budget) cell with both runs, the
    difference B - A with its interval, and the verdict."""
    column = budget_label(comparison.unit)
    flat = False
    lines = [
        "### Paired comparison, task by task",
        "",
        f"A = {label_a}, B = {label_b}, on the {comparison.n_tasks} tasks both runs have. "
        f"B - A is the mean over tasks of each task's difference, with its "
        f"{comparison.confidence:.0%} paired bootstrap interval over tasks; a verdict names "
        "a run only where that interval, as printed, excludes 0, and only with at least "
        f"{MIN_TASKS_FOR_CI} tasks. pass@k: at least one of K samples succeeds; pass^k: all "
        "K succeed.",
    ]
    for metric, m in comparison.metrics.items():
        decimals = m.decimals
        verdicts = comparison.verdicts(metric)
        lines += [
            "",
            f"#### {metric}",
            "",
            f"| K | {column} | A | B | B - A [{comparison.confidence:.0%} CI] | verdict |",
            "|---|---|---|---|---|---|",
        ]
        for i, k in enumerate(comparison.ks):
            for j, t in enumerate(comparison.budgets):
                diff = format_number(m.diff[i, j], decimals, signed=True)
                low = format_number(m.low[i, j], decimals, signed=True)
                high = format_number(m.high[i, j], decimals, signed=True)
                mark = " †" if low == high else ""
                flat = flat or bool(mark)
                lines.append(
                    f"| {k} | {t} | {format_number(m.a[i, j], decimals)} | "
                    f"{format_number(m.b[i, j], decimals)} | {diff} [{low}, {high}]{mark} | "
                    f"{verdicts[i, j]} |"
                )
    if flat:
        lines += ["", ZERO_WIDTH_NOTE]
    if comparison.n_tasks < MIN_TASKS_FOR_CI:
        lines += [
            "",
            f"No verdicts: {comparison.n_tasks} tasks (< {MIN_TASKS_FOR_CI}); paired "
            "bootstrap intervals over so few tasks cover less than their nominal level "
            "(docs/comparisons.md), so an interval that excludes 0 is not enough to name a "
            "better run. Compare on more tasks for a verdict.",
        ]
    return "\n".join(lines) + "\n"
