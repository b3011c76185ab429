"""Policies: the protocol, scripted reference policies, and (lazily) model-backed ones."""

from agentenvs.policy.base import (
    ActionScore,
    Conversation,
    Policy,
    ScoringPolicy,
    ScriptedPolicy,
)

__all__ = ["ActionScore", "Conversation", "Policy", "ScoringPolicy", "ScriptedPolicy"]
