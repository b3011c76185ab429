"""The OpenAI wire format of ``agentenvs serve-model`` (``agentenvs.policy.serve``): request
fields read and checked, messages put in the form chat templates take, tool calls found in
a generation, log-probs and streamed chunks shaped as OpenAI's API (and vLLM's token
extensions) shape them. Pure functions over dicts, no model here."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

#: roles a chat request may send (``developer`` is OpenAI's newer name for ``system``)
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
#: the most top log-probs a request may ask for (OpenAI's limit for chat)
MAX_TOP_LOGPROBS = 20
#: the markers of Hermes-style tool calls (Qwen, Hermes, many others): a JSON object
#: ``{"name": ..., "arguments": {...}}`` between them
TOOL_CALL_START, TOOL_CALL_END = "<tool_call>", "</tool_call>"
_TOOL_CALL = re.compile(
    re.escape(TOOL_CALL_START) + r"\s*(.*?)\s*(?:" + re.escape(TOOL_CALL_END) + r"|$)", re.DOTALL
)


class BadRequest(Exception):
    """A request the server refuses (HTTP 400), naming the field at fault."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


# ---------------------------------------------------------------- request fields
def int_field(
    body: dict[str, Any],
    key: str,
    default: int | None,
    minimum: int = 1,
    maximum: int | None = None,
) -> int | None:
    value = body.get(key)
    if value is None:
        return default
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise BadRequest(f"'{key}' must be an integer {bound}, got {value!r}", key)
    return value


def float_field(
    body: dict[str, Any], key: str, low: float, high: float, *, low_open: bool = False
) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not ((low < value if low_open else low <= value) and value <= high)
    ):
        bound = f"{'(' if low_open else '['}{low:g}, {high:g}]"
        raise BadRequest(f"'{key}' must be a number in {bound}, got {value!r}", key)
    return float(value)


def bool_field(body: dict[str, Any], key: str) -> bool:
    value = body.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequest(f"'{key}' must be a boolean, got {value!r}", key)
    return value


def stop_field(body: dict[str, Any]) -> tuple[str, ...] | None:
    """The request's stop strings (``None``: not given, the served spec's apply)."""
    stop = body.get("stop")
    if stop is None:
        return None
    if isinstance(stop, str):
        return (stop,) if stop else ()
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return tuple(s for s in stop if s)
    raise BadRequest(f"'stop' must be a string or a list of strings, got {stop!r}", "stop")


@dataclass(frozen=True)
class Sampling:
    """What one request asks of the model (unset values: the served spec's defaults)."""

    n: int = 1
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    stream: bool = False
    include_usage: bool = False
    return_token_ids: bool = False
    tokens_as_ids: bool = False

    def generate_options(self) -> dict[str, Any]:
        """Keyword arguments of ``HFPolicy.generate`` (unset ones left to the policy)."""
        options: dict[str, Any] = {"seed": self.seed}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.top_p is not None:
            options["top_p"] = self.top_p
        if self.max_tokens is not None:
            options["max_new_tokens"] = self.max_tokens
        if self.stop is not None:
            options["stop"] = self.stop
        return options


def read_sampling(body: dict[str, Any], *, chat: bool) -> Sampling:
    """The sampling fields of a chat or completions request, checked (``BadRequest``)."""
    max_tokens = int_field(body, "max_tokens", None, minimum=1 if chat else 0)
    if chat:
        max_tokens = int_field(body, "max_completion_tokens", max_tokens)
    seed = body.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise BadRequest(f"'seed' must be an integer, got {seed!r}", "seed")
    stream = bool_field(body, "stream")
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not stream:
            raise BadRequest(
                "'stream_options' is only allowed when 'stream' is true", "stream_options"
            )
        if not isinstance(options, dict):
            raise BadRequest("'stream_options' must be an object", "stream_options")
        include_usage = bool(options.get("include_usage"))
    return Sampling(
        n=int_field(body, "n", 1) or 1,
        max_tokens=max_tokens,
        temperature=float_field(body, "temperature", 0.0, 2.0),
        top_p=float_field(body, "top_p", 0.0, 1.0, low_open=True),
        seed=seed,
        stop=stop_field(body),
        stream=stream,
        include_usage=include_usage,
        return_token_ids=bool_field(body, "return_token_ids"),
        tokens_as_ids=bool_field(body, "return_tokens_as_token_ids"),
    )


def read_logprobs(body: dict[str, Any], *, chat: bool) -> int | None:
    """How many top log-probs to return per token (``None``: no log-probs).

    Chat: ``logprobs`` is a boolean and ``top_logprobs`` (0..20) needs it; completions:
    ``logprobs`` is the count itself."""
    if not chat:
        return int_field(body, "logprobs", None, minimum=0, maximum=MAX_TOP_LOGPROBS)
    wanted = bool_field(body, "logprobs")
    top = int_field(body, "top_logprobs", None, minimum=0, maximum=MAX_TOP_LOGPROBS)
    if top is not None and not wanted:
        raise BadRequest("'top_logprobs' needs 'logprobs' set to true", "top_logprobs")
    return (top or 0) if wanted else None


def read_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages in the form chat templates take: text content (a list of
    text parts joined), ``developer`` as ``system``, tool-call arguments as objects (a
    template renders them with ``tojson``; the API sends them as JSON text)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list", "messages")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise BadRequest(
                f"messages[{i}] must be an object whose 'role' is one of {sorted(ROLES)}",
                f"messages[{i}].role",
            )
        message = dict(message)
        if message["role"] == "developer":
            message["role"] = "system"
        content = message.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "text":
                    raise BadRequest(
                        f"messages[{i}].content: only text parts are served",
                        f"messages[{i}].content",
                    )
                parts.append(str(part.get("text") or ""))
            message["content"] = "".join(parts)
        elif content is None:
            message["content"] = ""
        elif not isinstance(content, str):
            raise BadRequest(f"messages[{i}].content must be text", f"messages[{i}].content")
        if message.get("tool_calls"):
            message["tool_calls"] = [_call_for_template(call) for call in message["tool_calls"]]
        out.append(message)
    return out


def _call_for_template(call: Any) -> Any:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return call
    function = dict(call["function"])
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            function["arguments"] = json.loads(arguments)
        except json.JSONDecodeError:
            pass  # the template shows the text as it came
    return {**call, "function": function}


def read_tools(body: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, bool]:
    """The request's tools and whether calls are to be parsed (not with ``tool_choice``
    ``"none"``, which asks the model for text)."""
    tools = body.get("tools")
    if tools is None:
        return None, False
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise BadRequest("'tools' must be a list of objects", "tools")
    choice = body.get("tool_choice")
    if choice is not None and not isinstance(choice, str | dict):
        raise BadRequest("'tool_choice' must be a string or an object", "tool_choice")
    return (tools or None), bool(tools) and choice != "none"


# ---------------------------------------------------------------- tool calls
def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Split a generation into its content and its Hermes-style tool calls
    (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``). Text before the first
    call is the content (``None`` when empty); text that does not parse stays content."""
    start = text.find(TOOL_CALL_START)
    if start < 0:
        return text, []
    calls = []
    for match in _TOOL_CALL.finditer(text, start):
        try:
            call = json.loads(match.group(1))
        except json.JSONDecodeError:
            return text, []
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return text, []
        arguments = call.get("arguments", call.get("parameters", {}))
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": arguments
                    if isinstance(arguments, str)
                    else json.dumps(arguments, ensure_ascii=False),
                },
            }
        )
    content = text[:start].strip()
    return (content or None), calls


# ---------------------------------------------------------------- log-probs
def token_text(tokenizer: Any, token_id: int, as_id: bool) -> str:
    """A token as the API names it: its text, or ``token_id:<id>`` (vLLM's
    ``return_tokens_as_token_ids``, for tokens whose bytes are not whole characters)."""
    if as_id:
        return f"token_id:{token_id}"
    return str(
        tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)
    )


def chat_logprob_entry(
    tokenizer: Any, token_id: int, logprob: float, top: Sequence[tuple[int, float]], as_id: bool
) -> dict[str, Any]:
    """One token of a chat choice's ``logprobs.content``."""

    def item(tid: int, value: float) -> dict[str, Any]:
        text = token_text(tokenizer, tid, as_id)
        return {"token": text, "logprob": value, "bytes": list(text.encode())}

    return {**item(token_id, logprob), "top_logprobs": [item(t, v) for t, v in top]}


def completion_logprobs(
    tokenizer: Any,
    token_ids: Sequence[int],
    values: Sequence[tuple[float, Sequence[tuple[int, float]]] | None],
    as_id: bool,
    offset: int = 0,
) -> dict[str, Any]:
    """A completions choice's ``logprobs``: tokens, their log-probs, the top ones (each
    holding the token itself, as vLLM's do) and the text offsets (from ``offset``)."""
    tokens = [token_text(tokenizer, t, as_id) for t in token_ids]
    token_logprobs: list[float | None] = []
    tops: list[dict[str, float] | None] = []
    for tid, token, value in zip(token_ids, tokens, values, strict=True):
        if value is None:
            token_logprobs.append(None)
            tops.append(None)
            continue
        logprob, top = value
        token_logprobs.append(logprob)
        tops.append(
            {token: logprob, **{token_text(tokenizer, t, as_id): v for t, v in top if t != tid}}
        )
    offsets, at = [], offset
    for t in token_ids:
        offsets.append(at)
        at += len(token_text(tokenizer, t, False))
    return {
        "tokens": tokens,
        "token_logprobs": token_logprobs,
        "top_logprobs": tops,
        "text_offset": offsets,
    }


# ---------------------------------------------------------------- streaming
def text_deltas(tokenizer: Any, token_ids: Sequence[int], text: str) -> list[str]:
    """The part of ``text`` each token adds, so that the deltas join to ``text`` exactly:
    a token that ends inside a character adds nothing until the character is whole, and
    nothing past ``text`` (a stop string cut from it) is added."""
    deltas, sent = [], 0
    for count in range(1, len(token_ids) + 1):
        decoded = tokenizer.decode(list(token_ids[:count]), skip_special_tokens=True)
        if decoded.endswith("\ufffd") and count < len(token_ids):
            deltas.append("")
            continue
        upto = min(len(decoded), len(text))
        deltas.append(text[sent:upto] if upto > sent else "")
        sent = max(sent, upto)
    if deltas:
        deltas[-1] += text[sent:]
    return deltas


def envelope(kind: str, model: str, request_id: str) -> dict[str, Any]:
    return {"id": request_id, "object": kind, "created": int(time.time()), "model": model}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def sse(event: dict[str, Any] | str) -> bytes:
    """One Server-Sent Event: ``data: <json>`` and a blank line."""
    data = event if isinstance(event, str) else json.dumps(event, ensure_ascii=False)
    return f"data: {data}\n\n".encode()


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def stream_events(
    base: dict[str, Any],
    chunks: Iterator[dict[str, Any]],
    final_usage: dict[str, int] | None,
    with_usage_field: bool,
) -> Iterator[bytes]:
    """The SSE body of a streamed answer: each chunk (with ``usage: null`` when the request
    asked for a usage chunk), that usage chunk (no choices), then ``data: [DONE]``."""
    for chunk in chunks:
        event = {**base, **chunk}
        if with_usage_field:
            event["usage"] = None
        yield sse(event)
    if final_usage is not None:
        yield sse({**base, "choices": [], "usage": final_usage})
    yield sse("[DONE]")
