"""Token-in, token-out conversations: each turn's prompt built from the ids the model saw
and sampled, and the check that tells when the chat template would have rewritten them.

A multi-turn conversation kept as text and rendered anew every turn puts tokens before
the model that it never produced: BPE is not a bijection (decoding sampled ids and
encoding the text again can give other ids), and chat templates rewrite history (Qwen3's
drops the ``<think>`` blocks of earlier turns). ``TurnPrompts`` builds the prompt of a
model policy one of two ways (``conversation=``):

- ``"tokens"`` (the default of the HF and vLLM policies): when the conversation ends
  with an assistant message that is the text of a ``Sample`` of this tokenizer, followed
  by the env's observation, the prompt is that sample's prompt ids + its completion ids
  (+ the template's end-of-turn token where the model did not draw one: a stop string or
  the token budget ended it) + the tokens of the observation wrapped in the template's
  role markers up to the next generation prompt (``ChatFormatter.observation_suffix``:
  only that suffix is tokenized). Otherwise (the first turn, an injected action, another
  tokenizer's sample) the history is rendered with the template, and the chain of ids
  starts again from there.
- ``"template"``: the whole history rendered with the template every turn.

With ``check_drift`` (default on), a prompt built from tokens is compared with the one
the template would render; the first position where they differ is the sample's
``drift`` (``None``: the same ids). A template that rewrites history, or a tokenizer that
does not give back the sampled ids, shows up there, turn by turn; the runner's manifest
reports the rate (``agentenvs.eval.records.token_summary``). The check renders and
tokenizes the whole history, which is the cost the template mode pays every turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentenvs.policy.base import Conversation, Sample
from agentenvs.policy.chat import ChatFormatter, ChatTemplateError

CONVERSATION_MODES = ("tokens", "template")


@dataclass(frozen=True)
class TurnPrompt:
    """The prompt ids of one turn and how they were built (see ``Sample``)."""

    ids: tuple[int, ...]
    prompt_from: str  # "tokens" or "template"
    drift: int | None = None
    drift_checked: bool = False


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first index where ``a`` and ``b`` differ (the shorter length where one is a
    strict prefix of the other), or ``None`` when they are equal."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


class TurnPrompts:
    """Builds each turn's prompt ids for a model policy (see the module docstring).

    ``end_ids``: the token ids that close an assistant turn when the model draws them
    (its EOS ids and the template's end-of-turn token); a completion ending in one is
    closed already.
    """

    def __init__(
        self,
        formatter: ChatFormatter,
        conversation: str = "tokens",
        *,
        check_drift: bool = True,
        end_ids: Sequence[int] = (),
    ) -> None:
        if conversation not in CONVERSATION_MODES:
            raise ValueError(
                f"conversation must be one of {CONVERSATION_MODES}, got {conversation!r}"
            )
        self.formatter = formatter
        self.mode = conversation
        self.check_drift = bool(check_drift)
        self.end_ids = frozenset(int(i) for i in end_ids)

    def build(self, conversation: Conversation) -> TurnPrompt:
        if self.mode == "tokens":
            chained = self._chained(conversation)
            if chained is not None:
                if not self.check_drift:
                    return TurnPrompt(chained, "tokens")
                rendered = self.formatter.prompt_ids(conversation)
                return TurnPrompt(chained, "tokens", first_difference(chained, rendered), True)
        return TurnPrompt(tuple(self.formatter.prompt_ids(conversation)), "template")

    def _chained(self, conversation: Conversation) -> tuple[int, ...] | None:
        last = conversation.last_sample()
        if last is None or not last.prompt_ids or last.vocab != self.formatter.vocab_fingerprint:
            return None
        observation = conversation.messages[-1]
        if observation.get("role") != "user":
            return None
        try:
            end_of_turn, suffix = self.formatter.observation_suffix(str(observation["content"]))
        except ChatTemplateError:
            return None  # the template cannot say where a turn ends: render it whole
        closing: list[int] = []
        completion = last.completion_ids
        if end_of_turn and not (completion and completion[-1] in self.end_ids):
            closing = self.formatter.encode(end_of_turn)
        return (*last.prompt_ids, *completion, *closing, *self.formatter.encode(suffix))

    def sample(
        self,
        prompt: TurnPrompt,
        text: str,
        completion_ids: Sequence[int],
        logprobs: Sequence[float] | None,
        finish_reason: str,
        logprob_kind: str = "sampled",
    ) -> Sample:
        """The ``Sample`` of one completion of ``prompt``."""
        return Sample(
            text=text,
            prompt_ids=prompt.ids,
            completion_ids=tuple(int(i) for i in completion_ids),
            logprobs=None if logprobs is None else tuple(float(v) for v in logprobs),
            finish_reason=finish_reason,
            vocab=self.formatter.vocab_fingerprint,
            logprob_kind=logprob_kind,
            prompt_from=prompt.prompt_from,
            drift=prompt.drift,
            drift_checked=prompt.drift_checked,
        )


def tokens_covering(tokenizer: object, tokens: Sequence[int], text: str) -> int:
    """The fewest leading ``tokens`` whose decoded text is at least as long as ``text``
    (the tokens of a completion cut at a stop string)."""
    decode = tokenizer.decode  # type: ignore[attr-defined]
    for count in range(len(tokens) + 1):
        if len(decode(list(tokens[:count]), skip_special_tokens=True)) >= len(text):
            return count
    return len(tokens)
