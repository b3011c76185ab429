"""Scripted policies for the adapted foreign envs (``agentenvs.envs.foreign``).

- ``foreign/random``: a move drawn from the env's own ``random_action`` (a uniformly
  random legal move where the adapter knows the moves): the baseline every Pass@(K,T)
  table of a foreign env can start from.
"""

from __future__ import annotations

import numpy as np

from agentenvs.envs.foreign.replay import ForeignTextEnv
from agentenvs.policy.base import Conversation, ScriptedPolicy, live_env


class RandomPolicy(ScriptedPolicy):
    """A random legal move of the live env (``ForeignTextEnv.random_action``)."""

    name = "foreign/random"
    conditions_on_budget = False

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        return live_env(conversation, ForeignTextEnv).random_action(rng)
