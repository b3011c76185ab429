"""Decoding a model's reply into function calls, and writing calls back as text.

A reply is read the way the BFCL leaderboard reads a prompting model's text
(``default_decode_ast_prompting`` in bfcl-eval), or as JSON tool calls, the form a
function-calling model's tool calls take:

- **BFCL's call syntax** (the default path). The reply is stripped of backticks, newlines
  and spaces at both ends and wrapped in ``[...]`` unless it already starts with ``[`` /
  ends with ``]``. In the Python categories the result is parsed with :mod:`ast`: it must
  be a list of calls, and only keyword arguments are read (**positional arguments are
  dropped**); dotted names are kept. In the Java and JavaScript categories the outer
  brackets are cut off and the rest is read by the language's tree-sitter grammar
  (:mod:`agentenvs.envs.bfcl.source_calls`): argument values are source text
  (``pageNo=3`` gives ``"3"``).
- **JSON tool calls**, tried first when the reply starts with ``{`` or ``[{`` (which BFCL's
  call syntax never decodes): ``[{"name": ..., "arguments": {...}}]`` (the arguments may
  be a JSON string), ``{"tool_calls": [{"function": {...}}]}``, a single ``{"name",
  "arguments"}`` object, or BFCL's own ``[{"f": {"a": 1}}]``; also ``<tool_call>...
  </tool_call>`` tags holding such objects.

Values in the Python syntax follow the official decoder: literals as they are (``...``
reads ``"..."``); lists, dicts and tuples (tuples stay tuples); a unary operator on a
literal reads as the literal negated (so ``+5`` reads ``-5``, as officially); a bare name
reads as its identifier (``unit=celsius`` gives ``"celsius"``); a nested call without
keyword arguments, and a subscript, read as their source text, a nested call with
keyword arguments as ``{name: {args}}``; ``**x`` is kept under the name ``None``; a
binary operation is evaluated (here without ``eval``: literal operands only, with size
limits). Anything else (attributes, sets, lambdas, comprehensions, f-strings) is a
:class:`DecodeError`, as it is a decoding failure officially. A leading
``<think>...</think>`` block is removed first (BFCL's handlers for reasoning models pass
only the answer to the decoder).

An empty reply, ``[]`` and an empty tool-call list decode to ``[]`` (no call). Every
failure, whatever the input (numbers of thousands of digits, thousands of nested
brackets, lone surrogates), is a :class:`DecodeError`, never another exception. Nothing
in a reply is run, and what a reply can make the decoder build is bounded: each evaluated
operation at most ``_MAX_LEN`` items (or ``_MAX_BITS`` bits), all of a reply's operations
together at most ``MAX_BUILT`` items, and the decoded values at most ``MAX_ITEMS`` items
counted as the checker walks them (a list repeated inside a list counts each time), so
``[[0]*100000]*100000`` or ``'%*d' % (2**31, 1)`` is refused at once.
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentenvs.envs.bfcl.fast_syntax import plain_calls

__all__ = [
    "Call",
    "DecodeError",
    "decode_calls",
    "format_calls",
    "format_calls_json",
    "format_calls_source",
    "is_python_formattable",
    "prompting_text",
    "surely_not_calls",
]

#: the languages of BFCL's categories, which decide how call syntax is read
LANGUAGES = ("python", "java", "javascript")
#: values nested deeper than this are refused (checkers and renderers recurse over them)
MAX_DEPTH = 100
#: the most items (scalars, lists, dicts, each counted where it occurs) a decoded reply
#: may hold; an aliased list counts once per place it occurs, as checkers walk it
MAX_ITEMS = 200_000
#: the most items (characters, elements) all the evaluated operations of one reply may build
MAX_BUILT = 200_000


class DecodeError(ValueError):
    """The reply is not a list of function calls in a known format."""


@dataclass(frozen=True, slots=True)
class Call:
    """One function call: the (possibly dotted) name, keyword and positional arguments.

    ``positional`` is empty for decoded replies (BFCL drops the positional arguments of a
    model's calls); the multi-turn ground truth keeps them, as BFCL runs it as written.
    """

    name: str
    args: dict[Any, Any] = field(default_factory=dict)
    positional: tuple[Any, ...] = ()

    def __iter__(self) -> Iterator[Any]:
        # lets callers unpack ``name, args = call`` like the (name, kwargs) pair it models
        yield self.name
        yield self.args

    def to_official(self) -> dict[str, dict[str, Any]]:
        """The official decoder's shape for one call: ``{name: {param: value}}``."""
        return {self.name: dict(self.args)}


# ------------------------------------------------------------------------- unwrapping
_THINK = re.compile(r"^\s*<think>.*?</think>", re.S)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_JSON_START = re.compile(r"^\s*(?:\{|\[\s*\{)")


def prompting_text(text: str) -> str:
    """The text BFCL's prompting decoder parses: trimmed of backticks, newlines and spaces
    at both ends, and wrapped in ``[...]`` where it does not already start/end so."""
    text = text.strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    return text


#: ``[`` then two names side by side (``[None of these...``, ``[The function...``): no
#: Python expression holds a name or ``None``/``True``/``False`` followed by another
#: name that is not a keyword (those that may follow one, ``if``, ``in``, ``is``...)
_TWO_NAMES = re.compile(r"\[[ \t\n]*([A-Za-z_][A-Za-z0-9_]*)[ \t\n]+([A-Za-z_][A-Za-z0-9_]*)")
_KEYWORDS = frozenset(keyword.kwlist)
_CONSTANT_NAMES = frozenset({"None", "True", "False"})


def surely_not_calls(text: str, language: str = "python") -> bool:
    """True when :func:`decode_calls` (``allow_json`` as by default) surely raises for
    ``text``, told without parsing it: Python call syntax that starts as prose does
    (``None of these functions...``), with no JSON, tag or think block to read first.
    False says only "not surely": it may decode or not. A grader that needs no message
    for a failure (relevance categories) may skip the parse then."""
    if not isinstance(text, str) or language != "python" or "<" in text:
        return False
    if _JSON_START.match(text):
        return False
    found = _TWO_NAMES.match(prompting_text(text))
    if found is None:
        return False
    first, second = found.groups()
    return (first not in _KEYWORDS or first in _CONSTANT_NAMES) and second not in _KEYWORDS


def decode_calls(
    text: str, *, allow_json: bool = True, language: str = "python", strict: bool = False
) -> list[Call]:
    """Decode a reply into calls (``[]`` when it holds none); raise :class:`DecodeError`.

    ``language`` (``python``, ``java``, ``javascript``) is the category's: it decides how
    BFCL's call syntax is read. ``allow_json=False`` refuses JSON tool calls.
    ``strict`` refuses a parameter given twice in one call (officially the last one
    counts, in Python syntax and in JSON arguments alike).
    """
    if not isinstance(text, str):
        raise DecodeError(f"expected text, got {type(text).__name__}")
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}; use one of {LANGUAGES}")
    try:
        calls = _decode(text, allow_json, language, strict)
        _check_size(calls)
        return calls
    except (DecodeError, ImportError):  # ImportError: the grammars' extra is missing
        raise
    except (Exception, MemoryError) as exc:  # any input must end as a DecodeError
        raise DecodeError(
            f"could not read the reply ({type(exc).__name__}: {exc!s:.200})"
        ) from None


def _decode(text: str, allow_json: bool, language: str, strict: bool = False) -> list[Call]:
    if "<think>" in text:
        text = _THINK.sub("", text, count=1)
    tags = _TOOL_CALL.findall(text) if "<tool_call>" in text else None
    if tags:
        if not allow_json:
            raise DecodeError("<tool_call> tags hold JSON tool calls, which are not accepted here")
        calls: list[Call] = []
        for body in tags:
            calls.extend(_decode_json(body.strip(), strict))
        return calls
    if allow_json and _JSON_START.match(text):
        try:
            return _decode_json(text.strip(), strict)
        except DecodeError as json_error:
            # ``[{...}]`` is also Python; only BFCL's call syntax could still read it
            try:
                return _decode_syntax(text, language, strict)
            except DecodeError:
                raise json_error from None
    return _decode_syntax(text, language, strict)


#: values that hold no others (``_check_size`` counts them without walking them)
_LEAVES = frozenset({str, int, float, bool, type(None)})


def _check_size(calls: Sequence[Call]) -> None:
    """Refuse values nested deeper than ``MAX_DEPTH`` or holding more than ``MAX_ITEMS``."""
    items = 0
    for call in calls:
        if _LEAVES.issuperset(map(type, call.args.values())):  # the usual case: scalars
            items += 1 + len(call.args)
            if items > MAX_ITEMS:
                raise DecodeError(f"{call.name}: the values hold more than {MAX_ITEMS} items")
            continue
        stack: list[tuple[Any, int]] = [(call.args, 0)]
        while stack:
            value, depth = stack.pop()
            items += 1
            if items > MAX_ITEMS:
                raise DecodeError(f"{call.name}: the values hold more than {MAX_ITEMS} items")
            if depth > MAX_DEPTH:
                raise DecodeError(f"{call.name}: values nested more than {MAX_DEPTH} levels deep")
            if isinstance(value, dict):
                stack.extend((v, depth + 1) for v in value.values())
            elif isinstance(value, list | tuple | set | frozenset):
                stack.extend((v, depth + 1) for v in value)


def _decode_syntax(text: str, language: str, strict: bool = False) -> list[Call]:
    source = prompting_text(text)
    if language == "python":
        return _decode_python(source, strict)
    from agentenvs.envs.bfcl import source_calls

    decoder = source_calls.decode_java if language == "java" else source_calls.decode_javascript
    try:
        found = decoder(source[1:-1])
    except source_calls.SourceDecodeError as exc:
        raise DecodeError(f"{exc}; expected [func(param=value, ...)]") from None
    if found is source_calls.NOT_A_CALL_LIST:
        raise DecodeError("no function call found; expected [func(param=value, ...)]")
    return [Call(name, args) for name, args in found]


# ------------------------------------------------------------------------- Python syntax
_SEQUENCE_NODES = (ast.List, ast.Tuple, ast.Set)


def _decode_python(text: str, strict: bool = False) -> list[Call]:
    source = text.strip().strip("'")
    # the plain form (keyword arguments, literal values) without a compile; anything
    # else, and every error, through ``ast`` below
    plain = plain_calls(source)
    if plain is not None:
        return [Call(name, args) for name, args in plain]
    return _decode_python_ast(source, strict)


def _decode_python_ast(source: str, strict: bool = False) -> list[Call]:
    """``source`` read with :func:`ast.parse`, as the official decoder reads it."""
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise DecodeError(
            f"not valid function-call syntax ({exc.msg}, line {exc.lineno}, column "
            f"{exc.offset}); expected [func(param=value, ...), ...]"
        ) from None
    body = tree.body
    built = _Built(strict)
    if isinstance(body, ast.Call):
        return [_resolve_call(body, built)]
    if isinstance(body, _SEQUENCE_NODES):
        calls = []
        for i, elt in enumerate(body.elts):
            if not isinstance(elt, ast.Call):
                raise DecodeError(
                    f"item {i} of the list is not a function call (found {_describe(elt)}); "
                    "expected [func(param=value, ...), ...]"
                )
            calls.append(_resolve_call(elt, built))
        return calls
    raise DecodeError(
        f"expected a function call or a list of calls, found {_describe(body)}; "
        "write [func(param=value, ...), ...]"
    )


def _describe(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - only for the message
        text = type(node).__name__
    return repr(text[:60])


def _call_name(func: ast.expr) -> str:
    # the official decoder joins the attribute chain down to a plain name, skipping
    # whatever else stands at its base (``a[0].f`` reads ``f``)
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _resolve_call(node: ast.Call, built: _Built) -> Call:
    name = _call_name(node.func)
    args: dict[Any, Any] = {}
    # positional arguments are dropped, as the official decoder does
    for kw in node.keywords:
        if built.strict and kw.arg in args:
            raise DecodeError(f"{name}: parameter {kw.arg!r} is given more than once")
        args[kw.arg] = _resolve_value(kw.value, f"{name}({kw.arg}=...)", built)
    return Call(name, args)


def _resolve_value(node: ast.expr, where: str, built: _Built) -> Any:
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        # the official decoder negates the operand's literal, whatever the operator
        operand = node.operand
        if not isinstance(operand, ast.Constant):
            raise DecodeError(f"{where}: unsupported value {_describe(node)}")
        try:
            return -operand.value
        except TypeError:
            raise DecodeError(f"{where}: cannot negate {_describe(operand)}") from None
    if isinstance(node, ast.List):
        return [_resolve_value(v, where, built) for v in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise DecodeError(f"{where}: '**' inside a dict is not supported")
            key = _resolve_value(k, where, built)
            try:
                out[key] = _resolve_value(v, where, built)
            except TypeError:
                raise DecodeError(f"{where}: unhashable dict key {_describe(k)}") from None
        return out
    if isinstance(node, ast.BinOp):
        return _evaluate(node, where, built)
    if isinstance(node, ast.Name):
        # the official decoder reads a bare name as its identifier (a "variable")
        return node.id
    if isinstance(node, ast.Call):
        if not node.keywords:
            return ast.unparse(node)
        return _resolve_call(node, built).to_official()
    if isinstance(node, ast.Tuple):
        return tuple(_resolve_value(v, where, built) for v in node.elts)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise DecodeError(
        f"{where}: unsupported value {_describe(node)}; use literals (strings, numbers, "
        "booleans, lists, dicts, tuples)"
    )


# ------------------------------------------------------------------------- binary operations
_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
    ast.Invert: operator.invert,
}
_SCALAR = (str, int, float, bool, type(None))
#: the largest sequence (items) or integer (bits) an evaluated operation may build
_MAX_LEN = 100_000
_MAX_BITS = 10_000
#: a printf-style conversion's width and precision (``%(key)-08.3f``: ``8``, ``3``)
_PRINTF_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\d*|\*)(?:\.(\d*|\*))?")


class _Built:
    """How many items the evaluated operations of one reply have built so far (and
    whether the reply is read under strict rules)."""

    __slots__ = ("items", "strict")

    def __init__(self, strict: bool = False) -> None:
        self.items = 0
        self.strict = strict

    def add(self, value: Any, node: ast.AST, where: str) -> None:
        if isinstance(value, str | list | tuple | bytes | set | dict):
            self.items += len(value)
        elif isinstance(value, int):
            self.items += value.bit_length() // 64
        if self.items > MAX_BUILT:
            raise DecodeError(
                f"{where}: {_describe(node)} takes the reply's operations past {MAX_BUILT} "
                "items built"
            )


def _evaluate(node: ast.expr, where: str, built: _Built) -> Any:
    """What ``eval`` gives for a literal expression (the official decoder evals binary
    operations), computed without ``eval``; names and calls are refused."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [_evaluate(v, where, built) for v in node.elts]
        if isinstance(node, ast.List):
            return items
        return tuple(items) if isinstance(node, ast.Tuple) else set(items)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {
            _evaluate(k, where, built): _evaluate(v, where, built)  # type: ignore[arg-type]
            for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.UnaryOp):
        value = _UNARY[type(node.op)](_evaluate(node.operand, where, built))
        return _bounded(value, node, where, built)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left = _evaluate(node.left, where, built)
        right = _evaluate(node.right, where, built)
        _precheck(node.op, left, right, node, where)
        return _bounded(_BINOPS[type(node.op)](left, right), node, where, built)
    raise DecodeError(f"{where}: cannot evaluate {_describe(node)} (literal operands only)")


def _precheck(op: ast.operator, left: Any, right: Any, node: ast.AST, where: str) -> None:
    """Refuse operations whose result would be too large to build."""
    too_big = DecodeError(f"{where}: the result of {_describe(node)} is too large")
    ints = isinstance(left, int) and isinstance(right, int)
    if isinstance(op, ast.Pow) and ints and right > 0 and abs(left) > 1:
        if right * abs(left).bit_length() > _MAX_BITS:
            raise too_big
    if isinstance(op, ast.LShift) and ints and right > _MAX_BITS:
        raise too_big
    if isinstance(op, ast.Mod) and isinstance(left, str | bytes):
        # printf-style formatting: a width or precision (written, or given for ``*``)
        # beyond the item limit would build a string that large before any check
        text = left.decode("latin-1") if isinstance(left, bytes) else left
        sizes = (d for spec in _PRINTF_SPEC.findall(text) for d in spec if d.isdigit())
        if any(len(d) > 6 or int(d) > _MAX_LEN for d in sizes):
            raise too_big
        numbers = right if isinstance(right, tuple) else (right,)
        if "*" in text and any(isinstance(n, int) and abs(n) > _MAX_LEN for n in numbers):
            raise too_big
    if isinstance(op, ast.Mult):
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple | bytes) and isinstance(times, int):
                if times * len(seq) > _MAX_LEN:
                    raise too_big


def _bounded(value: Any, node: ast.AST, where: str, built: _Built) -> Any:
    too_big = isinstance(value, int) and value.bit_length() > _MAX_BITS
    if too_big or (isinstance(value, str | list | tuple | bytes) and len(value) > _MAX_LEN):
        raise DecodeError(f"{where}: the result of {_describe(node)} is too large")
    built.add(value, node, where)
    return value


# ------------------------------------------------------------------------- JSON tool calls
_ARG_KEYS = ("arguments", "parameters", "args")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DecodeError(f"key {key!r} is given more than once in a JSON object")
        out[key] = value
    return out


def _decode_json(text: str, strict: bool = False) -> list[Call]:
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys if strict else None)
    except DecodeError:
        raise
    except (ValueError, RecursionError) as exc:  # a JSONDecodeError is a ValueError
        try:
            # single-quoted "JSON" written as Python literals
            data = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise DecodeError(f"invalid JSON tool calls: {exc!s:.200}") from None
    if isinstance(data, dict) and "tool_calls" in data:
        data = data["tool_calls"]
        if data is None:
            return []
    items = data if isinstance(data, list) else [data]
    return [_json_call(item, i, strict) for i, item in enumerate(items)]


def _json_call(item: Any, index: int, strict: bool = False) -> Call:
    where = f"tool call {index}"
    if not isinstance(item, dict):
        raise DecodeError(f"{where} is not an object: {str(item)[:60]!r}")
    if isinstance(item.get("function"), dict):
        item = item["function"]
    name = item.get("name")
    if isinstance(name, str):
        raw = next((item[k] for k in _ARG_KEYS if k in item), {})
    elif len(item) == 1:
        # BFCL's own shape: {"func": {"param": value}}
        ((name, raw),) = item.items()
    else:
        raise DecodeError(f"{where} has no 'name' (keys: {sorted(map(str, item))})")
    if not isinstance(name, str) or not name:
        raise DecodeError(f"{where}: the function name must be a non-empty string")
    if isinstance(raw, str):
        try:
            hook = _unique_keys if strict else None
            raw = json.loads(raw, object_pairs_hook=hook) if raw.strip() else {}
        except (ValueError, RecursionError) as exc:
            raise DecodeError(f"{where} ({name}): arguments are not valid JSON: {exc}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise DecodeError(f"{where} ({name}): arguments must be an object")
    return Call(name, {str(k): v for k, v in raw.items()})


# ------------------------------------------------------------------------- formatting
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _literal_ok(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, _SCALAR):
        return True
    if isinstance(value, list | tuple):
        return all(_literal_ok(v) for v in value)
    if isinstance(value, dict):
        return all(_literal_ok(k) and _literal_ok(v) for k, v in value.items())
    return False


def is_python_formattable(calls: Iterable[Call]) -> bool:
    """Whether ``format_calls`` output decodes back to the same calls.

    Not so when a name or parameter is not a Python identifier (``from``, ``$top``) or
    a value is not a plain literal (``inf``, a set).
    """
    for call in calls:
        name, args = call
        if not _NAME.match(name) or any(keyword.iskeyword(p) for p in name.split(".")):
            return False
        if not all(_identifier(p) and _literal_ok(v) for p, v in args.items()):
            return False
    return True


def format_calls(calls: Iterable[Call | tuple[str, dict[str, Any]]]) -> str:
    """Calls in the official Python-call list syntax: ``[f(a=1), g(b='x')]``."""
    parts = []
    for call in calls:
        name, args = call
        items = [repr(value) for value in getattr(call, "positional", ())]
        items += [f"{param}={value!r}" for param, value in args.items()]
        parts.append(f"{name}({', '.join(items)})")
    return "[" + ", ".join(parts) + "]"


def _source_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    if not any(ch in text for ch in '"\\\n\r'):
        return f'"{text}"'
    if not any(ch in text for ch in "'\\\n\r"):
        return f"'{text}'"
    return text  # written as source itself (a call, an object creation, ...)


def format_calls_source(calls: Iterable[Call | tuple[str, dict[str, Any]]]) -> str:
    """Java/JavaScript calls whose values are source text, as BFCL's decoders read them
    back: ``[f(a="3000412L", b=new ArrayList<>(Arrays.asList("x")))]``."""
    parts = []
    for call in calls:
        name, args = call
        inner = ", ".join(f"{param}={_source_value(value)}" for param, value in args.items())
        parts.append(f"{name}({inner})")
    return "[" + ", ".join(parts) + "]"


def format_calls_json(calls: Iterable[Call | tuple[str, dict[str, Any]]]) -> str:
    """Calls as an OpenAI-style JSON list: ``[{"name": ..., "arguments": {...}}]``."""
    out = []
    for call in calls:
        name, args = call
        out.append({"name": name, "arguments": args})
    return json.dumps(out, ensure_ascii=False)
