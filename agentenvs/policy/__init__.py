"""Policies: the protocol, scripted reference policies, and (lazily) model-backed ones."""

from agentenvs.policy.base import (
    ActionScore,
    Conversation,
    Policy,
    Sample,
    ScoringPolicy,
    ScriptedPolicy,
    TokenPolicy,
)

__all__ = [
    "ActionScore",
    "Conversation",
    "Policy",
    "Sample",
    "ScoringPolicy",
    "ScriptedPolicy",
    "TokenPolicy",
]
