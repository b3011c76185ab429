"""Scripted reference policies for InterCode-SQL, for Pass@(K,T) runs and demos.

``intercode_sql/gold`` runs the gold query, then submits. ``intercode_sql/noisy``
sends, at any turn, a plausible wrong statement (the env's ``error_action``) with
probability ``error_rate``, and otherwise acts like the gold policy (which recovers:
it re-runs the gold query until its result is the last one, then submits). Erring at
any turn, not only the first, keeps error states informative: after an injected
mistake a noisy policy with a lower ``error_rate`` really is the better one.
Neither reads the turn budget.
"""

from __future__ import annotations

import numpy as np

from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv
from agentenvs.policy.base import Conversation, ScriptedPolicy, live_env
from agentenvs.policy.noisy import NoisyPolicy


def _env(conversation: Conversation) -> InterCodeSQLEnv:
    return live_env(conversation, InterCodeSQLEnv)


class GoldPolicy(ScriptedPolicy):
    """Runs the gold query, then submits once its result is the last one."""

    name = "intercode_sql/gold"
    conditions_on_budget = False  # decides from the state, never from the turns left

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        env = _env(conversation)
        if env.try_again:
            return f"```sql\n{env.gold_query}\n```"
        if env.turn > 0 and env.score_action("submit") == 1:
            return "submit"
        return f"```sql\n{env.gold_query}\n```"


class NoisyGoldPolicy(NoisyPolicy, GoldPolicy):
    """At every turn, a wrong statement with probability ``error_rate``, else gold play."""

    name = "intercode_sql/noisy"
    env_type = InterCodeSQLEnv
