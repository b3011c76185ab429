"""``NoisyPolicy``: what the scripted ``*/noisy`` reference policies share.

A noisy policy is a clean scripted policy (the gold play of an env) that, at every step,
replies instead with a plausible mistake (the env's ``error_action``) with probability
``error_rate``. Erring at any step, not only the first, keeps error states informative:
after an injected mistake a noisy policy with a lower ``error_rate`` really is the better
one.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from agentenvs.policy.base import Conversation, ScriptedPolicy, live_env


class NoisyPolicy(ScriptedPolicy):
    """At every step, the env's ``error_action`` with probability ``error_rate``, else
    what the clean policy after it among the bases replies.

    It goes first among the bases, with ``env_type`` the env whose live state both read:
    ``class NoisyGoldPolicy(NoisyPolicy, GoldPolicy): env_type = BFCLEnv``.
    """

    env_type: ClassVar[type[Any]]

    def __init__(self, error_rate: float = 0.3) -> None:
        if not 0.0 <= float(error_rate) <= 1.0:
            raise ValueError(f"error_rate must be in [0, 1], got {error_rate!r}")
        self.error_rate = float(error_rate)

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        env = live_env(conversation, self.env_type)
        if rng.random() < self.error_rate:
            return env.error_action(rng)
        return super().act(conversation, rng)
