"""Multi-turn BFCL entries, ground truth and function docs, in the official file layout.

A data folder holds (the bundled one is ``tasks/bfcl/multi_turn/``; the official
``bfcl_eval/data/`` folder has the same layout):

- ``BFCL_v4_multi_turn_<category>.json``: JSON Lines of entries ``{"id", "question":
  [[messages of user turn 0], [turn 1], ...], "initial_config": {Class: {state}},
  "path", "involved_classes", "excluded_function"}``; miss_func entries add
  ``"missed_function": {"<turn>": [names]}`` and leave that turn's question ``[]``.
- ``possible_answer/BFCL_v4_multi_turn_<category>.json``: ``{"id", "ground_truth":
  [["call(a=1)", ...] per turn]}``, calls in BFCL's Python-call syntax.
- Function docs, JSON Lines of ``{"name", "description", "parameters": {"type": "dict",
  "properties": {...}, "required": [...]}}``: ``func_doc/<Class>.json`` for the
  project's backends, ``multi_turn_func_doc/<file>.json`` for the official ones (else
  taken from the installed ``bfcl-eval`` package).

Every malformed input raises ``TaskError`` naming the file (and line) and the field.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.core.errors import TaskError
from agentenvs.core.tasks import task_path
from agentenvs.envs.bfcl.data import tool_schema
from agentenvs.envs.bfcl.decode import Call
from agentenvs.envs.bfcl.multi_turn import official
from agentenvs.envs.bfcl.multi_turn.backends import BACKENDS

#: ``tasks_path`` value naming the data of the installed bfcl-eval package
INSTALLED = "bfcl-eval"
CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
_FILE = re.compile(r"^BFCL_v\d+_multi_turn_(?P<category>[a-z_]+)\.json$")


@dataclass(frozen=True)
class MultiTurnEntry:
    """One multi-turn entry with its parsed ground truth."""

    id: str
    category: str
    question: tuple[tuple[dict[str, str], ...], ...]
    initial_config: Mapping[str, Any]
    involved_classes: tuple[str, ...]
    ground_truth: tuple[tuple[Call, ...], ...]
    ground_truth_text: tuple[tuple[str, ...], ...]
    excluded_functions: tuple[str, ...] = ()
    missed_functions: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    path: tuple[str, ...] = ()
    source: str = ""

    @property
    def n_turns(self) -> int:
        return len(self.question)

    @property
    def long_context(self) -> bool:
        # the official checker decides from the id's category, so do we
        return "long_context" in self.id.rsplit("_", 1)[0]


@dataclass
class MultiTurnTaskSet:
    """Entries by id (in file order) and the function docs of every class they use."""

    entries: dict[str, MultiTurnEntry]
    docs: dict[str, list[dict[str, Any]]]
    origin: str

    def tools_at(self, entry: MultiTurnEntry, turn: int) -> list[dict[str, Any]]:
        """The docs an agent sees during user turn ``turn`` (held-out ones appear at theirs)."""
        hidden = set(entry.excluded_functions)
        for at, names in entry.missed_functions.items():
            if at > turn:
                hidden.update(names)
        return [
            doc
            for cls in entry.involved_classes
            for doc in self.docs[cls]
            if doc["name"] not in hidden
        ]


# ---------------------------------------------------------------------- tools
def doc_to_tool(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A function doc as an OpenAI-style tool whose parameters are JSON Schema
    (dict -> object, float -> number, tuple -> array), as the single-turn env gives them."""
    return tool_schema(doc)


# ---------------------------------------------------------------------- reading
def _read_jsonl(path: Path) -> list[tuple[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise TaskError(str(path), "path", "file not found") from exc
    except UnicodeDecodeError as exc:
        raise TaskError(str(path), "encoding", f"not UTF-8: {exc}") from exc
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        source = f"{path}:{number}"
        try:
            records.append((source, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise TaskError(source, "json", f"not valid JSON: {exc}") from exc
    return records


def _object(record: Any, source: str) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise TaskError(source, "record", f"expected a JSON object, got {type(record).__name__}")
    return record


def _str_list(value: Any, source: str, field_name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TaskError(source, field_name, f"expected a list of strings, got {value!r:.80}")
    return tuple(value)


def validate_doc(doc: Any, source: str) -> dict[str, Any]:
    """Check one function doc's shape; return it."""
    doc = _object(doc, source)
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise TaskError(source, "name", f"expected a non-empty string, got {name!r:.80}")
    if not isinstance(doc.get("description", ""), str):
        raise TaskError(source, "description", "expected a string")
    params = doc.get("parameters")
    if not isinstance(params, dict):
        raise TaskError(source, "parameters", "expected an object")
    if params.get("type") != "dict":
        raise TaskError(source, "parameters.type", f"expected 'dict', got {params.get('type')!r}")
    props = params.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(p, dict) for p in props.values()):
        raise TaskError(source, "parameters.properties", "expected an object of parameter schemas")
    required = _str_list(params.get("required", []), source, "parameters.required")
    unknown = [r for r in required if r not in props]
    if unknown:
        raise TaskError(source, "parameters.required", f"names {unknown} are not in properties")
    return doc


def load_docs(path: Path) -> list[dict[str, Any]]:
    """A JSON Lines file of function docs."""
    docs = [validate_doc(doc, source) for source, doc in _read_jsonl(path)]
    if not docs:
        raise TaskError(str(path), "docs", "no function docs in file")
    return docs


def _doc_path(class_name: str, root: Path, source: str) -> Path:
    own = root / "func_doc" / f"{class_name}.json"
    if own.is_file():
        return own
    if class_name in official.OFFICIAL_CLASSES:
        beside = root / "multi_turn_func_doc" / official.OFFICIAL_CLASSES[class_name].doc_file
        if beside.is_file():
            return beside
        return official.doc_path(class_name)  # raises MissingExtraError when not installed
    if class_name in BACKENDS:
        bundled = task_path("bfcl", "multi_turn", "func_doc", f"{class_name}.json")
        return bundled
    known = sorted({*BACKENDS, *official.OFFICIAL_CLASSES})
    raise TaskError(source, "involved_classes", f"unknown class {class_name!r}; known: {known}")


def _question(value: Any, source: str) -> tuple[tuple[dict[str, str], ...], ...]:
    if not isinstance(value, list) or not value:
        raise TaskError(source, "question", "expected a non-empty list of turns")
    turns = []
    for t, turn in enumerate(value):
        if not isinstance(turn, list):
            raise TaskError(source, f"question[{t}]", "expected a list of messages")
        messages = []
        for m, message in enumerate(turn):
            if (
                not isinstance(message, dict)
                or not isinstance(message.get("role"), str)
                or not isinstance(message.get("content"), str)
            ):
                raise TaskError(
                    source, f"question[{t}][{m}]", 'expected {"role": str, "content": str}'
                )
            messages.append({"role": message["role"], "content": message["content"]})
        turns.append(tuple(messages))
    return tuple(turns)


def parse_call(text: Any, source: str, where: str) -> Call:
    """One ground-truth call string, e.g. ``"cd(folder='docs')"`` or ``"cd('docs')"``.

    BFCL executes ground truth as written (``eval`` of the string), so positional
    arguments are kept (:attr:`Call.positional`) and every argument must be a literal.
    """
    if not isinstance(text, str):
        raise TaskError(source, where, f"expected a call string, got {text!r:.80}")
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise TaskError(source, where, f"cannot parse {text!r:.80}: {exc}") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise TaskError(source, where, f"expected one call of a function name, got {text!r:.80}")
    try:
        positional = tuple(ast.literal_eval(arg) for arg in node.args)
        keywords = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise ValueError("'**' arguments are not supported")
            keywords[kw.arg] = ast.literal_eval(kw.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise TaskError(
            source, where, f"arguments of {text!r:.80} must be literals: {exc}"
        ) from None
    return Call(node.func.id, keywords, positional)


def _ground_truth(
    record: Any, source: str, n_turns: int
) -> tuple[tuple[tuple[Call, ...], ...], tuple[tuple[str, ...], ...]]:
    gt = record.get("ground_truth") if isinstance(record, dict) else None
    if not isinstance(gt, list) or not all(isinstance(turn, list) for turn in gt):
        raise TaskError(source, "ground_truth", "expected a list of call lists, one per turn")
    if len(gt) != n_turns:
        raise TaskError(
            source, "ground_truth", f"{len(gt)} turns of ground truth for {n_turns} question turns"
        )
    parsed = tuple(
        tuple(parse_call(text, source, f"ground_truth[{t}][{i}]") for i, text in enumerate(turn))
        for t, turn in enumerate(gt)
    )
    return parsed, tuple(tuple(turn) for turn in gt)


def _entry(
    record: Any,
    source: str,
    answer: tuple[str, Any],
    category: str,
) -> MultiTurnEntry:
    record = _object(record, source)
    entry_id = record.get("id")
    if not isinstance(entry_id, str) or not entry_id:
        raise TaskError(source, "id", f"expected a non-empty string, got {entry_id!r:.80}")
    question = _question(record.get("question"), source)
    classes = _str_list(record.get("involved_classes"), source, "involved_classes")
    if not classes:
        raise TaskError(source, "involved_classes", "expected at least one class")
    config = record.get("initial_config", {})
    if not isinstance(config, dict) or not all(isinstance(v, dict) for v in config.values()):
        raise TaskError(source, "initial_config", "expected {Class: {state}}")
    # official entries may configure classes they do not involve: those are ignored
    excluded = _str_list(record.get("excluded_function", []), source, "excluded_function")
    missed_raw = record.get("missed_function", {})
    if not isinstance(missed_raw, dict):
        raise TaskError(source, "missed_function", 'expected {"<turn>": [names]}')
    missed: dict[int, tuple[str, ...]] = {}
    for key, names in missed_raw.items():
        if not (isinstance(key, str) and key.isdigit() and 0 < int(key) < len(question)):
            raise TaskError(
                source, "missed_function", f"turn {key!r} is not a turn after the first"
            )
        missed[int(key)] = _str_list(names, source, f"missed_function[{key!r}]")
    for t, turn in enumerate(question):
        if t in missed and turn:
            raise TaskError(
                source, f"question[{t}]", "a turn that adds held-out functions must be []"
            )
        if t not in missed and not turn:
            raise TaskError(source, f"question[{t}]", "empty turn without held-out functions")
    answer_source, answer_record = answer
    gt, gt_text = _ground_truth(answer_record, answer_source, len(question))
    path = record.get("path", [])
    return MultiTurnEntry(
        id=entry_id,
        category=category,
        question=question,
        initial_config=config,
        involved_classes=classes,
        ground_truth=gt,
        ground_truth_text=gt_text,
        excluded_functions=excluded,
        missed_functions=missed,
        path=tuple(path) if isinstance(path, list) else (),
        source=source,
    )


def _check_names(entry: MultiTurnEntry, docs: Mapping[str, list[dict[str, Any]]]) -> None:
    owner: dict[str, str] = {}
    for cls in entry.involved_classes:
        for doc in docs[cls]:
            if doc["name"] in owner and owner[doc["name"]] != cls:
                raise TaskError(
                    entry.source,
                    "involved_classes",
                    f"function {doc['name']!r} is defined by both {owner[doc['name']]} and {cls}",
                )
            owner[doc["name"]] = cls
    for field_name, names in (
        ("excluded_function", entry.excluded_functions),
        *(
            (f"missed_function[{str(t)!r}]", names)
            for t, names in sorted(entry.missed_functions.items())
        ),
    ):
        unknown = [n for n in names if n not in owner]
        if unknown:
            raise TaskError(
                entry.source, field_name, f"functions {unknown} are in no involved class"
            )


def category_files(root: Path, categories: Iterable[str] | None = None) -> list[tuple[str, Path]]:
    """``(category, file)`` for each multi-turn entry file in ``root``, in category order."""
    found: dict[str, Path] = {}
    for path in sorted(root.glob("BFCL_v*_multi_turn_*.json")):
        match = _FILE.match(path.name)
        if match:
            found.setdefault(match["category"], path)
    wanted = list(categories) if categories is not None else None
    if wanted is not None:
        unknown = [c for c in wanted if c not in found]
        if unknown:
            raise TaskError(
                str(root), "categories", f"no file for {unknown}; found {sorted(found)}"
            )
    order = {c: i for i, c in enumerate(CATEGORIES)}
    names = wanted if wanted is not None else sorted(found, key=lambda c: (order.get(c, 99), c))
    return [(c, found[c]) for c in names]


def load_tasks(
    path: str | Path | None = None, categories: Sequence[str] | str | None = None
) -> MultiTurnTaskSet:
    """Load entries, ground truth and docs from a data folder (default: the bundled one).

    ``path`` may also be one entry file; its answers are then looked up in
    ``possible_answer/`` beside it; ``"bfcl-eval"`` means the data folder of the
    installed ``bfcl-eval`` package (found without importing it).
    """
    if path == INSTALLED:
        root = official.package_dir().joinpath(*official.DOC_SUBDIR[:-1])
    else:
        root = Path(path) if path is not None else task_path("bfcl", "multi_turn")
    if isinstance(categories, str):
        categories = [categories]
    if root.is_file():
        match = _FILE.match(root.name)
        if not match:
            raise TaskError(
                str(root), "path", "expected a BFCL_v<N>_multi_turn_<category>.json file"
            )
        files = [(match["category"], root)]
        root = root.parent
    elif root.is_dir():
        files = category_files(root, categories)
    else:
        raise TaskError(str(root), "path", "no such file or folder")
    if not files:
        raise TaskError(str(root), "path", "no BFCL_v<N>_multi_turn_<category>.json files")
    entries: dict[str, MultiTurnEntry] = {}
    docs: dict[str, list[dict[str, Any]]] = {}
    for category, file in files:
        answer_file = root / "possible_answer" / file.name
        answers: dict[str, tuple[str, Any]] = {}
        for source, record in _read_jsonl(answer_file):
            answer_id = _object(record, source).get("id")
            if not isinstance(answer_id, str):
                raise TaskError(source, "id", "expected a string")
            answers[answer_id] = (source, record)
        for source, record in _read_jsonl(file):
            entry_id = _object(record, source).get("id")
            if entry_id not in answers:
                raise TaskError(source, "id", f"no ground truth for {entry_id!r} in {answer_file}")
            entry = _entry(record, source, answers[entry_id], category)
            if entry.id in entries:
                raise TaskError(source, "id", f"duplicate entry id {entry.id!r}")
            for cls in entry.involved_classes:
                if cls not in docs:
                    docs[cls] = load_docs(_doc_path(cls, root, source))
            _check_names(entry, docs)
            entries[entry.id] = entry
    if not entries:
        raise TaskError(str(root), "entries", "no entries in the data files")
    return MultiTurnTaskSet(entries, docs, str(root))
