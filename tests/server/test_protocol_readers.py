"""``protocol.parse_json`` reads a message with orjson where it can and with the
standard library's reader otherwise: the value, or the error's code and words, are the
same either way, for the usual messages and for every kind of malformed one."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from agentenvs.server import protocol
from agentenvs.server.protocol import MAX_DEPTH, SessionError, parse_json, parse_message

pytest.importorskip("orjson")

LIMIT = 1 << 20


def _read(raw: str | bytes) -> tuple[str, Any]:
    try:
        value = parse_json(raw, max_bytes=LIMIT)
    except SessionError as exc:
        return "error", (exc.code, str(exc))
    return "value", (type(value).__name__, repr(value))


def _standard(raw: str | bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    """What the standard library's reader alone answers."""
    with monkeypatch.context() as patch:
        patch.setattr(protocol, "_fast_loads", None)
        return _read(raw)


MESSAGES = [
    '{"type": "step", "data": {"text": "Left"}}',
    '{"type":"reset","data":{"seed":7}}',
    '{"type": "reset", "data": {"seed": 18446744073709551615}}',
    '{"type": "reset", "data": {"seed": 18446744073709551616}}',  # past 64 bits
    '{"type": "reset", "data": {"seed": -9223372036854775809}}',
    '{"type": "reset", "data": {"seed": 1e400}}',
    '{"type": "reset", "data": {"seed": NaN}}',
    '{"type": "reset", "data": {"seed": -Infinity}}',
    '{"type": "reset", "data": {"seed": 1.5, "options": {"max_turns": 3}}}',
    '{"type": "step", "data": {"text": "\\ud800"}}',  # a lone surrogate, escaped
    '{"type": "step", "data": {"text": "a", "text": "b"}}',
    "\ufeff{}",
    '{"type": "step"',
    "[1, 2, 3]",
    '"text"',
    "  {}  ",
    "",
    "{'type': 'step'}",
    '{"type": "step", "data": {"text": "\\u00e9\\u0000"}}',
    '{"a": ' * (MAX_DEPTH + 4) + "1" + "}" * (MAX_DEPTH + 4),
    "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1),
    "[" * 5000 + "]" * 5000,
]


@pytest.mark.parametrize("raw", MESSAGES)
def test_both_readers_answer_alike(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _read(raw) == _standard(raw, monkeypatch)
    assert _read(raw.encode("utf-8", "surrogatepass")) == _standard(
        raw.encode("utf-8", "surrogatepass"), monkeypatch
    )


def test_out_of_range_integers_are_refused_not_read_as_floats() -> None:
    for big in (2**64, -(2**63) - 1, 10**30):
        with pytest.raises(SessionError) as caught:
            parse_message(json.dumps({"type": "reset", "data": {"seed": big}}), max_bytes=LIMIT)
        assert caught.value.code == "VALIDATION_ERROR"
        assert "64 bits" in str(caught.value)
    kind, data = parse_message('{"type":"reset","data":{"seed":18446744073709551615}}', max_bytes=LIMIT)
    assert (kind, data) == ("reset", {"seed": 2**64 - 1})
    assert type(data["seed"]) is int


def _random_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.45:
        return rng.choice(
            [
                rng.randint(-(2**70), 2**70),
                rng.randint(-5, 5),
                rng.random() * 10 ** rng.randint(-20, 20),
                "".join(chr(rng.choice([65, 0x263A, 0xE9, 0x1F600, 10])) for _ in range(3)),
                True,
                False,
                None,
            ]
        )
    if roll < 0.75:
        return {f"k{i}": _random_value(rng, depth + 1) for i in range(rng.randint(0, 3))}
    return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def test_random_messages_read_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(20261206)
    for _ in range(2000):
        message = {"type": "step", "data": _random_value(rng, 1)}
        raw = json.dumps(message, ensure_ascii=rng.random() < 0.5)
        if rng.random() < 0.2:  # cut short: malformed
            raw = raw[: rng.randint(0, len(raw))]
        assert _read(raw) == _standard(raw, monkeypatch), raw
