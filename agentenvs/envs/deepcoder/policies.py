"""Scripted DeepCoder-MT reference policies, for Pass@(K,T) runs and demos.

- ``deepcoder/reference``: submits the task's reference solution (solves every task
  whose reference is correct, on the first turn).
- ``deepcoder/buggy-then-fix:fix_rate=0.7``: first a buggy program (the env's
  ``error_action``), then on each later turn the reference with probability
  ``fix_rate``, else another buggy program. Its success within T turns is
  ``1 - (1 - fix_rate) ** (T - 1)``, a known curve for checking Pass@(K,T) plumbing.
"""

from __future__ import annotations

import numpy as np

from agentenvs.envs.deepcoder.env import DeepCoderMTEnv
from agentenvs.policy.base import Conversation, ScriptedPolicy, live_env


def _env_of(conversation: Conversation) -> DeepCoderMTEnv:
    return live_env(conversation, DeepCoderMTEnv)


def reference_action(env: DeepCoderMTEnv) -> str:
    """The current task's reference solution as an answer."""
    reference = env.reference
    if not reference:
        raise ValueError(f"task {env.task_id!r} has no reference solution in its metadata")
    return f"```python\n{reference.rstrip()}\n```"


class ReferencePolicy(ScriptedPolicy):
    """Always submits the reference solution."""

    name = "deepcoder/reference"
    conditions_on_budget = False  # decides from the state, never from the turns left

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        return reference_action(_env_of(conversation))


class BuggyThenFixPolicy(ScriptedPolicy):
    """A buggy program first; then the reference with probability ``fix_rate`` per turn."""

    name = "deepcoder/buggy-then-fix"
    conditions_on_budget = False  # decides from the state, never from the turns left

    def __init__(self, fix_rate: float = 0.7) -> None:
        if not 0.0 <= float(fix_rate) <= 1.0:
            raise ValueError(f"fix_rate must be in [0, 1], got {fix_rate!r}")
        self.fix_rate = float(fix_rate)

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        env = _env_of(conversation)
        if env.turn > 0 and rng.random() < self.fix_rate:
            return reference_action(env)
        return env.error_action(rng)
