"""BudgetMix: argument checks, the budget distribution, seeding and snapshots."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from _toy_env import LineWalkEnv

from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot
from agentenvs.wrappers import BUDGET_SAMPLED, BudgetMix

TESTS_DIR = Path(__file__).resolve().parent.parent


def budgets_of(env: BudgetMix, n: int, seed: int | None = None) -> list[int]:
    out = []
    for i in range(n):
        _, info = env.reset(seed=seed if i == 0 else None)
        assert info["max_turns"] == info[BUDGET_SAMPLED]
        out.append(info["max_turns"])
    return out


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"budgets": []}, ValueError),
        ({"budgets": [3, 0]}, ValueError),
        ({"budgets": [2.5]}, ValueError),
        ({"budgets": [True]}, ValueError),
        ({"budgets": "5"}, TypeError),
        ({"budgets": 5}, TypeError),
        ({"budgets": [1, 2], "weights": [1.0]}, ValueError),
        ({"budgets": [1, 2], "weights": [1.0, -1.0]}, ValueError),
        ({"budgets": [1, 2], "weights": [0, 0]}, ValueError),
        ({"budgets": [1, 2], "weights": [1, float("nan")]}, ValueError),
        ({"budgets": lambda rng: 3, "weights": [1.0]}, ValueError),
        ({"budgets": [1], "seed": -1}, ValueError),
        ({"budgets": [1], "seed": 1.5}, ValueError),
    ],
)
def test_rejects_bad_arguments(kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        BudgetMix(LineWalkEnv(), **kwargs)


def test_uniform_and_weighted_distributions() -> None:
    uniform = Counter(budgets_of(BudgetMix(LineWalkEnv(), [2, 4, 8], seed=1), 3000))
    assert set(uniform) == {2, 4, 8}
    for count in uniform.values():
        assert abs(count / 3000 - 1 / 3) < 0.04

    weighted = Counter(
        budgets_of(BudgetMix(LineWalkEnv(), [2, 4, 8], [0.7, 0.3, 0.0], seed=1), 3000)
    )
    assert set(weighted) == {2, 4}
    assert abs(weighted[2] / 3000 - 0.7) < 0.04


def test_callable_sampler_gets_the_wrapper_rng_and_is_validated() -> None:
    seen = []

    def sampler(rng: np.random.Generator) -> int:
        seen.append(rng)
        return int(rng.integers(3, 6))

    env = BudgetMix(LineWalkEnv(), sampler, seed=0)
    assert set(budgets_of(env, 200)) == {3, 4, 5}
    assert all(isinstance(r, np.random.Generator) for r in seen)

    with pytest.raises(ValueError, match="not a positive integer"):
        BudgetMix(LineWalkEnv(), lambda rng: 0).reset(seed=0)


def test_the_sampled_budget_truncates_the_episode() -> None:
    env = BudgetMix(LineWalkEnv(), [2], seed=0)
    _, info = env.reset(seed=3)
    assert info["max_turns"] == 2 and info[BUDGET_SAMPLED] == 2
    _, _, terminated, truncated, info = env.step("stay")
    assert not truncated and info[BUDGET_SAMPLED] == 2
    _, _, terminated, truncated, info = env.step("stay")
    assert truncated and not terminated and info["turns_left"] == 0


def test_callers_max_turns_wins_and_the_stream_is_unchanged() -> None:
    plain = BudgetMix(LineWalkEnv(), [2, 4, 8, 16], seed=5)
    overridden = BudgetMix(LineWalkEnv(), [2, 4, 8, 16], seed=5)
    expected = budgets_of(plain, 4, seed=9)
    _, info = overridden.reset(seed=9, options={"max_turns": 3})
    assert info["max_turns"] == 3 and info[BUDGET_SAMPLED] is None
    assert overridden.episode_budget is None
    # the override still used up a draw, so later episodes get the same budgets
    assert budgets_of(overridden, 3) == expected[1:]


def test_reset_seed_determines_budgets() -> None:
    a = budgets_of(BudgetMix(LineWalkEnv(), list(range(1, 50))), 20, seed=7)
    b = budgets_of(BudgetMix(LineWalkEnv(), list(range(1, 50))), 20, seed=7)
    c = budgets_of(BudgetMix(LineWalkEnv(), list(range(1, 50))), 20, seed=8)
    assert a == b and a != c
    # the wrapper seed is mixed in when given
    d = budgets_of(BudgetMix(LineWalkEnv(), list(range(1, 50)), seed=1), 20, seed=7)
    e = budgets_of(BudgetMix(LineWalkEnv(), list(range(1, 50)), seed=2), 20, seed=7)
    assert d != e


def test_reset_seed_gives_the_same_budgets_in_another_process() -> None:
    code = (
        "from _toy_env import LineWalkEnv\n"
        "from agentenvs.wrappers import BudgetMix\n"
        "env = BudgetMix(LineWalkEnv(), list(range(1, 50)))\n"
        "out = [env.reset(seed=11 if i == 0 else None)[1]['max_turns'] for i in range(10)]\n"
        "print(out)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=TESTS_DIR,
        env={"PYTHONHASHSEED": "random", "PATH": ""},
        timeout=60,
        check=True,
    )
    here = budgets_of(BudgetMix(LineWalkEnv(), list(range(1, 50))), 10, seed=11)
    assert proc.stdout.strip() == str(here)


def test_budget_rng_is_independent_of_the_env_rng() -> None:
    # the env draws its start from the reset seed; the budget must not mirror that draw
    starts, budgets = [], []
    for seed in range(60):
        env = BudgetMix(LineWalkEnv(), [3, 4, 5, 6])
        _, info = env.reset(seed=seed, options={"task_id": "line-7"})
        starts.append(env.unwrapped.state_key())
        budgets.append(info["max_turns"])
    assert len(set(zip(starts, budgets, strict=True))) > 6


def test_snapshot_round_trip_restores_the_budget_stream() -> None:
    env = BudgetMix(LineWalkEnv(), list(range(1, 30)), seed=3)
    env.reset(seed=1)
    env.step("right")
    snap = env.snapshot()
    assert isinstance(snap, Snapshot)
    after = budgets_of(env, 5)
    env.restore(snap)
    assert env.episode_budget == snap.wrappers[0][1]["episode_budget"]
    assert budgets_of(env, 5) == after

    # into a fresh wrapped env, through bytes
    fresh = BudgetMix(LineWalkEnv(), list(range(1, 30)))
    restore_snapshot(fresh, Snapshot.from_bytes(take_snapshot(env).to_bytes()))
    assert budgets_of(fresh, 5) == budgets_of(env, 5)
