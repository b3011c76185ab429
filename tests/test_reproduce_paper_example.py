"""The miniature reproduction of the paper's findings: its pieces, and a ``--quick`` run
end to end (the verdict table's shape, never a particular verdict)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

pytest.importorskip("torch", reason="the example trains a torch policy: pip install torch")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "reproduce_paper.py"
FINDINGS = ["1", "2", "3", "4", "5a", "5b"]


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reproduce_paper_under_test", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def test_the_budget_binds_on_the_evaluation_maps() -> None:
    # the oracle's best success must change across the budgets, else finding 1 and
    # BudgetMix could only come out one way
    example = load_example()
    values = example.oracle_values(example.eval_tasks(example.QUICK, 0))
    means = values.mean(axis=0)
    assert all(a < b for a, b in zip(means, means[1:], strict=False))
    assert means[-1] - means[0] > 0.4
    assert means[0] < 0.5


def test_verdict_rule() -> None:
    example = load_example()
    up = {"value": 0.2, "low": 0.1, "high": 0.3}
    down = {"value": -0.2, "low": -0.3, "high": -0.1}
    across = {"value": 0.0, "low": -0.1, "high": 0.1}
    assert example.verdict(up) == "reproduced"
    assert example.verdict(down) == "not reproduced"
    assert example.verdict(across) == "inconclusive"
    assert example.verdict(up, across) == "inconclusive"
    assert example.verdict(up, down) == "not reproduced"
    assert example.verdict(up, up) == "reproduced"


def test_bootstrap_over_seeds_and_maps() -> None:
    example = load_example()
    boot = example.Bootstrap(n_seeds=2, n_maps=3, n_boot=400, seed=0)
    # every draw resamples both axes: seed weights sum to 2, map weights to 3
    assert (boot.ws.sum(axis=1) == 2).all() and (boot.wm.sum(axis=1) == 3).all()
    num = np.array([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])
    den = np.full((2, 3), 2.0)
    point, draws = boot.ratio(num, den)
    assert point == pytest.approx(18 / 12)
    # one draw by hand: the weighted sums of the resampled cells
    w = boot.ws[0][:, None] * boot.wm[0][None, :]
    assert draws[0] == pytest.approx((w * num).sum() / (w * den).sum())
    # a figure that varies only between seeds has an interval from the seed axis alone
    _, by_seed = boot.ratio(np.array([[0.0], [1.0]]) * np.ones((2, 3)))
    assert set(np.round(by_seed, 9)) <= {0.0, 0.5, 1.0} and by_seed.min() == 0.0 and by_seed.max() == 1.0
    # a base figure (one row) broadcasts over the seeds
    base_point, base_draws = boot.ratio(np.array([1.0, 0.0, 0.0]))
    assert base_point == pytest.approx(1 / 3) and base_draws.min() >= 0.0


def test_features_come_from_the_text_alone() -> None:
    import gymnasium as gym

    example = load_example()
    env = gym.make(example.ENV_ID, max_turns=12, desc=["SFH", "FFF", "HFG"], show_budget=True)
    obs, _ = env.reset(seed=0)
    x = example.features(obs)
    side = 2 * example.VIEW + 1
    planes = x[: side * side * 3].reshape(3, side, side)
    c = example.VIEW
    assert planes[0, c, c + 2] == 1 and planes[0, c + 2, c] == 1  # the holes
    assert planes[1, c + 2, c + 2] == 1  # the goal
    turns = x[side * side * 3 : -1]
    assert turns.argmax() == 12 - 1 and turns.sum() == 1 and x[-1] == pytest.approx(12 / example.MAX_TURNS)
    env.close()


def test_model_path_refuses_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--model", str(tmp_path), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--model" in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_quick_run_gives_a_verdict_per_finding(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "reproduce_paper.json").read_text())
    assert list(results["findings"]) == FINDINGS
    for key, finding in results["findings"].items():
        assert finding["verdict"] in ("reproduced", "not reproduced", "inconclusive"), key
        assert finding["primary"]["low"] <= finding["primary"]["high"], key
        for stat in finding["stats"].values():
            assert stat["low"] <= stat["high"]
    # the printed Markdown table: a header, a rule and one row per finding, the verdict last
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    table = rows[: 1 + len(FINDINGS)]
    assert table[0].split("|")[1:-1] == [" # ", " finding ", " measurement ", " value [95% CI] ", " verdict "]
    for row, key in zip(table[1:], FINDINGS, strict=True):
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        assert cells[0] == key and cells[-1] == results["findings"][key]["verdict"]
    assert (out / "reproduce_paper.md").read_text().count("| verdict |") == 1
    # Pass@(K,T) of every recipe lies in [0, 1], grows with K, and never beats the oracle
    # by more than the sampling noise of 8 maps
    surf = results["surfaces"]
    for name in ("base", "rl_fixed", "rl_budgetmix", "rl_process"):
        assert all(0.0 <= v <= 1.0 for row in surf[name] for v in row)
        assert all(a <= b + 1e-12 for a, b in zip(surf[name][0], surf[name][-1], strict=True))
    assert results["states"]["ordinary"] > 0 and results["states"]["error"] > 0
    assert results["seeds"] == 2 and len(results["training_curves"]["rl_fixed"]) == 2
