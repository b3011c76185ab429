"""Scripted FrozenLake reference policies that read the live env's exact oracle.

- ``OraclePolicy``: always a move of highest Q (ties broken at random): success
  probability ``V_T(start)`` with T turns.
- ``RandomPolicy``: a uniformly random move.
- ``NoisyOraclePolicy(error_rate, recover)``: optimal most of the time, a lowest-Q move
  with probability ``error_rate`` in ordinary states; right after a mistake (the env's
  ``last_regret`` > 0, whether the mistake was its own or injected) it plays optimally
  with probability ``recover`` and errs again otherwise.

Two noisy policies with the same ``error_rate`` and different ``recover`` have the same
action quality in ordinary states and differ only in error states, the shape the paper
reports for RL vs base models (e.g. ``frozenlake/noisy:error_rate=0.2,recover=0.7`` vs
``recover=0.3``). Every policy answers in the env's format, e.g. ``<answer>Left</answer>``.

The oracle and the noisy policy plan with the exact Q for the turns they have left, so
their moves depend on the turn budget (``conditions_on_budget = True``): Pass@(K,T) needs
``rerun`` mode for them (``derive`` refuses them).
"""

from __future__ import annotations

import numpy as np

from agentenvs.envs.frozenlake.env import FrozenLakeEnv, format_action
from agentenvs.policy.base import Conversation, ScriptedPolicy, live_env

#: regrets at or below this count as optimal (floating-point noise in the DP)
REGRET_TOL = 1e-9


def _env_of(conversation: Conversation) -> FrozenLakeEnv:
    return live_env(conversation, FrozenLakeEnv)


def best_action(env: FrozenLakeEnv, rng: np.random.Generator) -> int:
    """A move of highest Q for the env's current cell and budget (ties broken by ``rng``)."""
    q = env.q_values()
    best = np.flatnonzero(q >= q.max() - 1e-12)
    return int(best[int(rng.integers(len(best)))])


class OraclePolicy(ScriptedPolicy):
    """An optimal move (argmax of the exact Q), ties broken at random."""

    name = "frozenlake/oracle"
    #: plans with Q for the turns left: its moves depend on the budget (Pass@(K,T) rerun)
    conditions_on_budget = True

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        return format_action(best_action(_env_of(conversation), rng))


class RandomPolicy(ScriptedPolicy):
    """A uniformly random move."""

    name = "frozenlake/random"
    conditions_on_budget = False

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        return format_action(int(rng.integers(4)))


class NoisyOraclePolicy(ScriptedPolicy):
    """Optimal play with errors: ``error_rate`` in ordinary states, ``1 - recover`` after a
    mistake. An error is the env's ``error_action`` (a lowest-Q move)."""

    name = "frozenlake/noisy"
    #: its optimal moves use Q for the turns left, so they depend on the budget
    conditions_on_budget = True

    def __init__(self, error_rate: float = 0.2, recover: float = 0.5) -> None:
        for label, value in (("error_rate", error_rate), ("recover", recover)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{label} must be a probability in [0, 1], got {value!r}")
        self.error_rate = float(error_rate)
        self.recover = float(recover)

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        env = _env_of(conversation)
        after_mistake = env.last_regret > REGRET_TOL
        err = rng.random() >= self.recover if after_mistake else rng.random() < self.error_rate
        if err:
            return env.error_action(rng)
        return format_action(best_action(env, rng))
