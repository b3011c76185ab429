"""Paired comparisons: pass@k and pass^k against brute force, the bootstrap by hand, verdicts."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from agentenvs.cli import main
from agentenvs.eval.paired import paired_bootstrap, paired_comparison
from agentenvs.eval.passk import pass_hat_k
from agentenvs.eval.printing import printed_excludes_zero


def subsets_all_succeed(outcomes: list[bool], k: int) -> float:
    subsets = list(itertools.combinations(outcomes, k))
    return sum(all(s) for s in subsets) / len(subsets)


def subsets_any_succeed(outcomes: list[bool], k: int) -> float:
    subsets = list(itertools.combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 3, 6, 9])
def test_pass_hat_k_matches_enumeration(n: int) -> None:
    for c in range(n + 1):
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            assert pass_hat_k(n, c, k) == pytest.approx(subsets_all_succeed(outcomes, k), abs=1e-12)
    assert np.isnan(pass_hat_k(3, 2, 4))


def test_paired_means_match_brute_force_per_task() -> None:
    rng = np.random.default_rng(5)
    n, ks, budgets = 6, [1, 2, 4, 6], [1, 2, 3]
    # samples' first-success turns (0: never) for each run; counts at each budget
    turns_a = rng.integers(0, 4, size=(7, n))
    turns_b = rng.integers(0, 4, size=(7, n))

    def counts(turns: np.ndarray) -> np.ndarray:
        return np.stack([((turns > 0) & (turns <= t)).sum(1) for t in budgets], axis=1)

    result = paired_comparison(counts(turns_a), n, counts(turns_b), n, ks, budgets, n_boot=50)
    for metric, by_hand in (("pass@k", subsets_any_succeed), ("pass^k", subsets_all_succeed)):
        m = result.metrics[metric]
        for i, k in enumerate(ks):
            for j, t in enumerate(budgets):
                a = np.mean([by_hand(list((row > 0) & (row <= t)), k) for row in turns_a])
                b = np.mean([by_hand(list((row > 0) & (row <= t)), k) for row in turns_b])
                assert m.a[i, j] == pytest.approx(a)
                assert m.b[i, j] == pytest.approx(b)
                assert m.diff[i, j] == pytest.approx(b - a)


def test_bootstrap_equals_a_direct_computation_with_its_seed() -> None:
    rng = np.random.default_rng(1)
    d = rng.normal(0.05, 0.2, size=(23, 2, 3))
    mean, low, high = paired_bootstrap(d, n_boot=400, seed=7, confidence=0.9)
    draws = np.random.default_rng(7).integers(23, size=(400, 23))
    boot = np.stack([d[row].mean(axis=0) for row in draws])
    np.testing.assert_allclose(mean, d.mean(axis=0))
    np.testing.assert_allclose(low, np.quantile(boot, 0.05, axis=0))
    np.testing.assert_allclose(high, np.quantile(boot, 0.95, axis=0))


def test_verdicts_follow_the_printed_interval() -> None:
    n, tasks = 8, 60
    weak = np.full((tasks, 1), 2)
    strong = np.full((tasks, 1), 6)
    strong[::3] = 3  # not every task gains as much
    b_better = paired_comparison(weak, n, strong, n, [1, 4], [5], n_boot=300)
    a_better = paired_comparison(strong, n, weak, n, [1, 4], [5], n_boot=300)
    same = paired_comparison(weak, n, weak, n, [1, 4], [5], n_boot=300)
    for metric in ("pass@k", "pass^k"):
        assert list(b_better.metrics[metric].verdicts()[:, 0]) == ["B better"] * 2
        assert list(a_better.metrics[metric].verdicts()[:, 0]) == ["A better"] * 2
        assert list(same.metrics[metric].verdicts()[:, 0]) == ["no clear difference"] * 2
    # a verdict names a run exactly where the interval, as printed, excludes 0
    for cell in b_better.to_dict()["cells"]:
        decimals = b_better.metrics[cell["metric"]].decimals
        named = cell["verdict"] != "no clear difference"
        assert named == printed_excludes_zero(cell["low"], cell["high"], decimals)


def test_report_compare_prints_paired_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = [
        "--env",
        "agentenvs/FrozenLake-v0",
        "--env-kwargs",
        '{"success_rate": 0.9}',
        "--tasks",
        "first:6",
        "--n",
        "4",
        "--budgets",
        "4,8",
        "--workers",
        "0",
        "--no-progress",
    ]
    assert (
        main(["eval", *common, "--policy", "frozenlake/random", "--out", str(tmp_path / "a")]) == 0
    )
    assert (
        main(["eval", *common, "--policy", "frozenlake/oracle", "--out", str(tmp_path / "b")]) == 0
    )
    capsys.readouterr()
    assert (
        main(
            [
                "report",
                str(tmp_path / "a"),
                "--compare",
                str(tmp_path / "b"),
                "--no-plots",
                "--n-boot",
                "100",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    # stdout: the headline and the paths; the paired tables are in comparison.md
    assert "B - A in pass@1 at T = 8" in printed and "#### pass@k" not in printed
    text = (tmp_path / "a" / "report" / "comparison.md").read_text()
    assert "#### pass@k" in text and "#### pass^k" in text
    assert "A = frozenlake/random, B = frozenlake/oracle" in text
    assert "### Paired comparison, task by task" in text
    blob = json.loads((tmp_path / "a" / "report" / "comparison.json").read_text())
    cells = blob["paired"]["cells"]
    assert len(cells) == 2 * 3 * 2  # metrics x K (1, 2, 4) x budgets
    # pass@k's paired difference is the difference table's, interval included
    surface = blob["surface"]
    for c in cells:
        if c["metric"] == "pass@k":
            i, j = surface["ks"].index(c["k"]), surface["budgets"].index(c["budget"])
            assert c["diff"] == pytest.approx(surface["mean"][i][j])
            assert c["low"] == pytest.approx(surface["low"][i][j])
            assert c["high"] == pytest.approx(surface["high"][i][j])
    # pass@1 and pass^1 are the same success rate
    k1 = {(c["metric"], c["budget"]): (c["a"], c["b"]) for c in cells if c["k"] == 1}
    for budget in (4, 8):
        assert k1[("pass@k", budget)] == pytest.approx(k1[("pass^k", budget)])
    # the interval says B, but 6 tasks are too few for the report to print a verdict
    assert any(c["interval_verdict"] == "B better" for c in cells)
    assert {c["verdict"] for c in cells} == {"too few tasks for a verdict (6 < 50)"}
    assert "too few tasks for a verdict (6 < 50)" in printed


@pytest.mark.parametrize("tasks", [10, 49, 50, 60])
def test_no_verdict_below_the_task_count_where_intervals_under_cover(tasks: int) -> None:
    """Terminal-Bench's demo compares 10 tasks x 2 samples: its interval may exclude 0,
    but paired intervals over fewer than MIN_TASKS_FOR_CI tasks cover less than their
    level, so the tables, the JSON and the summary print no verdict there."""
    from agentenvs.eval.paired import paired_markdown
    from agentenvs.eval.passk import MIN_TASKS_FOR_CI

    assert MIN_TASKS_FOR_CI == 50  # the rule docs/comparisons.md states
    n = 2
    weak = np.zeros((tasks, 2), dtype=int)
    weak[::2] = 1
    strong = np.full((tasks, 2), 2)
    result = paired_comparison(weak, n, strong, n, [1], [1, 3], n_boot=200)
    by_interval = result.metrics["pass@k"].verdicts()
    assert set(by_interval.ravel()) == {"B better"}  # the interval alone would say so
    text = paired_markdown(result, "terminal/noisy:error_rate=0.6", "terminal/noisy:error_rate=0.2")
    rows = [line for line in text.splitlines() if line.startswith("| 1 |")]
    cells = result.to_dict()["cells"]
    if tasks < MIN_TASKS_FOR_CI:
        withheld = f"too few tasks for a verdict ({tasks} < {MIN_TASKS_FOR_CI})"
        assert all(row.endswith(f"| {withheld} |") for row in rows), rows
        assert "B better" not in text and "No verdicts" in text
        assert {c["verdict"] for c in cells} == {withheld}
        assert {c["interval_verdict"] for c in cells if c["metric"] == "pass@k"} == {"B better"}
    else:
        assert all(row.endswith("| B better |") for row in rows), rows
        assert "too few tasks" not in text
        assert {c["verdict"] for c in cells if c["metric"] == "pass@k"} == {"B better"}
