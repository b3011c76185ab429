"""Loading BFCL's single-turn task files, in the official layout, and what derives from them.

A folder in the official layout holds ``BFCL_v4_<category>.json`` (JSON Lines despite
the suffix: one ``{"id", "question", "function"}`` record a line) and, for the
categories checked against answers, ``possible_answer/BFCL_v4_<category>.json``
(``{"id", "ground_truth"}`` a line). Three sources are understood:

- the bundled subset (``tasks/bfcl`` in a checkout, ``agentenvs/_tasks/bfcl`` in a wheel);
- any folder in that layout;
- the data folder of an installed ``bfcl-eval`` package, located *without importing it*
  (its import creates folders and pulls in every model SDK).

Also here: a task's function docs as JSON Schema tools, and the reply a perfect agent
would give (the first acceptable value of every parameter).
"""

from __future__ import annotations

import copy
import functools
import importlib.metadata
import importlib.util
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenvs.core.errors import TaskError
from agentenvs.core.tasks import task_path
from agentenvs.envs.bfcl.ast_checker import is_relevance_category, language_of
from agentenvs.envs.bfcl.convert import java_source, js_source
from agentenvs.envs.bfcl.decode import Call

#: the single-turn categories, in the official order
SINGLE_TURN_CATEGORIES: tuple[str, ...] = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
)

#: ``tasks_path`` value that selects an installed bfcl-eval package's data
INSTALLED = "bfcl-eval"


@dataclass(frozen=True)
class BfclTask:
    """One single-turn entry: the conversation, the function docs and the accepted calls.

    ``ground_truth`` is ``None`` for the relevance categories (there is no answer key).
    ``source`` names the file and line it came from.
    """

    id: str
    category: str
    question: list[list[dict[str, str]]]
    functions: list[dict[str, Any]]
    ground_truth: list[dict[str, dict[str, list[Any]]]] | None
    source: str

    @property
    def language(self) -> str:
        return language_of(self.category)


# ------------------------------------------------------------------------- locating data
def installed_data_dir() -> Path:
    """The ``data`` folder of an installed bfcl-eval package, found without importing it."""
    try:
        spec = importlib.util.find_spec("bfcl_eval")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "data"
            if candidate.is_dir():
                return candidate
    try:
        dist = importlib.metadata.distribution("bfcl-eval")
    except importlib.metadata.PackageNotFoundError:
        raise TaskError(
            "bfcl-eval", "tasks_path", "the bfcl-eval package is not installed"
        ) from None
    candidate = Path(str(dist.locate_file("bfcl_eval/data")))
    if not candidate.is_dir():
        raise TaskError(str(candidate), "tasks_path", "bfcl-eval is installed but has no data")
    return candidate


def resolve_tasks_path(tasks_path: str | Path | None) -> Path:
    """The folder to load: bundled (``None``), installed (``"bfcl-eval"``) or given."""
    if tasks_path is None:
        return task_path("bfcl")
    if str(tasks_path) == INSTALLED:
        return installed_data_dir()
    path = Path(tasks_path)
    if not path.is_dir():
        raise TaskError(str(path), "tasks_path", "not a folder in BFCL's layout")
    return path


_FILE = re.compile(r"^BFCL_v(\d+)_(.+)\.json$")


def category_file(folder: Path, category: str) -> Path | None:
    """``BFCL_v<N>_<category>.json`` in ``folder``, the highest version if several."""
    best: tuple[int, Path] | None = None
    for path in folder.glob(f"BFCL_v*_{category}.json"):
        found = _FILE.match(path.name)
        if found and found.group(2) == category:
            version = int(found.group(1))
            if best is None or version > best[0]:
                best = (version, path)
    return best[1] if best else None


def available_categories(folder: Path) -> list[str]:
    """The single-turn categories with a question file in ``folder``."""
    return [c for c in SINGLE_TURN_CATEGORIES if category_file(folder, c) is not None]


# ------------------------------------------------------------------------- reading
def _read_jsonl(path: Path) -> list[tuple[int, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskError(str(path), "file", f"cannot read: {exc}") from None
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise TaskError(f"{path}:{number}", "line", f"invalid JSON: {exc}") from None
    return rows


def _check_question(where: str, value: Any) -> list[list[dict[str, str]]]:
    if not isinstance(value, list) or not value:
        raise TaskError(where, "question", "must be a non-empty list of turns")
    for t, turn in enumerate(value):
        if not isinstance(turn, list):
            raise TaskError(where, f"question[{t}]", "a turn must be a list of messages")
        for m, message in enumerate(turn):
            if (
                not isinstance(message, dict)
                or not isinstance(message.get("role"), str)
                or not isinstance(message.get("content"), str)
            ):
                raise TaskError(
                    where, f"question[{t}][{m}]", "a message needs string 'role' and 'content'"
                )
    return value


def _check_functions(where: str, value: Any, category: str) -> list[dict[str, Any]]:
    if isinstance(value, dict):  # a few official entries hold one doc, not a list
        value = [value]
    if not isinstance(value, list):
        raise TaskError(where, "function", "must be a list of function docs")
    if not value and not is_relevance_category(category):
        # an empty list is legal where no call is expected (4 official live_irrelevance
        # entries have one); an entry checked against calls needs the docs
        raise TaskError(where, "function", f"must not be empty in category {category}")
    for i, doc in enumerate(value):
        field = f"function[{i}]"
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or not doc["name"]:
            raise TaskError(where, f"{field}.name", "a function doc needs a non-empty name")
        params = doc.get("parameters")
        if not isinstance(params, dict) or not isinstance(params.get("properties"), dict):
            raise TaskError(where, f"{field}.parameters.properties", "must be an object")
        required = params.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise TaskError(where, f"{field}.parameters.required", "must be a list of names")
        for name, spec in params["properties"].items():
            if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
                raise TaskError(
                    where, f"{field}.parameters.properties.{name}.type", "must be a string"
                )
    return value


def _check_ground_truth(where: str, value: Any) -> list[dict[str, dict[str, list[Any]]]]:
    if not isinstance(value, list) or not value:
        raise TaskError(where, "ground_truth", "must be a non-empty list of calls")
    for i, call in enumerate(value):
        if not isinstance(call, dict) or len(call) != 1:
            raise TaskError(where, f"ground_truth[{i}]", "must be {function_name: {param: [...]}}")
        ((name, params),) = call.items()
        if not isinstance(params, dict):
            raise TaskError(where, f"ground_truth[{i}].{name}", "parameters must be an object")
        for param, accepted in params.items():
            if not isinstance(accepted, list):
                raise TaskError(
                    where,
                    f"ground_truth[{i}].{name}.{param}",
                    "must be a list of acceptable values",
                )
    return value


def load_category(folder: Path, category: str) -> list[BfclTask]:
    """Every task of ``category`` in ``folder``; answers joined by id."""
    path = category_file(folder, category)
    if path is None:
        raise TaskError(str(folder / f"BFCL_v4_{category}.json"), "file", "not found")
    answers: dict[str, Any] = {}
    needs_answers = not is_relevance_category(category)
    if needs_answers:
        answer_path = folder / "possible_answer" / path.name
        if not answer_path.is_file():
            raise TaskError(str(answer_path), "file", f"answers for {category} not found")
        for number, row in _read_jsonl(answer_path):
            where = f"{answer_path}:{number}"
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                raise TaskError(where, "id", "each line needs a string id")
            answers[row["id"]] = (where, row.get("ground_truth"))
    tasks = []
    seen: set[str] = set()
    for number, row in _read_jsonl(path):
        where = f"{path}:{number}"
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not row["id"]:
            raise TaskError(where, "id", "each line needs a non-empty string id")
        task_id = row["id"]
        if task_id in seen:
            raise TaskError(where, "id", f"duplicate id {task_id!r}")
        seen.add(task_id)
        truth = None
        if needs_answers:
            if task_id not in answers:
                raise TaskError(where, "id", f"no ground truth for {task_id!r} in possible_answer/")
            answer_where, raw = answers[task_id]
            truth = _check_ground_truth(answer_where, raw)
        tasks.append(
            BfclTask(
                id=task_id,
                category=category,
                question=_check_question(where, row.get("question")),
                functions=_check_functions(where, row.get("function"), category),
                ground_truth=truth,
                source=where,
            )
        )
    return tasks


@functools.lru_cache(maxsize=16)
def _load_cached(folder: str, categories: tuple[str, ...]) -> tuple[BfclTask, ...]:
    out: list[BfclTask] = []
    seen: dict[str, str] = {}
    for category in categories:
        for task in load_category(Path(folder), category):
            if task.id in seen:
                raise TaskError(task.source, "id", f"id {task.id!r} also in {seen[task.id]}")
            seen[task.id] = task.source
            out.append(task)
    return tuple(out)


def load_tasks(
    tasks_path: str | Path | None = None, categories: Sequence[str] | str | None = None
) -> list[BfclTask]:
    """Tasks of ``categories`` (default: every single-turn category the folder has).

    Loaded files are cached per process; treat the returned tasks as read-only.
    """
    folder = resolve_tasks_path(tasks_path)
    if isinstance(categories, str):
        categories = [categories]
    if categories is None:
        chosen = available_categories(folder)
        if not chosen:
            raise TaskError(str(folder), "categories", "no single-turn BFCL file in this folder")
    else:
        unknown = [c for c in categories if c not in SINGLE_TURN_CATEGORIES]
        if unknown:
            raise ValueError(
                f"unknown BFCL single-turn categories {unknown}; use {list(SINGLE_TURN_CATEGORIES)}"
            )
        chosen = list(dict.fromkeys(categories))
    return list(_load_cached(str(folder.resolve()), tuple(chosen)))


# ------------------------------------------------------------------------- JSON Schema tools
_SCHEMA_TYPES = {
    "string": "string",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "tuple": "array",
    "dict": "object",
    "object": "object",
    "any": "string",
}
_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
_SOURCE_EXAMPLES = {
    "java": {
        "float": '"1.5f"',
        "long": '"10L"',
        "double": '"1.5"',
        "boolean": '"true"',
        "ArrayList": '"new ArrayList<>(Arrays.asList(1, 2))"',
        "Array": '"new int[]{1, 2}"',
        "HashMap": '"new HashMap<String, Object>() {{ put(\\"k\\", 1); }}"',
    },
    "javascript": {
        "Bigint": '"10n"',
        "Boolean": '"true"',
        "array": '"[1, 2]"',
        "dict": "\"{'k': 1}\"",
        "String": '"\\"text\\""',
    },
}


def _schema(spec: Any) -> Any:
    """One BFCL parameter spec as a Draft 2020-12 schema (Python type names)."""
    if not isinstance(spec, dict):
        return {"type": "string"}
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key == "type":
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {k: _schema(v) for k, v in value.items()}
        elif key == "items":
            if isinstance(value, list):  # old tuple form → prefixItems
                out["prefixItems"] = [_schema(v) for v in value]
            else:
                out[key] = _schema(value)
        elif key == "required":
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                out[key] = list(dict.fromkeys(value))
        elif key == "enum":
            if isinstance(value, list):
                out[key] = value
        elif key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[key] = value
        elif key in ("minItems", "maxItems", "minLength", "maxLength"):
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                out[key] = value
        elif key in ("description", "format", "pattern"):
            if isinstance(value, str):
                out[key] = value
        elif key in ("default", "examples", "title"):
            out[key] = value
        # other keys (BFCL's "optional", vendor extras) are dropped
    raw = spec.get("type")
    kind = _SCHEMA_TYPES.get(raw, raw if raw in _JSON_TYPES else "string")
    out = {"type": kind, **out}
    if kind == "array" and "items" not in out and "prefixItems" not in out:
        out["items"] = {}
    return out


def _source_schema(spec: dict[str, Any], language: str) -> dict[str, Any]:
    """A Java/JS parameter: always a string holding source code of the declared type."""
    kind = spec.get("type")
    item = spec.get("items", {}).get("type") if isinstance(spec.get("items"), dict) else None
    of = f"{kind} of {item}" if item else f"{kind}"
    name = "Java" if language == "java" else "JavaScript"
    hint = f"{name} {of} value, written in {name} syntax as a string"
    example = _SOURCE_EXAMPLES[language].get(kind)
    if example:
        hint += f", e.g. {example}"
    description = spec.get("description", "")
    out: dict[str, Any] = {
        "type": "string",
        "description": f"{description} ({hint}.)".strip(),
    }
    if isinstance(spec.get("enum"), list):
        out["enum"] = [str(v) for v in spec["enum"]]
    if "default" in spec:
        out["default"] = spec["default"]
    return out


def tool_schema(
    doc: Mapping[str, Any], language: str = "python", *, underscore_to_dot: bool = False
) -> dict[str, Any]:
    """One function doc as an OpenAI-style tool with Draft 2020-12 parameters."""
    params = doc.get("parameters", {})
    props = params.get("properties", {})
    if language in ("java", "javascript"):
        properties = {p: _source_schema(s, language) for p, s in props.items()}
    else:
        properties = {p: _schema(s) for p, s in props.items()}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [r for r in params.get("required", []) if isinstance(r, str)]
    if required:
        schema["required"] = list(dict.fromkeys(required))
    name = str(doc["name"])
    if underscore_to_dot:
        name = name.replace(".", "_")
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": str(doc.get("description", "")),
            "parameters": schema,
        },
    }


def task_tools(task: BfclTask, *, underscore_to_dot: bool = False) -> list[dict[str, Any]]:
    return [
        tool_schema(doc, task.language, underscore_to_dot=underscore_to_dot)
        for doc in task.functions
    ]


def check_tool_schemas(tools: Sequence[Mapping[str, Any]]) -> None:
    """Raise ``jsonschema.SchemaError`` unless every tool's parameters are valid 2020-12.

    A schema built only of the keywords BFCL's docs convert to, each well formed, is valid
    at a glance; any other goes through ``jsonschema``'s check against the meta-schema
    (milliseconds a schema), which alone decides what is invalid and says why.
    """
    for tool in tools:
        schema = tool["function"]["parameters"]
        if not plainly_valid_schema(schema):
            from jsonschema import Draft202012Validator  # here: keep `import agentenvs` light

            Draft202012Validator.check_schema(schema)


_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
#: keywords whose value is a subschema / a map of names to subschemas
_SUBSCHEMA_KEYS = frozenset({"items", "additionalProperties"})
_PLAIN_KEYS = frozenset(
    {"type", "properties", "required", "description", "title", "enum", "default"} | _SUBSCHEMA_KEYS
)


def plainly_valid_schema(schema: Any, depth: int = 0) -> bool:
    """True when ``schema`` is a valid Draft 2020-12 schema made only of ``type`` (a simple
    type or a list of distinct ones), ``properties``, ``items``, ``additionalProperties``,
    ``required`` (distinct names), ``description``/``title`` (text), ``enum`` (a list) and
    ``default``, as the meta-schema has them. False says only "not plainly": such a schema
    may still be valid (a keyword outside this set) or not."""
    if isinstance(schema, bool):
        return True
    if type(schema) is not dict or depth > 64 or not schema.keys() <= _PLAIN_KEYS:
        return False
    for key, value in schema.items():
        if key == "type":
            if type(value) is str:
                ok = value in _SIMPLE_TYPES
            else:
                ok = (
                    type(value) is list
                    and len(value) > 0
                    and all(type(t) is str and t in _SIMPLE_TYPES for t in value)
                    and len(set(value)) == len(value)
                )
        elif key == "properties":
            ok = type(value) is dict and all(
                type(name) is str and plainly_valid_schema(sub, depth + 1)
                for name, sub in value.items()
            )
        elif key in _SUBSCHEMA_KEYS:
            ok = plainly_valid_schema(value, depth + 1)
        elif key == "required":
            ok = (
                type(value) is list
                and all(type(name) is str for name in value)
                and len(set(value)) == len(value)
            )
        elif key in ("description", "title"):
            ok = type(value) is str
        elif key == "enum":
            ok = type(value) is list
        else:  # default: any value
            ok = True
        if not ok:
            return False
    return True


# ------------------------------------------------------------------------- the gold reply
def _first_acceptable(values: Sequence[Any]) -> tuple[bool, Any]:
    for value in values:
        if value != "":
            return True, value
    return False, None


def _gold_dict(accepted: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, values in accepted.items():
        found, value = _first_acceptable(values if isinstance(values, list) else [values])
        if found:
            out[key] = value
    return out


def _gold_value(value: Any, spec: Mapping[str, Any], language: str) -> Any:
    kind = spec.get("type")
    items = spec.get("items") if isinstance(spec.get("items"), dict) else {}
    item_kind = items.get("type")
    # dict answers map each key to its acceptable values; pick the first of each
    if kind in ("dict", "HashMap") and isinstance(value, dict):
        value = _gold_dict(value)
    elif item_kind in ("dict", "HashMap") and isinstance(value, list):
        value = [_gold_dict(v) if isinstance(v, dict) else v for v in value]
    if language == "java":
        return java_source(value, kind, item_kind)
    if language == "javascript":
        return js_source(value, kind, item_kind)
    return value


def gold_calls(task: BfclTask, *, underscore_to_dot: bool = False) -> list[Call]:
    """The calls of a perfect reply: each parameter's first acceptable value, "" skipped.

    Relevance categories: ``[]`` for irrelevance (no call), and one call to the first
    function with its required parameters for ``live_relevance`` (any call passes).
    """
    if task.ground_truth is None:
        if "irrelevance" in task.category:
            return []
        if not task.functions:  # nothing to call: any call is a made-up one
            return [Call("unavailable_function", {})]
        doc = task.functions[0]
        props = doc["parameters"]["properties"]
        args = {p: _placeholder(props.get(p, {})) for p in doc["parameters"].get("required", [])}
        return [Call(_shown_name(doc["name"], underscore_to_dot), args)]
    docs = {doc["name"]: doc for doc in task.functions}
    calls = []
    for answer in task.ground_truth:
        ((name, accepted),) = answer.items()
        props = docs.get(name, {}).get("parameters", {}).get("properties", {})
        args = {}
        for param, values in accepted.items():
            found, value = _first_acceptable(values)
            if found:
                args[param] = _gold_value(copy.deepcopy(value), props.get(param, {}), task.language)
        calls.append(Call(_shown_name(name, underscore_to_dot), args))
    return calls


def _shown_name(name: str, underscore_to_dot: bool) -> str:
    return name.replace(".", "_") if underscore_to_dot else name


def _placeholder(spec: Mapping[str, Any]) -> Any:
    kind = spec.get("type")
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return spec["enum"][0]
    return {
        "integer": 1,
        "float": 1.0,
        "boolean": True,
        "array": [],
        "tuple": [],
        "dict": {},
    }.get(kind, "value")
