"""Chat formatting for model policies: conversations to prompts, (history, action) to tokens.

``ChatFormatter`` renders a ``Conversation`` (system prompt, user observations, assistant
actions, tool specs) with the model's own chat template, through the tokenizer's
``apply_chat_template``. It works with any Hugging Face tokenizer (the HF and vLLM
adapters both use it, and the OpenAI-compatible client when given a tokenizer).

Rules, in one place so sampling and scoring agree:

- Prompt: ``template(messages, tools=..., add_generation_prompt=True)``, tokenized without
  extra special tokens (the template writes BOS itself where the model wants one).
- Tools: passed as ``tools=`` when the template uses them; a template that never mentions
  ``tools`` gets them as JSON appended to the system message instead, so the model sees
  them either way.
- System role: a template that refuses it (some raise on ``system``) is retried with the
  system prompt prepended to the first user message.
- Fallback template (``FALLBACK_CHAT_TEMPLATE``) when the tokenizer has none (base
  models): ``### User:\\n...\\n\\n### Assistant:\\n...<eos>\\n\\n``, so the model ends its
  turn with its EOS token.
- Action tokens, for scoring: with ``prefix = template(history, add_generation_prompt=True)``
  and ``full = template(history + [assistant: action])``, ``full`` must start with
  ``prefix`` (text and tokens); the action's tokens are those the template renders for
  the assistant message after the prefix, **including the end-of-turn token** that closes
  it when that is a special token (``<|im_end|>``, ``<|eot_id|>``, EOS) and excluding what
  follows (a newline). So a score is log p(the model writes this action *and ends its
  turn*): the probability that sampling from the same prompt yields exactly this action.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentenvs.core.errors import AgentEnvsError
from agentenvs.policy.base import Conversation

FALLBACK_CHAT_TEMPLATE = (
    "{{ bos_token if bos_token else '' }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "### Assistant:\n{{ message['content'] }}{{ eos_token if eos_token else '' }}\n\n"
    "{% else %}"
    "### {{ message['role'] | capitalize }}:\n{{ message['content'] }}\n\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}### Assistant:\n{% endif %}"
)

# Rendered as the assistant's content to find where the template puts the action; plain
# ASCII with no whitespace at either end, so no template trims or escapes it.
_SENTINEL = "ACTION0SENTINEL0b7e1"


class ChatTemplateError(AgentEnvsError, ValueError):
    """The chat template cannot render an action as a continuation of its prompt."""


class PromptTooLongError(ChatTemplateError):
    """The rendered history does not fit the model's context window (with room for one
    new token; an OpenAI-compatible server may also count ``max_tokens``).

    The history is the agent's doing, so this is an outcome, never a ``Fault``: like a
    history the template cannot render, it ends the trajectory there, unsuccessful.
    """


@dataclass(frozen=True)
class ScoredSequence:
    """Token ids of ``history + action`` (cut after the action) and where the action is."""

    ids: list[int]
    action_start: int  # index of the action's first token in ``ids``

    @property
    def action_ids(self) -> list[int]:
        return self.ids[self.action_start :]


@dataclass(frozen=True)
class ActionSpan:
    """Text of the prompt, the rendered action and the end-of-turn token that closes it."""

    prefix: str
    action: str  # the assistant message as the template renders it (may trim, add markup)
    end_of_turn: str  # "" when the template closes the turn without a special token


class ChatFormatter:
    """Renders conversations with a tokenizer's chat template (or the fallback one)."""

    def __init__(self, tokenizer: Any, chat_template: str | None = None) -> None:
        self.tokenizer = tokenizer
        template = chat_template or getattr(tokenizer, "chat_template", None)
        self.uses_fallback = not template
        self.chat_template: str = template or FALLBACK_CHAT_TEMPLATE
        self.template_takes_tools = "tools" in self.chat_template
        self._special = {t for t in (getattr(tokenizer, "all_special_tokens", None) or []) if t}
        added = getattr(tokenizer, "added_tokens_decoder", None) or {}
        self._special |= {str(tok) for tok in added.values() if getattr(tok, "special", False)}

    # ------------------------------------------------------------ rendering
    def render(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool,
    ) -> str:
        messages = [dict(m) for m in messages]
        if tools and not self.template_takes_tools:
            messages = _tools_into_system(messages, tools)
            tools = None
        try:
            return self._apply(messages, tools, add_generation_prompt)
        except Exception as exc:  # jinja raises its own errors (e.g. "system role not supported")
            if not messages or messages[0].get("role") != "system" or len(messages) < 2:
                raise ChatTemplateError(f"the chat template failed: {exc}") from exc
            merged = _system_into_user(messages)
            try:
                return self._apply(merged, tools, add_generation_prompt)
            except Exception as exc2:
                raise ChatTemplateError(f"the chat template failed: {exc2}") from exc2

    def _apply(
        self, messages: list[dict[str, Any]], tools: Any, add_generation_prompt: bool
    ) -> str:
        text = self.tokenizer.apply_chat_template(
            messages,
            tools=list(tools) if tools else None,
            chat_template=self.chat_template,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
        )
        return str(text)

    def prompt_text(self, conversation: Conversation) -> str:
        return self.render(conversation.messages, conversation.tools, add_generation_prompt=True)

    def encode(self, text: str) -> list[int]:
        # The template already wrote BOS and the turn markers; adding special tokens again
        # would double BOS (as apply_chat_template(tokenize=True) also avoids).
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, conversation: Conversation) -> list[int]:
        return self.encode(self.prompt_text(conversation))

    # ------------------------------------------------------------ actions
    def action_span(self, conversation: Conversation, action: str) -> ActionSpan:
        """Split ``template(history + action)`` into prompt, action and end-of-turn text."""
        prefix = self.prompt_text(conversation)
        full = self._with_assistant(conversation, action)
        if not full.startswith(prefix):
            raise ChatTemplateError(
                "the chat template does not render an assistant message as a continuation "
                "of its generation prompt, so the action's tokens are undefined; "
                f"prompt ends {prefix[-60:]!r}, full text there is {full[max(len(prefix) - 60, 0) : len(prefix) + 20]!r}"
            )
        probe = self._with_assistant(conversation, _SENTINEL)
        cut = probe.rfind(_SENTINEL)
        tail = probe[cut + len(_SENTINEL) :] if cut >= 0 else ""
        if cut < 0 or not full.endswith(tail) or len(full) - len(tail) < len(prefix):
            tail = ""  # the template does something unusual after the content: keep it all
        body = full[len(prefix) : len(full) - len(tail)]
        return ActionSpan(prefix=prefix, action=body, end_of_turn=self._leading_special(tail))

    def _with_assistant(self, conversation: Conversation, content: str) -> str:
        messages = [*conversation.messages, {"role": "assistant", "content": content}]
        return self.render(messages, conversation.tools, add_generation_prompt=False)

    def _leading_special(self, text: str) -> str:
        best = ""
        for token in self._special:
            if text.startswith(token) and len(token) > len(best):
                best = token
        return best

    @functools.cached_property
    def vocab_fingerprint(self) -> str:
        """A short name of the tokenizer's vocabulary (token to id, special tokens
        included): ids recorded under one fingerprint mean the same tokens under it."""
        vocab = sorted((str(k), int(v)) for k, v in self.tokenizer.get_vocab().items())
        raw = json.dumps(vocab, separators=(",", ":"), ensure_ascii=False).encode()
        return hashlib.blake2b(raw, digest_size=8).hexdigest()

    def observation_suffix(self, observation: str) -> tuple[str, str]:
        """``(end_of_turn, suffix)``: the special token the template closes an assistant
        turn with (``""`` when none) and the text it writes after it for the next user
        message ``observation``, up to and including the next generation prompt.

        Read off a probe (``user``, ``assistant``, ``user: observation``) rendered with a
        generation prompt; what comes before the assistant's content is not used, so a
        template that renders the last assistant turn otherwise (Qwen3's empty think
        block) does not matter here.
        """
        messages = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": _SENTINEL},
            {"role": "user", "content": observation},
        ]
        text = self.render(messages, None, add_generation_prompt=True)
        cut = text.find(_SENTINEL)
        if cut < 0 or observation not in text[cut:]:
            raise ChatTemplateError(
                "the chat template does not render an assistant message followed by a user "
                "message in a way that shows where one ends and the next begins"
            )
        tail = text[cut + len(_SENTINEL) :]
        end_of_turn = self._leading_special(tail)
        return end_of_turn, tail[len(end_of_turn) :]

    def end_of_turn_token(self, conversation: Conversation | None = None) -> str:
        """The special token that closes an assistant turn ("" when there is none)."""
        conv = conversation or Conversation(messages=[{"role": "user", "content": "hi"}])
        return self.action_span(conv, "ok").end_of_turn

    def scored_sequence(self, conversation: Conversation, action: str) -> ScoredSequence:
        """Token ids of history + action (+ end-of-turn token); see the module docstring."""
        span = self.action_span(conversation, action)
        prefix_ids = self.encode(span.prefix)
        ids = self.encode(span.prefix + span.action + span.end_of_turn)
        if ids[: len(prefix_ids)] != prefix_ids:
            raise ChatTemplateError(
                "the prompt's tokens are not a prefix of the prompt+action tokens (the "
                "tokenizer merges across the boundary), so the action's tokens are undefined"
            )
        if len(ids) == len(prefix_ids):
            raise ChatTemplateError(f"the action {action!r} renders to no tokens")
        return ScoredSequence(ids=ids, action_start=len(prefix_ids))


def _tools_into_system(
    messages: list[dict[str, Any]], tools: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    listing = "You can call these functions:\n" + json.dumps(list(tools), indent=1)
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = f"{first.get('content') or ''}\n\n{listing}".lstrip()
        return [first, *messages[1:]]
    return [{"role": "system", "content": listing}, *messages]


def _system_into_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    system, rest = messages[0], [dict(m) for m in messages[1:]]
    for message in rest:
        if message.get("role") == "user":
            message["content"] = f"{system.get('content') or ''}\n\n{message.get('content') or ''}"
            break
    else:
        rest.insert(0, {"role": "user", "content": system.get("content") or ""})
    return rest


def apply_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` before the earliest stop string (the stop string is not kept)."""
    cut = min((i for s in stop if s and (i := text.find(s)) >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
