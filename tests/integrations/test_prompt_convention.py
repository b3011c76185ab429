"""One prompt convention for every env: the reset observation is ``info["system_prompt"]``,
a blank line, then the task; chat formatting and the trainer adapters show the rules once."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentenvs
from agentenvs.integrations.common import split_prompt
from agentenvs.policy.base import Conversation


@pytest.mark.parametrize("env_id", agentenvs.registered_ids())
def test_reset_observation_is_system_prompt_then_task(env_id: str) -> None:
    kwargs = {}
    if env_id.endswith("TerminalBench-v0"):
        from agentenvs.sandbox.local import local_available

        ok, reason = local_available()
        if not ok:
            pytest.skip(reason)
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
