"""Java and JavaScript replies read as BFCL reads them: tree-sitter grammars, values as source.

BFCL's Java and JavaScript categories expect a reply such as ``[getPage(pageNo=3)]`` in
which every argument value is *source text* of the target language; the official pipeline
strips the outer brackets, parses the rest with the tree-sitter grammar of the language
(``tree-sitter-java`` / ``tree-sitter-javascript``, the same packages are used here) and
takes the first call it finds. The rules, as they decide verdicts:

- A parse tree holding an ``ERROR`` node is a decoding failure (a node the parser only
  inserted, such as a missing ``;``, is not).
- Java: the first method invocation of the tree, depth first, is the call; its name is
  ``object.name`` when it has an object. An argument ``name=value`` reads ``value`` as:
  a string or character literal without its quotes; an identifier, class literal, type
  or method invocation as its text; ``new T[]{...}`` and ``new T(args)`` rebuilt from
  their parts (arguments joined by ``", "``, an anonymous class body left out); anything
  else as the concatenated texts of its parts, without the whitespace between them
  (``1 + 2`` reads ``"1+2"``). A bare identifier or class literal argument is kept under
  the name ``None``; other positional arguments are dropped. Node texts are cut from the
  reply by byte offsets, as the official code does (so after a non-ASCII character the
  cuts shift, exactly as there). No call at all reads as ``{}``, which is not a call list.
- JavaScript: the first call expression that is a whole statement of the program is the
  call. An argument ``name=value`` reads ``value`` as its source text, without the
  quotes when it is one quoted string; a bare identifier or ``true`` is kept under the
  name ``None``. No call reads as nothing (not a call list).
- A name given twice is a decoding failure in both languages.

The grammars are loaded on first use (``import agentenvs`` stays light); a missing
package raises :class:`agentenvs.core.errors.MissingExtraError` naming the ``bfcl`` extra.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

__all__ = ["NOT_A_CALL_LIST", "SourceDecodeError", "decode_java", "decode_javascript"]

#: what the official decoders give when the reply holds no call (``{}`` / ``None``)
NOT_A_CALL_LIST = object()


class SourceDecodeError(ValueError):
    """The reply does not parse as Java/JavaScript calls the way BFCL reads them."""


@functools.lru_cache(maxsize=2)
def _parser(language: str) -> Any:
    from agentenvs.core.errors import MissingExtraError

    module_name = "tree_sitter_java" if language == "java" else "tree_sitter_javascript"
    try:
        tree_sitter = importlib.import_module("tree_sitter")
        grammar = importlib.import_module(module_name)
    except ImportError:
        raise MissingExtraError(f"tree-sitter and {module_name}", "bfcl") from None
    pointer = grammar.language()
    try:  # tree-sitter 0.21 (the version bfcl-eval pins) takes the name too
        lang = tree_sitter.Language(pointer, language)
    except TypeError:
        lang = tree_sitter.Language(pointer)
    try:
        parser = tree_sitter.Parser()
        parser.set_language(lang)
    except (AttributeError, TypeError):
        parser = tree_sitter.Parser(lang)
    return parser


def _has_error_node(root: Any) -> bool:
    """Whether the tree holds an ERROR node (what ``"ERROR" in sexp`` finds officially)."""
    if not root.has_error:  # neither an ERROR nor a MISSING node anywhere: no walk
        return False
    cursor = root.walk()
    while True:
        if cursor.node.type == "ERROR":
            return True
        if cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return False


def _parse(language: str, text: str) -> Any:
    try:
        source = text.encode("utf8")
    except UnicodeEncodeError:
        raise SourceDecodeError("the reply holds characters that are not valid UTF-8") from None
    tree = _parser(language).parse(source)
    if _has_error_node(tree.root_node):
        name = "Java" if language == "java" else "JavaScript"
        raise SourceDecodeError(f"the reply is not valid {name} call syntax")
    return tree


def _add_argument(arguments: dict[Any, Any], name: Any, value: Any) -> None:
    if name in arguments:
        raise SourceDecodeError(f"the argument {name!r} is given more than once")
    arguments[name] = value


# ----------------------------------------------------------------------------- Java
def decode_java(text: str) -> Any:
    """``[(name, args)]`` for the first Java call in ``text``, or :data:`NOT_A_CALL_LIST`."""
    tree = _parse("java", text)

    def cut(node: Any) -> str:
        # byte offsets used on the text, as the official decoder does
        return text[node.start_byte : node.end_byte]

    def value_of(node: Any, nested: bool = False) -> str:
        kind = node.type
        if kind in ("string_literal", "character_literal"):
            return cut(node) if nested else cut(node)[1:-1]
        if kind in ("identifier", "class_literal", "type_identifier", "method_invocation"):
            return cut(node)
        if kind == "array_creation_expression":
            of_type = node.child_by_field_name("type")
            items = node.child_by_field_name("value")
            if of_type is None or items is None:
                raise SourceDecodeError(f"cannot read the array creation {cut(node)!r}")
            return f"new {value_of(of_type, True)}[]{value_of(items, True)}"
        if kind == "object_creation_expression":
            of_type = node.child_by_field_name("type")
            if of_type is None:
                raise SourceDecodeError(f"cannot read the object creation {cut(node)!r}")
            type_text = value_of(of_type, True)
            args_node = node.child_by_field_name("arguments")
            if not args_node:
                return f"new {type_text}()"
            parts = [
                value_of(child, True)
                for child in args_node.children
                if child.type not in (",", "(", ")")
            ]
            return f"new {type_text}({', '.join(parts)})"
        if kind == "set":
            parts = [value_of(c, True) for c in node.children if c.type not in (",", "set")]
            return "{" + ", ".join(parts) + "}"
        if node.child_count > 0:
            return "".join(value_of(child, True) for child in node.children)
        return cut(node)

    def arguments_of(args_node: Any) -> dict[Any, Any]:
        arguments: dict[Any, Any] = {}
        for child in args_node.children:
            if child.type == "assignment_expression":
                parts = child.children
                _add_argument(arguments, cut(parts[0]), value_of(parts[2]))
            elif child.type in ("identifier", "class_literal", "set"):
                _add_argument(arguments, None, value_of(child))
        return arguments

    def first_call(node: Any) -> Any:
        if node.type == "method_invocation":
            name_node = node.child_by_field_name("name")
            if name_node is None:
                raise SourceDecodeError("a method invocation without a name")
            name = cut(name_node)
            owner = node.child_by_field_name("object")
            if owner:
                name = f"{cut(owner)}.{name}"
            args_node = node.child_by_field_name("arguments")
            if args_node:
                return [(name, arguments_of(args_node))]
            return None
        for child in node.children:
            found = first_call(child)
            if found:
                return found
        return None

    try:
        found = first_call(tree.root_node)
    except RecursionError:
        raise SourceDecodeError("the reply is nested too deeply") from None
    return found if found else NOT_A_CALL_LIST


# ----------------------------------------------------------------------------- JavaScript
def _js_text(node: Any) -> str:
    return node.text.decode("utf8")


def decode_javascript(text: str) -> Any:
    """``[(name, args)]`` for the first JavaScript call statement, or :data:`NOT_A_CALL_LIST`."""
    root = _parse("javascript", text).root_node
    if root.type != "program":
        return NOT_A_CALL_LIST
    for statement in root.children:
        if statement.type != "expression_statement":
            continue
        for expression in statement.children:
            if expression.type != "call_expression":
                continue
            parts = expression.children
            if len(parts) < 2:
                raise SourceDecodeError("a call without an argument list")
            arguments: dict[Any, Any] = {}
            for child in parts[1].children:
                if child.type == "assignment_expression":
                    pieces = child.children
                    value = _js_text(pieces[2])
                    if value and value[0] == value[-1] and value[0] in "\"'":
                        value = value[1:-1]
                    _add_argument(arguments, _js_text(pieces[0]), value)
                elif child.type in ("identifier", "true"):
                    _add_argument(arguments, None, _js_text(child))
            return [(_js_text(parts[0]), arguments)]
    return NOT_A_CALL_LIST
