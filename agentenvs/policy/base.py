"""The policy protocol: sample actions for a batch of chat histories, score given actions.

Every policy (scripted, HF transformers, vLLM, an OpenAI-compatible endpoint) speaks
this protocol, so the runner and the analyses never care which one they drive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class Sample:
    """One sampled action, as the model sampled it.

    ``prompt_ids`` are the tokens the model was given and ``completion_ids`` the tokens it
    drew, the end-of-turn (or EOS) token included when it drew one; with a stop string the
    completion ends with the last token the returned ``text`` needs. ``logprobs`` holds
    one log-probability per completion token under the distribution sampled from (after
    temperature and top-p: ``logprob_kind="sampled"``; ``"raw"`` where the engine gives
    the model's own, before them), or ``None`` where the policy cannot say. ``vocab``
    names the tokenizer the ids belong to (``ChatFormatter.vocab_fingerprint``).

    ``prompt_from`` says how the prompt was built: ``"tokens"`` (the previous turn's ids,
    its sampled ids and the new observation's tokens, see ``agentenvs.policy.tokens``) or
    ``"template"`` (the whole history rendered). ``drift``: where the prompt was built
    from tokens and the drift was checked, the first position at which rendering the
    whole history with the chat template gives other ids (``None``: the same ids, or not
    checked; ``drift_checked`` says which).
    """

    text: str
    prompt_ids: tuple[int, ...] = ()
    completion_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] | None = None
    finish_reason: str = "stop"
    vocab: str = ""
    logprob_kind: str = "sampled"
    prompt_from: str = "template"
    drift: int | None = None
    drift_checked: bool = False


@dataclass
class Conversation:
    """A chat history: ``messages`` are ``{"role", "content"}`` dicts.

    ``env`` is the live (unwrapped) env the conversation is about; scripted reference
    policies read its state, model policies ignore it. It is never serialized.
    ``samples`` holds, per assistant message, the ``Sample`` it came from (``None`` for
    an action the model did not sample, e.g. an injected error): model policies build
    the next prompt from its token ids (``agentenvs.policy.tokens``).
    """

    messages: list[dict[str, str]] = field(default_factory=list)
    tools: list[dict[str, Any]] | None = None
    env: Any = field(default=None, repr=False, compare=False)
    samples: list[Sample | None] = field(default_factory=list, repr=False, compare=False)

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

    def add_turn(self, action: str, observation: str, sample: Sample | None = None) -> None:
        """Append the agent's ``action`` and the env's answer; ``sample``: the model's
        sample the action is the text of (its tokens then start the next prompt)."""
        turns = sum(1 for m in self.messages if m.get("role") == "assistant")
        self.samples.extend([None] * (turns - len(self.samples)))
        self.messages.append({"role": "assistant", "content": action})
        self.messages.append({"role": "user", "content": observation})
        self.samples.append(sample if sample is not None and sample.text == action else None)

    def last_sample(self) -> Sample | None:
        """The sample of the last assistant message, when the conversation ends with it
        and the observation after it (``None`` otherwise)."""
        turns = sum(1 for m in self.messages if m.get("role") == "assistant")
        if not turns or len(self.samples) != turns or len(self.messages) < 2:
            return None
        if self.messages[-2].get("role") != "assistant":
            return None
        return self.samples[-1]


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
class TokenPolicy(Policy, Protocol):
    """A model policy that returns what it sampled as tokens (HF, vLLM, OpenAI-compatible)."""

    def sample_tokens(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[Sample]]:
        """``n`` samples for each conversation, with their prompt and completion ids."""
        ...


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
