"""Scripted reference policies for multi-turn BFCL, for Pass@(K,T) runs and demos.

``bfcl_mt/gold`` sends the current user turn's ground-truth calls in one reply (if they
have not all been made in this turn yet), then a reply without calls to hand the turn
back. ``bfcl_mt/noisy`` sends, at any step, a near-miss call (the env's
``error_action``) with probability ``error_rate``, and otherwise carries on like gold.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from agentenvs.envs.bfcl.decode import format_calls
from agentenvs.envs.bfcl.multi_turn.env import BFCLMultiTurnEnv
from agentenvs.policy.base import Conversation, ScriptedPolicy, live_env
from agentenvs.policy.noisy import NoisyPolicy


def _env(conversation: Conversation) -> BFCLMultiTurnEnv:
    return live_env(conversation, BFCLMultiTurnEnv)


def _key(call) -> str:  # noqa: ANN001 - a decode.Call
    # calls compare by their text: argument values may be unhashable lists or dicts
    return format_calls([call])


class GoldPolicy(ScriptedPolicy):
    """Replays the ground truth of the current user turn, then ends the turn."""

    name = "bfcl_mt/gold"
    conditions_on_budget = False  # decides from the state, never from the turns left

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        from agentenvs.envs.bfcl.multi_turn.env import END_TURN_REPLY

        env = _env(conversation)
        gold = env.gold_calls()
        made = Counter(_key(c) for c in env.calls_this_turn)
        if gold and Counter(_key(c) for c in gold) - made:
            return format_calls(gold)
        return END_TURN_REPLY


class NoisyGoldPolicy(NoisyPolicy, GoldPolicy):
    """At every step, a near-miss call with probability ``error_rate``, else gold play."""

    name = "bfcl_mt/noisy"
    env_type = BFCLMultiTurnEnv
