"""What a client message may be: the size, depth and number limits, and their parsing.

Every message, on the WebSocket or as an HTTP body, passes ``parse_message`` before any
part of it reaches a session: a message that breaks a limit raises ``SessionError`` (the
session answers an error and stays open), never an exception that ends the session.

Limits:

- size: at most ``max_message_bytes`` of UTF-8 (``MESSAGE_TOO_LARGE``). The default fits
  any action within the env's ``max_action_chars`` even with every character escaped as
  JSON's six-byte ``\\uXXXX`` (``default_message_bytes``), so the env, not the server,
  judges an action's length, as it does in process;
- nesting: at most ``MAX_DEPTH`` levels of objects and arrays (``INVALID_JSON``);
- numbers: integers within 64 bits (``[-2**63, 2**64)``), finite floats; ``NaN`` and
  ``Infinity`` are not JSON (``INVALID_JSON``).

A reset's data is read by ``reset_params`` (``ResetParams``; a reset from a snapshot takes
no seed or options) and its env options by ``reset_options``, the same for every way a
session answers a reset.
"""

from __future__ import annotations

import inspect
import json
import math
from typing import Any

import gymnasium as gym
from pydantic import ValidationError

from agentenvs.core.env import DEFAULT_MAX_CHARS
from agentenvs.server.models import ResetParams

#: objects and arrays nested deeper than this are refused
MAX_DEPTH = 32
#: the smallest default message limit, whatever the env's action limit
MIN_MESSAGE_BYTES = 1 << 20
_INT_MIN, _INT_END = -(2**63), 2**64


class SessionError(Exception):
    """A request a session cannot serve; ``code`` is OpenEnv's error code (or one of ours:
    ``MESSAGE_TOO_LARGE``, ``INFRASTRUCTURE_FAULT``); ``fault`` is the ``Fault.record()``
    of an infrastructure fault."""

    def __init__(
        self, message: str, code: str = "EXECUTION_ERROR", fault: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.fault = fault


def max_action_chars(env_id: str, env_kwargs: dict[str, Any]) -> int:
    """The env's action limit as ``gym.make(env_id, **env_kwargs)`` would set it, read
    without making the env (which may start a sandbox)."""
    value = env_kwargs.get("max_action_chars")
    spec = gym.spec(env_id)
    if value is None:
        value = spec.kwargs.get("max_action_chars")
    if value is None:
        entry = spec.entry_point
        if isinstance(entry, str):
            import importlib

            module, _, name = entry.partition(":")
            entry = getattr(importlib.import_module(module), name)
        param = inspect.signature(entry).parameters.get("max_action_chars")
        if param is not None and isinstance(param.default, int):
            value = param.default
    return int(value) if isinstance(value, int) and value > 0 else DEFAULT_MAX_CHARS


def default_message_bytes(env_id: str, env_kwargs: dict[str, Any]) -> int:
    """Room for the longest valid action written as JSON escapes, plus 64 KiB of envelope."""
    return max(MIN_MESSAGE_BYTES, 6 * max_action_chars(env_id, env_kwargs) + (64 << 10))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


#: leaves the limits say nothing about
_FREE_LEAVES = frozenset({str, bool, type(None)})


def _shallow(value: dict[str, Any]) -> bool:
    """Whether ``value`` is two levels of objects holding only text, booleans, nulls and
    integers within 64 bits (a step's or a seeded reset's message), which are within every
    limit."""
    free = _FREE_LEAVES
    for child in value.values():
        if type(child) in free:
            continue
        if type(child) is not dict:
            return False
        for leaf in child.values():
            kind = type(leaf)
            if kind in free:
                continue
            if kind is not int or not _INT_MIN <= leaf < _INT_END:
                return False
    return True


def _check_tree(value: Any) -> None:
    if type(value) is dict and _shallow(value):
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise SessionError(
                    f"the message nests objects and arrays deeper than {MAX_DEPTH} levels",
                    "INVALID_JSON",
                )
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int):
            if not _INT_MIN <= item < _INT_END:
                raise SessionError(
                    f"a number of {len(str(abs(item)))} digits is out of range "
                    "(integers must fit in 64 bits)",
                    "VALIDATION_ERROR",
                )
        elif isinstance(item, float) and not math.isfinite(item):
            raise SessionError("a number overflows a float (got infinity)", "INVALID_JSON")


try:  # a faster reader where installed (the server extra has it)
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - the standard library's reader alone
    _fast_loads = None


def parse_json(raw: str | bytes, *, max_bytes: int) -> Any:
    """``raw`` parsed as JSON within the limits above, or ``SessionError``.

    orjson reads it first where installed, and its value is kept only when it is an
    object of the usual shape (``_shallow``: two levels of text, booleans, nulls and
    64-bit integers), which the standard library's reader reads to the same value. Any
    other message, and any orjson refuses (bad JSON, lone surrogates, a byte-order mark),
    is read again by the standard reader, whose value or error is the answer: the same
    values and error replies as without orjson (which would read an integer past 64 bits
    as a float, for one)."""
    size = len(raw) if isinstance(raw, bytes) or raw.isascii() else len(raw.encode("utf-8"))
    if size > max_bytes:
        raise SessionError(
            f"the message is {size} bytes, over the server's limit of {max_bytes}",
            "MESSAGE_TOO_LARGE",
        )
    if _fast_loads is not None:
        try:
            value = _fast_loads(raw)
        except ValueError:  # orjson.JSONDecodeError: worded by the standard reader below
            pass
        else:
            if type(value) is dict and _shallow(value):
                return value
    try:
        if type(raw) is str and not raw.startswith("\ufeff"):
            value = _DECODER.decode(raw)  # what json.loads does with text, without a new decoder
        else:
            value = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise SessionError(
            f"the message nests objects and arrays deeper than {MAX_DEPTH} levels", "INVALID_JSON"
        ) from None
    except ValueError as exc:  # JSONDecodeError, bad UTF-8, an integer of too many digits
        raise SessionError(f"Invalid JSON: {str(exc)[:200]}", "INVALID_JSON") from None
    _check_tree(value)
    return value


def parse_message(raw: str | bytes | None, *, max_bytes: int) -> tuple[str, dict[str, Any]]:
    """A WebSocket message's ``(type, data)``; ``raw`` is a text frame's text, or bytes for
    a binary frame (refused: the protocol is JSON in text frames)."""
    if not isinstance(raw, str):
        raise SessionError(
            "binary frames are not part of the protocol: send JSON in a text frame", "INVALID_JSON"
        )
    message = parse_json(raw, max_bytes=max_bytes)
    if not isinstance(message, dict):
        raise SessionError("a message must be a JSON object with a 'type'", "INVALID_JSON")
    kind = message.get("type")
    if not isinstance(kind, str):
        raise SessionError("a message's 'type' must be a string", "INVALID_JSON")
    data = message.get("data")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SessionError(
            f"a message's 'data' must be an object, got {type(data).__name__}", "VALIDATION_ERROR"
        )
    return kind, data


def reset_params(data: dict[str, Any]) -> ResetParams:
    """A reset's data as ``ResetParams``; a snapshot comes with no seed or options."""
    try:
        params = ResetParams.model_validate(data)
    except ValidationError as exc:
        raise SessionError(f"invalid reset data: {_short(exc)}", "VALIDATION_ERROR") from None
    if params.snapshot is not None and (
        params.task_id is not None
        or params.max_turns is not None
        or params.options
        or params.seed is not None
    ):
        raise SessionError(
            "a reset from a snapshot takes no seed or options: the snapshot fixes them",
            "VALIDATION_ERROR",
        )
    return params


def reset_options(params: ResetParams) -> dict[str, Any] | None:
    """The env's reset options: ``options`` with ``task_id`` and ``max_turns`` in them."""
    options = dict(params.options)
    if params.task_id is not None:
        options["task_id"] = params.task_id
    if params.max_turns is not None:
        options["max_turns"] = params.max_turns
    return options or None


def _short(exc: BaseException, limit: int = 500) -> str:
    """An error's text, cut to ``limit`` characters."""
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + " ..."


__all__ = [
    "MAX_DEPTH",
    "SessionError",
    "default_message_bytes",
    "max_action_chars",
    "parse_json",
    "parse_message",
    "reset_options",
    "reset_params",
]
