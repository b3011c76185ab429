"""Gymnasium's own envs as text envs of the suite: the whole contract, exact replay, and a
source that cannot be replayed refused by name.

The sources are Gymnasium's real toy-text envs (FrozenLake, Taxi, CliffWalking,
Blackjack), made by ``gym.make`` with their registered ids; nothing of them is mocked.
"""

from __future__ import annotations

import random
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.errors import SnapshotError
from agentenvs.envs.foreign.gymnasium_text import GymnasiumTextEnv, plain_text
from agentenvs.testing import check_env_contract

SOURCES = ["FrozenLake-v1", "Taxi-v4", "CliffWalking-v1", "Blackjack-v1"]


@pytest.mark.parametrize("source", SOURCES)
def test_the_contract_holds_on_each_toy_text_source(source: str) -> None:
    check_env_contract(
        "agentenvs/GymnasiumText-v0", env_kwargs={"env_id": source, "n_tasks": 20}, steps=20
    )


@pytest.mark.parametrize("source", SOURCES)
def test_a_restore_replays_to_the_same_source_state(source: str) -> None:
    env = gym.make("agentenvs/GymnasiumText-v0", env_id=source).unwrapped
    rng = np.random.default_rng(3)
    env.reset(seed=5)
    for _ in range(4):
        if env.done:
            break
        env.step(env.error_action(rng))
    if env.done:
        env.reset(seed=6)
    snap = env.snapshot()
    key_at_snap = env.state_key()
    seen = []
    for _ in range(3):
        obs, *_ = env.step(env.error_action(np.random.default_rng(9)))
        seen.append(obs)
        if env.done:
            break
    # a fresh env (never reset) restored from the bytes replays to the same point
    other = gym.make("agentenvs/GymnasiumText-v0", env_id=source).unwrapped
    other.restore(type(snap).from_bytes(snap.to_bytes()))
    assert other.state_key() == key_at_snap
    replayed = []
    for _ in range(len(seen)):
        obs, *_ = other.step(other.error_action(np.random.default_rng(9)))
        replayed.append(obs)
    assert replayed == seen
    env.close()
    other.close()


def test_colours_become_words_and_nothing_is_lost() -> None:
    assert plain_text("\x1b[41mS\x1b[0mFFF") == "<on-red>S</on-red>FFF"
    assert plain_text("|\x1b[34;1mR\x1b[0m: |") == "|<blue>R</blue>: |"
    assert plain_text("a\x1b[2Kb") == "ab"
    env = GymnasiumTextEnv(env_id="FrozenLake-v1")
    obs, _ = env.reset(seed=0)
    assert "\x1b" not in obs and "<on-red>S</on-red>" in obs
    env.close()


def test_moves_by_name_number_or_answer_tag_and_a_bad_one_explains_the_format() -> None:
    env = GymnasiumTextEnv(env_id="Taxi-v4")
    env.reset(seed=0)
    assert env.parse_action("<answer>pickup</answer>") == 4
    assert env.parse_action("  Dropoff. ") == 5
    assert env.parse_action("2") == 2
    obs, _, _, _, info = env.step("fly north")
    assert info["action_valid"] is False
    assert "names no move" in obs and "4 (Pickup)" in obs
    assert env.turn == 1
    env.close()


def test_a_discrete_action_space_is_required() -> None:
    with pytest.raises(ValueError, match="Box action space"):
        GymnasiumTextEnv(env_id="MountainCarContinuous-v0")


def test_taxi_solved_by_its_own_drop_off_scores_1() -> None:
    # Taxi's start for task 0, solved by a breadth-first search over the source's own
    # transition table (its P), played through text
    env = GymnasiumTextEnv(env_id="Taxi-v4", max_turns=40)
    env.reset(seed=0, options={"task_id": "0"})
    inner = env.source.unwrapped
    start = int(inner.s)
    frontier, parent = [start], {start: None}
    goal = None
    while frontier and goal is None:
        nxt = []
        for s in frontier:
            for a in range(6):
                _, s2, _, done = inner.P[s][a][0]
                if s2 not in parent:
                    parent[s2] = (s, a)
                    if done:
                        goal = s2
                    nxt.append(s2)
        frontier = nxt
    assert goal is not None
    plan = []
    s = goal
    while parent[s] is not None:
        s, a = parent[s]
        plan.append(a)
    for a in reversed(plan):
        obs, reward, terminated, truncated, info = env.step(
            f"<answer>{env.action_names[a]}</answer>"
        )
    assert terminated and reward == 20 and info["success"] is True and info["score"] == 1.0
    env.close()


class _Unseeded(gym.Env[int, int]):
    """A source whose steps ignore the seed (they draw from Python's global random)."""

    action_space = gym.spaces.Discrete(2)
    observation_space = gym.spaces.Discrete(1000)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        self.t += 1
        return random.randrange(1000), 0.0, self.t >= 50, False, {}


def test_a_source_that_does_not_replay_is_refused_by_name_and_left_as_it_was() -> None:
    gym.register("test-foreign/Unseeded-v0", entry_point=_Unseeded)
    try:
        env = GymnasiumTextEnv(env_id="test-foreign/Unseeded-v0")
        env.reset(seed=0)
        env.step("1")
        snap = env.snapshot()
        env.step("0")
        before = env.snapshot()
        with pytest.raises(SnapshotError, match="test-foreign/Unseeded-v0 is not replayable"):
            env.restore(snap)
        assert env.snapshot().to_bytes() == before.to_bytes()
        env.step("1")  # and it plays on
        env.close()
    finally:
        gym.registry.pop("test-foreign/Unseeded-v0", None)


# ------------------------------------------------------------- Monte-Carlo action quality
LAKE = {"env_id": "FrozenLake-v1", "env_kwargs": {"is_slippery": False, "map_name": "4x4"}}


def test_a_monte_carlo_score_is_exact_at_the_ends_and_the_same_when_asked_again() -> None:
    env = GymnasiumTextEnv(**LAKE, value_policy="foreign/random", value_rollouts=32, max_turns=30)
    env.reset(seed=0, options={"task_id": "0"})
    env.step("Right")  # (0, 1): below it is a hole
    key, turn = env.state_key(), env.turn
    assert env.score_action("Down") == 0.0  # into the hole: the episode ends, lost
    lo, hi = env.last_score_interval
    assert lo == 0.0 and 0.0 < hi < 1.0
    first = env.score_action("Right")
    assert env.score_action("Right") == first  # seeded by the state and the action
    assert env.state_key() == key and env.turn == turn  # nothing advanced
    lo, hi = env.last_score_interval
    assert lo <= first <= hi
    for move in ("Right", "Down", "Down", "Down"):  # (0, 2) down to (3, 2), left of the goal
        env.step(move)
    assert env.score_action("Right") == 1.0
    env.close()


def test_without_a_value_policy_the_score_is_the_base_ones() -> None:
    env = GymnasiumTextEnv(**LAKE)
    env.reset(seed=0, options={"task_id": "0"})
    assert env.score_action("Right") == 0.0 and env.last_score_interval is None
    env.close()


def test_pass_at_k_t_and_step_quality_run_on_an_adapted_env(tmp_path) -> None:  # noqa: ANN001
    from agentenvs.eval.report import load_run
    from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t
    from agentenvs.eval.step_quality import StepQualityConfig, run_step_quality

    kwargs = {**LAKE, "value_policy": "foreign/random", "value_rollouts": 8}
    config = EvalConfig(
        env_id="agentenvs/GymnasiumText-v0",
        policy="foreign/random",
        task_ids=["0", "1"],
        n=4,
        budgets=[6, 12],
        env_kwargs=kwargs,
    )
    run_pass_at_k_t(config, tmp_path / "run", workers=0, progress=False)
    records = load_run(tmp_path / "run")
    assert records.n_records == 2 * 4 * 2
    sq = StepQualityConfig(
        env_id="agentenvs/GymnasiumText-v0",
        policy_a="foreign/random",
        policy_b="foreign/random",
        env_kwargs=kwargs,
        run_dir=str(tmp_path / "run"),
        n_states=6,
        n_actions=2,
    )
    result = run_step_quality(
        sq, tmp_path / "sq", workers=0, progress=False, plots=False, n_boot=50
    )
    # the scores were estimates: the summary carries their half-width and says so
    estimate = result.summary["score_estimate"]
    assert estimate["states"] > 0 and 0 < estimate["mean_half_width"] <= estimate["max_half_width"]
    from agentenvs.eval.step_quality import summary_markdown

    assert "Monte-Carlo estimates" in summary_markdown(result.summary)


def test_check_replayable_passes_a_seeded_source_and_names_one_that_is_not() -> None:
    env = GymnasiumTextEnv(env_id="Taxi-v4")
    env.check_replayable(seed=3)
    env.close()
    gym.register("test-foreign/Unseeded-v1", entry_point=_Unseeded)
    try:
        bad = GymnasiumTextEnv(env_id="test-foreign/Unseeded-v1")
        with pytest.raises(SnapshotError, match="Unseeded-v1 is not replayable"):
            bad.check_replayable()
        bad.close()
    finally:
        gym.registry.pop("test-foreign/Unseeded-v1", None)


def test_step_quality_refuses_a_source_that_does_not_replay_before_any_work(tmp_path) -> None:  # noqa: ANN001
    from agentenvs.eval.step_quality import AnalysisConfigError, StepQualityConfig, run_step_quality

    gym.register("test-foreign/Unseeded-v2", entry_point=_Unseeded)
    try:
        sq = StepQualityConfig(
            env_id="agentenvs/GymnasiumText-v0",
            policy_a="foreign/random",
            policy_b="foreign/random",
            env_kwargs={"env_id": "test-foreign/Unseeded-v2"},
            reference="foreign/random",
            task_ids=["0"],
            episodes=1,
            n_states=2,
        )
        with pytest.raises(AnalysisConfigError, match="Unseeded-v2 is not replayable"):
            run_step_quality(sq, tmp_path / "sq", workers=0, progress=False, plots=False)
        assert not (tmp_path / "sq").exists()
    finally:
        gym.registry.pop("test-foreign/Unseeded-v2", None)
