"""The token side of ``OpenAICompatPolicy``: vLLM's token extensions of OpenAI's API read
into ``Sample``s (pure functions over the answers' dicts, no HTTP here).

What a server with the extensions (vLLM's, ``agentenvs serve-model``) gives when asked:

- ``"return_token_ids": true``: ``prompt_token_ids`` (chat: on the answer; completions: on
  each choice) and ``token_ids`` on each choice, the ids the model drew, EOS or the
  end-of-turn token included where it drew one;
- ``logprobs`` (chat: ``true``, per token in ``choices[].logprobs.content[]``; completions:
  a count, ``choices[].logprobs.tokens`` / ``token_logprobs``) and, with
  ``"return_tokens_as_token_ids": true``, each token named ``token_id:<id>``: the ids
  again, where a server gives log-probs but not ``token_ids``;
- ``/v1/completions`` takes the prompt as a list of token ids.

Their log-probs are the model's own (``logprob_kind="raw"``): vLLM's server reports
them before temperature and top-p unless it runs with ``--logprobs-mode
processed_logprobs``, and ``serve-model`` always does; at temperature 1 and top-p 1 they
are those of the distribution sampled from. A server without the extensions (OpenAI's
own) answers text only: its samples carry no ids.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentenvs.policy.base import Sample
from agentenvs.policy.chat import ChatFormatter, ChatTemplateError, apply_stop
from agentenvs.policy.tokens import TurnPrompt, tokens_covering

#: the request fields of vLLM's token extensions (a server without them may refuse them)
EXTENSION_FIELDS = ("return_token_ids", "return_tokens_as_token_ids")
#: the fields asking for ids and log-probs, per endpoint
CHAT_TOKEN_FIELDS: dict[str, Any] = {
    "return_token_ids": True,
    "logprobs": True,
    "return_tokens_as_token_ids": True,
}
COMPLETION_TOKEN_FIELDS: dict[str, Any] = {
    "return_token_ids": True,
    "logprobs": 0,  # the drawn token's own log-prob, no alternatives
    "return_tokens_as_token_ids": True,
}
#: what the samples' log-probs are: the model's own, before temperature and top-p
SERVED_LOGPROB_KIND = "raw"


#: finish reasons of a generation the engine did not finish (its text is partial)
DROPPED_FINISH_REASONS = frozenset({"abort", "error"})


class DroppedGeneration(Exception):
    """The engine dropped a generation (``finish_reason`` ``abort`` or ``error``)."""


def answer_choices(
    answer: dict[str, Any], n: int, *, chat: bool, stop: Sequence[str]
) -> list[tuple[dict[str, Any], str]]:
    """A chat or completions answer's ``n`` choices in order, each with its text (stop
    strings cut, in case the server ignored them; a chat answer's tool calls, should the
    server still send some, appended as JSON). ``DroppedGeneration`` for a choice the
    engine dropped, ``ValueError`` for an answer of the wrong shape or number of choices."""
    try:
        out = []
        for choice in sorted(answer["choices"], key=lambda ch: ch.get("index", 0)):
            if choice.get("finish_reason") in DROPPED_FINISH_REASONS:
                raise DroppedGeneration(
                    f"the engine dropped the generation (finish_reason="
                    f"{choice['finish_reason']!r}): its text is partial"
                )
            if chat:
                message = choice["message"]
                text = message.get("content") or ""
                if message.get("tool_calls"):
                    text += json.dumps(message["tool_calls"])
            else:
                text = choice["text"]
                if not isinstance(text, str):
                    raise TypeError("text")
            out.append((choice, apply_stop(text, stop)[0]))
    except (KeyError, TypeError, AttributeError) as exc:
        kind = "chat completion" if chat else "completion"
        raise ValueError(f"malformed {kind}: {str(answer)[:300]}") from exc
    if len(out) != n:
        raise ValueError(f"asked for n={n} samples, the server returned {len(out)}")
    return out


def end_of_turn_ids(formatter: ChatFormatter) -> list[int]:
    """EOS and the chat template's end-of-turn token: a completion ending in one of them
    closed its turn itself."""
    tokenizer = formatter.tokenizer
    ids = [tokenizer.eos_token_id]
    try:
        end_of_turn = formatter.end_of_turn_token()
    except ChatTemplateError:
        end_of_turn = ""
    if end_of_turn:
        ids.append(tokenizer.convert_tokens_to_ids(end_of_turn))
    return [int(i) for i in ids if i is not None and int(i) >= 0]


def refuses_extensions(message: str) -> bool:
    """Whether a 400/422 answer's ``message`` names one of the extension fields (a server
    that rejects unknown arguments, as OpenAI's does)."""
    return any(name in message for name in EXTENSION_FIELDS)


def named_token_id(name: Any) -> int | None:
    """The id of a log-prob token named ``token_id:<id>`` (``None`` for any other name)."""
    if isinstance(name, str) and name.startswith("token_id:"):
        try:
            return int(name[len("token_id:") :])
        except ValueError:
            return None
    return None


def choice_tokens(
    choice: dict[str, Any], *, chat: bool
) -> tuple[list[int] | None, list[float] | None]:
    """A choice's drawn ids (``token_ids``, else its log-prob tokens named by id) and one
    log-prob per id (``None`` where the server gave none, or not one per id)."""
    logprobs = choice.get("logprobs")
    names: list[Any] = []
    values: list[Any] = []
    if isinstance(logprobs, dict):
        if chat:
            entries = logprobs.get("content") or []
            names = [e.get("token") for e in entries if isinstance(e, dict)]
            values = [e.get("logprob") for e in entries if isinstance(e, dict)]
        else:
            names = list(logprobs.get("tokens") or [])
            values = list(logprobs.get("token_logprobs") or [])
    raw_ids = choice.get("token_ids")
    ids: list[int] | None = None
    if isinstance(raw_ids, list) and all(isinstance(i, int) for i in raw_ids):
        ids = [int(i) for i in raw_ids]
    elif names:
        named = [named_token_id(n) for n in names]
        if all(i is not None for i in named):
            ids = [int(i) for i in named]  # type: ignore[arg-type]
    if ids is None:
        return None, None
    floats: list[float] | None = None
    if len(values) == len(ids) and all(isinstance(v, int | float) for v in values):
        floats = [float(v) for v in values]
    return ids, floats


def served_sample(
    choice: dict[str, Any],
    text: str,
    prompt: TurnPrompt | None,
    prompt_ids: Sequence[int] | None,
    *,
    chat: bool,
    tokenizer: Any,
    vocab: str,
    stop: Sequence[str],
    end_ids: Sequence[int],
) -> Sample:
    """The ``Sample`` of one choice: ``text`` (stop strings cut), the prompt's ids (those
    sent, or ``prompt_ids`` as the server rendered them) and the drawn ids with their
    log-probs; without ids from the server, the text alone (no ids, so the next turn's
    prompt is rendered, not chained).

    Where a stop string ended the text and the server's ids run past it (vLLM keeps the
    stop string's tokens), the ids are cut after the last token the text needs, as the
    ``vllm`` policy cuts them (``tokenizer`` needed; without one they stay as drawn)."""
    reason = str(choice.get("finish_reason") or "stop")
    ids, logprobs = choice_tokens(choice, chat=chat)
    sent = tuple(prompt.ids) if prompt is not None else tuple(int(i) for i in prompt_ids or ())
    built = {
        "prompt_from": prompt.prompt_from if prompt is not None else "template",
        "drift": prompt.drift if prompt is not None else None,
        "drift_checked": prompt.drift_checked if prompt is not None else False,
    }
    if ids is None or not sent:
        return Sample(text=text, finish_reason=reason, vocab="", **built)
    ended = bool(ids) and ids[-1] in set(end_ids)
    stopped = isinstance(choice.get("stop_reason"), str) or apply_stop(text, stop)[1]
    if tokenizer is not None and not ended and (stopped or reason == "stop"):
        keep = tokens_covering(tokenizer, ids, text)
        ids = ids[:keep]
        logprobs = None if logprobs is None else logprobs[:keep]
    return Sample(
        text=text,
        prompt_ids=sent,
        completion_ids=tuple(ids),
        logprobs=None if logprobs is None else tuple(logprobs),
        finish_reason=reason,
        vocab=vocab,
        logprob_kind=SERVED_LOGPROB_KIND,
        **built,
    )
