"""The policy protocol: sample actions for a batch of chat histories, score given actions.

Every policy (scripted, HF transformers, vLLM, an OpenAI-compatible endpoint) speaks
this protocol, so the runner and the analyses never care which one they drive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np


@dataclass
class Conversation:
    """A chat history: ``messages`` are ``{"role", "content"}`` dicts.

    ``env`` is the live (unwrapped) env the conversation is about; scripted reference
    policies read its state, model policies ignore it. It is never serialized.
    """

    messages: list[dict[str, str]] = field(default_factory=list)
    tools: list[dict[str, Any]] | None = None
    env: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def start(
        cls,
        observation: str,
        info: dict[str, Any],
        env: Any = None,
    ) -> Conversation:
        messages: list[dict[str, str]] = []
        system = info.get("system_prompt")
        if system:
            messages.append({"role": "system", "content": system})
            # a reset observation starts with the system prompt: show the rules once
            if observation.startswith(system):
                observation = observation[len(system) :].lstrip("\n")
        messages.append({"role": "user", "content": observation})
        return cls(messages=messages, tools=info.get("tools"), env=env)

    def add_turn(self, action: str, observation: str) -> None:
        self.messages.append({"role": "assistant", "content": action})
        self.messages.append({"role": "user", "content": observation})


@runtime_checkable
class Policy(Protocol):
    """Anything that turns chat histories into actions."""

    name: str

    def sample(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[str]]:
        """``n`` sampled actions for each conversation (outer list follows the input)."""
        ...


@dataclass(frozen=True)
class ActionScore:
    """The log-probability of one action's tokens given its history."""

    total: float  # sum of the per-token log-probabilities (natural log)
    tokens: tuple[str, ...] = ()
    token_logprobs: tuple[float, ...] = ()

    @property
    def nll_per_token(self) -> float:
        return -self.total / max(len(self.token_logprobs), 1)


@runtime_checkable
class ScoringPolicy(Policy, Protocol):
    """A policy that can also score given actions (model-backed policies)."""

    def score(
        self, conversations: Sequence[Conversation], actions: Sequence[str]
    ) -> list[ActionScore]:
        """``log p(action | conversation)`` for each pair, summed and per token."""
        ...


E = TypeVar("E")


def live_env(conversation: Conversation, env_type: type[E]) -> E:
    """The conversation's live env, unwrapped and checked to be an ``env_type``.

    Scripted reference policies decide from the env's state; this is how they reach it.
    """
    env: Any = getattr(conversation.env, "unwrapped", conversation.env)
    if not isinstance(env, env_type):
        raise TypeError(
            f"this scripted policy reads the live env: the conversation's env must be a "
            f"{env_type.__name__}, got {type(env).__name__} (pass Conversation(env=...))"
        )
    return env


def conditions_on_budget(policy: Any) -> bool | None:
    """Whether ``policy`` declares that its actions depend on the turn budget.

    A policy says so with a ``conditions_on_budget`` attribute: ``True`` when it plans
    on the turns left (e.g. a finite-horizon oracle), ``False`` when its action at turn
    t depends only on the history (model policies: they see only the messages, so they
    condition on the budget exactly when the env shows it). ``None``: not declared.
    Pass@(K,T)'s ``derive`` mode is valid only for ``False``.
    """
    value = getattr(policy, "conditions_on_budget", None)
    return None if value is None else bool(value)


class ScriptedPolicy:
    """Base for reference policies that decide from the env's state, one action at a time.

    Subclasses declare ``conditions_on_budget`` (see ``conditions_on_budget()``): a
    scripted policy reads the live env, so only it knows whether it reads the budget.
    """

    name = "scripted"
    conditions_on_budget: bool | None = None

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        raise NotImplementedError

    def sample(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[str]]:
        rng = np.random.default_rng(seed)
        return [[self.act(conv, rng) for _ in range(n)] for conv in conversations]
