"""Scripted Terminal-Bench policies, for Pass@(K,T) runs and demos.

- ``terminal/solution``: the task's oracle as one action (TB1 ``/oracle/solution.sh``,
  Harbor ``/solution/solve.sh``, placed where the official harness puts them), then
  ``submit``.
- ``terminal/noisy:error_rate=0.3``: at any turn, with probability ``error_rate``, the
  env's ``error_action`` (a damaging or mistyped command); otherwise the solution and
  ``submit`` in one action. (A deleted starting file may leave the task unsolvable:
  that is the point of an error state.)
"""

from __future__ import annotations

import numpy as np

from agentenvs.envs.terminal.env import TerminalBenchEnv
from agentenvs.policy.base import Conversation, ScriptedPolicy, live_env


def _env_of(conversation: Conversation) -> TerminalBenchEnv:
    return live_env(conversation, TerminalBenchEnv)


def solution_action(env: TerminalBenchEnv) -> str:
    """The task's oracle, run as the official harness runs it (see ``oracle_action``)."""
    if env.task.solution_path is None and not env.task.solution_commands:
        raise ValueError(f"task {env.task_id!r} has no solution script")
    return env.oracle_action()


class SolutionPolicy(ScriptedPolicy):
    """The task's solution script, then ``submit``."""

    name = "terminal/solution"
    conditions_on_budget = False  # decides from the state, never from the turns left

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        env = _env_of(conversation)
        return solution_action(env) if env.turn == 0 else "submit"


class NoisySolutionPolicy(ScriptedPolicy):
    """At every turn, an erroneous command with probability ``error_rate``, else the solution."""

    name = "terminal/noisy"
    conditions_on_budget = False  # decides from the state, never from the turns left

    def __init__(self, error_rate: float = 0.3) -> None:
        if not 0.0 <= float(error_rate) <= 1.0:
            raise ValueError(f"error_rate must be in [0, 1], got {error_rate!r}")
        self.error_rate = float(error_rate)

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        env = _env_of(conversation)
        if rng.random() < self.error_rate:
            return env.error_action(rng)
        # the solution scripts are idempotent: after an error, the whole script repairs it
        return solution_action(env) + "\nsubmit"
