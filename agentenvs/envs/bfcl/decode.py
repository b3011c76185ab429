"""Decoding a model's reply into function calls, and writing calls back as text.

Two reply formats decode to the same ``list[Call]``:

- BFCL's Python-call list syntax, ``[f(a=1), pkg.g(b="x")]`` (brackets optional for a
  single call), parsed with :mod:`ast` as the official decoder does: only keyword
  arguments are read and **positional arguments are dropped**; dotted names are kept.
- JSON tool calls in the OpenAI style: ``[{"name": ..., "arguments": {...}}]`` (the
  arguments may also be a JSON string), ``{"tool_calls": [{"function": {...}}]}``, a
  single ``{"name", "arguments"}`` object, or BFCL's own ``[{"f": {"a": 1}}]``.

Values in the Python syntax: literals (strings, numbers, booleans, ``None``), lists,
dicts, tuples (kept as tuples: the checker turns a tuple into a list only where the
doc says ``tuple``), negative numbers. Like the official decoder, a bare name reads as
its identifier (``unit=celsius`` gives ``"celsius"``), a nested call without keyword
arguments or a subscript reads as its source text, a nested call with keyword
arguments as ``{name: {args}}``, and ``...`` as ``"..."``. Arithmetic on number or
string literals (``2**10``, ``"a" + "b"``) is computed without ``eval``; anything
else (lambdas, comprehensions, f-strings, ``**kwargs``) is a :class:`DecodeError`.

Also accepted around either format: surrounding whitespace, one pair of wrapping single
quotes (as the official decoder strips), a leading ``<think>...</think>`` block, a reply
that is exactly one fenced code block, and ``<tool_call>...</tool_call>`` tags. An empty
reply, ``[]`` and an empty tool-call list decode to ``[]`` (no call).
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import operator
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Call",
    "DecodeError",
    "decode_calls",
    "format_calls",
    "format_calls_json",
    "is_python_formattable",
]


class DecodeError(ValueError):
    """The reply is not a list of function calls in a known format."""


@dataclass(frozen=True, slots=True)
class Call:
    """One function call: the function's (possibly dotted) name and its keyword arguments."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        # lets callers unpack ``name, args = call`` like the (name, kwargs) pair it models
        yield self.name
        yield self.args

    def to_official(self) -> dict[str, dict[str, Any]]:
        """The official decoder's shape for one call: ``{name: {param: value}}``."""
        return {self.name: dict(self.args)}


# ------------------------------------------------------------------------- unwrapping
_THINK = re.compile(r"^\s*<think>.*?</think>", re.S)
_FENCE = re.compile(r"^\s*```[ \t]*[A-Za-z0-9_+-]*[ \t]*\r?\n(.*?)\r?\n?```\s*$", re.S)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_JSON_START = re.compile(r"^\s*(?:\{|\[\s*\{)")


def _unwrap(text: str) -> tuple[str, list[str] | None]:
    """Strip wrappers; returns the core text, or the bodies of ``<tool_call>`` tags."""
    text = _THINK.sub("", text, count=1)
    tags = _TOOL_CALL.findall(text)
    if tags:
        return text, [t.strip() for t in tags]
    fence = _FENCE.match(text)
    if fence:
        text = fence.group(1)
    return text.strip(), None


def decode_calls(text: str, *, allow_json: bool = True) -> list[Call]:
    """Decode a reply into calls (``[]`` when it holds none); raise :class:`DecodeError`."""
    if not isinstance(text, str):
        raise DecodeError(f"expected text, got {type(text).__name__}")
    core, tags = _unwrap(text)
    if tags is not None:
        if not allow_json:
            raise DecodeError("<tool_call> tags hold JSON tool calls, which are not accepted here")
        calls: list[Call] = []
        for body in tags:
            calls.extend(_decode_json(body))
        return calls
    if not core:
        return []
    if allow_json and _JSON_START.match(core):
        try:
            return _decode_json(core)
        except DecodeError as json_error:
            # ``[{...}]`` is also a Python list; only a Python call list would rescue it
            try:
                return _decode_python(core)
            except DecodeError:
                raise json_error from None
    return _decode_python(core)


# ------------------------------------------------------------------------- Python syntax
def _decode_python(text: str) -> list[Call]:
    # the official decoder strips wrapping single quotes a model may add
    source = text.strip().strip("'")
    if not source:
        return []
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise DecodeError(
            f"not valid function-call syntax ({exc.msg}, line {exc.lineno}, column "
            f"{exc.offset}); expected [func(param=value, ...), ...]"
        ) from None
    except (ValueError, MemoryError, RecursionError) as exc:
        raise DecodeError(f"could not parse the reply: {exc}") from None
    body = tree.body
    if isinstance(body, ast.Call):
        return [_resolve_call(body)]
    # a set of calls, {f(a=1)}, is read like a list, as the official decoder does
    if isinstance(body, ast.List | ast.Tuple | ast.Set):
        calls = []
        for i, elt in enumerate(body.elts):
            if not isinstance(elt, ast.Call):
                raise DecodeError(
                    f"item {i} of the list is not a function call (found {_describe(elt)}); "
                    "expected [func(param=value, ...), ...]"
                )
            calls.append(_resolve_call(elt))
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
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        raise DecodeError(f"the called object {_describe(func)} is not a (dotted) function name")
    parts.append(func.id)
    return ".".join(reversed(parts))


def _resolve_call(node: ast.Call) -> Call:
    name = _call_name(node.func)
    args: dict[str, Any] = {}
    # positional arguments are dropped, as the official decoder does
    for kw in node.keywords:
        if kw.arg is None:
            raise DecodeError(f"{name}(**...) is not supported: name every argument")
        args[kw.arg] = _resolve_value(kw.value, f"{name}({kw.arg}=...)")
    return Call(name, args)


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_SCALAR = (str, int, float, bool, type(None))


def _resolve_value(node: ast.expr, where: str) -> Any:
    if isinstance(node, ast.Constant):
        value = node.value
        if value is Ellipsis:
            return "..."
        if isinstance(value, _SCALAR):
            return value
        raise DecodeError(f"{where}: unsupported literal {_describe(node)}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _resolve_value(node.operand, where)
        if isinstance(operand, bool) or not isinstance(operand, int | float):
            raise DecodeError(f"{where}: a sign needs a number, found {_describe(node)}")
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.List):
        return [_resolve_value(v, where) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_resolve_value(v, where) for v in node.elts)
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise DecodeError(f"{where}: '**' inside a dict is not supported")
            key = _resolve_value(k, where)
            try:
                out[key] = _resolve_value(v, where)
            except TypeError:
                raise DecodeError(f"{where}: unhashable dict key {_describe(k)}") from None
        return out
    if isinstance(node, ast.Name):
        # the official decoder reads a bare name as its identifier (a "variable")
        return node.id
    if isinstance(node, ast.Call):
        if node.keywords:
            return _resolve_call(node).to_official()
        return ast.unparse(node)
    if isinstance(node, ast.Subscript | ast.Attribute):
        return ast.unparse(node)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _arith(node, where)
    raise DecodeError(
        f"{where}: unsupported value {_describe(node)}; use literals (strings, numbers, "
        "booleans, lists, dicts, tuples)"
    )


def _arith(node: ast.BinOp, where: str) -> Any:
    left = _resolve_value(node.left, where)
    right = _resolve_value(node.right, where)
    numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (left, right))
    strings = isinstance(node.op, ast.Add) and all(isinstance(x, str) for x in (left, right))
    if not (numbers or strings):
        raise DecodeError(f"{where}: arithmetic on non-literals {_describe(node)}")
    if isinstance(node.op, ast.Pow) and (abs(right) > 1000 or abs(left) > 1e6):
        raise DecodeError(f"{where}: power too large in {_describe(node)}")
    try:
        result = _BINOPS[type(node.op)](left, right)
    except (ArithmeticError, ValueError) as exc:
        raise DecodeError(f"{where}: {exc} in {_describe(node)}") from None
    if isinstance(result, complex):
        raise DecodeError(f"{where}: complex result of {_describe(node)}")
    return result


# ------------------------------------------------------------------------- JSON tool calls
_ARG_KEYS = ("arguments", "parameters", "args")


def _decode_json(text: str) -> list[Call]:
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        try:
            # single-quoted "JSON" written as Python literals
            data = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise DecodeError(f"invalid JSON tool calls: {exc}") from None
    if isinstance(data, dict) and "tool_calls" in data:
        data = data["tool_calls"]
        if data is None:
            return []
    items = data if isinstance(data, list) else [data]
    return [_json_call(item, i) for i, item in enumerate(items)]


def _json_call(item: Any, index: int) -> Call:
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
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
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
        inner = ", ".join(f"{param}={value!r}" for param, value in args.items())
        parts.append(f"{name}({inner})")
    return "[" + ", ".join(parts) + "]"


def format_calls_json(calls: Iterable[Call | tuple[str, dict[str, Any]]]) -> str:
    """Calls as an OpenAI-style JSON list: ``[{"name": ..., "arguments": {...}}]``."""
    out = []
    for call in calls:
        name, args = call
        out.append({"name": name, "arguments": args})
    return json.dumps(out, ensure_ascii=False)
