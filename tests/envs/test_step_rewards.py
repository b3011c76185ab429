"""``info["step_reward"]``: each env that grades single steps gives the exact grade of the
step just taken, as its class docstring says; envs that cannot leave the key out."""

from __future__ import annotations

import pickle
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.info import STEP_REWARD

DEEPCODER_FIXTURES = Path(__file__).parent / "deepcoder_fixtures"


@pytest.mark.parametrize("actions_per_turn", [1, 2])
def test_frozenlake_step_reward_is_the_oracle_advantage_of_the_action(
    actions_per_turn: int,
) -> None:
    env = gym.make(
        "agentenvs/FrozenLake-v0", map_name="8x8", max_turns=14, actions_per_turn=actions_per_turn
    )
    rng = np.random.default_rng(0)
    seen = 0
    for episode in range(6):
        _, info = env.reset(seed=episode)
        assert STEP_REWARD not in info  # a grade is of a step, not of a reset
        done = False
        while not done:
            lake = env.unwrapped
            moves = rng.choice(["Left", "Down", "Right", "Up"], size=actions_per_turn)
            action = rng.choice([" || ".join(moves), "Jump", "Down"])
            want = lake.score_action(action) - lake.optimal_success_probability()
            _, _, terminated, truncated, info = env.step(action)
            assert info[STEP_REWARD] == pytest.approx(want, abs=1e-12)
            assert info[STEP_REWARD] <= 1e-12
            if info["action_valid"] and actions_per_turn == 1:
                assert info[STEP_REWARD] == pytest.approx(-info["last_regret"], abs=1e-15)
            seen += info[STEP_REWARD] < 0
            done = terminated or truncated
    assert seen  # mistakes were graded below 0
    if actions_per_turn == 1:  # an optimal move is graded 0
        env.reset(seed=0)
        best = ["Left", "Down", "Right", "Up"][int(np.argmax(env.unwrapped.q_values()))]
        assert env.step(best)[4][STEP_REWARD] == pytest.approx(0.0, abs=1e-12)
    env.close()


@pytest.mark.parametrize("refused", [5, "x" * 1_000_000], ids=["not a str", "too long"])
def test_frozenlake_grades_an_action_the_base_env_refuses_as_a_wasted_turn(refused) -> None:
    """An action refused before the env parses it costs the turn an unparsable one costs."""
    rewards = []
    for action in ("not a move", refused):
        env = gym.make("agentenvs/FrozenLake-v0", max_turns=8)  # a turn short of 8 costs
        env.reset(seed=3, options={"task_id": "4x4"})
        _, _, _, _, info = env.step(action)
        assert info["action_valid"] is False
        rewards.append(info[STEP_REWARD])
        env.close()
    assert rewards[0] == rewards[1] < 0


def test_envs_that_cannot_grade_a_step_leave_the_key_out() -> None:
    env = gym.make("agentenvs/BFCLMultiTurn-v0")
    env.reset(seed=0)
    assert STEP_REWARD not in env.step("nothing")[4]
    env.close()


@pytest.mark.parametrize("try_again", [False, True])
def test_intercode_step_reward_is_intercodes_reward_of_each_result(try_again: bool) -> None:
    env = gym.make("agentenvs/InterCodeSQL-v0", try_again=try_again)
    _, info = env.reset(seed=5)
    lake = env.unwrapped
    gold = lake.gold_query
    table = next(iter(info["schema"]))
    for action, want in (
        ("```sql\nSELECT 1 WHERE 0\n```", None),
        (f"```sql\nSELECT * FROM {table}\n```", None),
        ("```sql\n\n```", 0.0),  # invalid: no result set
        (f"```sql\n{gold}\n```", 1.0),
    ):
        _, reward, _, _, step = env.step(action)
        if want is None:  # InterCode's reward of this result, as submitting it would score
            want = lake.reward_of(lake._last)
        assert step[STEP_REWARD] == want
        assert reward == (want if try_again and step["action_valid"] else 0.0)
        if try_again and want == 1.0:
            return env.close()
    _, reward, terminated, _, step = env.step("submit")
    assert terminated and step[STEP_REWARD] == reward == 1.0
    env.close()


def _py(code: str) -> str:
    return f"```python\n{code}```"


@pytest.mark.bwrap
def test_deepcoder_step_reward_is_the_change_in_the_pass_rate() -> None:
    # lcb-stdin: print the sum of n numbers; its four tests print 6, 5, 0 and 4
    env = gym.make(
        "agentenvs/DeepCoderMT-v0",
        tasks_path=DEEPCODER_FIXTURES / "lcb.jsonl",
        sandbox="local",
        public_tests=2,
        max_turns=6,
    )
    _, info = env.reset(seed=0, options={"task_id": "lcb-stdin"})
    assert STEP_REWARD not in info and info["score"] == 0.0
    read = "input()\nxs = list(map(int, input().split()))\n"
    steps = [
        (_py(read + "print(xs[0])\n"), 0.25, 0.25),  # buggy: only "5" right; baseline 0
        (_py(read + "print(sum(map(abs, xs)))\n"), 0.75, 0.5),  # better: all but "-1 1"
        ("I will think about it.", 0.75, 0.0),  # invalid: nothing changes
        (_py(read + "print(0)\n"), 0.25, -0.5),  # a regression is graded below 0
        (_py(read + "print(sum(xs))\n"), 1.0, 0.75),  # fixed
    ]
    total = 0.0
    before = None
    for number, (action, score, want) in enumerate(steps, 1):
        if number == 4:
            before = pickle.dumps(env.unwrapped.snapshot())
        _, reward, terminated, _, info = env.step(action)
        assert info["score"] == score, number
        assert info[STEP_REWARD] == pytest.approx(want, abs=1e-12), number
        total += info[STEP_REWARD]
        assert terminated == (number == len(steps))
    assert reward == 1.0 and total == pytest.approx(info["score"])
    # the baseline travels with a snapshot: a restored copy grades the step alike
    other = gym.make(
        "agentenvs/DeepCoderMT-v0",
        tasks_path=DEEPCODER_FIXTURES / "lcb.jsonl",
        sandbox="local",
        public_tests=2,
    )
    other.unwrapped.restore(pickle.loads(before))
    assert other.step(steps[3][0])[4][STEP_REWARD] == pytest.approx(-0.5, abs=1e-12)
    other.close()
    env.close()
