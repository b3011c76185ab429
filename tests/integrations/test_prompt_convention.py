"""One prompt convention for every env: the reset observation is ``info["system_prompt"]``,
a blank line, then the task; chat formatting and the trainer adapters show the rules once."""

from __future__ import annotations

import gymnasium as gym
import pytest
from _services import env_id_params

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.integrations.common import split_prompt
from agentenvs.policy.base import Conversation


@pytest.mark.parametrize("env_id", env_id_params())
def test_reset_observation_is_system_prompt_then_task(env_id: str) -> None:
    kwargs = {}
    if env_id.endswith("DeepCoderMT-v0"):
        kwargs["sandbox"] = "local"
    env = gym.make(env_id, **kwargs)
    try:
        for seed in (0, 1):
            obs, info = env.reset(seed=seed)
            system = info["system_prompt"]
            assert system and obs.startswith(system + "\n\n"), env_id
            conv = Conversation.start(obs, info)
            assert [m["role"] for m in conv.messages] == ["system", "user"]
            assert conv.messages[0]["content"] == system
            assert system not in conv.messages[1]["content"]  # the rules once
            assert conv.messages[1]["content"] == split_prompt(obs, info)[1] == obs[len(system) + 2 :]
    finally:
        env.close()
