"""Scripted reference policies for multi-turn BFCL, for Pass@(K,T) runs and demos.

``bfcl_mt/gold`` sends the current user turn's ground-truth calls in one reply (if they
have not all been made in this turn yet), then a reply without calls to hand the turn
back. ``bfcl_mt/noisy`` first sends a near-miss call (the env's ``error_action``) at the
start of a user turn with probability ``error_rate``, then carries on like gold.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from agentenvs.envs.bfcl.decode import format_calls
from agentenvs.envs.bfcl.multi_turn.env import BFCLMultiTurnEnv
from agentenvs.policy.base import Conversation, ScriptedPolicy, live_env


def _env(conversation: Conversation) -> BFCLMultiTurnEnv:
    return live_env(conversation, BFCLMultiTurnEnv)


def _key(call) -> str:  # noqa: ANN001 - a decode.Call
    # calls compare by their text: argument values may be unhashable lists or dicts
    return format_calls([call])


class GoldPolicy(ScriptedPolicy):
    """Replays the ground truth of the current user turn, then ends the turn."""

    name = "bfcl_mt/gold"

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        from agentenvs.envs.bfcl.multi_turn.env import END_TURN_REPLY

        env = _env(conversation)
        gold = env.gold_calls()
        made = Counter(_key(c) for c in env.calls_this_turn)
        if gold and Counter(_key(c) for c in gold) - made:
            return format_calls(gold)
        return END_TURN_REPLY


class NoisyGoldPolicy(GoldPolicy):
    """With probability ``error_rate`` opens a user turn with a near-miss call, then plays gold."""

    name = "bfcl_mt/noisy"

    def __init__(self, error_rate: float = 0.3) -> None:
        if not 0.0 <= float(error_rate) <= 1.0:
            raise ValueError(f"error_rate must be in [0, 1], got {error_rate!r}")
        self.error_rate = float(error_rate)

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        env = _env(conversation)
        if env.call_steps == 0 and rng.random() < self.error_rate:
            return env.error_action(rng)
        return super().act(conversation, rng)
