"""Regret: how much worse an action is than the best one, by the env's own scoring.

Shared by the error injection (``agentenvs.wrappers.inject_error``: an injected error
must have a regret above ``REGRET_TOL``) and the state analyses (``agentenvs.eval.states``:
a drawn state after a mistake is a self-made error state).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

#: a regret at or below this is no mistake (oracle values carry floating-point noise)
REGRET_TOL = 1e-9


def action_regret(env: gym.Env, action: str) -> float:
    """How much worse ``action`` is than the best action from the env's current state,
    by the env's own scoring, without advancing it: the env's ``action_regret`` when it
    has one, else ``max(q_values()) - score_action(action)`` where an exact oracle gives
    Q-values (FrozenLake), else ``1 - score_action(action)`` (full score is a solve)."""
    inner: Any = env.unwrapped
    own = getattr(inner, "action_regret", None)
    if callable(own):
        return float(own(action))
    score = float(inner.score_action(action))
    q_values = getattr(inner, "q_values", None)
    best = float(np.max(q_values())) if callable(q_values) else 1.0
    return max(0.0, best - score)
