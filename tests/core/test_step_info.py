"""The base env's info: every key, its value and its order, step after step."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core import info as keys


def _expected(env: Any, action_valid: bool, extra: dict[str, Any]) -> dict[str, Any]:
    info = {
        keys.TASK_ID: env.task_id,
        keys.TURN: env.turn,
        keys.MAX_TURNS: env.episode_max_turns,
        keys.TURNS_LEFT: max(env.episode_max_turns - env.turn, 0),
        keys.SUCCESS: env._success,
        keys.SCORE: env._score,
        keys.ACTION_VALID: action_valid,
        keys.STATE_KEY: env.state_key(),
    }
    info.update(env._extra_info())
    info.update(extra)
    return info


def test_frozenlake_infos_hold_every_key_in_order() -> None:
    env = gym.make("agentenvs/FrozenLake-v0", map_name="4x4", max_turns=6).unwrapped
    moves = ["Down", "Right", "nonsense", 12, "Down", "Right", "Left", "Up"]
    seen_done = False
    for seed in range(40):
        _, info = env.reset(seed=seed)
        want = _expected(env, True, env._reset_info())
        assert info == want and list(info) == list(want)
        for i, move in enumerate(moves):
            _, _, terminated, truncated, info = env.step(move)
            extra = {k: info[k] for k in ("step_reward",)}
            valid = move in ("Down", "Right", "Left", "Up")
            want = _expected(env, valid, extra)
            assert info == want and list(info) == list(want), (seed, i)
            assert type(info[keys.ACTION_VALID]) is bool
            assert info[keys.TURNS_LEFT] == 6 - (i + 1)
            if terminated or truncated:
                seen_done = True
                break
    assert seen_done
