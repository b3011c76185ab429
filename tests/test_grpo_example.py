"""The GRPO FrozenLake example: its text features, and a ``--quick`` run end to end."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("torch", reason="the example trains a torch policy: pip install torch")
pytest.importorskip("matplotlib", reason="the example draws a figure: pip install 'agentenvs[plot]'")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "grpo_frozenlake.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("grpo_frozenlake_under_test", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def test_features_come_from_the_text_alone() -> None:
    import gymnasium as gym

    example = load_example()
    env = gym.make(example.ENV_ID, max_turns=9, desc=["SFH", "FFF", "HFG"], show_budget=True)
    obs, _ = env.reset(seed=0)
    x = example.features(obs)
    side = 2 * example.VIEW + 1
    planes = x[: side * side * 3].reshape(3, side, side)
    c = example.VIEW  # the player, at (0, 0), is the centre of the window
    assert planes[0, c + 0, c + 2] == 1 and planes[0, c + 2, c + 0] == 1  # the two holes
    assert planes[1, c + 2, c + 2] == 1  # the goal
    assert planes[2, c - 1, c] == 1 and planes[2, c, c + 3] == 1  # off the map
    assert planes.sum() == 3 + (side * side - 9)
    turns = x[-example.MAX_TURNS_FEATURE :]
    assert turns.argmax() == 9 - 1 and turns.sum() == 1
    # after an invalid action the grid still follows the message; the budget has shrunk
    obs, *_ = env.step("jump")
    assert example.features(obs)[-example.MAX_TURNS_FEATURE :].argmax() == 8 - 1
    assert (example.features(obs)[: side * side * 3] == x[: side * side * 3]).all()
    assert example.features("no grid here").sum() == 0


@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path: Path) -> None:
    plot = tmp_path / "figure.png"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--quick", "--out", str(tmp_path / "out"), "--plot", str(plot)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "out"
    for name in ("grpo_frozenlake.json", "grpo_frozenlake.png", "fixed.pt", "budgetmix.pt"):
        assert (out / name).stat().st_size > 0, name
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads((out / "grpo_frozenlake.json").read_text())
    ks, budgets = results["eval"]["ks"], results["eval"]["budgets"]
    assert ks[0] == 1 and budgets == sorted(budgets)
    for name in ("fixed", "budgetmix"):
        surface = results["configs"][name]["pass_at_k_t"]
        assert surface["ks"] == ks and surface["budgets"] == budgets
        mean = surface["mean"]
        assert len(mean) == len(ks) and all(len(row) == len(budgets) for row in mean)
        assert all(0.0 <= v <= 1.0 for row in mean for v in row)
        # Pass@(K,T) grows with K; nothing beats the exact oracle by more than sampling noise
        assert all(a <= b + 1e-12 for a, b in zip(mean[0], mean[-1], strict=True))
        assert len(results["configs"][name]["train"]["success_per_iteration"]) > 0
        # the trained policy does better than the untrained one at the largest budget
        assert mean[0][-1] > results["untrained"]["mean"][0][-1]
    # the shortest path on a 4x4 map is 6 moves: nobody succeeds with 4 turns
    assert results["oracle"]["mean"][0][budgets.index(4)] == 0.0
