"""A fast reader for the plain form of BFCL's Python call syntax, with ``ast`` as its judge.

Most replies are a list of calls with keyword arguments whose values are plain literals:
``[get_weather(city="Paris", days=3, units=["C"])]``. Parsing those with :func:`ast.parse`
(a compile of the text, then a walk over the tree) is most of the cost of grading a reply.
:func:`plain_calls` reads exactly that plain form with one token pattern, and gives up
(returns ``None``) at the first thing outside it, so that the caller decodes the text with
``ast`` as before: everything it does accept, ``ast`` would parse to the same calls, and
the decoder (:func:`agentenvs.envs.bfcl.decode._resolve_call`) would read the same values.

The plain form, with spaces, tabs and newlines between tokens:

- ``[`` calls separated by ``,`` ``]`` (a trailing comma allowed, ``[]`` too); a call is a
  dotted name of ASCII identifiers, ``(``, keyword arguments ``name=value`` separated by
  ``,``, ``)``; no positional argument, no parameter given twice;
- values: strings in single or double quotes without a backslash, a line break, a
  control character but tab, or a lone surrogate inside; decimal numbers (``0``, ``12``,
  ``-3``, ``1.5``, ``2e-3``, at most 40 characters, no leading zero, no ``_``);
  ``True``, ``False``, ``None``; bare names (read as their identifier, as officially);
  lists, dicts with hashable keys and parenthesized tuples of these, nested at most 32
  levels deep.

Anything else (escapes, prefixed or concatenated strings, ``+5``, arithmetic, nested calls,
subscripts, comments, sets, ``...``) is left to ``ast``, with its values and messages.
"""

from __future__ import annotations

import keyword
import re
from typing import Any

__all__ = ["plain_calls"]

_STRING = (
    r"\"[^\"\\\x00-\x08\n-\x1f\x7f\ud800-\udfff]*\"|'[^'\\\x00-\x08\n-\x1f\x7f\ud800-\udfff]*'"
)
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
#: every token of the text, in order: punctuation, a name, a string, a number (the
#: commonest first: no two of these can start with the same character), or any other one
#: character (which leaves the plain form); the kind is told by the first character,
#: since a quote, a digit, ``-`` or a letter starts a longer token whenever one can be
#: read there
_TOKENS = re.compile(rf"[ \t\n]*([\[\](){{}},:=.]|{_IDENTIFIER}|{_STRING}|{_NUMBER}|.)", re.DOTALL)
_IDENTIFIER_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NUMBER_START = frozenset("-0123456789")
_QUOTES = frozenset("\"'")
#: names that are not a plain identifier in an expression (``True`` and the like are
#: constants, read apart)
_RESERVED = frozenset(keyword.kwlist) | {"__debug__"}
_CONSTANTS = {"True": True, "False": False, "None": None}
_MAX_NUMBER = 40
_MAX_DEPTH = 32


class _NotPlain(Exception):
    """The text leaves the plain form: ``ast`` decides."""


_NOT_PLAIN = _NotPlain()


def plain_calls(text: str) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls of ``text`` (BFCL's prompting text, ``[`` ... ``]``) as ``(name, args)``
    pairs when it is in the plain form, exactly as the ``ast`` decoder reads them;
    ``None`` when it is not."""
    tokens = _TOKENS.findall(text)
    try:
        if tokens[0] != "[":
            return None
        calls: list[tuple[str, dict[str, Any]]] = []
        i = 1
        if tokens[1] == "]":
            i = 2
        else:
            while True:
                i = _call(tokens, i, calls)
                sep = tokens[i]
                i += 1
                if sep == "]":
                    break
                if sep != ",":
                    return None
                if tokens[i] == "]":  # a trailing comma
                    i += 1
                    break
    except (_NotPlain, IndexError):  # IndexError: the tokens ran out
        return None
    return calls if i == len(tokens) else None


def _name(token: str) -> str:
    if token[0] not in _IDENTIFIER_START or token in _RESERVED:
        raise _NOT_PLAIN
    return token


def _call(tokens: list[str], i: int, calls: list[tuple[str, dict[str, Any]]]) -> int:
    """Read the call at ``tokens[i]`` into ``calls``; the index after it."""
    name = _name(tokens[i])
    i += 1
    while tokens[i] == ".":
        name += "." + _name(tokens[i + 1])
        i += 2
    if tokens[i] != "(":
        raise _NOT_PLAIN
    i += 1
    args: dict[str, Any] = {}
    calls.append((name, args))
    if tokens[i] == ")":
        return i + 1
    while True:
        param = _name(tokens[i])
        if param in args or tokens[i + 1] != "=":
            raise _NOT_PLAIN
        args[param], i = _value(tokens, i + 2, 0)
        sep = tokens[i]
        i += 1
        if sep == ")":
            return i
        if sep != ",":
            raise _NOT_PLAIN
        if tokens[i] == ")":
            return i + 1


def _value(tokens: list[str], i: int, depth: int) -> tuple[Any, int]:
    """The value at ``tokens[i]`` and the index after it."""
    token = tokens[i]
    first = token[0]
    if first in _QUOTES:
        if len(token) < 2:  # a lone quote: a string the plain form does not read
            raise _NOT_PLAIN
        return token[1:-1], i + 1
    if first in _NUMBER_START:
        if token == "-" or len(token) > _MAX_NUMBER:
            raise _NOT_PLAIN
        if "." in token or "e" in token or "E" in token:
            return float(token), i + 1
        return int(token), i + 1
    if first in _IDENTIFIER_START:
        if token in _CONSTANTS:
            return _CONSTANTS[token], i + 1
        if token in _RESERVED:
            raise _NOT_PLAIN
        return token, i + 1
    if depth >= _MAX_DEPTH:
        raise _NOT_PLAIN
    if token == "[":
        items: list[Any] = []
        i = _items(tokens, i + 1, "]", depth, items)
        return items, i
    if token == "(":  # ``(x)`` is ``x``; ``()``, ``(x,)`` and ``(x, y)`` are tuples
        items = []
        end = _items(tokens, i + 1, ")", depth, items)
        if len(items) == 1 and tokens[end - 2] != ",":
            return items[0], end
        return tuple(items), end
    if token == "{":
        return _dict(tokens, i + 1, depth)
    raise _NOT_PLAIN


def _items(tokens: list[str], i: int, closing: str, depth: int, out: list[Any]) -> int:
    """Elements up to ``closing`` into ``out``; the index after ``closing``."""
    if tokens[i] == closing:
        return i + 1
    while True:
        value, i = _value(tokens, i, depth + 1)
        out.append(value)
        sep = tokens[i]
        i += 1
        if sep == closing:
            return i
        if sep != ",":
            raise _NOT_PLAIN
        if tokens[i] == closing:
            return i + 1


def _dict(tokens: list[str], i: int, depth: int) -> tuple[dict[Any, Any], int]:
    out: dict[Any, Any] = {}
    if tokens[i] == "}":
        return out, i + 1
    while True:
        key, i = _value(tokens, i, depth + 1)
        if tokens[i] != ":":
            raise _NOT_PLAIN
        value, i = _value(tokens, i + 1, depth + 1)
        try:
            out[key] = value
        except TypeError:  # an unhashable key: ``ast``'s decoder says why
            raise _NOT_PLAIN from None
        sep = tokens[i]
        i += 1
        if sep == "}":
            return out, i
        if sep != ",":
            raise _NOT_PLAIN
        if tokens[i] == "}":
            return out, i + 1
