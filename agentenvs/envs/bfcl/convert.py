"""Java and JavaScript argument values, from their source text to Python values.

In the Java and JavaScript categories BFCL expects every argument as a *string* of
source code (``"3.5f"``, ``"new ArrayList<>(Arrays.asList(1, 2))"``, ``"12n"``) and
converts it by the parameter's declared type before the usual checks. These
functions follow the official converters' behaviour, odd corners included:

- A value that does not match its type's pattern stays the original string, which
  then fails the type check (a Java float needs ``f``, a long ``L``, a JS Bigint ``n``;
  booleans are exactly ``true``/``false``).
- A Java ``char`` always stays as written: the official pattern for it cannot match.
- Elements of a Java ``Array`` of ``String`` keep their quotes (each element goes
  through the ``String`` conversion, which is the identity); elements of an
  ``ArrayList`` of ``String`` or ``char`` lose their first and last characters.
- JavaScript ``String`` values lose one pair of surrounding quotes if they have them;
  unquoted text stays as it is.
- Collections are split on commas with regular expressions, not parsed, so nested or
  comma-holding values come apart as the official converter takes them apart.
- Types the official converter leaves unimplemented (Java ``Set``, ``Hashtable``,
  ``Queue``, ``Stack``) raise there; here the value stays a string and fails its check.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

#: BFCL's Java type names and the Python type a converted value must have
JAVA_TYPES: dict[str, type] = {
    "byte": int,
    "short": int,
    "integer": int,
    "float": float,
    "double": float,
    "long": int,
    "boolean": bool,
    "char": str,
    "Array": list,
    "ArrayList": list,
    "Set": set,
    "HashMap": dict,
    "Hashtable": dict,
    "Queue": list,
    "Stack": list,
    "String": str,
    "any": str,
}

#: BFCL's JavaScript type names and the Python type a converted value must have
JS_TYPES: dict[str, type] = {
    "String": str,
    "integer": int,
    "float": float,
    "Bigint": int,
    "Boolean": bool,
    "dict": dict,
    "array": list,
    "any": str,
}

# Note: ``$`` (not ``\Z``) as the official patterns use, so a trailing newline passes
_INT = re.compile(r"^-?\d+$")
_JAVA_FLOAT = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$")
_JAVA_DOUBLE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_JAVA_LONG = re.compile(r"^-?\d+[lL]$")
_F_SUFFIX = re.compile(r"[fF]$")
_JS_FLOAT = re.compile(r"^-?\d+(\.\d+)?$")
_JS_BIGINT = re.compile(r"^-?\d+n$")

_AS_LIST = re.compile(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)")
_ADD_BLOCK = re.compile(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", re.S)
_ADD_ITEM = re.compile(r"add\((.+?)\)")
_EMPTY_LIST = re.compile(r"new\s+ArrayList<\w*>\(\)")
_ARRAY = re.compile(r"new\s+\w+\[\]\s*\{(.*?)\}")
_HASHMAP = re.compile(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", re.S)
_PUT = re.compile(r"put\(\"(.*?)\",\s*(.*?)\)")
_EMPTY_MAP = re.compile(r"new\s+HashMap<.*?>\s*\(\)")


class UnsupportedTypeError(ValueError):
    """A declared type that BFCL's converters do not know."""


# ------------------------------------------------------------------------- Java
def java_value(value: str, java_type: str, item_type: str | None = None) -> Any:
    """Convert Java source text ``value`` declared as ``java_type`` (or return it as is)."""
    if java_type not in JAVA_TYPES:
        raise UnsupportedTypeError(f"unknown Java type {java_type!r}")
    if java_type in ("byte", "short", "integer"):
        return int(value) if _INT.match(value) else value
    if java_type == "float":
        return _java_float(value) if _JAVA_FLOAT.match(value) else value
    if java_type == "double":
        return float(value) if _JAVA_DOUBLE.match(value) else value
    if java_type == "long":
        return int(value[:-1]) if _JAVA_LONG.match(value) else value
    if java_type == "boolean":
        return value == "true" if value in ("true", "false") else value
    if java_type == "ArrayList":
        return _java_arraylist(value, item_type)
    if java_type == "Array":
        return _java_array(value, item_type)
    if java_type == "HashMap":
        return _java_hashmap(value)
    # String, any, char (its official pattern never matches) and the unimplemented kinds
    return str(value)


def _java_item(text: str, item_type: str | None) -> Any:
    if item_type in ("char", "String"):
        return text[1:-1]  # drop the quotes
    return java_value(text, item_type) if item_type else java_literal(text)


def _java_arraylist(text: str, item_type: str | None) -> Any:
    found = _AS_LIST.search(text)
    if found:
        return [_java_item(part.strip(), item_type) for part in found.group(1).split(",")]
    found = _ADD_BLOCK.search(text)
    if found:
        return [_java_item(m.strip(), item_type) for m in _ADD_ITEM.findall(found.group(1))]
    if _EMPTY_LIST.search(text):
        return []
    return text


def _java_array(text: str, item_type: str | None) -> Any:
    found = _ARRAY.search(text)
    if not found:
        return text
    parts = [p.strip() for p in found.group(1).split(",") if p.strip()]
    if item_type:
        return [java_value(p, item_type) for p in parts]
    return [java_literal(p) for p in parts]


def _java_hashmap(text: str) -> Any:
    found = _HASHMAP.search(text)
    if found:
        body = found.group(1)
        if not body.strip():
            return {}
        return {key: java_literal(raw.strip()) for key, raw in _PUT.findall(body)}
    if _EMPTY_MAP.search(text):
        return {}
    return text


def java_literal(text: str) -> Any:
    """A Java literal of unknown type: boolean, quoted string, long, float, number, else text."""
    if text == "true":
        return True
    if text == "false":
        return False
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if _JAVA_LONG.match(text):
        return int(text[:-1])
    if _JAVA_FLOAT.match(text):
        return _java_float(text)
    return _number_or_text(text)


def _java_float(text: str) -> float:
    return float(_F_SUFFIX.sub("", text))


def _number_or_text(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


# ------------------------------------------------------------------------- JavaScript
_JS_2D = re.compile(
    r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)"
)
_JS_1D = re.compile(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)")
_JS_INNER = re.compile(r"\[(.*?)\]")
_JS_OBJECT = re.compile(r"\{(.*?)\}")
_JS_PAIR = re.compile(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)")


def js_value(value: str, js_type: str, item_type: str | None = None) -> Any:
    """Convert JavaScript source text ``value`` declared as ``js_type`` (or return it as is)."""
    if js_type not in JS_TYPES:
        raise UnsupportedTypeError(f"unknown JavaScript type {js_type!r}")
    if js_type == "String":
        quoted = (value.startswith('"') and value.endswith('"')) or (
            value.startswith("'") and value.endswith("'")
        )
        return value[1:-1] if quoted else value
    if js_type == "integer":
        return int(value) if _INT.match(value) else value
    if js_type == "float":
        return float(value) if _JS_FLOAT.match(value) else value
    if js_type == "Bigint":
        return int(value[:-1]) if _JS_BIGINT.match(value) else value
    if js_type == "Boolean":
        return value == "true" if value in ("true", "false") else value
    if js_type == "dict":
        return _js_object(value)
    if js_type == "array":
        return _js_array(value, item_type)
    return str(value)


def _js_array(code: str, item_type: str | None) -> Any:
    code = code.strip()
    try:
        grid = _JS_2D.match(code)
        if grid:
            rows = []
            for i, inner in enumerate(_JS_INNER.findall(grid.group(0))):
                inner = inner.strip()
                if i == 0 and inner.startswith("["):
                    inner = inner[1:]
                rows.append([js_literal(e.strip()) for e in inner.split(",")])
            return rows
        flat = _JS_1D.match(code)
        if not flat:
            return code
        body = flat.group(1) if flat.group(1) is not None else flat.group(2)
        body = (body or "").strip()
        parts = body.split(",") if body else []
        if not item_type:
            return [js_literal(p.strip()) for p in parts]
        out = []
        for part in parts:
            part = part.strip()
            if part.startswith(("'", '"')):
                out.append(js_value(part, item_type, "String"))
            else:
                out.append(js_value(part, item_type))
        return out
    except Exception:  # noqa: BLE001 - any failure leaves the text, as officially
        return code


def _js_object(code: str) -> Any:
    if code == "{}":
        return {}
    found = _JS_OBJECT.match(code)
    if not found:
        return code
    try:
        out: dict[str, Any] = {}
        for key, raw in _JS_PAIR.findall(found.group(1)):
            key = key.strip().strip("'\"")
            raw = raw.strip()
            if raw.startswith("[") and raw.endswith("]"):
                out[key] = _js_array(raw, None)
            elif raw.startswith("{") and raw.endswith("}"):
                out[key] = _js_object(raw)
            else:
                # quotes are stripped before the literal is read, so "'5'" becomes 5
                out[key] = js_literal(raw.strip("'\""))
        return out
    except Exception:  # noqa: BLE001 - any failure leaves the text, as officially
        return code


def js_literal(text: str) -> Any:
    """A JavaScript literal of unknown type: boolean, quoted string, number, else text."""
    text = text.strip()
    if text == "true":
        return True
    if text == "false":
        return False
    if (text.startswith('"') and text.endswith('"')) or (
        text.startswith("'") and text.endswith("'")
    ):
        return text[1:-1]
    return _number_or_text(text)


# ------------------------------------------------------------------------- encoding
# The inverse direction: a Python value written as the source text that converts back
# to it. Used to build the reply a perfect agent would give in the Java/JS categories.
_JAVA_ARRAY_TYPES = {
    "integer": "int",
    "short": "short",
    "byte": "byte",
    "long": "long",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "char": "char",
    "String": "String",
}


def _positional(number: float | int) -> str:
    """A number without exponent notation (the Java/JS patterns refuse ``1e-05``)."""
    if isinstance(number, int):
        return str(number)
    return format(Decimal(repr(float(number))), "f")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def java_literal_source(value: Any) -> str:
    """A value as an untyped Java literal (what ``java_literal`` reads back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if _is_number(value):
        return _positional(value)
    return str(value)


def java_source(value: Any, java_type: str | None, item_type: str | None = None) -> Any:
    """Java source text that ``java_value(text, java_type, item_type)`` turns into ``value``.

    A string value is returned unchanged (strings, ``any``, and variable names).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_number(value):
        if java_type == "long":
            return f"{int(value)}L"
        if java_type == "float":
            return f"{_positional(value)}f"
        return _positional(value)
    if isinstance(value, list | tuple):
        if java_type == "Array":
            parts = [v if isinstance(v, str) else java_source(v, item_type) for v in value]
            return f"new {_JAVA_ARRAY_TYPES.get(item_type or '', 'Object')}[]{{{', '.join(parts)}}}"
        if not value:
            return "new ArrayList<>()"
        if item_type in ("String", "char"):
            parts = [f'"{v}"' for v in value]
        elif item_type:
            parts = [java_source(v, item_type) for v in value]
        else:
            parts = [java_literal_source(v) for v in value]
        return f"new ArrayList<>(Arrays.asList({', '.join(parts)}))"
    if isinstance(value, dict):
        if not value:
            return "new HashMap<>()"
        puts = " ".join(f'put("{k}", {java_literal_source(v)});' for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}"
    return str(value)


def js_literal_source(value: Any) -> str:
    """A value as an untyped JavaScript literal (what ``js_literal`` reads back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if _is_number(value):
        return _positional(value)
    return str(value)


def js_source(value: Any, js_type: str | None, item_type: str | None = None) -> Any:
    """JavaScript source text that ``js_value(text, js_type, item_type)`` turns into ``value``."""
    if isinstance(value, str):
        if js_type == "String" and value[:1] in ("'", '"') and value[-1:] in ("'", '"'):
            return f'"{value}"'  # one pair of quotes is stripped on the way back
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_number(value):
        if js_type == "Bigint":
            return f"{int(value)}n"
        return _positional(value)
    if isinstance(value, list | tuple):
        if item_type:
            parts = [f'"{v}"' if isinstance(v, str) else js_source(v, item_type) for v in value]
        else:
            parts = [js_literal_source(v) for v in value]
        return f"[{', '.join(parts)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}": {js_literal_source(v)}' for k, v in value.items()) + "}"
    return str(value)
