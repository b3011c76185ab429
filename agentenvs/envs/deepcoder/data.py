"""DeepCoder problems and their tests, from every DeepCoder-Preview-Dataset source format.

A row is ``{"id"?, "problem", "tests", "starter_code"?, "metadata"?}`` (the dataset's
columns; ``question`` is accepted for ``problem``). ``tests`` is a JSON string or already
decoded, in one of the sources' schemas:

- **lcbv5 / codeforces**: ``[{"input", "output", "testtype": "stdin" | "functional"}]``;
  a functional input is newline-separated JSON arguments, its output one JSON value,
  and the function's name is ``metadata["func_name"]`` (of the row, or of each test as
  rLLM's preprocessed files carry it). A test without ``testtype`` (rLLM's own
  ``codeforces.json``: plain ``{"input", "output"}``) is a stdin test.
- **taco**: ``{"inputs": [...], "outputs": [...], "fn_name"?}``; with ``fn_name`` each
  input is a list of arguments and each output the value or ``[value]`` (TACO's
  checker accepts either); otherwise inputs/outputs are stdin/stdout text (a list of
  lines is joined with newlines).
- **primeintellect**: ``[{"type": "stdin_stdout", "input", "output"}]``, or
  ``{"type": "function_call", "fn_name", "input", "output"}`` for call-based tests (the
  name may also come from ``metadata["func_name"]``); outputs accepted as in taco.

Each task records its ``source_format`` (``"lcb"``, ``"taco"`` or ``"primeintellect"``),
which picks the official checker under ``rules="official"``: from the row's
``data_source`` column when present (rLLM's names: livecodebench, codeforces, taco, apps,
code_contests, primeintellect), else from the test schema.

rLLM's own training files (``train_<source>.parquet``, ``deepscaler_code.parquet``, the
``test_<source>.json`` copies) load too: rows ``{"data_source", "prompt": [chat
messages], "reward_model": {"ground_truth": tests}}``, the last user message shown as the
prompt unchanged.

``metadata`` (a JSON string or a dict) may hold ``func_name``, ``difficulty`` and
``reference`` (a correct solution: the scripted policy submits it and error actions
mutate it). Rows without an ``id`` are named ``row-NNNNN`` by position.

Files: ``.jsonl`` (one row a line), ``.json`` (a list of rows, or ``{"rows": [...]}``),
``.parquet`` (needs pyarrow: the ``parquet`` extra). Wrong solutions, for tests and as
error actions of last resort, are ``{"id", "source"}`` lines in ``wrong_solutions.jsonl``
beside the problems file. Every malformed input raises ``TaskError`` naming the file,
the row (its line in JSONL) and the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentenvs.core.errors import MissingExtraError, TaskError
from agentenvs.core.tasks import task_path

BUNDLED_FILE = ("deepcoder", "problems.jsonl")
SourceFormat = Literal["lcb", "taco", "primeintellect"]
#: rLLM's ``data_source`` names -> the checker that grades them
DATA_SOURCES: Mapping[str, SourceFormat] = {
    "livecodebench": "lcb",
    "lcbv5": "lcb",
    "codeforces": "lcb",
    "taco": "taco",
    "apps": "taco",
    "code_contests": "taco",
    "primeintellect": "primeintellect",
}
WRONG_SOLUTIONS_FILE = "wrong_solutions.jsonl"
DATA_SUFFIXES = (".jsonl", ".json", ".parquet")


@dataclass(frozen=True, eq=False)
class CodeTest:
    """One unit test. ``input``/``output`` are the text shown to the agent.

    ``kind="stdin"``: ``input`` is the program's stdin, ``output`` the expected stdout.
    ``kind="call"``: ``args`` are the decoded arguments and ``accepted`` the decoded
    values that count as correct; ``input`` is newline-separated JSON arguments and
    ``output`` the expected value as JSON.
    """

    kind: Literal["stdin", "call"]
    input: str
    output: str
    args: tuple[Any, ...] = ()
    accepted: tuple[Any, ...] = ()
    #: the test's input and output exactly as the file holds them (official rules read
    #: these: they parse, sort and compare the raw values)
    raw_input: Any = None
    raw_output: Any = None


@dataclass(frozen=True, eq=False)
class CodeTask:
    """One problem with its tests (in file order) and, when known, a reference solution."""

    id: str
    problem: str
    tests: tuple[CodeTest, ...]
    starter_code: str = ""
    func_name: str | None = None
    difficulty: str | None = None
    reference: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: which official checker grades it: "lcb" (LiveCodeBench, Codeforces), "taco" or
    #: "primeintellect" (both APPS-style)
    source_format: SourceFormat = "lcb"
    #: ``problem`` is already the full prompt (rLLM's training files): shown as it is
    prompt_formatted: bool = False


@dataclass
class TaskSet:
    """Tasks by id, in file order, and any known-wrong solutions by task id."""

    tasks: dict[str, CodeTask]
    origin: str
    wrong_solutions: dict[str, list[str]] = field(default_factory=dict)
    #: every file read (the problems and any wrong solutions), resolved
    files: tuple[str, ...] = ()


# ---------------------------------------------------------------------- tests
def _json_value(text: str, source: str, name: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise TaskError(source, name, f"not valid JSON: {exc}") from exc


def _text(value: Any, source: str, name: str) -> str:
    """stdin/stdout text; TACO sometimes stores a list of lines."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise TaskError(source, name, f"expected text, got {type(value).__name__}")


def _call_args(value: Any, source: str, name: str) -> tuple[str, tuple[Any, ...]]:
    """(display text, decoded args) from newline-separated JSON or a list of arguments."""
    if isinstance(value, str):
        lines = [line for line in value.split("\n") if line.strip()]
        args = tuple(_json_value(line, source, name) for line in lines)
        return value, args
    if isinstance(value, list):
        return "\n".join(json.dumps(a) for a in value), tuple(value)
    raise TaskError(
        source, name, f"expected newline-separated JSON or a list, got {type(value).__name__}"
    )


def _call_test(
    raw_input: Any, raw_output: Any, source: str, where: str, *, wrapped_ok: bool
) -> CodeTest:
    shown_input, args = _call_args(raw_input, source, f"{where}.input")
    if isinstance(raw_output, str):
        expected = _json_value(raw_output, source, f"{where}.output")
        shown_output = raw_output
    else:
        expected = raw_output
        shown_output = json.dumps(raw_output)
    accepted = [expected]
    # TACO and PrimeIntellect wrap a call's expected value in a one-element list
    if wrapped_ok and isinstance(expected, list) and len(expected) == 1:
        accepted.append(expected[0])
        shown_output = json.dumps(expected[0])
    return CodeTest("call", shown_input, shown_output, args, tuple(accepted), raw_input, raw_output)


def _require(record: Mapping[str, Any], key: str, source: str, where: str) -> Any:
    if key not in record:
        raise TaskError(source, f"{where}.{key}", "missing")
    return record[key]


def parse_tests(
    raw: Any, source: str, *, func_name: str | None = None
) -> tuple[tuple[CodeTest, ...], str | None]:
    """Tests in any DeepCoder schema -> (tests, function name for call-based tests)."""
    if isinstance(raw, str | bytes):
        raw = _json_value(raw, source, "tests")
    tests: list[CodeTest] = []
    if isinstance(raw, dict):  # taco
        inputs = _require(raw, "inputs", source, "tests")
        outputs = _require(raw, "outputs", source, "tests")
        if not isinstance(inputs, list) or not isinstance(outputs, list):
            raise TaskError(source, "tests", "taco tests need lists 'inputs' and 'outputs'")
        if len(inputs) != len(outputs):
            raise TaskError(source, "tests", f"{len(inputs)} inputs but {len(outputs)} outputs")
        fn = raw.get("fn_name") or None
        if fn is not None and not isinstance(fn, str):
            raise TaskError(source, "tests.fn_name", f"expected a string, got {fn!r:.60}")
        func_name = fn or func_name
        for i, (x, y) in enumerate(zip(inputs, outputs, strict=True)):
            where = f"tests.inputs[{i}]"
            if func_name:
                tests.append(_call_test(x, y, source, where, wrapped_ok=True))
            else:
                tests.append(
                    CodeTest(
                        "stdin",
                        _text(x, source, where),
                        _text(y, source, f"tests.outputs[{i}]"),
                        raw_input=x,
                        raw_output=y,
                    )
                )
    elif isinstance(raw, list):  # lcbv5, codeforces, primeintellect
        for i, test in enumerate(raw):
            where = f"tests[{i}]"
            if not isinstance(test, dict):
                raise TaskError(source, where, f"expected an object, got {type(test).__name__}")
            x = _require(test, "input", source, where)
            y = _require(test, "output", source, where)
            kind = test.get("testtype", test.get("type"))
            if kind is None and "testtype" not in test and "type" not in test:
                kind = "stdin"  # rLLM's codeforces rows: plain {input, output}
            if kind in ("stdin", "stdin_stdout"):
                tests.append(
                    CodeTest(
                        "stdin",
                        _text(x, source, f"{where}.input"),
                        _text(y, source, f"{where}.output"),
                        raw_input=x,
                        raw_output=y,
                    )
                )
            elif kind in ("functional", "function_call"):
                test_meta = test.get("metadata")
                own = test_meta.get("func_name") if isinstance(test_meta, dict) else None
                name = test.get("fn_name") or own or func_name
                if not isinstance(name, str) or not name:
                    raise TaskError(
                        source, "metadata.func_name", f"{where} is call-based but names no function"
                    )
                func_name = name
                tests.append(_call_test(x, y, source, where, wrapped_ok=kind == "function_call"))
            else:
                raise TaskError(
                    source,
                    f"{where}.testtype",
                    f"expected 'stdin', 'functional', 'stdin_stdout' or 'function_call', "
                    f"got {kind!r:.40}",
                )
    else:
        raise TaskError(
            source,
            "tests",
            f"expected a list of tests or taco's {{inputs, outputs}}, got {type(raw).__name__}",
        )
    if not tests:
        raise TaskError(source, "tests", "no tests")
    kinds = {t.kind for t in tests}
    if len(kinds) > 1:
        raise TaskError(source, "tests", "mixes stdin and call-based tests")
    return tuple(tests), func_name if "call" in kinds else None


def detect_format(raw: Any) -> SourceFormat:
    """The source schema of a row's tests: taco's ``{inputs, outputs}``, PrimeIntellect's
    ``type`` key, else LiveCodeBench/Codeforces."""
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except (json.JSONDecodeError, TypeError):
            return "lcb"
    if isinstance(raw, dict):
        return "taco"
    if isinstance(raw, list) and raw and isinstance(raw[0], dict) and "type" in raw[0]:
        return "primeintellect"
    return "lcb"


# ---------------------------------------------------------------------- rows
def _metadata(row: Mapping[str, Any], source: str) -> dict[str, Any]:
    raw = row.get("metadata")
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str | bytes):
        raw = _json_value(raw, source, "metadata")
    if not isinstance(raw, dict):
        raise TaskError(source, "metadata", f"expected an object, got {type(raw).__name__}")
    return raw


def _optional_str(value: Any, source: str, name: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise TaskError(source, name, f"expected a string, got {type(value).__name__}")
    return value


def parse_row(row: Any, source: str, default_id: str) -> CodeTask:
    """One dataset row -> ``CodeTask``; ``source`` names the file and row for errors."""
    if not isinstance(row, Mapping):
        raise TaskError(source, "row", f"expected an object, got {type(row).__name__}")
    task_id = row.get("id", default_id)
    if isinstance(task_id, int) and not isinstance(task_id, bool):
        task_id = str(task_id)
    if not isinstance(task_id, str) or not task_id.strip():
        raise TaskError(source, "id", f"expected a non-empty string, got {task_id!r:.60}")
    problem = row.get("problem", row.get("question"))
    formatted = False
    tests_raw = row.get("tests")
    if problem is None and isinstance(row.get("prompt"), list | tuple):
        # rLLM's training files: the prompt as chat messages (already formatted), the tests
        # as reward_model.ground_truth
        users = [
            m.get("content")
            for m in row["prompt"]
            if isinstance(m, Mapping) and m.get("role") == "user"
        ]
        problem, formatted = (users[-1] if users else None), True
        reward_model = row.get("reward_model")
        if tests_raw is None and isinstance(reward_model, Mapping):
            tests_raw = reward_model.get("ground_truth")
    if not isinstance(problem, str) or not problem.strip():
        raise TaskError(source, "problem", "missing or not a non-empty string")
    if tests_raw is None:
        raise TaskError(source, "tests", "missing")
    meta = _metadata(row, source)
    func_name = _optional_str(meta.get("func_name"), source, "metadata.func_name")
    tests, func_name = parse_tests(tests_raw, source, func_name=func_name)
    starter = _optional_str(row.get("starter_code"), source, "starter_code") or ""
    difficulty = meta.get("difficulty")
    data_source = row.get("data_source")
    if data_source is None or data_source == "":
        source_format = detect_format(tests_raw)
    elif isinstance(data_source, str) and data_source.lower() in DATA_SOURCES:
        source_format = DATA_SOURCES[data_source.lower()]
    else:
        raise TaskError(
            source,
            "data_source",
            f"expected one of {sorted(DATA_SOURCES)}, got {data_source!r:.60}",
        )
    return CodeTask(
        id=task_id,
        problem=problem,
        tests=tests,
        starter_code=starter,
        func_name=func_name,
        difficulty=None if difficulty is None else str(difficulty),
        reference=_optional_str(meta.get("reference"), source, "metadata.reference"),
        metadata=meta,
        source_format=source_format,
        prompt_formatted=formatted,
    )


# ---------------------------------------------------------------------- files
def _read_jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise TaskError(str(path), "path", "file not found") from exc
    except UnicodeDecodeError as exc:
        raise TaskError(str(path), "encoding", f"not UTF-8: {exc}") from exc
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        source = f"{path}:{number}"
        try:
            yield source, json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskError(source, "json", f"not valid JSON: {exc}") from exc


def _read_json(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise TaskError(str(path), "path", "file not found") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(str(path), "json", f"not valid JSON: {exc}") from exc
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        data = data["rows"]
    if not isinstance(data, list):
        raise TaskError(
            str(path), "rows", f"expected a JSON list of rows, got {type(data).__name__}"
        )
    for i, row in enumerate(data):
        yield f"{path}[{i}]", row


def _read_parquet(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingExtraError("pyarrow", "parquet") from exc
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises its own error types for bad files
        raise TaskError(str(path), "parquet", f"cannot read: {exc}") from exc
    for i, row in enumerate(rows):
        yield f"{path}[row {i}]", row


def _rows(path: Path) -> Iterator[tuple[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _read_jsonl(path)
    if suffix == ".json":
        return _read_json(path)
    if suffix == ".parquet":
        return _read_parquet(path)
    raise TaskError(str(path), "tasks_path", "expected a .jsonl, .json or .parquet file")


def load_wrong_solutions(path: Path) -> dict[str, list[str]]:
    """``{"id", "source"}`` lines -> sources by task id (several per task allowed)."""
    out: dict[str, list[str]] = {}
    for source, record in _read_jsonl(path):
        if not isinstance(record, dict):
            raise TaskError(source, "row", "expected an object")
        task_id = record.get("id")
        code = record.get("source")
        if not isinstance(task_id, str) or not task_id:
            raise TaskError(source, "id", "missing or not a string")
        if not isinstance(code, str) or not code.strip():
            raise TaskError(source, "source", "missing or not a non-empty string")
        out.setdefault(task_id, []).append(code)
    return out


def load_tasks(tasks_path: str | Path | None = None) -> TaskSet:
    """Problems from a ``.jsonl``/``.json``/``.parquet`` file, a folder holding
    ``problems.jsonl``, a folder of shards or a glob pattern (every data file in it or
    matching it, in name order: ``agentenvs data`` gives such a pattern for each
    published split, e.g. ``.../lcbv5/test-*.parquet``), else the bundled set;
    ``wrong_solutions.jsonl`` beside it is read when present."""
    files: list[Path]
    if tasks_path is None:
        path = task_path(*BUNDLED_FILE)
        files = [path]
    elif any(c in str(tasks_path) for c in "*?["):  # a glob: every match, in name order
        pattern = Path(tasks_path).expanduser()
        files = sorted(p for p in pattern.parent.glob(pattern.name) if p.is_file())
        if not files:
            raise TaskError(str(pattern), "tasks_path", "no file matches")
        path = files[0]
    else:
        path = Path(tasks_path).expanduser()
        files = [path]
        if path.is_dir():
            shards = sorted(
                p
                for p in path.iterdir()
                if p.suffix.lower() in DATA_SUFFIXES
                and p.is_file()
                and p.name != WRONG_SOLUTIONS_FILE
            )
            if (path / BUNDLED_FILE[1]).is_file() or not shards:
                path = path / BUNDLED_FILE[1]
                files = [path]
            else:  # a split published as shards: every data file, in name order
                files = shards
                path = files[0]
        if not path.is_file():
            raise TaskError(str(path), "tasks_path", "no such file")
    tasks: dict[str, CodeTask] = {}
    rows = (item for file in files for item in _rows(file))
    for index, (source, row) in enumerate(rows):
        task = parse_row(row, source, default_id=f"row-{index:05d}")
        if task.id in tasks:
            raise TaskError(source, "id", f"duplicate task id {task.id!r}")
        tasks[task.id] = task
    if not tasks:
        raise TaskError(str(path), "rows", "no problems in file")
    wrong_path = path.parent / WRONG_SOLUTIONS_FILE
    wrong = load_wrong_solutions(wrong_path) if wrong_path.is_file() else {}
    read = [*files, wrong_path] if wrong else files
    return TaskSet(tasks, str(path), wrong, tuple(str(p.resolve()) for p in read))


def public_count(n_tests: int, public_tests: int | float) -> int:
    """How many of ``n_tests`` are public: a count (capped), or a fraction (at least 1)."""
    if isinstance(public_tests, float):
        return max(1, min(n_tests, math.ceil(public_tests * n_tests)))
    return max(1, min(n_tests, int(public_tests)))


__all__: Sequence[str] = (
    "CodeTask",
    "CodeTest",
    "TaskSet",
    "load_tasks",
    "detect_format",
    "load_wrong_solutions",
    "parse_row",
    "parse_tests",
    "public_count",
)
