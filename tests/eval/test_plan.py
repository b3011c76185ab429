"""agentenvs plan: against the textbook two-proportion size and simulations of the report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from agentenvs.cli import main
from agentenvs.eval.paired import paired_comparison
from agentenvs.eval.plan import (
    make_plan,
    normal_tasks,
    pilot_from_rates,
    shifted,
    solve_shift,
    tasks_needed,
    true_metric,
)


def textbook(p_a: float, p_b: float, alpha: float, power: float) -> int:
    """Normal-approximation size of a two-sided test of two proportions (per group)."""
    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    return math.ceil(z**2 * (p_a * (1 - p_a) + p_b * (1 - p_b)) / (p_b - p_a) ** 2)


def test_shift_reaches_delta() -> None:
    p = np.array([0.05, 0.2, 0.5, 0.9])
    for metric in ("pass@k", "pass^k"):
        theta = solve_shift(p, 4, metric, 0.1)
        gain = true_metric(shifted(p, theta), 4, metric).mean() - true_metric(p, 4, metric).mean()
        assert gain == pytest.approx(0.1, abs=1e-9)
    assert solve_shift(np.array([0.99]), 1, "pass@k", 0.5) is None  # no rate goes past 1


def test_closed_form_is_the_textbook_size_at_k1_m1() -> None:
    p_a = np.full(10, 0.3)
    p_b = shifted(p_a, solve_shift(p_a, 1, "pass@k", 0.1))
    assert p_b[0] == pytest.approx(0.4)
    assert normal_tasks(p_a, p_b, 1, 1, 0.1, 0.05, 0.8) == textbook(0.3, 0.4, 0.05, 0.8) == 354


def test_simulation_agrees_with_the_closed_form_at_large_n() -> None:
    p_a = np.full(10, 0.3)
    p_b = shifted(p_a, solve_shift(p_a, 1, "pass@k", 0.1))
    needed, power = tasks_needed(p_a, p_b, 1, 1, power=0.8, sims=2000, seed=3)
    assert needed == pytest.approx(354, rel=0.08)
    assert power >= 0.8
    # spread-out tasks, K = 4 of 8 samples: the exact-variance closed form, no textbook
    rng = np.random.default_rng(0)
    p_a = rng.beta(0.7, 1.5, size=200)
    p_b = shifted(p_a, solve_shift(p_a, 4, "pass@k", 0.04))
    needed, _ = tasks_needed(p_a, p_b, 4, 8, power=0.8, sims=1500, seed=1)
    assert needed == pytest.approx(normal_tasks(p_a, p_b, 4, 8, 0.04, 0.05, 0.8), rel=0.1)


def test_plan_power_holds_under_the_reports_bootstrap() -> None:
    rng = np.random.default_rng(2)
    p_a = rng.beta(0.7, 1.5, size=40)
    plan = make_plan(pilot_from_rates(p_a), delta=0.15, ks=[4], samples=[8], sims=1000, seed=0)
    (cell,) = plan.cells
    assert cell.tasks is not None and 10 < cell.tasks < 200
    p_b = shifted(p_a, cell.shift)
    # experiments the report would run: its paired bootstrap, its verdicts
    sims, found = 300, 0
    for rep in range(sims):
        tasks = rng.integers(len(p_a), size=cell.tasks)
        counts_a = rng.binomial(8, p_a[tasks])[:, None]
        counts_b = rng.binomial(8, p_b[tasks])[:, None]
        result = paired_comparison(counts_a, 8, counts_b, 8, [4], [1], n_boot=300, seed=rep)
        found += result.metrics["pass@k"].verdicts()[0, 0] == "B better"
    # 0.8 planned; 300 experiments measure it to about +-0.05 (two standard errors)
    assert abs(found / sims - 0.8) < 0.07


def test_plan_command_from_a_pilot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "eval",
                "--env",
                "agentenvs/FrozenLake-v0",
                "--env-kwargs",
                '{"success_rate": 0.8}',
                "--policy",
                "frozenlake/noisy",
                "--tasks",
                "first:8",
                "--n",
                "4",
                "--budgets",
                "8,16",
                "--workers",
                "0",
                "--no-progress",
                "--out",
                str(tmp_path / "pilot"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    out = tmp_path / "plan.json"
    assert (
        main(
            [
                "plan",
                "--pilot",
                str(tmp_path / "pilot"),
                "--delta",
                "0.1",
                "--ks",
                "1,4",
                "--samples",
                "4,8",
                "--sims",
                "200",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert (
        "| K | T | pilot pass@k, raw | pilot pass@k, smoothed (planned with) | samples per task "
        "| tasks |" in printed
    )
    assert "(c + 0.5) / (n + 1)" in printed and "`agentenvs report` prints" in printed
    plan = json.loads(out.read_text())
    assert {(c["k"], c["budget"], c["samples"]) for c in plan["cells"]} == {
        (k, t, m) for k in (1, 4) for t in (8, 16) for m in (4, 8)
    }
    for c in plan["cells"]:
        assert c["tasks"] is None or c["tasks"] >= 2
    # more samples per task never need more tasks (common seeds, same cell)
    by = {(c["k"], c["budget"], c["samples"]): c["tasks"] for c in plan["cells"]}
    for k in (1, 4):
        for t in (8, 16):
            if by[(k, t, 4)] and by[(k, t, 8)]:
                assert by[(k, t, 8)] <= by[(k, t, 4)] * 1.1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--rates", "0.2,0.5", "--delta", "0.1", "--budgets", "4"], "--budgets picks"),
        (["--rates", "0.2,1.5", "--delta", "0.1"], "rate in [0, 1]"),
        (["--rates", "0.2", "--delta", "1.5"], "in (0, 1)"),
        (["--rates", "0.2", "--delta", "0.1", "--ks", "8", "--samples", "4"], "K=8"),
    ],
)
def test_plan_usage_errors_are_one_line(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) if "rate in" in says or "(0, 1)" in says else _no_raise():
        code = main(["plan", *args])
        assert code == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


class _no_raise:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def _pilot(tmp_path: Path, policy: str, budgets: str, tasks: str = "first:6", n: str = "4") -> Path:
    run = tmp_path / policy.replace("/", "-").replace(":", "-")
    assert main(["eval", "--env", "agentenvs/FrozenLake-v0", "--env-kwargs",
                 '{"success_rate": 0.8}', "--policy", policy, "--tasks", tasks, "--n", n,
                 "--budgets", budgets, "--workers", "0", "--no-progress", "--out", str(run)]) == 0
    return run


def test_plan_prints_the_raw_rates_the_report_prints_beside_the_smoothed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pilot column agentenvs report prints (raw c/n) sits beside the smoothed one the
    plan scales from, and each matches its own definition."""
    from agentenvs.eval.plan import pilot_from_run, plan_markdown
    from agentenvs.eval.report import load_run, success_count_matrix

    run = _pilot(tmp_path, "frozenlake/noisy:error_rate=0.25,recover=0.3", "2,16")
    capsys.readouterr()
    pilot = pilot_from_run(run)
    data = load_run(run)
    counts, n = success_count_matrix(data, data.task_ids(), [2, 16])
    np.testing.assert_allclose(pilot.raw_rates, counts / n[:, None])
    np.testing.assert_allclose(pilot.rates, (counts + 0.5) / (n[:, None] + 1))
    plan = make_plan(pilot, delta=0.1, ks=[1], samples=[4], sims=50)
    by_budget = {c.budget: c for c in plan.cells}
    assert by_budget[16].raw_base == pytest.approx(float((counts[:, 1] / n).mean()))
    assert by_budget[16].base == pytest.approx(float(((counts[:, 1] + 0.5) / (n + 1)).mean()))
    assert by_budget[16].raw_base < by_budget[16].base  # the smoothed sits above on hard tasks
    text = plan_markdown(plan)
    row = next(line for line in text.splitlines() if line.startswith("| 1 | 16 |"))
    assert f"| {by_budget[16].raw_base:.3f} | {by_budget[16].base:.3f} |" in row
    # no success at T = 2 (no map is 2 moves from its goal): that cell is not planned
    assert counts[:, 0].sum() == 0
    assert by_budget[2].tasks is None and by_budget[2].skipped
    row = next(line for line in text.splitlines() if line.startswith("| 1 | 2 |"))
    assert "| 0.000 |" in row and "not planned: no success in the pilot at this budget" in row


def test_plan_refuses_a_pilot_without_a_single_success(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every policy, the oracle included, scores 0 within 2 turns: nothing to scale from."""
    run = _pilot(tmp_path, "frozenlake/oracle", "1,2")
    capsys.readouterr()
    code = main(["plan", "--pilot", str(run), "--delta", "0.05", "--sims", "50"])
    captured = capsys.readouterr()
    assert code != 0 and captured.out == ""
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert "cannot plan" in err and "succeeded at any budget" in err
    assert "--rates" in err  # and says what to do instead
    assert main(["plan", "--rates", "0,0,0", "--delta", "0.05"]) != 0
    assert "every given rate is 0" in capsys.readouterr().err
