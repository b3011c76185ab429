"""Decoding replies into calls (Python-call syntax and JSON tool calls) and formatting them."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from agentenvs.envs.bfcl.decode import (
    Call,
    DecodeError,
    decode_calls,
    format_calls,
    format_calls_json,
    is_python_formattable,
)

F_AND_G = [Call("f", {"a": 1}), Call("pkg.g", {"b": "x", "c": [1, 2], "d": {"k": True}})]


@pytest.mark.parametrize(
    "text",
    [
        "[f(a=1), pkg.g(b='x', c=[1, 2], d={'k': True})]",
        '[f(a=1), pkg.g(b="x", c=[1, 2], d={"k": True})]',
        "  [f(a=1),\n pkg.g(b='x', c=[1, 2], d={'k': True})]  \n",
        "f(a=1), pkg.g(b='x', c=[1, 2], d={'k': True})",
        "```\n[f(a=1), pkg.g(b='x', c=[1, 2], d={'k': True})]\n```",
        "<think>first f, then g</think>[f(a=1), pkg.g(b='x', c=[1, 2], d={'k': True})]",
        '[{"name": "f", "arguments": {"a": 1}}, '
        '{"name": "pkg.g", "arguments": {"b": "x", "c": [1, 2], "d": {"k": true}}}]',
        '[{"name": "f", "arguments": "{\\"a\\": 1}"}, '
        '{"name": "pkg.g", "arguments": "{\\"b\\": \\"x\\", \\"c\\": [1, 2], \\"d\\": {\\"k\\": true}}"}]',
        '{"tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}, '
        '{"type": "function", "function": {"name": "pkg.g", '
        '"arguments": {"b": "x", "c": [1, 2], "d": {"k": true}}}}]}',
        '[{"f": {"a": 1}}, {"pkg.g": {"b": "x", "c": [1, 2], "d": {"k": true}}}]',
        '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>\n'
        '<tool_call>{"name": "pkg.g", "parameters": {"b": "x", "c": [1, 2], "d": {"k": true}}}'
        "</tool_call>",
    ],
    ids=[
        "python",
        "python double quotes",
        "whitespace",
        "no brackets",
        "backtick fence without a language",
        "think block",
        "json",
        "json string arguments",
        "openai tool_calls",
        "bfcl shape",
        "tool_call tags",
    ],
)
def test_every_format_decodes_to_the_same_calls(text: str) -> None:
    assert decode_calls(text) == F_AND_G


def test_single_call_without_brackets() -> None:
    assert decode_calls("f(a=1)") == [Call("f", {"a": 1})]
    assert decode_calls('{"name": "f", "arguments": {"a": 1}}') == [Call("f", {"a": 1})]


def test_positional_arguments_are_dropped() -> None:
    assert decode_calls("[f(1, 'two', a=3)]") == [Call("f", {"a": 3})]


def test_a_set_of_calls_is_not_a_call_list() -> None:
    # wrapped in brackets, it is a list holding a set, which the official decoder refuses
    with pytest.raises(DecodeError):
        decode_calls("{f(a=1)}")


def test_dotted_names_are_kept() -> None:
    assert decode_calls("[a.b.c(x=1)]")[0].name == "a.b.c"


def test_odd_calls_read_as_the_official_decoder_reads_them() -> None:
    # ``**x`` is kept under the name None; the base of a call that is not a name is skipped
    assert decode_calls("f(**kwargs)") == [Call("f", {None: "kwargs"})]
    assert decode_calls("f()(a=1)") == [Call("", {"a": 1})]
    assert decode_calls("a[0].g(b=2)") == [Call("g", {"b": 2})]
    assert decode_calls("f(v=data[1:2])")[0].args["v"] == "data[1:2]"
    assert decode_calls("f(v=[1] + [2])")[0].args["v"] == [1, 2]
    assert decode_calls("f(v=(1, 2) * 2)")[0].args["v"] == (1, 2, 1, 2)


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("-5", -5),
        ("-2.5", -2.5),
        ("+3", -3),  # the official decoder negates under any unary operator
        ("b'raw'", b"raw"),
        ("(1, 2)", (1, 2)),
        ("[(1, 2), [3]]", [(1, 2), [3]]),
        ("{'a': (1,)}", {"a": (1,)}),
        ("None", None),
        ("...", "..."),
        ("celsius", "celsius"),
        ("datetime.now()", "datetime.now()"),
        ("data[0]", "data[0]"),
        ("inner(x=1)", {"inner": {"x": 1}}),
        ("2**10", 1024),
        ("60 * 60", 3600),
        ("'a' + 'b'", "ab"),
        ("True", True),
    ],
)
def test_values(source: str, value: Any) -> None:
    got = decode_calls(f"f(v={source})")[0].args["v"]
    assert got == value and type(got) is type(value)


def test_tuples_stay_tuples_and_json_lists_stay_lists() -> None:
    assert decode_calls("f(p=(1, 2))")[0].args["p"] == (1, 2)
    assert decode_calls('[{"name": "f", "arguments": {"p": [1, 2]}}]')[0].args["p"] == [1, 2]


@pytest.mark.parametrize("text", ["", "   \n", "[]", '{"tool_calls": []}', '{"tool_calls": null}'])
def test_no_call(text: str) -> None:
    assert decode_calls(text) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("The answer is 42.", "not valid function-call syntax"),
        ("[1, 2]", "item 0 of the list is not a function call"),
        ("x = f(a=1)", "not valid function-call syntax"),
        ("42", "item 0 of the list is not a function call"),
        ("(f(a=1), g(b=2))", "item 0 of the list is not a function call"),
        ("'[f(a=1)]'", "item 0 of the list is not a function call"),
        ("```python\n[f(a=1)]\n```", "not valid function-call syntax"),
        ("f(v=math.pi)", "unsupported value"),
        ("f(v={1, 2})", "unsupported value"),
        ("f(v=lambda: 1)", "unsupported value"),
        ("f(v=[x for x in y])", "unsupported value"),
        ("f(v={**d})", "'**' inside a dict"),
        ("f(v=-'x')", "cannot negate"),
        ("f(v=-x)", "unsupported value"),
        ("f(v=a + 1)", "cannot evaluate"),
        ("f(v=10**100000)", "too large"),
        ("f(v='ab' * 10**9)", "too large"),
        ("f(v=1 << 100000)", "too large"),
        ("f(v=1/0)", "division by zero"),
        ("[{'name': 'f', 'arguments': 3}]", "arguments must be an object"),
        ('[{"name": "f", "arguments": "{not json"}]', "arguments are not valid JSON"),
        ('[{"name": "", "arguments": {}}]', "non-empty string"),
        ('{"a": 1, "b": 2}', "has no 'name'"),
        ('[{"name": "f",', "invalid JSON tool calls"),
    ],
)
def test_decode_errors_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(DecodeError, match=re.escape(message)):
        decode_calls(text)


def test_allow_json_false_refuses_json_calls() -> None:
    with pytest.raises(DecodeError):
        decode_calls('[{"name": "f", "arguments": {"a": 1}}]', allow_json=False)
    with pytest.raises(DecodeError):
        decode_calls('<tool_call>{"name": "f"}</tool_call>', allow_json=False)
    assert decode_calls("[f(a=1)]", allow_json=False) == [Call("f", {"a": 1})]


def test_call_unpacks_like_a_pair() -> None:
    name, args = Call("f", {"a": 1})
    assert (name, args) == ("f", {"a": 1})
    assert Call("f", {"a": 1}).to_official() == {"f": {"a": 1}}


def test_format_round_trips() -> None:
    calls = [Call("f", {"a": 1, "s": "it's", "t": (1, 2), "n": None, "x": -0.5}), Call("p.g", {})]
    text = format_calls(calls)
    assert text == '[f(a=1, s="it\'s", t=(1, 2), n=None, x=-0.5), p.g()]'
    assert decode_calls(text) == calls
    assert format_calls([("f", {"a": 1})]) == "[f(a=1)]"


def test_format_json_round_trips() -> None:
    text = format_calls_json(F_AND_G)
    assert json.loads(text)[0] == {"name": "f", "arguments": {"a": 1}}
    assert decode_calls(text) == F_AND_G


@pytest.mark.parametrize(
    ("calls", "ok"),
    [
        ([Call("f", {"a": 1})], True),
        ([Call("f", {"from": 1})], False),
        ([Call("f", {"$top": 1})], False),
        ([Call("class.f", {})], False),
        ([Call("f-g", {})], False),
        ([Call("f", {"a": float("inf")})], False),
        ([Call("f", {"a": {1, 2}})], False),
    ],
)
def test_is_python_formattable(calls: list[Call], ok: bool) -> None:
    assert is_python_formattable(calls) is ok
    if not ok and all(isinstance(v, int | float) for c in calls for v in c.args.values()):
        assert decode_calls(format_calls_json(calls)) == calls
