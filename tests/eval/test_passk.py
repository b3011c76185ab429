"""The Pass@(K,T) estimator against brute-force enumeration, edge cases and the bootstrap."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from agentenvs.eval.passk import (
    bootstrap_pass_at_k_t,
    bootstrap_weights,
    difference_surface,
    estimate_surface,
    pass_at_k,
    pass_at_k_t,
    success_counts,
    survival_table,
)


def brute_force_task(first_success: np.ndarray, k: int, t: int) -> float:
    """Share of all K-subsets of the samples holding one that succeeded within T turns."""
    ok = [1 <= s <= t for s in first_success]
    subsets = list(itertools.combinations(range(len(ok)), k))
    return sum(any(ok[i] for i in subset) for subset in subsets) / len(subsets)


@pytest.mark.parametrize("case", range(8))
def test_matches_enumeration_over_subsets(case: int) -> None:
    rng = np.random.default_rng(case)
    n_tasks, n = int(rng.integers(1, 5)), int(rng.integers(1, 9))
    # 0 = never succeeded; otherwise the turn of first success
    first = rng.integers(0, 7, size=(n_tasks, n))
    budgets = [1, 2, 3, 5, 8]
    ks = list(range(1, n + 1))
    got = pass_at_k_t(success_counts(first, budgets), n, ks)
    want = np.array(
        [[np.mean([brute_force_task(row, k, t) for row in first]) for t in budgets] for k in ks]
    )
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_success_counts_by_hand() -> None:
    first = np.array([[0, 1, 3, 3, 9], [2, 0, 0, -1, 4]])
    np.testing.assert_array_equal(
        success_counts(first, [1, 2, 3, 4, 10]), [[1, 1, 3, 3, 4], [0, 1, 1, 2, 2]]
    )


def test_unequal_sample_counts_per_task() -> None:
    counts = np.array([[1, 2], [0, 3], [4, 4]])
    n = np.array([4, 6, 5])
    got = pass_at_k_t(counts, n, [1, 2, 4])
    want = np.array(
        [
            [np.mean([1 - math.comb(n[i] - counts[i, j], k) / math.comb(n[i], k) for i in range(3)])
             for j in range(2)]
            for k in (1, 2, 4)
        ]
    )
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_edge_cases() -> None:
    # no success: 0; all succeed: 1; K = n: 1 as soon as one sample succeeded
    assert pass_at_k(10, 0, 3) == 0.0
    assert pass_at_k(10, 10, 3) == 1.0
    assert pass_at_k(10, 1, 10) == 1.0
    assert pass_at_k(1, 1, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    # K > n has no unbiased estimate: NaN per task, an error for the task mean
    assert np.isnan(pass_at_k(4, 2, 5))
    with pytest.raises(ValueError, match="K=5 exceeds"):
        pass_at_k_t(np.array([[2]]), 4, [5])
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k_t(np.zeros((0, 2)), 4, [1])


def test_stable_for_large_n() -> None:
    # C(5000, 2500) overflows a float; the product of ratios does not
    n, c, k = 5000, 3, 2500
    want = 1 - math.exp(
        math.lgamma(n - c + 1) - math.lgamma(n - c - k + 1)
        - math.lgamma(n + 1) + math.lgamma(n - k + 1)
    )
    assert pass_at_k(n, c, k) == pytest.approx(want, rel=1e-9)
    table = survival_table(1000)
    assert np.all(np.isfinite(table)) and np.all((table >= 0) & (table <= 1))
    # monotone: more successes or more draws never lowers Pass@K
    assert np.all(np.diff(table, axis=0) <= 1e-15)
    assert np.all(np.diff(table, axis=1) <= 1e-15)


def test_bootstrap_matches_loop_and_is_seeded() -> None:
    rng = np.random.default_rng(3)
    first = rng.integers(0, 6, size=(30, 8))
    budgets, ks = [1, 2, 4, 6], [1, 2, 4, 8]
    counts = success_counts(first, budgets)
    weights = bootstrap_weights(30, 50, np.random.default_rng(0))
    assert np.all(weights.sum(axis=1) == 30)
    boot = bootstrap_pass_at_k_t(counts, 8, ks, weights=weights)
    per_task = np.stack([pass_at_k(8, counts, k) for k in ks], axis=1)  # (tasks, K, T)
    for b in range(50):
        want = np.average(per_task, axis=0, weights=weights[b])
        np.testing.assert_allclose(boot[b], want, atol=1e-12)
    one = estimate_surface(counts, 8, ks, budgets, n_boot=200, seed=7)
    two = estimate_surface(counts, 8, ks, budgets, n_boot=200, seed=7)
    np.testing.assert_array_equal(one.low, two.low)
    assert np.all(one.low <= one.mean + 1e-12) and np.all(one.mean <= one.high + 1e-12)


def test_bootstrap_with_unequal_n_and_many_budgets() -> None:
    rng = np.random.default_rng(5)
    n = rng.choice([4, 6], size=20)
    counts = np.stack([rng.integers(0, v + 1, size=40) for v in n])
    counts.sort(axis=1)
    weights = bootstrap_weights(20, 10, rng)
    boot = bootstrap_pass_at_k_t(counts, n, [1, 3], weights=weights)
    per_task = np.stack([pass_at_k(n[:, None], counts, k) for k in (1, 3)], axis=1)
    for b in range(10):
        np.testing.assert_allclose(
            boot[b], np.average(per_task, axis=0, weights=weights[b]), atol=1e-12
        )


def test_paired_difference() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(0, 5, size=(25, 4))
    b = np.minimum(a + 1, 4)
    sa = estimate_surface(a, 4, [1, 2], [1, 2, 3, 4], n_boot=300, seed=0, keep_boot=True)
    sb = estimate_surface(b, 4, [1, 2], [1, 2, 3, 4], n_boot=300, seed=0, keep_boot=True)
    diff = difference_surface(sa, sb)
    np.testing.assert_allclose(diff.mean, sb.mean - sa.mean)
    # b dominates a task by task, so every paired resample shows a gain
    assert np.all(diff.low >= 0)
    assert diff.to_dict()["ks"] == [1, 2]


def test_unreliable_intervals_are_flagged() -> None:
    from agentenvs.eval.passk import MIN_TASKS_FOR_CI, ci_reliability, estimate_surface
    from agentenvs.eval.report import surface_markdown

    # T=1: nobody succeeds (all at 0); T=4: every task has at most 2 failures of 8, so
    # Pass@K is 1 for every task once K > 2
    counts = np.array([[0, 6], [0, 7], [0, 8], [0, 6]])
    surface = estimate_surface(counts, 8, [1, 2, 4, 8], [1, 4], n_boot=200, seed=0)
    expected = np.array([[True, False], [True, False], [True, True], [True, True]])
    np.testing.assert_array_equal(surface.at_bound, expected)
    assert np.all(surface.high[expected] - surface.low[expected] == 0)  # why they are flagged
    info = ci_reliability(surface)
    assert info["few_tasks"] and surface.n_tasks < MIN_TASKS_FOR_CI
    assert [1, 1] in info["cells_at_bound"] and [4, 4] in info["cells_at_bound"]
    assert surface.to_dict()["ci_unreliable"] == info
    text = surface_markdown(surface, "t")
    assert "†" in text and "Intervals are approximate: 4 tasks" in text
    # many tasks with spread: nothing to flag
    rng = np.random.default_rng(1)
    many = rng.binomial(8, rng.uniform(0.1, 0.9, size=(200, 1)), size=(200, 2))
    big = estimate_surface(many, 8, [1, 2], [1, 2], n_boot=50, seed=0)
    assert ci_reliability(big) == {"few_tasks": False, "cells_at_bound": [], "notes": []}
    assert "†" not in surface_markdown(big, "t")
