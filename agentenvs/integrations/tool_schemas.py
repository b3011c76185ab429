"""Tools from JSON schemas: Python methods whose signature, type hints and docstring are
what a trainer reads to show a model the tool (TRL reads them through transformers'
``get_json_schema``), and whose calls hand the arguments back under their schema names.

Used by ``agentenvs.integrations.trl`` for BFCL's functions as tools, one class per task.
"""

from __future__ import annotations

import inspect
import json
import keyword
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class ToolParam:
    """A Python parameter of a generated tool and the schema name it stands for."""

    name: str  # a valid, non-keyword Python identifier
    schema_name: str
    hint: Any
    description: str
    required: bool


def _python_name(name: str, taken: set[str]) -> str:
    candidate = re.sub(r"\W", "_", name) or "arg"
    if candidate[0].isdigit():
        candidate = "_" + candidate
    if keyword.iskeyword(candidate) or candidate in ("self",):
        candidate += "_"
    while candidate in taken:
        candidate += "_"
    taken.add(candidate)
    return candidate


_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}


def schema_hint(schema: Any) -> Any:
    """A type hint whose JSON schema (as transformers writes it) matches ``schema``."""
    if not isinstance(schema, dict):
        return Any
    enum = schema.get("enum")
    if (
        isinstance(enum, list)
        and enum
        and all(isinstance(v, str | int | float | bool) for v in enum)
    ):
        return Literal[tuple(enum)]  # type: ignore[valid-type]
    kind = schema.get("type")
    if isinstance(kind, list):
        hints = [schema_hint({**schema, "type": k}) for k in kind if k != "null"]
        if not hints:
            return Any
        hint = hints[0]
        for h in hints[1:]:
            hint = hint | h
        return hint | None if "null" in kind else hint
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        return list[schema_hint(schema.get("items"))] if schema.get("items") else list
    if kind == "object":
        return dict[str, Any]
    return Any


def _describe_param(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "A value."
    text = " ".join(str(schema.get("description") or "").split()) or "A value."
    if "default" in schema:
        text += f" (default: {json.dumps(schema['default'])})"
    nested = {k: schema[k] for k in ("properties", "items") if k in schema and k != "items"}
    if schema.get("type") == "object" and nested:
        text += f" Fields: {json.dumps(nested['properties'])}"
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        items = schema["items"]
        if items.get("type") == "object" and items.get("properties"):
            text += f" Each item has fields: {json.dumps(items['properties'])}"
    return text


def tool_params(parameters: Any) -> list[ToolParam]:
    """The Python parameters of a tool whose arguments follow the JSON schema ``parameters``."""
    props = (parameters or {}).get("properties") or {}
    required = set((parameters or {}).get("required") or [])
    taken: set[str] = set()
    params = []
    for schema_name, schema in props.items():
        params.append(
            ToolParam(
                name=_python_name(str(schema_name), taken),
                schema_name=str(schema_name),
                hint=schema_hint(schema),
                description=_describe_param(schema),
                required=schema_name in required,
            )
        )
    # required parameters first: a Python signature cannot put them after optional ones
    return sorted(params, key=lambda p: not p.required)


def make_tool_method(
    name: str,
    description: str,
    params: Sequence[ToolParam],
    run: Callable[[Any, dict[str, Any]], str],
) -> Callable[..., str]:
    """A function to set on a class as a tool method: TRL reads its name, signature,
    type hints and Google-style docstring; calling it runs ``run(self, arguments)`` with
    the arguments under their schema names. Arguments may be passed by name (as TRL passes
    a model's tool call) or by position, in the signature's order (required first)."""
    by_python = {p.name: p.schema_name for p in params}

    def tool(self: Any, *args: Any, **kwargs: Any) -> str:
        if len(args) > len(params):
            raise TypeError(f"{name}() takes {len(params)} arguments but {len(args)} were given")
        for p, value in zip(params, args, strict=False):
            if p.name in kwargs:
                raise TypeError(f"{name}() got multiple values for argument {p.name!r}")
            kwargs[p.name] = value
        arguments = {by_python.get(k, k): v for k, v in kwargs.items()}
        return run(self, arguments)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for p in params:
        parameters.append(
            inspect.Parameter(
                p.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=inspect.Parameter.empty if p.required else None,
                annotation=p.hint,
            )
        )
    tool.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    tool.__annotations__ = {**{p.name: p.hint for p in params}, "return": str}
    tool.__name__ = tool.__qualname__ = name
    summary = " ".join(description.split()) or name
    lines = [summary, ""]
    if params:
        lines.append("Args:")
        lines += [f"    {p.name}: {p.description}" for p in params]
        lines.append("")
    lines += ["Returns:", "    What the environment answers."]
    tool.__doc__ = "\n".join(lines)
    return tool
