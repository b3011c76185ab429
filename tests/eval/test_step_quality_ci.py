"""Step-quality figures and their intervals: hand-computed values, the coverage script,
and the coverage of A's share of decided pairs where ties are most of the pairs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest

from agentenvs.eval.step_quality import (
    INTERVAL,
    MIN_TASKS_FOR_STEP_CI,
    bootstrap_ratio,
    cluster_totals,
    expanded_level,
    ratio_interval,
    summarize_group,
    summary_markdown,
    t_quantile,
)

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "step_quality_ci_coverage.py"

# three tasks: per-task sums of a numerator and a denominator (ratio 6/8 = 0.75)
NUM = np.array([1.0, 2.0, 3.0])
DEN = np.array([2.0, 2.0, 4.0])
# resamples of the three tasks (draw counts) and their ratios
WEIGHTS = np.array([
    [1, 1, 1],  # 6/8 = 0.75
    [2, 1, 0],  # 4/6
    [0, 1, 2],  # 8/10 = 0.8
    [3, 0, 0],  # 3/6 = 0.5
    [0, 0, 3],  # 9/12 = 0.75
])


def test_t_quantiles_against_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 4, 9, 19, 49, 199):
        for p in (0.75, 0.9, 0.975, 0.995):
            assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-8), (p, df)
            assert t_quantile(1 - p, df) == pytest.approx(-t_quantile(p, df))
    assert t_quantile(0.975, 9) == pytest.approx(2.262, abs=1e-3)  # the printed tables
    with pytest.raises(ValueError):
        t_quantile(0.975, 0)


def test_expanded_percentile_interval_by_hand() -> None:
    # three tasks at 50%: t's 0.75 quantile with 2 df is 0.5 / sqrt(0.375), and
    # sqrt(3/2) times it is exactly 1, so the level is that of z = 1: 2 Phi(1) - 1
    level = 2 * NormalDist().cdf(1.0) - 1
    assert expanded_level(0.5, 3) == pytest.approx(level)
    half = ratio_interval(NUM, DEN, WEIGHTS, confidence=0.5)
    assert half["mean"] == pytest.approx(0.75)
    # linear percentiles of the sorted ratios 0.5, 2/3, 0.75, 0.75, 0.8 at (1 -+ level) / 2
    low_at, high_at = 4 * (1 - level) / 2, 4 * (1 + level) / 2  # 0.635 and 3.365
    assert half["low"] == pytest.approx(0.5 + low_at * (2 / 3 - 0.5))
    assert half["high"] == pytest.approx(0.75 + (high_at - 3) * (0.8 - 0.75))
    # 95% over three tasks widens to nearly all of the resamples: from 0.5 to 0.8
    wide = ratio_interval(NUM, DEN, WEIGHTS)
    assert wide["low"] == pytest.approx(0.5, abs=1e-5) and wide["high"] == pytest.approx(0.8, abs=1e-5)
    clipped = ratio_interval(NUM, DEN, WEIGHTS, bounds=(0.0, 0.7))
    assert clipped["high"] == 0.7
    # the plain percentile interval of the same resamples is narrower
    percentile = bootstrap_ratio(NUM, DEN, WEIGHTS, confidence=0.5)
    assert percentile["low"] == pytest.approx(2 / 3) and percentile["high"] == pytest.approx(0.75)
    # the level falls towards the nominal one as tasks grow
    levels = [expanded_level(0.95, g) for g in (3, 10, 50, 1000)]
    assert levels == sorted(levels, reverse=True) and 0.95 < levels[-1] < 0.951


def test_one_task_has_no_interval_and_tasks_alike_a_zero_width_one() -> None:
    same = ratio_interval(np.array([1.0, 2.0]), np.array([2.0, 4.0]), WEIGHTS[:, :2])
    assert same["low"] == same["high"] == pytest.approx(0.5)
    assert set(ratio_interval(NUM, DEN, None)) == {"mean"}
    assert set(ratio_interval(NUM[:1], DEN[:1], WEIGHTS[:, :1])) == {"mean"}


def _state(task: str, i: int, a: float, b: float) -> dict[str, Any]:
    return {"state_id": f"{task}:{i}", "task_id": task, "a_better": a, "b_better": b,
            "ties": 1 - a - b, "mean_score_a": a, "mean_score_b": b}


def test_summary_figures_by_hand() -> None:
    # task x: two states, task y: one; ties are most pairs
    results = [_state("x", 0, 0.1, 0.1), _state("x", 1, 0.2, 0.0), _state("y", 0, 0.0, 0.3)]
    names, totals, sizes = cluster_totals(
        [r["task_id"] for r in results], {"a": np.array([r["a_better"] for r in results])}
    )
    assert names == ["x", "y"] and list(sizes) == [2, 1]
    assert totals["a"] == pytest.approx([0.3, 0.0])
    group = summarize_group(results, n_boot=200)
    assert group["interval"] == INTERVAL
    assert group["a_better"]["mean"] == pytest.approx(0.3 / 3)  # mean over states
    assert group["b_better"]["mean"] == pytest.approx(0.4 / 3)
    assert group["ties"]["mean"] == pytest.approx(2.3 / 3)
    assert group["a_minus_b"]["mean"] == pytest.approx(-0.1 / 3)
    assert group["a_share_of_decided"]["mean"] == pytest.approx(0.3 / 0.7)  # a ratio of sums
    for name in ("a_better", "b_better", "ties", "a_share_of_decided"):
        assert 0.0 <= group[name]["low"] <= group[name]["mean"] <= group[name]["high"] <= 1.0


def test_the_table_defines_each_column_once_and_names_the_papers_figure() -> None:
    rng = np.random.default_rng(3)
    results = [_state(f"t{t}", i, *rng.choice([(0.1, 0.1), (0.05, 0.15), (0.0, 0.0)]))
               for t in range(12) for i in range(4)]
    group = summarize_group(results, n_boot=200)
    text = summary_markdown({"kinds": {"ordinary": {"all": group}}})
    assert text.count("P(A better): the share of all paired comparisons") == 1
    assert text.count("A's share of decided pairs: A-better / (A-better + B-better)") == 1
    assert text.count("46.8%") == 1 and "compare the paper with that column" in text
    # ties are most pairs, so both figures are printed, and they differ
    assert "ordinary states: ties are" in text
    assert "expanded percentile bootstrap over tasks" in text
    assert f"Intervals are approximate: with 12 tasks (< {MIN_TASKS_FOR_STEP_CI})" in text
    many = [_state(f"t{t}", 0, 0.1, 0.05) for t in range(MIN_TASKS_FOR_STEP_CI)]
    many_text = summary_markdown({"kinds": {"ordinary": {"all": summarize_group(many)}}})
    assert "Intervals are approximate" not in many_text


def test_the_coverage_script_quick_prints_its_table() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| regime")]
    assert len(rows) == 3 * 2 * 5  # regimes x task counts x figures
    figures = {row[3].strip() for row in rows}
    assert figures == {"a_better", "b_better", "ties", "a_minus_b", "a_share_of_decided"}
    for row in rows:
        for cell in (row[5], row[7]):
            assert 0.0 <= float(cell) <= 1.0


def _coverage_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    spec = importlib.util.spec_from_file_location("step_quality_ci_coverage", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclass looks itself up
    spec.loader.exec_module(module)
    return module


def test_share_of_decided_pairs_covers_with_most_pairs_tied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """10 tasks of unequal size, about 77% ties: the percentile interval the summary used
    to print held the true share in under 92% of 1,000 simulated analyses; the expanded
    percentile one holds it in at least 93% (one analysis moves it by 0.001)."""
    bench = _coverage_module(monkeypatch)
    cells = bench.coverage(bench.REGIMES["heavy"], 10, 1000, n_boot=1000, seed=0)
    share = cells["a_share_of_decided"]
    assert 0.7 < share["ties_seen"] < 0.85
    assert share["before"] < 0.92
    assert share["after"] >= 0.93
