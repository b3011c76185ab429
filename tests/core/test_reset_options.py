"""``reset``'s ``options`` argument, over every registered env: a non-mapping is a
``TypeError`` that names the argument, raised before the env reads it (an env that
overrides ``reset`` included), and the env is left as it was."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
from _services import env_id_params
from _toy_env import LineWalkEnv

import agentenvs  # noqa: F401 - registers the env ids

NOT_MAPPINGS: tuple[Any, ...] = (5, 0, "task_id", b"", [("task_id", "x")], (), 1.5, True, object())


@pytest.mark.parametrize("env_id", env_id_params())
def test_non_mapping_options_are_a_type_error(env_id: str) -> None:
    env = gym.make(env_id)
    try:
        for options in NOT_MAPPINGS:
            with pytest.raises(TypeError, match=r"reset\(options=\.\.\.\) must be a dict"):
                env.reset(seed=0, options=options)
        # unknown keys stay the ValueError the base env raises, naming the allowed ones
        with pytest.raises(ValueError, match="unknown reset option.*allowed"):
            env.reset(seed=0, options={"no_such_option": 1})
    finally:
        env.close()


def test_a_subclass_reset_is_checked_before_it_runs() -> None:
    read: list[Any] = []

    class ReadsOptions(LineWalkEnv):
        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            read.append(options)  # as an env that reads an option before the base reset
            return super().reset(seed=seed, options=options)

    env = ReadsOptions()
    with pytest.raises(TypeError, match=r"reset\(options=\.\.\.\) must be a dict"):
        env.reset(options=5)
    assert read == []
    observation, info = env.reset(seed=1, options={"task_id": "line-5"})
    assert info["task_id"] == "line-5" and read == [{"task_id": "line-5"}]
