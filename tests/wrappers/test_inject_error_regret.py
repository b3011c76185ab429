"""Injected errors are errors: a positive regret measured here, independently, by the
FrozenLake oracle (and by DeepCoder-MT's tests); no error where every action is as good
as the best; redraws counted and reported; the same seed, the same error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from _services import require_bwrap
from _toy_env import LineWalkEnv

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.envs.frozenlake.env import format_action, parse_moves
from agentenvs.eval.error_states import injected_error_summary
from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t
from agentenvs.eval.states import candidate_points, collect_states, load_trajectories, replay
from agentenvs.wrappers.inject_error import (
    ERROR_REDRAWS,
    ERROR_UNAVAILABLE,
    INJECTED_ACTION,
    INJECTED_REGRET,
    MAX_ERROR_DRAWS,
    ORIGINAL_ACTION,
    InjectError,
    draw_error_action,
)

ENV = "agentenvs/FrozenLake-v0"
EPS = 1e-9
#: every move of these states is as good as the best: a goal out of reach of the budget
#: (all Q are 0), and a non-slippery map whose goal no move can miss (all Q are 1)
ALL_EQUAL = [
    ("desc:SFFFFFFG", {"max_turns": 2}),
    ("desc:SG", {"max_turns": 3, "is_slippery": False}),
]


def standard_maps() -> list[str]:
    env = gym.make(ENV)
    ids = list(env.unwrapped.task_ids)
    env.close()
    return sorted({"4x4", "8x8", *ids})


def play_to_injection(
    task: str, seed: int, turn: int, budget: int, **kwargs: Any
) -> tuple[np.ndarray, dict[str, Any]] | None:
    """Random moves to ``turn``, where InjectError fires: the oracle's Q of the state
    before that step and the step's info; None when the episode ended earlier."""
    env = InjectError(gym.make(ENV, max_turns=budget, **kwargs), turn=turn, seed=seed)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed, options={"task_id": task})
    try:
        for step in range(1, turn + 1):
            q = env.unwrapped.q_values() if step == turn else None
            _, _, terminated, truncated, info = env.step(format_action(int(rng.integers(4))))
            if step == turn:
                return q, info
            if terminated or truncated:
                return None
    finally:
        env.close()
    return None


def test_every_injected_frozenlake_error_has_positive_oracle_regret() -> None:
    maps = standard_maps()
    injected = unavailable = 0
    for task in maps:
        for seed in range(60):
            turn, budget = 1 + seed % 6, 6 + seed % 11  # small budgets reach flat states
            played = play_to_injection(task, seed, turn, budget)
            if played is None:
                continue
            q, info = played
            if info["error_injected"]:
                injected += 1
                (move,) = parse_moves(info[INJECTED_ACTION])
                regret = float(q.max() - q[move])
                assert regret > EPS, (task, seed, info[INJECTED_ACTION], q)
                assert info[INJECTED_REGRET] == pytest.approx(regret, abs=1e-12)
                assert info[ERROR_REDRAWS] == 0  # a lowest-Q move: the first draw is an error
                assert ERROR_UNAVAILABLE not in info
            else:  # skipped only where no move is worse than the best
                unavailable += 1
                assert info[ERROR_UNAVAILABLE] is True
                assert q.max() - q.min() <= EPS, (task, seed, q)
                assert info[ERROR_REDRAWS] == MAX_ERROR_DRAWS
                assert INJECTED_ACTION not in info and ORIGINAL_ACTION not in info
    assert injected > 500 and unavailable > 0  # both branches were exercised


@pytest.mark.parametrize(("task", "kwargs"), ALL_EQUAL)
def test_a_state_whose_moves_are_all_equal_gets_no_error(task: str, kwargs: dict) -> None:
    env = InjectError(gym.make(ENV, **kwargs), turn=1, seed=0, max_draws=3)
    env.reset(seed=0, options={"task_id": task})
    q = env.unwrapped.q_values()
    assert q.max() - q.min() <= EPS  # the premise, checked
    _, _, _, _, info = env.step("Right")
    assert info["error_injected"] is False and info[ERROR_UNAVAILABLE] is True
    assert info[ERROR_REDRAWS] == 3 and env.redraws == 3
    assert env.injections == 0 and env.unavailable == 1
    assert env.unwrapped.last_action == "Right"  # the agent's own move was played
    state = env.snapshot().wrappers[0][1]
    assert (state["redraws"], state["unavailable"]) == (3, 1)


@pytest.mark.parametrize(("task", "kwargs"), ALL_EQUAL)
def test_error_state_collection_skips_all_equal_states_and_counts_them(
    task: str, kwargs: dict, tmp_path: Any
) -> None:
    config = EvalConfig(
        env_id=ENV, policy="frozenlake/oracle", task_ids=[task], n=2,
        budgets=[kwargs["max_turns"]], env_kwargs={k: v for k, v in kwargs.items() if k != "max_turns"},
    )
    run_pass_at_k_t(config, tmp_path / "run", workers=0, progress=False)
    records = load_trajectories(tmp_path / "run")[1]
    points = candidate_points(records)
    env = gym.make(ENV, **config.env_kwargs)
    flat = 0
    for traj, t in points:  # by hand: the states where every move is as good as the best
        replay(env, records[traj], t)
        q = env.unwrapped.q_values()
        flat += q.max() - q.min() <= EPS
    draws: dict[str, int] = {}
    states = collect_states(
        records, ENV, config.env_kwargs, n_states=50, seed=0, kinds=("error",), error_draws=draws
    )
    # the other states are on the last turn: their error ends the episode
    assert states == []
    assert draws["tried"] == len(points) and flat > 0
    assert draws["no_error"] == flat and draws["ended"] == len(points) - flat
    assert draws["redraws"] == MAX_ERROR_DRAWS * flat
    summary = injected_error_summary([s.to_record() for s in states], draws)
    assert summary["states"] == 0 and summary["no_error"] == flat


def test_the_same_seed_gives_the_same_error() -> None:
    def run(seed: int) -> list[tuple]:
        env = InjectError(gym.make(ENV, max_turns=30), probability=0.5, seed=11)
        env.reset(seed=seed, options={"task_id": "8x8"})
        out = []
        for _ in range(30):
            _, _, terminated, truncated, info = env.step("Down")
            out.append((info["error_injected"], info.get(INJECTED_ACTION), info.get(ERROR_REDRAWS),
                        info["position"]))
            if terminated or truncated:
                break
        return out

    assert run(3) == run(3)
    assert any(injected for injected, *_ in run(3))


class ChoosyLineEnv(LineWalkEnv):
    """Its error action is "right" (no mistake: regret 0) or "left" (regret 1), drawn
    with the rng; its own ``action_regret`` says which is which."""

    def error_action(self, rng: np.random.Generator) -> str:
        return "right" if rng.random() < 0.7 else "left"

    def action_regret(self, action: str) -> float:
        return 1.0 if action == "left" else 0.0


def test_redraws_are_the_rejected_candidates() -> None:
    env = ChoosyLineEnv()
    env.reset(seed=0, options={"task_id": "line-7"})
    seen = set()
    for seed in range(40):
        expected = 0
        replica = np.random.default_rng(seed)  # the same draws, made here
        while expected < 5 and replica.random() < 0.7:
            expected += 1
        draw = draw_error_action(env, np.random.default_rng(seed), max_draws=5)
        assert draw.redraws == expected
        if expected < 5:
            assert (draw.action, draw.regret) == ("left", 1.0)
        else:
            assert (draw.action, draw.regret) == (None, 0.0)
        seen.add(expected)
    assert {0, 1, 5} <= seen  # first-time hits, redraws, and give-ups all happened
    with pytest.raises(ValueError, match="max_draws"):
        draw_error_action(env, np.random.default_rng(0), max_draws=0)
    with pytest.raises(ValueError, match="max_draws"):
        InjectError(ChoosyLineEnv(), turn=1, max_draws=0)


def test_wrapper_info_and_counters_report_redraws() -> None:
    env = InjectError(ChoosyLineEnv(max_turns=40), probability=1.0, seed=5, max_draws=2)
    totals = []
    for seed in range(10):
        env.reset(seed=seed, options={"task_id": "line-7"})
        total = 0
        for _ in range(6):
            _, _, terminated, _, info = env.step("stay")
            total += info[ERROR_REDRAWS]
            assert info["error_injected"] is (info[ERROR_REDRAWS] < 2)
            assert info.get(ERROR_UNAVAILABLE, False) is (info[ERROR_REDRAWS] == 2)
            if terminated:
                break
        assert env.redraws == total  # the episode's count, from its reset
        totals.append(total)
    assert sum(totals) > 0


# ------------------------------------------------------------------------ DeepCoder-MT
@pytest.fixture(scope="module")
def deepcoder() -> Iterator[gym.Env]:
    require_bwrap()
    from agentenvs.envs.deepcoder.env import DeepCoderMTEnv

    env = DeepCoderMTEnv(sandbox="local")
    yield env
    env.close()


@pytest.mark.bwrap
def test_every_injected_deepcoder_program_fails_a_test(deepcoder: Any) -> None:
    from agentenvs.envs.deepcoder.checker import extract_code

    wrapped = InjectError(deepcoder, turn=1, seed=0)
    for task_id in list(deepcoder.task_ids)[:6]:
        wrapped.reset(seed=1, options={"task_id": task_id})
        _, _, _, _, info = wrapped.step("no code")
        assert info["error_injected"] is True and not info["success"]
        code, _ = extract_code(info[INJECTED_ACTION])
        outcomes = deepcoder.outcomes_of_many([code])[0]  # every test, run here again
        passed = sum(o.passed for o in outcomes)
        assert passed < len(outcomes), task_id
        assert info[INJECTED_REGRET] == pytest.approx(1 - passed / len(outcomes))
