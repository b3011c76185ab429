"""examples/process_rewards_frozenlake.py: the miniature reproduction runs (--quick), measures
every recipe by Pass@(K,T) over budgets and by step quality from the same states with
intervals, and draws its figure; its TRL path trains through GRPOTrainer with a tiny model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "process_rewards_frozenlake.py"
RECIPES = {"grpo", "budgetmix", "oracle_q", "oracle_q_mean", "gigpo"}


def test_the_quick_reproduction_measures_every_recipe(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="could not import torch: pip install 'agentenvs[hf]'")
    pytest.importorskip(
        "matplotlib", reason="could not import matplotlib: pip install 'agentenvs[plot]'"
    )
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "process_rewards_frozenlake.json").read_text())
    assert set(results["train"]) == RECIPES
    assert results["train"]["budgetmix"]["budgets"] == list(range(3, 13))
    assert results["train"]["oracle_q"]["process_weight"] == 1.0
    assert results["train"]["gigpo"]["advantage"] == "gigpo"
    budgets, ks = results["eval"]["budgets"], results["eval"]["ks"]
    assert len(budgets) >= 3 and ks[0] == 1
    for name in RECIPES | {"untrained"}:
        surface = results["pass_at_k_t"][name]
        assert surface["budgets"] == budgets
        for row, low, high in zip(surface["mean"], surface["low"], surface["high"], strict=True):
            assert all(
                lo - 1e-9 <= m <= hi + 1e-9 for m, lo, hi in zip(row, low, high, strict=True)
            )
        assert len(surface["mean"]) == len(ks) and len(surface["mean"][0]) == len(budgets)
    assert len(results["oracle"]["mean"]) == len(ks)
    quality = results["step_quality"]
    assert quality["n_actions"] == 16 and quality["states"] > 0
    for name in RECIPES:
        entry = quality["policies"][name]
        for metric in ("better", "worse", "regret"):
            assert entry[metric]["low"] <= entry[metric]["mean"] <= entry[metric]["high"]
        assert entry["better"]["mean"] + entry["worse"]["mean"] <= 1 + 1e-9
    assert quality["policies"]["untrained"]["regret"]["mean"] >= 0
    table = (tmp_path / "process_rewards_frozenlake.md").read_text()
    assert "GiGPO" in table and "BudgetMix" in table and "oracle (exact)" in table
    assert (tmp_path / "process_rewards_frozenlake.png").stat().st_size > 10_000


@pytest.mark.slow
def test_the_trl_path_trains_each_recipe_with_a_tiny_model(tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="could not import trl: pip install 'agentenvs[integrations]'")
    pytest.importorskip("torch", reason="could not import torch: pip install 'agentenvs[hf]'")
    proc = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--trl",
            "--model",
            "tiny",
            "--quick",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(results["recipes"]) == {"grpo", "budgetmix", "oracle_q"}
    assert results["recipes"]["budgetmix"]["recipe"] == {"budgets": results["budgets"]}
    for recipe in results["recipes"].values():
        assert recipe["steps"] == results["steps"] >= 1
        per_budget = recipe["eval_reward_per_budget"]
        assert sorted(map(int, per_budget)) == results["budgets"]
        assert all(0.0 <= v <= 1.0 for v in per_budget.values())
