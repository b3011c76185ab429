"""Policies: the protocol, scripted reference policies, and (lazily) model-backed ones."""

from agentenvs.policy.base import Conversation, Policy, ScriptedPolicy

__all__ = ["Conversation", "Policy", "ScriptedPolicy"]
