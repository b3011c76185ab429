"""The Pass@(K,T) estimator: unbiased per task, averaged over tasks, with bootstrap CIs.

Pass@(K,T) is the probability that at least one of K independent trajectories, each
allowed at most T turns, succeeds. From n samples of a task of which c_T succeeded
within T turns, the unbiased estimate is ``1 - C(n - c_T, K) / C(n, K)``.

The ratio of binomials is never formed from huge integers: it equals the running
product ``prod_{i<K} (n - c - i) / (n - i)``, a table ``survival_table(n)[c, K]`` of
at most (n+1)² floats, built once per distinct n with one ``cumprod``. The task mean
for every (K, T) then only needs how many tasks have each count c at each T (a
histogram), so the whole surface costs O(tasks·T + n²·T) and never loops in Python.

Inputs come in two shapes:

- ``first_success``: an integer array ``(tasks, n)`` holding, per sample, the turn
  (1-based) at which it first succeeded, and ``0`` (or any value < 1) when it never
  did; turn it into counts with ``success_counts``.
- ``counts``: an integer array ``(tasks, len(budgets))`` with ``counts[t, j] = c`` for
  budget ``budgets[j]``, plus ``n`` (an int, or one int per task: tasks may have
  different sample counts).

Budgets need not be turns: Pass@(K,B) with B in completion tokens or seconds reads the
cumulative cost at each sample's first success instead of its turn
(``success_counts_within``; ``agentenvs.eval.budget_units``), and the same estimator
applies. ``pass_hat_k`` is the other end: pass^k, the chance that all K succeed,
unbiased as ``C(c, K) / C(n, K)``.

Every surface is indexed ``[k_index, t_index]``. A K larger than a task's n has no
unbiased estimate: ``pass_at_k`` returns NaN for it, while ``pass_at_k_t`` and
``estimate_surface`` raise ``ValueError`` (a mean over tasks with a NaN would be NaN).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ArrayLike = Any


def survival_table(n: int, k_max: int | None = None) -> np.ndarray:
    """``F[c, k] = C(n - c, k) / C(n, k)`` for ``c = 0..n`` and ``k = 0..k_max``.

    The chance that k samples drawn without replacement from n, c of them successes,
    hold no success. Built as a cumulative product of ratios in [0, 1], so it is
    exact to rounding for any n; entries with ``k > n`` are NaN (no estimate).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    k_max = n if k_max is None else int(k_max)
    c = np.arange(n + 1, dtype=np.float64)[:, None]
    i = np.arange(min(k_max, n), dtype=np.float64)[None, :]
    # ratio of the i-th draw missing every success; clip makes C(n-c, k) = 0 once k > n-c
    ratios = np.clip((n - c - i) / (n - i), 0.0, None)
    table = np.empty((n + 1, k_max + 1))
    table[:, 0] = 1.0
    table[:, 1 : ratios.shape[1] + 1] = np.cumprod(ratios, axis=1)
    table[:, n + 1 :] = np.nan
    return table


def pass_at_k(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> np.ndarray:
    """The unbiased per-task estimate ``1 - C(n-c, k)/C(n, k)``, broadcast over inputs.

    NaN where ``k > n`` (no unbiased estimate from fewer samples than draws).
    """
    n_arr, c_arr, k_arr = np.broadcast_arrays(
        np.asarray(n, dtype=np.int64), np.asarray(c, dtype=np.int64), np.asarray(k, dtype=np.int64)
    )
    if np.any(c_arr < 0) or np.any(c_arr > n_arr) or np.any(k_arr < 1):
        raise ValueError("need 0 <= c <= n and k >= 1")
    out = np.full(n_arr.shape, np.nan)
    for n_value in np.unique(n_arr):
        mask = n_arr == n_value
        table = survival_table(int(n_value), int(k_arr[mask].max()))
        out[mask] = 1.0 - table[c_arr[mask], k_arr[mask]]
    return out


def pass_hat_k(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> np.ndarray:
    """pass^k: the unbiased per-task estimate ``C(c, k)/C(n, k)`` of the chance that all k
    of k samples succeed, broadcast over inputs. NaN where ``k > n``.

    ``C(c, k)/C(n, k)`` is ``survival_table``'s entry for ``n - c`` successes: drawing k
    successes from c is drawing no failure from ``n - c``.
    """
    n_arr, c_arr, k_arr = np.broadcast_arrays(
        np.asarray(n, dtype=np.int64), np.asarray(c, dtype=np.int64), np.asarray(k, dtype=np.int64)
    )
    if np.any(c_arr < 0) or np.any(c_arr > n_arr) or np.any(k_arr < 1):
        raise ValueError("need 0 <= c <= n and k >= 1")
    out = np.full(n_arr.shape, np.nan)
    for n_value in np.unique(n_arr):
        mask = n_arr == n_value
        table = survival_table(int(n_value), int(k_arr[mask].max()))
        out[mask] = table[n_value - c_arr[mask], k_arr[mask]]
    return out


def success_counts_within(first_cost: ArrayLike, budgets: Sequence[float]) -> np.ndarray:
    """Per task and budget, how many samples first succeeded at a cumulative cost of at
    most that budget (turns, completion tokens or seconds).

    ``first_cost`` is ``(tasks, n)``: the cumulative cost at each sample's first success,
    and 0 (or any value <= 0, or NaN) for a sample that never succeeded. Returns
    ``(tasks, len(budgets))`` ints. With turns it equals ``success_counts``.
    """
    costs = np.asarray(first_cost, dtype=np.float64)
    if costs.ndim != 2:
        raise ValueError(f"first_cost must be 2-D (tasks, n), got shape {costs.shape}")
    limits = np.asarray(budgets, dtype=np.float64)
    if limits.ndim != 1 or limits.size == 0 or not np.all(limits > 0):
        raise ValueError(f"budgets must be a non-empty list of positive numbers, got {budgets!r}")
    succeeded = np.nan_to_num(costs, nan=0.0) > 0
    within = succeeded[:, :, None] & (costs[:, :, None] <= limits[None, None, :])
    return within.sum(axis=1).astype(np.int64)


def success_counts(first_success: ArrayLike, budgets: Sequence[int]) -> np.ndarray:
    """Per task and budget, how many samples first succeeded within that many turns.

    ``first_success`` is ``(tasks, n)``: the 1-based turn of first success, or a value
    below 1 for a sample that never succeeded. Returns ``(tasks, len(budgets))`` ints.
    """
    turns = np.asarray(first_success)
    if turns.ndim != 2:
        raise ValueError(f"first_success must be 2-D (tasks, n), got shape {turns.shape}")
    budgets_arr = np.asarray(budgets, dtype=np.int64)
    if budgets_arr.ndim != 1 or budgets_arr.size == 0 or np.any(budgets_arr < 1):
        raise ValueError(f"budgets must be a non-empty list of positive ints, got {budgets!r}")
    t_max = int(budgets_arr.max())
    # one bucket per turn 1..t_max; failures and later successes share bucket t_max + 1
    buckets = np.where((turns >= 1) & (turns <= t_max), turns, t_max + 1).astype(np.int64)
    width = t_max + 2
    index = (buckets + np.arange(turns.shape[0])[:, None] * width).ravel()
    hist = np.bincount(index, minlength=turns.shape[0] * width).reshape(-1, width)
    return np.cumsum(hist, axis=1)[:, budgets_arr]


def _as_counts(counts: ArrayLike, n: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    counts_arr = np.asarray(counts)
    if counts_arr.ndim != 2:
        raise ValueError(f"counts must be 2-D (tasks, budgets), got shape {counts_arr.shape}")
    if counts_arr.shape[0] == 0:
        raise ValueError("no tasks")
    counts_arr = counts_arr.astype(np.int64)
    n_arr = np.broadcast_to(np.asarray(n, dtype=np.int64), (counts_arr.shape[0],))
    if np.any(counts_arr < 0) or np.any(counts_arr > n_arr[:, None]):
        raise ValueError("every count must lie in [0, n]")
    return counts_arr, n_arr


def _check_ks(ks: Sequence[int], n_arr: np.ndarray) -> np.ndarray:
    ks_arr = np.asarray(ks, dtype=np.int64)
    if ks_arr.ndim != 1 or ks_arr.size == 0 or np.any(ks_arr < 1):
        raise ValueError(f"ks must be a non-empty list of positive ints, got {ks!r}")
    if ks_arr.max() > n_arr.min():
        raise ValueError(
            f"K={int(ks_arr.max())} exceeds the smallest number of samples per task "
            f"(n={int(n_arr.min())}): Pass@K has no unbiased estimate for K > n"
        )
    return ks_arr


def _count_histogram(counts: np.ndarray, n: int, weights: np.ndarray | None = None) -> np.ndarray:
    """``H[t_index, c]`` = how many tasks (or how much bootstrap weight) have count c."""
    n_budgets = counts.shape[1]
    index = (np.arange(n_budgets)[None, :] * (n + 1) + counts).ravel()
    w = None if weights is None else np.repeat(weights, n_budgets)
    return np.bincount(index, weights=w, minlength=n_budgets * (n + 1)).reshape(n_budgets, n + 1)


def pass_at_k_t(counts: ArrayLike, n: ArrayLike, ks: Sequence[int]) -> np.ndarray:
    """Mean over tasks of Pass@(K,T), shape ``(len(ks), budgets)``, in one vectorized pass.

    ``counts`` is ``(tasks, budgets)``; ``n`` is the number of samples per task (an int
    or one per task).
    """
    counts_arr, n_arr = _as_counts(counts, n)
    ks_arr = _check_ks(ks, n_arr)
    miss = np.zeros((len(ks_arr), counts_arr.shape[1]))
    for n_value in np.unique(n_arr):
        rows = n_arr == n_value
        hist = _count_histogram(counts_arr[rows], int(n_value))
        table = survival_table(int(n_value), int(ks_arr.max()))[:, ks_arr]
        miss += (hist @ table).T
    return 1.0 - miss / counts_arr.shape[0]


def bootstrap_weights(n_tasks: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``(n_boot, n_tasks)`` multinomial weights: how often each task is drawn per resample."""
    weights = np.empty((n_boot, n_tasks), dtype=np.int32)
    # a block of ~1M draws keeps bincount's output in cache: 10x faster than one big call
    block = max(1, (1 << 20) // max(n_tasks, 1))
    for start in range(0, n_boot, block):
        rows = min(block, n_boot - start)
        draws = rng.integers(n_tasks, size=(rows, n_tasks))
        flat = (draws + np.arange(rows)[:, None] * n_tasks).ravel()
        weights[start : start + rows] = np.bincount(flat, minlength=rows * n_tasks).reshape(
            rows, n_tasks
        )
    return weights


def bootstrap_pass_at_k_t(
    counts: ArrayLike,
    n: ArrayLike,
    ks: Sequence[int],
    *,
    weights: np.ndarray,
) -> np.ndarray:
    """Pass@(K,T) for every bootstrap resample: ``(n_boot, len(ks), budgets)``.

    ``weights`` comes from ``bootstrap_weights``; passing the same weights for two runs
    over the same tasks gives a paired bootstrap of their difference.
    """
    counts_arr, n_arr = _as_counts(counts, n)
    ks_arr = _check_ks(ks, n_arr)
    n_boot, n_tasks = weights.shape
    if n_tasks != counts_arr.shape[0]:
        raise ValueError(f"weights cover {n_tasks} tasks, counts {counts_arr.shape[0]}")
    n_budgets = counts_arr.shape[1]
    miss = np.zeros((n_boot, n_budgets, len(ks_arr)))
    # weights are small integers, one-hot entries 0/1, and every partial sum <= n_tasks,
    # so a float32 matmul is exact (below 2**24) and twice as fast as float64
    w32 = weights.astype(np.float32)
    for n_value in np.unique(n_arr):
        rows = np.flatnonzero(n_arr == n_value)
        width = int(n_value) + 1
        table = survival_table(int(n_value), int(ks_arr.max()))[:, ks_arr]
        # bound the one-hot block to ~32 MB by taking a few budgets at a time
        step = max(1, (8 << 20) // max(1, len(rows) * width))
        for start in range(0, n_budgets, step):
            stop = min(start + step, n_budgets)
            block = counts_arr[rows, start:stop]
            onehot = np.zeros((len(rows), (stop - start) * width), dtype=np.float32)
            cols = np.arange(stop - start)[None, :] * width + block
            onehot[np.arange(len(rows))[:, None], cols] = 1.0
            hist = (w32[:, rows] @ onehot).reshape(n_boot, stop - start, width)
            miss[:, start:stop, :] += hist.astype(np.float64) @ table
    total = weights.sum(axis=1).astype(np.float64)[:, None, None]
    return 1.0 - np.transpose(miss, (0, 2, 1)) / total


#: below this many tasks a percentile bootstrap over tasks covers clearly less than its
#: nominal level (``benchmarks/passk_ci_coverage.py``: 95% intervals cover 0.87 of the
#: time at 10 tasks, as low as 0.86 for some K at 20, 0.93 at 40 to 200)
MIN_TASKS_FOR_CI = 50


def cells_at_bound(counts: ArrayLike, n: ArrayLike, ks: Sequence[int]) -> np.ndarray:
    """``[k_index, t_index]`` True where every task's Pass@(K,T) is 0 (no success within
    T) or every task's is 1 (fewer than K failures): there the bootstrap interval has
    zero width, whatever the true uncertainty."""
    counts_arr, n_arr = _as_counts(counts, n)
    ks_arr = np.asarray(ks, dtype=np.int64)
    at_zero = (counts_arr == 0).all(axis=0)
    most_failures = (n_arr[:, None] - counts_arr).max(axis=0)
    at_one = most_failures[None, :] < ks_arr[:, None]
    return at_zero[None, :] | at_one


def ci_reliability(surface: PassSurface) -> dict[str, Any]:
    """Which intervals of a surface not to trust, and why (also in ``to_dict``)."""
    cells = []
    if surface.at_bound is not None:
        for i, j in zip(*np.nonzero(surface.at_bound), strict=True):
            cells.append([int(surface.ks[i]), int(surface.budgets[j])])
    few = surface.n_tasks < MIN_TASKS_FOR_CI
    notes = []
    if few:
        notes.append(
            f"{surface.n_tasks} tasks (< {MIN_TASKS_FOR_CI}): percentile bootstrap intervals "
            "over so few tasks cover less than their nominal level"
        )
    if cells:
        notes.append(
            "cells marked at_bound: every task at 0 or every task at 1, so the interval has "
            "zero width and says nothing about the uncertainty"
        )
    return {"few_tasks": few, "cells_at_bound": cells, "notes": notes}


@dataclass
class PassSurface:
    """Pass@(K,T) over a grid, indexed ``[k_index, t_index]``, with bootstrap bounds.

    ``low``/``high`` are percentile bounds at ``confidence`` (``None`` without a
    bootstrap); ``boot`` keeps the resamples when asked, for paired comparisons.
    ``at_bound`` marks cells whose interval is degenerate (``cells_at_bound``); with
    fewer than ``MIN_TASKS_FOR_CI`` tasks every interval is approximate
    (``ci_reliability``).
    """

    ks: np.ndarray
    budgets: np.ndarray
    mean: np.ndarray
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    confidence: float = 0.95
    n_tasks: int = 0
    n_samples: tuple[int, ...] = ()
    boot: np.ndarray | None = field(default=None, repr=False)
    at_bound: np.ndarray | None = field(default=None, repr=False)
    #: what the budgets count: turns, tokens or seconds (``agentenvs.eval.budget_units``)
    unit: str = "turns"

    def value(self, k: int, t: int) -> float:
        return float(self.mean[_index(self.ks, k), _index(self.budgets, t)])

    def to_dict(self) -> dict[str, Any]:
        def listify(a: np.ndarray | None) -> Any:
            return None if a is None else np.asarray(a).tolist()

        return {
            "ks": listify(self.ks),
            "budgets": listify(self.budgets),
            "mean": listify(self.mean),
            "low": listify(self.low),
            "high": listify(self.high),
            "confidence": self.confidence,
            "n_tasks": self.n_tasks,
            "n_samples": sorted(set(self.n_samples)),
            "budget_unit": self.unit,
            "ci_unreliable": ci_reliability(self),
        }


def _index(values: np.ndarray, v: int) -> int:
    hits = np.flatnonzero(values == v)
    if hits.size == 0:
        raise KeyError(f"{v} not in {values.tolist()}")
    return int(hits[0])


def percentile_bounds(boot: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided percentile interval over the first axis of ``boot``."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot, [alpha, 1.0 - alpha], axis=0)
    return low, high


def estimate_surface(
    counts: ArrayLike,
    n: ArrayLike,
    ks: Sequence[int],
    budgets: Sequence[int],
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    keep_boot: bool = False,
    unit: str = "turns",
) -> PassSurface:
    """Mean Pass@(K,T) over tasks with a seeded percentile bootstrap over tasks.

    ``n_boot=0`` skips the bootstrap. The same ``seed`` and task count give the same
    resampling weights, so two surfaces estimated with it are paired.
    """
    counts_arr, n_arr = _as_counts(counts, n)
    if counts_arr.shape[1] != len(budgets):
        raise ValueError(f"counts have {counts_arr.shape[1]} budgets, got {len(budgets)} labels")
    mean = pass_at_k_t(counts_arr, n_arr, ks)
    surface = PassSurface(
        ks=np.asarray(ks, dtype=np.int64),
        budgets=np.asarray(budgets, dtype=np.int64),
        mean=mean,
        confidence=confidence,
        n_tasks=int(counts_arr.shape[0]),
        n_samples=tuple(int(v) for v in n_arr),
        at_bound=cells_at_bound(counts_arr, n_arr, ks),
        unit=unit,
    )
    if n_boot > 0:
        weights = bootstrap_weights(counts_arr.shape[0], n_boot, np.random.default_rng(seed))
        boot = bootstrap_pass_at_k_t(counts_arr, n_arr, ks, weights=weights)
        surface.low, surface.high = percentile_bounds(boot, confidence)
        if keep_boot:
            surface.boot = boot
    return surface


def difference_surface(a: PassSurface, b: PassSurface) -> PassSurface:
    """``b - a`` on a shared grid; CIs come from the paired resamples when both kept them."""
    if not (np.array_equal(a.ks, b.ks) and np.array_equal(a.budgets, b.budgets)):
        raise ValueError("surfaces must share their K and T grids")
    diff = PassSurface(
        ks=a.ks,
        budgets=a.budgets,
        mean=b.mean - a.mean,
        confidence=a.confidence,
        n_tasks=min(a.n_tasks, b.n_tasks),
        n_samples=a.n_samples,
        # both runs without spread there: the paired interval has zero width too
        at_bound=None if a.at_bound is None or b.at_bound is None else a.at_bound & b.at_bound,
        unit=a.unit,
    )
    if a.boot is not None and b.boot is not None and a.boot.shape == b.boot.shape:
        diff.boot = b.boot - a.boot
        diff.low, diff.high = percentile_bounds(diff.boot, a.confidence)
    return diff
