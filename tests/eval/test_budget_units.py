"""Budgets in tokens and seconds: Pass@(K,B) against brute force, LimitCost, the refusals."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from agentenvs.cli import main
from agentenvs.core.snapshot import restore_snapshot, take_snapshot
from agentenvs.eval.passk import pass_at_k_t, success_counts, success_counts_within
from agentenvs.eval.records import TRAJECTORIES_NAME, read_trajectories
from agentenvs.eval.report import write_report
from agentenvs.eval.runner import EvalConfig, RunConfigError, run_pass_at_k_t
from agentenvs.policy.base import Sample, ScriptedPolicy
from agentenvs.policy.registry import register_policy
from agentenvs.wrappers.cost_budget import LimitCost, text_tokens

FROZEN = "agentenvs/FrozenLake-v0"
SLIP = '{"success_rate": 0.9}'


def brute_force(first_cost: list[list[float]], budgets: list[float], ks: list[int]) -> np.ndarray:
    """Mean over tasks of the share of K-subsets of samples holding a sample that first
    succeeded at a cumulative cost <= B (0: never succeeded)."""
    out = np.zeros((len(ks), len(budgets)))
    for samples in first_cost:
        for i, k in enumerate(ks):
            subsets = list(itertools.combinations(samples, k))
            for j, b in enumerate(budgets):
                hit = sum(any(0 < c <= b for c in subset) for subset in subsets)
                out[i, j] += hit / len(subsets) / len(first_cost)
    return out


def first_costs(steps: list[tuple[float, bool]]) -> float:
    """The cumulative cost at the first successful step of (cost, success) steps, or 0."""
    total = 0.0
    for cost, success in steps:
        total += cost
        if success:
            return total
    return 0.0


def test_pass_at_k_b_matches_brute_force_on_hand_made_records() -> None:
    # three tasks of five samples, each a list of (step cost, success) steps
    tasks = [
        [
            [(3, False), (4, True)],
            [(10, True)],
            [(2, False)] * 6,
            [(1, True)],
            [(5, False), (5, True)],
        ],
        [[(7, False)], [(2, False), (2, False), (2, True)], [], [(0.5, True)], [(9, False)]],
        [[(1, False)] * 3, [(4, False), (8, True)], [(12, True)], [(3, True)], [(6, True)]],
    ]
    costs = [[first_costs(sample) for sample in task] for task in tasks]
    budgets, ks = [1, 3.5, 6, 10, 12, 40], [1, 2, 3, 5]
    counts = success_counts_within(costs, budgets)
    np.testing.assert_allclose(pass_at_k_t(counts, 5, ks), brute_force(costs, budgets, ks))
    # turns are costs of 1 per step: the same counts as the turn estimator's
    turns = [[first_costs([(1, s) for _, s in sample]) for sample in task] for task in tasks]
    np.testing.assert_array_equal(
        success_counts_within(turns, [1, 2, 3]), success_counts(np.array(turns, int), [1, 2, 3])
    )


def test_text_rule() -> None:
    assert [text_tokens(t) for t in ("", "a", "abcd", "abcde", "x" * 21)] == [1, 1, 1, 2, 6]


def _eval(tmp_path: Path, name: str, *options: str) -> int:
    return main(
        [
            "eval",
            "--env",
            FROZEN,
            "--env-kwargs",
            SLIP,
            "--tasks",
            "first:5",
            "--n",
            "6",
            "--workers",
            "0",
            "--no-progress",
            "--out",
            str(tmp_path / name),
            *options,
        ]
    )


def test_derive_tokens_report_matches_brute_force_from_records(tmp_path: Path) -> None:
    budgets = [12, 30, 60, 200]
    assert (
        _eval(
            tmp_path,
            "tok",
            "--policy",
            "frozenlake/random",
            "--mode",
            "derive",
            "--budget-unit",
            "tokens",
            "--budgets",
            ",".join(map(str, budgets)),
        )
        == 0
    )
    records = read_trajectories(tmp_path / "tok" / TRAJECTORIES_NAME)
    by_task: dict[str, list[float]] = {}
    for record in records:
        # every step costs the text rule of its action; the record's totals add up
        steps = [(text_tokens(s["action"]), s["info"]["success"]) for s in record["steps"]]
        assert [s["cost"] for s in record["steps"]] == [c for c, _ in steps]
        assert record["cost_used"] == sum(c for c, _ in steps) <= max(budgets)
        assert (record["first_success_cost"] or 0) == first_costs(steps)
        by_task.setdefault(record["task_id"], []).append(first_costs(steps))
    assert any(record["success"] for record in records)
    result = write_report(tmp_path / "tok", ks=[1, 2, 6], n_boot=50, plots=False)
    expected = brute_force(list(by_task.values()), budgets, [1, 2, 6])
    np.testing.assert_allclose(result.surface.mean, expected)
    table = (result.out_dir / "passk.md").read_text()
    assert "| K \\ B (tokens) | 12 | 30 | 60 | 200 |" in table
    assert (
        json.loads((result.out_dir / "passk.json").read_text())["surface"]["budget_unit"]
        == "tokens"
    )


def test_rerun_tokens_stop_at_the_budget_and_show_it(tmp_path: Path) -> None:
    assert (
        _eval(
            tmp_path,
            "shown",
            "--policy",
            "frozenlake/noisy",
            "--budget-unit",
            "tokens",
            "--budgets",
            "13,40",
            "--show-budget",
        )
        == 0
    )
    records = read_trajectories(tmp_path / "shown" / TRAJECTORIES_NAME)
    assert {r["budget"] for r in records} == {13, 40}
    for record in records:
        assert record["cost_used"] <= record["budget"]
        assert "tokens left]" in record["initial_observation"]
        if record["success"]:
            assert record["first_success_cost"] <= record["budget"]
    # "<answer>Down</answer>" costs 5 tokens: 13 tokens hold two moves, the third is refused
    short = [r for r in records if r["budget"] == 13]
    assert max(len(r["steps"]) for r in short) == 3
    refused = [r["steps"][-1] for r in short if len(r["steps"]) == 3]
    assert refused and all("budget is spent" in s["observation"] for s in refused)
    assert all(s["cost"] == 0 and s["truncated"] for s in refused)


def test_seconds_are_recorded_per_step(tmp_path: Path) -> None:
    # budgets far above what these steps take: the outcome does not depend on the machine
    assert (
        _eval(
            tmp_path,
            "sec",
            "--policy",
            "frozenlake/random",
            "--mode",
            "derive",
            "--budget-unit",
            "seconds",
            "--budgets",
            "600,1200",
            "--max-turns",
            "12",
        )
        == 0
    )
    records = read_trajectories(tmp_path / "sec" / TRAJECTORIES_NAME)
    for record in records:
        assert len(record["steps"]) <= 12
        assert all(s["cost"] > 0 for s in record["steps"])
        assert math.isclose(record["cost_used"], sum(s["cost"] for s in record["steps"]))
        assert record["success"] == bool(record["first_success_cost"])
    result = write_report(tmp_path / "sec", ks=[1], n_boot=0, plots=False)
    rate = np.mean([r["success"] for r in records])
    np.testing.assert_allclose(result.surface.mean[0], [rate, rate])


class CountedTokens(ScriptedPolicy):
    """Moves down, saying it drew three tokens each time."""

    name = "test/counted-tokens"
    conditions_on_budget = False

    def sample_tokens(self, conversations, n=1, *, seed=None):  # noqa: ANN001, ANN201
        return [[Sample("<answer>Down</answer>", (1,), (7, 8, 9))] * n for _ in conversations]

    def act(self, conversation, rng):  # noqa: ANN001, ANN201
        return "<answer>Down</answer>"


def test_sampled_tokens_are_charged_not_the_text(tmp_path: Path) -> None:
    register_policy(CountedTokens.name, f"{__name__}:CountedTokens")
    config = EvalConfig(
        FROZEN,
        CountedTokens.name,
        ["4x4"],
        n=2,
        budgets=[7, 30],
        mode="derive",
        budget_unit="tokens",
    )
    run_pass_at_k_t(config, tmp_path / "counted", workers=0, progress=False)
    for record in read_trajectories(tmp_path / "counted" / TRAJECTORIES_NAME):
        assert [s["cost"] for s in record["steps"]] == [3] * len(record["steps"])
        assert record["cost_used"] == 3 * len(record["steps"]) <= 30


def _refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    return err


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--policy", "frozenlake/random", "--mode", "derive", "--show-budget"], "--mode rerun"),
        (["--policy", "frozenlake/oracle", "--mode", "derive"], "conditions on the turn budget"),
        (
            ["--policy", "frozenlake/random", "--budget-unit", "turns", "--max-turns", "5"],
            "turn cap",
        ),
    ],
)
def test_invalid_combinations_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], says: str
) -> None:
    args = [
        "eval",
        "--env",
        FROZEN,
        "--budgets",
        "20,40",
        "--budget-unit",
        "tokens",
        "--workers",
        "0",
        "--out",
        str(tmp_path / "x"),
        *options,
    ]
    assert says in _refused(args, capsys)
    assert not (tmp_path / "x").exists()


def test_env_graded_at_its_turn_budget_refuses_cost_budgets(tmp_path: Path) -> None:
    config = EvalConfig(
        "agentenvs/TerminalBench-v0",
        "terminal/noisy",
        ["hello-world"],
        n=1,
        budgets=[100],
        budget_unit="tokens",
    )
    with pytest.raises(ValueError, match="ends the episode first would end it ungraded"):
        run_pass_at_k_t(config, tmp_path / "tb", workers=0, progress=False)
    assert not (tmp_path / "tb").exists()


def test_config_fields_go_with_their_unit() -> None:
    with pytest.raises(RunConfigError, match="turn cap"):
        EvalConfig(FROZEN, "frozenlake/random", ["4x4"], n=1, budgets=[2], max_turns=3)
    with pytest.raises(RunConfigError, match="shown by the env itself"):
        EvalConfig(FROZEN, "frozenlake/random", ["4x4"], n=1, budgets=[2], show_budget=True)
    # a turns config keeps the run id it had before the option existed
    plain = EvalConfig(FROZEN, "frozenlake/random", ["4x4"], n=1, budgets=[2])
    assert "budget_unit" not in plain.to_dict()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.25  # every env step takes 0.25 s between the wrapper's two readings
        return self.now


def test_limit_cost_seconds_with_a_given_clock() -> None:
    env = LimitCost(
        gym.make(FROZEN, success_rate=1.0), "seconds", 2.0, show_budget=True, clock=Clock()
    )
    obs, info = env.reset(seed=0, options={"task_id": "4x4"})
    assert obs.endswith("[2.0 s left]") and info["budget_left"] == 2.0
    env.charge(0.5)
    obs, _, _, truncated, info = env.step("<answer>Down</answer>")
    assert info["step_cost"] == 0.75 and info["budget_left"] == 1.25 and not truncated
    snap = take_snapshot(env)
    env.charge(1.5)  # more than is left: not carried out
    obs, _, _, truncated, info = env.step("<answer>Down</answer>")
    assert truncated and info["budget_exceeded"] and not info["success"]
    assert env.unwrapped.turn == 1 and "budget is spent" in obs
    restore_snapshot(env, snap)
    assert env.used == 0.75
    env.charge(1.1)  # fits before the step, but the env's 0.25 s takes it past 2 s
    _, _, _, truncated, info = env.step("<answer>Down</answer>")
    assert truncated and info["budget_exceeded"] and env.used == pytest.approx(2.1)
    assert env.unwrapped.turn == 2


def test_cli_help_lists_the_units() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agentenvs.cli", "eval", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "--budget-unit {turns,tokens,seconds}" in out
