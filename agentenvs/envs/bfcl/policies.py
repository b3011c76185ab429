"""Scripted reference policies for the single-turn BFCL env, for Pass@(K,T) runs and demos.

``bfcl/gold`` replies with the ground-truth calls (each parameter's first acceptable
value; plain text in the irrelevance categories). ``bfcl/noisy`` replies with a near
miss (the env's ``error_action``) with probability ``error_rate``, else like gold.
"""

from __future__ import annotations

import numpy as np

from agentenvs.envs.bfcl.env import BFCLEnv
from agentenvs.policy.base import Conversation, ScriptedPolicy, live_env
from agentenvs.policy.noisy import NoisyPolicy


def _env(conversation: Conversation) -> BFCLEnv:
    return live_env(conversation, BFCLEnv)


class GoldPolicy(ScriptedPolicy):
    """Replies with a call list that the checker accepts."""

    name = "bfcl/gold"
    conditions_on_budget = False  # decides from the state, never from the turns left

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        return _env(conversation).gold_reply()


class NoisyGoldPolicy(NoisyPolicy, GoldPolicy):
    """With probability ``error_rate`` replies with a near miss, else with the gold calls."""

    name = "bfcl/noisy"
    env_type = BFCLEnv
