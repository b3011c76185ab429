"""Fidelity table for the BFCL AST checker: one row per rule, with the official verdict.

Each row is a reply text, the docs, the ground truth and a category, with the verdict
(valid, error type) that bfcl-eval's ``ast_checker`` (and its runner's decoder and
relevance rule) gives for it.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentenvs.envs.bfcl.ast_checker import (
    UnsupportedDocError,
    check_calls,
    check_reply,
    normalize_string,
)
from agentenvs.envs.bfcl.convert import java_source, java_value, js_source, js_value
from agentenvs.envs.bfcl.decode import Call, decode_calls


def doc(name: str, required: list[str] | None = None, **params: Any) -> dict[str, Any]:
    """A function doc; ``params`` map names to a type name or a full spec dict."""
    props = {p: (s if isinstance(s, dict) else {"type": s}) for p, s in params.items()}
    return {
        "name": name,
        "description": "",
        "parameters": {"type": "dict", "properties": props, "required": required or []},
    }


TRI = doc("area", ["base", "height"], base="integer", height="integer", unit="string")
TRI_GT = [{"area": {"base": [10], "height": [5], "unit": ["units", ""]}}]

ARR_INT = {"type": "array", "items": {"type": "integer"}}
ARR_FLOAT = {"type": "array", "items": {"type": "float"}}
ARR_STR = {"type": "array", "items": {"type": "string"}}
TUP_FLOAT = {"type": "tuple", "items": {"type": "float"}}
LIST_DICT = {"type": "array", "items": {"type": "dict"}}


def one(param: str, spec: Any, accepted: list[Any], name: str = "f") -> tuple[list, list]:
    """Docs and ground truth for a single-parameter function ``f``."""
    return [doc(name, [], **{param: spec})], [{name: {param: accepted}}]


# (id, category, reply, docs, ground truth, valid, error_type)
ROWS: list[tuple[str, str, str, list, list, bool, str]] = [
    # ---- call shape
    ("exact match", "simple_python", "[area(base=10, height=5)]", [TRI], TRI_GT, True, ""),
    ("no brackets", "simple_python", "area(base=10, height=5)", [TRI], TRI_GT, True, ""),
    (
        "positional arguments dropped: then base is missing",
        "simple_python",
        "[area(10, height=5)]",
        [TRI],
        TRI_GT,
        False,
        "simple_function_checker:missing_required",
    ),
    (
        "positional arguments dropped: keyword ones still count",
        "simple_python",
        "[area(99, base=10, height=5)]",
        [TRI],
        TRI_GT,
        True,
        "",
    ),
    (
        "wrong function name",
        "simple_python",
        "[triangle_area(base=10, height=5)]",
        [TRI],
        TRI_GT,
        False,
        "simple_function_checker:wrong_func_name",
    ),
    (
        "two calls in a simple category",
        "simple_python",
        "[area(base=10, height=5), area(base=10, height=5)]",
        [TRI],
        TRI_GT,
        False,
        "simple_function_checker:wrong_count",
    ),
    (
        "empty list in a simple category",
        "simple_python",
        "[]",
        [TRI],
        TRI_GT,
        False,
        "simple_function_checker:wrong_count",
    ),
    (
        "undecodable reply",
        "simple_python",
        "The area is 25.",
        [TRI],
        TRI_GT,
        False,
        "ast_decoder:decoder_failed",
    ),
    (
        "parameter not in the doc",
        "simple_python",
        "[area(base=10, height=5, color='red')]",
        [TRI],
        TRI_GT,
        False,
        "simple_function_checker:unexpected_param",
    ),
    (
        "parameter in the doc but not in the ground truth",
        "simple_python",
        "[f(a=1, b=2)]",
        [doc("f", ["a"], a="integer", b="integer")],
        [{"f": {"a": [1]}}],
        False,
        "simple_function_checker:unexpected_param",
    ),
    # ---- optional parameters
    (
        "'' lets a parameter be left out",
        "simple_python",
        "[area(base=10, height=5)]",
        [TRI],
        TRI_GT,
        True,
        "",
    ),
    (
        "an optional parameter given",
        "simple_python",
        "[area(base=10, height=5, unit='units')]",
        [TRI],
        TRI_GT,
        True,
        "",
    ),
    (
        "left out without '' listed",
        "simple_python",
        "[area(base=10, height=5)]",
        [TRI],
        [{"area": {"base": [10], "height": [5], "unit": ["units"]}}],
        False,
        "simple_function_checker:missing_optional",
    ),
    # ---- Python types
    (
        "True is not an int",
        "simple_python",
        "[f(n=True)]",
        *one("n", "integer", [1]),
        False,
        "type_error:simple",
    ),
    (
        "an int is not a bool",
        "simple_python",
        "[f(b=1)]",
        *one("b", "boolean", [True]),
        False,
        "type_error:simple",
    ),
    (
        "an int is accepted for a float",
        "simple_python",
        "[f(x=5)]",
        *one("x", "float", [5.0]),
        True,
        "",
    ),
    (
        "a float is not accepted for an int",
        "simple_python",
        "[f(n=5.0)]",
        *one("n", "integer", [5]),
        False,
        "type_error:simple",
    ),
    (
        "a bool is not turned into a float",
        "simple_python",
        "[f(x=True)]",
        *one("x", "float", [1.0]),
        False,
        "type_error:simple",
    ),
    (
        "any means str",
        "simple_python",
        "[f(v=5)]",
        *one("v", "any", ["5"]),
        False,
        "type_error:simple",
    ),
    (
        "a tuple becomes a list where the doc says tuple",
        "simple_python",
        "[f(p=(1.5, 2.0))]",
        *one("p", TUP_FLOAT, [[1.5, 2.0]]),
        True,
        "",
    ),
    (
        "a tuple is not an array",
        "simple_python",
        "[f(p=(1, 2))]",
        *one("p", ARR_INT, [[1, 2]]),
        False,
        "type_error:simple",
    ),
    (
        "element types checked one level deep",
        "simple_python",
        "[f(p=[1, '2'])]",
        *one("p", ARR_INT, [[1, 2]]),
        False,
        "type_error:nested",
    ),
    (
        "elements get no int-to-float allowance",
        "simple_python",
        "[f(p=[1, 2])]",
        *one("p", ARR_FLOAT, [[1.0, 2.0]]),
        False,
        "type_error:nested",
    ),
    (
        "elements of the answer's own type pass",
        "simple_python",
        "[f(p=[1, 2])]",
        *one("p", ARR_FLOAT, [[1, 2]]),
        True,
        "",
    ),
    (
        "an optional array accepts []",
        "simple_python",
        "[f(p=[])]",
        *one("p", ARR_INT, ["", [1, 2]]),
        True,
        "",
    ),
    (
        "variable rule: the answer's type passes, then membership",
        "simple_python",
        "[f(n='num_items')]",
        *one("n", "integer", ["num_items"]),
        True,
        "",
    ),
    (
        "variable rule: membership is exact (no normalization)",
        "simple_python",
        "[f(n='Num_Items')]",
        *one("n", "integer", ["num_items"]),
        False,
        "value_error:others",
    ),
    (
        "variable rule: a doc-typed value checked by membership",
        "simple_python",
        "[f(n=3)]",
        *one("n", "integer", ["num_items"]),
        False,
        "value_error:others",
    ),
    (
        "a bare name decodes to its identifier",
        "simple_python",
        "[f(n=num_items)]",
        *one("n", "integer", ["num_items"]),
        True,
        "",
    ),
    # ---- strings
    (
        "strings: case ignored",
        "simple_python",
        "[f(s='NEW YORK')]",
        *one("s", "string", ["new york"]),
        True,
        "",
    ),
    *[
        (
            f"strings: {ch!r} ignored",
            "simple_python",
            f"[f(s='ab{ch}c')]",
            *one("s", "string", ["abc"]),
            True,
            "",
        )
        for ch in [" ", ",", ".", "/", "-", "_", "*", "^"]
    ],
    (
        "strings: other punctuation counts",
        "simple_python",
        "[f(s='ab!c')]",
        *one("s", "string", ["abc"]),
        False,
        "value_error:string",
    ),
    (
        "strings: ' and \" are the same",
        "simple_python",
        '[f(s="it\'s")]',
        *one("s", "string", ['it"s']),
        True,
        "",
    ),
    (
        "strings: any acceptable value",
        "simple_python",
        "[f(s='Paris, France')]",
        *one("s", "string", ["Paris", "Paris, France"]),
        True,
        "",
    ),
    (
        "strings: a wrong value",
        "simple_python",
        "[f(s='Lyon')]",
        *one("s", "string", ["Paris"]),
        False,
        "value_error:string",
    ),
    # ---- lists
    (
        "lists: order matters",
        "simple_python",
        "[f(p=[2, 1])]",
        *one("p", ARR_INT, [[1, 2]]),
        False,
        "value_error:list/tuple",
    ),
    (
        "lists: string elements normalized",
        "simple_python",
        "[f(p=['New York'])]",
        *one("p", ARR_STR, [["new-york"]]),
        True,
        "",
    ),
    (
        "lists: equal to one acceptable list",
        "simple_python",
        "[f(p=[3])]",
        *one("p", ARR_INT, [[1, 2], [3]]),
        True,
        "",
    ),
    # ---- dicts
    (
        "dicts: values by membership, strings normalized",
        "simple_python",
        "[f(d={'city': 'new-york', 'n': 2})]",
        *one("d", "dict", [{"city": ["New York"], "n": [2, 3]}]),
        True,
        "",
    ),
    (
        "dicts: a key may be missing if '' is listed",
        "simple_python",
        "[f(d={'a': 1})]",
        *one("d", "dict", [{"a": [1], "b": [2, ""]}]),
        True,
        "",
    ),
    (
        "dicts: a key may not be missing otherwise",
        "simple_python",
        "[f(d={'a': 1})]",
        *one("d", "dict", [{"a": [1], "b": [2]}]),
        False,
        "value_error:dict_key",
    ),
    (
        "dicts: an unexpected key",
        "simple_python",
        "[f(d={'a': 1, 'z': 0})]",
        *one("d", "dict", [{"a": [1]}]),
        False,
        "value_error:dict_key",
    ),
    (
        "dicts: a wrong value",
        "simple_python",
        "[f(d={'a': 2})]",
        *one("d", "dict", [{"a": [1]}]),
        False,
        "value_error:dict_value",
    ),
    (
        "list of dicts: same order",
        "simple_python",
        "[f(p=[{'a': 1}, {'a': 2}])]",
        *one("p", LIST_DICT, [[{"a": [1]}, {"a": [2]}]]),
        True,
        "",
    ),
    (
        "list of dicts: order matters",
        "simple_python",
        "[f(p=[{'a': 2}, {'a': 1}])]",
        *one("p", LIST_DICT, [[{"a": [1]}, {"a": [2]}]]),
        False,
        "value_error:dict_value",
    ),
    (
        "list of dicts: same length",
        "simple_python",
        "[f(p=[{'a': 1}])]",
        *one("p", LIST_DICT, [[{"a": [1]}, {"a": [2]}]]),
        False,
        "value_error:list_dict_count",
    ),
    # ---- everything else: plain membership
    (
        "booleans by membership",
        "simple_python",
        "[f(b=False)]",
        *one("b", "boolean", [True]),
        False,
        "value_error:others",
    ),
    (
        "numbers by membership",
        "simple_python",
        "[f(n=7)]",
        *one("n", "integer", [5, 6]),
        False,
        "value_error:others",
    ),
    (
        "an int float equals the int answer",
        "simple_python",
        "[f(x=5)]",
        *one("x", "float", [5]),
        True,
        "",
    ),
    # ---- dispatch
    (
        "parallel: any order",
        "parallel",
        "[g(city='Rome'), g(city='Paris')]",
        [doc("g", ["city"], city="string")],
        [{"g": {"city": ["Paris"]}}, {"g": {"city": ["Rome"]}}],
        True,
        "",
    ),
    (
        "parallel: the counts must match",
        "parallel",
        "[g(city='Paris')]",
        [doc("g", ["city"], city="string")],
        [{"g": {"city": ["Paris"]}}, {"g": {"city": ["Rome"]}}],
        False,
        "parallel_function_checker_no_order:wrong_count",
    ),
    (
        "parallel: a call matching nothing",
        "parallel",
        "[g(city='Paris'), g(city='Oslo')]",
        [doc("g", ["city"], city="string")],
        [{"g": {"city": ["Paris"]}}, {"g": {"city": ["Rome"]}}],
        False,
        "parallel_function_checker_no_order:cannot_find_match",
    ),
    (
        "parallel_multiple: greedy matching per answer",
        "parallel_multiple",
        "[h(n=1), g(city='Paris')]",
        [doc("g", ["city"], city="string"), doc("h", ["n"], n="integer")],
        [{"g": {"city": ["Paris"]}}, {"h": {"n": [1]}}],
        True,
        "",
    ),
    (
        "multiple: checked against the expected function's doc",
        "multiple",
        "[h(n=1)]",
        [doc("g", ["city"], city="string"), doc("h", ["n"], n="integer")],
        [{"h": {"n": [1]}}],
        True,
        "",
    ),
    (
        "multiple: calling another offered function",
        "multiple",
        "[g(city='Paris')]",
        [doc("g", ["city"], city="string"), doc("h", ["n"], n="integer")],
        [{"h": {"n": [1]}}],
        False,
        "simple_function_checker:wrong_func_name",
    ),
    (
        "multiple: exactly one call",
        "live_multiple",
        "[h(n=1), h(n=1)]",
        [doc("g", ["city"], city="string"), doc("h", ["n"], n="integer")],
        [{"h": {"n": [1]}}],
        False,
        "multiple_function_checker:wrong_count",
    ),
    (
        "simple: the first doc is used",
        "live_simple",
        "[h(n=1)]",
        [doc("g", ["city"], city="string"), doc("h", ["n"], n="integer")],
        [{"h": {"n": [1]}}],
        False,
        "simple_function_checker:wrong_func_name",
    ),
    (
        "JSON tool calls are checked the same",
        "simple_python",
        '[{"name": "area", "arguments": "{\\"base\\": 10, \\"height\\": 5}"}]',
        [TRI],
        TRI_GT,
        True,
        "",
    ),
    # ---- Java
    (
        "java: values must be strings",
        "simple_java",
        "[f(n=12)]",
        *one("n", "integer", [12]),
        False,
        "type_error:java",
    ),
    ("java: integer", "simple_java", "[f(n='12')]", *one("n", "integer", [12]), True, ""),
    ("java: float needs f", "simple_java", "[f(x='3.5f')]", *one("x", "float", [3.5]), True, ""),
    (
        "java: float without f stays a string",
        "simple_java",
        "[f(x='3.5')]",
        *one("x", "float", [3.5]),
        False,
        "type_error:simple",
    ),
    (
        "java: double without suffix",
        "simple_java",
        "[f(x='3.5')]",
        *one("x", "double", [3.5]),
        True,
        "",
    ),
    ("java: long needs L", "simple_java", "[f(n='10L')]", *one("n", "long", [10]), True, ""),
    (
        "java: long without L stays a string",
        "simple_java",
        "[f(n='10')]",
        *one("n", "long", [10]),
        False,
        "type_error:simple",
    ),
    (
        "java: boolean is true/false",
        "simple_java",
        "[f(b='true')]",
        *one("b", "boolean", [True]),
        True,
        "",
    ),
    (
        "java: True is not a Java boolean",
        "simple_java",
        "[f(b='True')]",
        *one("b", "boolean", [True]),
        False,
        "type_error:simple",
    ),
    (
        "java: String as written",
        "simple_java",
        "[f(s='TBL-1')]",
        *one("s", "String", ["tbl 1"]),
        True,
        "",
    ),
    (
        "java: ArrayList of String",
        "simple_java",
        '[f(p=\'new ArrayList<>(Arrays.asList("a", "b"))\')]',
        *one("p", {"type": "ArrayList", "items": {"type": "String"}}, [["a", "b"]]),
        True,
        "",
    ),
    (
        "java: a list literal is not an ArrayList",
        "simple_java",
        '[f(p=\'["a", "b"]\')]',
        *one("p", {"type": "ArrayList", "items": {"type": "String"}}, [["a", "b"]]),
        False,
        "type_error:simple",
    ),
    (
        "java: HashMap puts",
        "simple_java",
        "[f(m='new HashMap<String, Object>() {{ put(\"k\", 2); }}')]",
        *one("m", "HashMap", [{"k": [2]}]),
        True,
        "",
    ),
    (
        "java: Array of double",
        "simple_java",
        "[f(p='new double[]{1.5, 2.0}')]",
        *one("p", {"type": "Array", "items": {"type": "double"}}, [[1.5, 2.0]]),
        True,
        "",
    ),
    (
        "java: char stays as written",
        "simple_java",
        "[f(c=\"'a'\")]",
        *one("c", "char", ["'a'"]),
        True,
        "",
    ),
    # ---- JavaScript
    (
        "js: values must be strings",
        "simple_javascript",
        "[f(n=5)]",
        *one("n", "integer", [5]),
        False,
        "type_error:js",
    ),
    (
        "js: Bigint needs n",
        "simple_javascript",
        "[f(n='10n')]",
        *one("n", "Bigint", [10]),
        True,
        "",
    ),
    (
        "js: Bigint without n stays a string",
        "simple_javascript",
        "[f(n='10')]",
        *one("n", "Bigint", [10]),
        False,
        "type_error:simple",
    ),
    (
        "js: a quoted String loses its quotes",
        "simple_javascript",
        "[f(s='\"abc\"')]",
        *one("s", "String", ["abc"]),
        True,
        "",
    ),
    (
        "js: an unquoted String stays as written",
        "simple_javascript",
        "[f(s='abc')]",
        *one("s", "String", ["abc"]),
        True,
        "",
    ),
    ("js: Boolean", "simple_javascript", "[f(b='false')]", *one("b", "Boolean", [False]), True, ""),
    ("js: float", "simple_javascript", "[f(x='2.5')]", *one("x", "float", [2.5]), True, ""),
    (
        "js: array of String",
        "simple_javascript",
        '[f(p=\'["a", "b"]\')]',
        *one("p", {"type": "array", "items": {"type": "String"}}, [["a", "b"]]),
        True,
        "",
    ),
    (
        "js: object",
        "simple_javascript",
        "[f(d=\"{'k': 1, 'm': 'x'}\")]",
        *one("d", "dict", [{"k": [1], "m": ["x"]}]),
        True,
        "",
    ),
    # ---- relevance
    ("irrelevance: plain text is no call", "irrelevance", "No function fits.", [TRI], [], True, ""),
    ("irrelevance: [] is no call", "live_irrelevance", "[]", [TRI], [], True, ""),
    (
        "irrelevance: a call fails",
        "irrelevance",
        "[area(base=1, height=2)]",
        [TRI],
        [],
        False,
        "irrelevance_error:decoder_success",
    ),
    ("relevance: any call passes", "live_relevance", "[area(wrong=1)]", [TRI], [], True, ""),
    (
        "relevance: no call fails",
        "live_relevance",
        "I can't.",
        [TRI],
        [],
        False,
        "relevance_error:decoder_failed",
    ),
]


@pytest.mark.parametrize(
    ("category", "reply", "docs", "truth", "valid", "error_type"),
    [pytest.param(*row[1:], id=row[0]) for row in ROWS],
)
def test_official_verdict(
    category: str, reply: str, docs: list, truth: list, valid: bool, error_type: str
) -> None:
    if category.endswith(("java", "javascript")):
        # these rows pin the checker's rules on decoded values (the replies are written
        # as Python literals, as JSON tool calls give them); Java/JS source text is read
        # by the tree-sitter decoder, pinned in test_bfcl_source_calls.py
        verdict = check_calls(docs, decode_calls(reply), truth, category)
    else:
        verdict = check_reply(reply, docs, truth, category)
    assert verdict.valid is valid, verdict
    assert verdict.error_type == error_type, verdict
    assert bool(verdict.errors) is not valid


def test_underscore_to_dot_expects_underscored_names() -> None:
    docs, truth = [doc("maps.route", ["a"], a="integer")], [{"maps.route": {"a": [1]}}]
    assert check_reply("[maps_route(a=1)]", docs, truth, "simple_python", underscore_to_dot=True)
    assert not check_reply(
        "[maps.route(a=1)]", docs, truth, "simple_python", underscore_to_dot=True
    )
    assert check_reply("[maps.route(a=1)]", docs, truth, "simple_python")


def test_unknown_doc_type_is_reported() -> None:
    docs, truth = one("x", "number", [1.0])
    with pytest.raises(UnsupportedDocError, match="unknown type 'number'"):
        check_calls(docs, [Call("f", {"x": 1.0})], truth, "simple_python")


def test_normalize_string_removes_exactly_the_official_characters() -> None:
    assert normalize_string(" ,./-_*^") == ""
    assert normalize_string("A!b'C") == 'a!b"c'


@pytest.mark.parametrize(
    ("text", "kind", "item", "expected"),
    [
        ("12", "integer", None, 12),
        ("-12", "short", None, -12),
        ("1.2", "integer", None, "1.2"),
        ("3e2f", "float", None, 300.0),
        ("3.5F", "float", None, 3.5),
        ("3.5", "float", None, "3.5"),
        ("7l", "long", None, 7),
        ("false", "boolean", None, False),
        ("FALSE", "boolean", None, "FALSE"),
        ("'x'", "char", None, "'x'"),
        ("new int[]{1, 2, 3}", "Array", "integer", [1, 2, 3]),
        ('new String[]{"a", "b"}', "Array", "String", ['"a"', '"b"']),
        ("new ArrayList<>()", "ArrayList", "integer", []),
        ("new ArrayList<Long>() {{ add(1L); add(2L); }}", "ArrayList", "long", [1, 2]),
        ("new HashMap<>()", "HashMap", None, {}),
        (
            'new HashMap<String, Object>() {{ put("a", 1L); put("b", true); }}',
            "HashMap",
            None,
            {"a": 1, "b": True},
        ),
        ("whatever", "Set", None, "whatever"),
    ],
)
def test_java_conversions(text: str, kind: str, item: str | None, expected: Any) -> None:
    got = java_value(text, kind, item)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("text", "kind", "item", "expected"),
    [
        ("12n", "Bigint", None, 12),
        ("12", "Bigint", None, "12"),
        ("'q'", "String", None, "q"),
        ("q", "String", None, "q"),
        ("1.50", "float", None, 1.5),
        ("1e3", "float", None, "1e3"),
        ("[1, 2]", "array", "integer", [1, 2]),
        ("new Array(1, 2)", "array", None, [1, 2]),
        ("[[1, 2], [3, 4]]", "array", "array", [[1, 2], [3, 4]]),
        ("{'k': '5'}", "dict", None, {"k": 5}),
        ("{}", "dict", None, {}),
        ("not an array", "array", None, "not an array"),
    ],
)
def test_js_conversions(text: str, kind: str, item: str | None, expected: Any) -> None:
    got = js_value(text, kind, item)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("value", "kind", "item"),
    [
        (12, "integer", None),
        (3000412, "long", None),
        (21.5, "float", None),
        (1e-05, "double", None),
        (True, "boolean", None),
        (["a", "b"], "ArrayList", "String"),
        ([1, 2], "ArrayList", "long"),
        ([1.5, 2.5], "Array", "double"),
        ({"k": 2, "s": "x"}, "HashMap", None),
        ([], "ArrayList", "String"),
    ],
)
def test_java_source_round_trips(value: Any, kind: str, item: str | None) -> None:
    assert java_value(java_source(value, kind, item), kind, item) == value


@pytest.mark.parametrize(
    ("value", "kind", "item"),
    [
        (9007199254740993, "Bigint", None),
        (0.00001, "float", None),
        ("'quoted'", "String", None),
        (["a", "b"], "array", "String"),
        ([1.5, 2.0], "array", "float"),
        ({"k": 1, "m": "x"}, "dict", None),
    ],
)
def test_js_source_round_trips(value: Any, kind: str, item: str | None) -> None:
    assert js_value(js_source(value, kind, item), kind, item) == value
