"""Java/JavaScript replies: read through tree-sitter with BFCL's rules (values as source)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

pytest.importorskip("tree_sitter_java")
pytest.importorskip("tree_sitter_javascript")

from agentenvs.envs.bfcl.decode import Call, DecodeError, decode_calls  # noqa: E402
from agentenvs.envs.bfcl.source_calls import (  # noqa: E402
    NOT_A_CALL_LIST,
    SourceDecodeError,
    decode_java,
    decode_javascript,
)

JAVA = [
    ("[getPage(pageNo=3)]", [Call("getPage", {"pageNo": "3"})]),
    (
        'connect(sa=new InetSocketAddress("192.168.1.10", 8080))',
        [Call("connect", {"sa": 'new InetSocketAddress("192.168.1.10", 8080)'})],
    ),
    (
        '[f(items=new ArrayList<>(Arrays.asList("a", "b")), n="5L", c=\'x\')]',
        [Call("f", {"items": 'new ArrayList<>(Arrays.asList("a", "b"))', "n": "5L", "c": "x"})],
    ),
    (
        "[f(a=new int[]{1, 2}, b=1 + 2, c=true)]",
        [Call("f", {"a": "new int[]{1,2}", "b": "1+2", "c": "true"})],
    ),
    ("[obj.method(from=x, async=y)]", [Call("obj.method", {"from": "x", "async": "y"})]),
    ("[f(x, a=1)]", None),  # two arguments without ";" after the call: an ERROR node
    ("[f(a=1), g(b=2)]", None),
]

JS = [
    ("[getPage(pageNo=3)]", [Call("getPage", {"pageNo": "3"})]),
    (
        '[f(status=["completed", "failed"], name="x", other=\'y\')]',
        [Call("f", {"status": '["completed", "failed"]', "name": "x", "other": "y"})],
    ),
    ("[f(from=1, async=2)]", [Call("f", {"from": "1", "async": "2"})]),
    ("[f(x, true, a={k: 1})]", None),  # two positional values under one name: refused
    ("[f(a=10n)]", [Call("f", {"a": "10n"})]),
]


@pytest.mark.parametrize(("reply", "calls"), [c for c in JAVA if c[1] is not None])
def test_java_values_are_source_text(reply: str, calls: list[Call]) -> None:
    assert decode_calls(reply, language="java") == calls


@pytest.mark.parametrize(("reply", "calls"), [c for c in JS if c[1] is not None])
def test_javascript_values_are_source_text(reply: str, calls: list[Call]) -> None:
    assert decode_calls(reply, language="javascript") == calls


@pytest.mark.parametrize(
    ("reply", "language"),
    [
        ("[f(a=]", "java"),
        ("[f(a=1, a=2)]", "java"),
        ("[f(a=1, a=2)]", "javascript"),
        ("[f(x, true)]", "javascript"),
        ("[x = 1]", "java"),  # no call: {} officially, not a call list
        ("[1 + 2]", "javascript"),  # no call statement
        ("[" + "(" * 5000 + "f(a=1)" + ")" * 5000 + "]", "java"),
        ("[f(x, a=1)]", "java"),
        ("[f(a='\ud800')]", "java"),
    ],
)
def test_unreadable_source_is_a_decode_error(reply: str, language: str) -> None:
    with pytest.raises(DecodeError):
        decode_calls(reply, language=language)


def test_deep_javascript_values_are_read_as_source() -> None:
    reply = "[f(a=" + "[" * 5000 + "]" * 5000 + ")]"
    (call,) = decode_calls(reply, language="javascript")
    assert call.args["a"] == "[" * 5000 + "]" * 5000


def test_no_call_reads_as_not_a_call_list() -> None:
    assert decode_java("int x = 1;") is NOT_A_CALL_LIST
    assert decode_javascript("let x = 1;") is NOT_A_CALL_LIST
    with pytest.raises(SourceDecodeError):
        decode_java("f(a=")


# ---------------------------------------------------------------- against bfcl-eval itself
SNIPPETS = [reply for reply, _ in JAVA + JS] + [
    '[f(m=new HashMap<String, Object>() {{ put("k", 1); }})]',
    "[f(a=String.class, b=new String[]{\"x\"}, c='q')]",
    "[Math.max(a=1.5f, b=2.0)]",
    '[f(s="tab\\there", n=-3)]',
    "[f(a=x.y.z, b=arr[0])]",
    "[f(a=() => 1, b=`t`)]",
    "[f(a=null, b=undefined, c=false)]",
    "[]",
    "",
    "no call here",
    "[f(a=1)] trailing",
    '[f(s="é", t="z")]',  # byte offsets cut the text: shifted after a non-ASCII character
    "```\n[f(a=1)]\n```",
]


def _official(reply: str, language: str) -> Any:
    from agentenvs.envs.bfcl.reference import official

    ref = official()
    fmt = ref.ReturnFormat.JAVA if language == "java" else ref.ReturnFormat.JAVASCRIPT
    try:
        decoded = ref.decode_ast(reply, fmt, False)
    except Exception:  # noqa: BLE001 - the official runner's decoder failure
        return "error"
    if not ref.is_function_calling_format_output(decoded):
        return "not a call list"
    return [Call(name, args) for item in decoded for name, args in item.items()]


def _ours(reply: str, language: str) -> Any:
    try:
        return decode_calls(reply, language=language, allow_json=False)
    except DecodeError as exc:
        return "not a call list" if "no function call found" in str(exc) else "error"


@pytest.mark.parametrize("language", ["java", "javascript"])
@pytest.mark.parametrize("reply", SNIPPETS)
def test_same_reading_as_bfcl_eval(reply: str, language: str) -> None:
    if importlib.util.find_spec("bfcl_eval") is None:
        pytest.skip("could not import 'bfcl_eval' (make test installs it)")
    assert _ours(reply, language) == _official(reply, language)
