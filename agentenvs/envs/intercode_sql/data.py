"""InterCode-SQL tasks and their databases, in three on-disk formats.

- **Bundled** (``tasks/intercode_sql/``): ``tasks.jsonl``, one JSON object a line
  ``{"id", "db", "query", "gold", "hardness", "db_tables"}``, and
  ``databases/<db>.sql``, each database's schema and data as an SQLite-dialect script.
- **InterCode** (``ic_spider_dev.json``): a JSON list (or JSONL) of records
  ``{"db", "query", "gold", "hardness", "db_tables"}`` without ids, or a CSV/TSV with
  columns ``query,gold,db`` (the ``intercode-bench`` package's ``sql_queries.csv``); ids
  are made as ``<db>-NNN`` (numbered per database in file order). Databases are looked up
  in ``databases_path`` and beside the file: ``databases/<db>.sql``, Spider's
  ``database/<db>/<db>.sqlite``, or a database of a MySQL dump (InterCode's
  ``spider_dev.sql``, see ``mysql_dump``): a dump given as ``databases_path`` or lying
  beside the task file. ``tasks_path="intercode-bench"`` is the installed package's own
  question file with its own dump (extra ``intercode``).
- **Spider** (a folder with ``dev.json``, ``tables.json`` and
  ``database/<db>/<db>.sqlite``): records ``{"db_id", "question", "query"}``; table
  columns come from ``tables.json``; ids are ``<db>-NNN``.

Every malformed input raises ``TaskError`` naming the file and the field.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.core.errors import TaskError
from agentenvs.core.tasks import task_path
from agentenvs.envs.intercode_sql.mysql_dump import (
    Dump,
    DumpDatabase,
    build_sqlite,
    is_mysql_dump,
    read_dump,
)

HARDNESS_LEVELS = ("easy", "medium", "hard", "extra")


@dataclass(frozen=True)
class DatabaseSource:
    """Where one task database comes from: an SQLite-dialect script, an SQLite file, or
    one database of a MySQL dump (``dump_db`` names it; ``path`` is the dump)."""

    name: str
    path: Path
    dump_db: str | None = None

    @property
    def kind(self) -> str:
        """``"mysql_dump"``, ``"sqlite_script"`` or ``"sqlite_file"``."""
        if self.dump_db is not None:
            return "mysql_dump"
        return "sqlite_script" if self.path.suffix == ".sql" else "sqlite_file"

    @property
    def is_script(self) -> bool:
        return self.kind == "sqlite_script"

    def cache_key(self) -> tuple[str, int, int, str]:
        """Changes whenever the file does, so process-wide caches never go stale."""
        stat = self.path.stat()
        return (str(self.path.resolve()), stat.st_mtime_ns, stat.st_size, self.dump_db or "")

    def dump_database(self) -> DumpDatabase:
        """This database's part of its MySQL dump."""
        if self.dump_db is None:
            raise ValueError(f"database {self.name!r} does not come from a MySQL dump")
        return read_dump(self.path).databases[self.dump_db]

    def build_sqlite(self, conn: sqlite3.Connection) -> None:
        """Create the database in an empty SQLite connection."""
        kind = self.kind
        if kind == "sqlite_script":
            conn.executescript(self.path.read_text(encoding="utf-8"))
        elif kind == "mysql_dump":
            build_sqlite(conn, self.dump_database(), str(self.path))
        else:
            disk = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            try:
                disk.backup(conn)
            finally:
                disk.close()
        conn.commit()

    def sqlite_script(self) -> str:
        """The database as an SQLite-dialect SQL script (schema, then data)."""
        if self.is_script:
            return self.path.read_text(encoding="utf-8")
        conn = sqlite3.connect(":memory:")
        try:
            self.build_sqlite(conn)
            return "\n".join(conn.iterdump())
        finally:
            conn.close()


@dataclass(frozen=True)
class SqlTask:
    """One question over one database, with the gold query that answers it."""

    id: str
    db: str
    question: str
    gold: str
    hardness: str | None = None
    db_tables: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass
class TaskSet:
    """Tasks by id (in file order) and the databases they use."""

    tasks: dict[str, SqlTask]
    databases: dict[str, DatabaseSource]
    origin: str


# ---------------------------------------------------------------------- validation
def _require_str(record: Mapping[str, Any], key: str, source: str) -> str:
    if key not in record:
        raise TaskError(source, key, "missing")
    value = record[key]
    if not isinstance(value, str) or not value.strip():
        raise TaskError(source, key, f"expected a non-empty string, got {value!r:.80}")
    return value


def _tables(record: Mapping[str, Any], source: str, *, required: bool) -> dict[str, list[str]]:
    if "db_tables" not in record:
        if required:
            raise TaskError(source, "db_tables", "missing")
        return {}
    raw = record["db_tables"]
    if not isinstance(raw, dict):
        raise TaskError(
            source, "db_tables", f"expected {{table: [columns]}}, got {type(raw).__name__}"
        )
    tables: dict[str, list[str]] = {}
    for table, cols in raw.items():
        if not isinstance(cols, list) or not all(isinstance(c, str) for c in cols):
            raise TaskError(
                source, "db_tables", f"columns of table {table!r} must be a list of strings"
            )
        tables[str(table)] = list(cols)
    return tables


def _hardness(record: Mapping[str, Any], source: str, *, required: bool) -> str | None:
    if "hardness" not in record:
        if required:
            raise TaskError(source, "hardness", "missing")
        return None
    value = record["hardness"]
    if value not in HARDNESS_LEVELS:
        raise TaskError(
            source, "hardness", f"expected one of {list(HARDNESS_LEVELS)}, got {value!r}"
        )
    return value


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise TaskError(str(path), "path", "file not found") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(str(path), "json", f"not valid JSON: {exc}") from exc


def _read_jsonl(path: Path) -> list[tuple[str, Any]]:
    """(source label naming the line, record) pairs."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise TaskError(str(path), "path", "file not found") from exc
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


def _find_database(
    db: str, roots: Sequence[Path], source: str, dumps: Sequence[Dump] = ()
) -> DatabaseSource:
    tried = []
    for root in roots:
        for candidate in (
            root / "databases" / f"{db}.sql",
            root / "database" / db / f"{db}.sqlite",
        ):
            if candidate.is_file():
                return DatabaseSource(db, candidate)
            tried.append(str(candidate))
    for dump in dumps:
        if db in dump.databases:
            return DatabaseSource(db, dump.path, dump_db=db)
        # a server with lower_case_table_names=1 stores database names lower-cased
        folded = [name for name in dump.databases if name.lower() == db.lower()]
        if folded:
            return DatabaseSource(db, dump.path, dump_db=folded[0])
        tried.append(f"database {db!r} in the MySQL dump {dump.path}")
    raise TaskError(source, "db", f"database {db!r} not found (looked for {', '.join(tried)})")


def _database_places(
    task_file: Path, databases_path: str | Path | None
) -> tuple[list[Path], list[Dump]]:
    """Folders to look in and MySQL dumps to read: ``databases_path`` first, then the
    task file's folder (and any MySQL dump lying there)."""
    roots: list[Path] = []
    dumps: list[Dump] = []
    if databases_path is not None:
        given = Path(databases_path)
        if given.is_dir():
            roots.append(given)
        elif given.is_file():
            if not is_mysql_dump(given):
                raise TaskError(
                    str(given), "databases_path", "not a MySQL dump (no CREATE DATABASE/USE)"
                )
            dumps.append(read_dump(given))
        else:
            raise TaskError(str(given), "databases_path", "no such file or folder")
    roots.append(task_file.parent)
    for candidate in sorted(task_file.parent.glob("*.sql")):
        if is_mysql_dump(candidate) and all(d.path != candidate for d in dumps):
            dumps.append(read_dump(candidate))
    return roots, dumps


def _numbered_id(db: str, counters: dict[str, int]) -> str:
    counters[db] = counters.get(db, 0) + 1
    return f"{db}-{counters[db]:03d}"


def _add(tasks: dict[str, SqlTask], task: SqlTask, source: str) -> None:
    if task.id in tasks:
        raise TaskError(source, "id", f"duplicate task id {task.id!r}")
    tasks[task.id] = task


# ---------------------------------------------------------------------- loaders
def load_bundled_format(path: Path) -> TaskSet:
    """``tasks.jsonl`` with ``databases/<db>.sql`` beside it."""
    tasks: dict[str, SqlTask] = {}
    databases: dict[str, DatabaseSource] = {}
    for source, record in _read_jsonl(path):
        if not isinstance(record, dict):
            raise TaskError(
                source, "record", f"expected a JSON object, got {type(record).__name__}"
            )
        db = _require_str(record, "db", source)
        task = SqlTask(
            id=_require_str(record, "id", source),
            db=db,
            question=_require_str(record, "query", source),
            gold=_require_str(record, "gold", source),
            hardness=_hardness(record, source, required=True),
            db_tables=_tables(record, source, required=True),
        )
        if db not in databases:
            databases[db] = _find_database(db, [path.parent], source)
        _add(tasks, task, source)
    if not tasks:
        raise TaskError(str(path), "tasks", "no tasks in file")
    return TaskSet(tasks, databases, str(path))


def _read_table_file(path: Path) -> list[tuple[str, Any]]:
    """CSV/TSV rows as records (InterCode's loader reads these with pandas)."""
    import csv

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise TaskError(str(path), "path", "file not found") from exc
    except UnicodeDecodeError as exc:
        raise TaskError(str(path), "encoding", f"not UTF-8 text: {exc}") from exc
    reader = csv.DictReader(text.splitlines(), delimiter="\t" if path.suffix == ".tsv" else ",")
    missing = [c for c in ("query", "gold", "db") if c not in (reader.fieldnames or [])]
    if missing:
        raise TaskError(str(path), missing[0], f"missing column (has {reader.fieldnames})")
    # line numbers count the header as line 1
    return [(f"{path}:{i}", dict(row)) for i, row in enumerate(reader, start=2)]


def load_intercode_format(
    path: Path,
    database_roots: Sequence[Path] = (),
    databases_path: str | Path | None = None,
) -> TaskSet:
    """InterCode's records: ``ic_spider_dev.json`` (a JSON list, or JSONL), or a CSV/TSV."""
    if path.suffix in (".csv", ".tsv"):
        pairs = _read_table_file(path)
    elif path.suffix == ".jsonl":
        pairs = _read_jsonl(path)
    else:
        data = _read_json(path)
        if not isinstance(data, list):
            raise TaskError(
                str(path), "records", f"expected a JSON list, got {type(data).__name__}"
            )
        pairs = [(f"{path}[{i}]", record) for i, record in enumerate(data)]
    more_roots, dumps = _database_places(path, databases_path)
    roots = [*database_roots, *more_roots]
    tasks: dict[str, SqlTask] = {}
    databases: dict[str, DatabaseSource] = {}
    counters: dict[str, int] = {}
    for source, record in pairs:
        if not isinstance(record, dict):
            raise TaskError(
                source, "record", f"expected a JSON object, got {type(record).__name__}"
            )
        db = _require_str(record, "db", source)
        task_id = record.get("id")
        if task_id is None:
            task_id = _numbered_id(db, counters)
        elif not isinstance(task_id, str):
            raise TaskError(source, "id", f"expected a string, got {task_id!r}")
        task = SqlTask(
            id=task_id,
            db=db,
            question=_require_str(record, "query", source),
            gold=_require_str(record, "gold", source),
            hardness=_hardness(record, source, required=False),
            db_tables=_tables(record, source, required=False),
        )
        if db not in databases:
            databases[db] = _find_database(db, roots, source, dumps)
        _add(tasks, task, source)
    if not tasks:
        raise TaskError(str(path), "records", "no tasks in file")
    return TaskSet(tasks, databases, str(path))


def _spider_tables(path: Path) -> dict[str, dict[str, list[str]]]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise TaskError(str(path), "tables", f"expected a JSON list, got {type(data).__name__}")
    schemas: dict[str, dict[str, list[str]]] = {}
    for i, entry in enumerate(data):
        source = f"{path}[{i}]"
        if not isinstance(entry, dict):
            raise TaskError(source, "record", "expected a JSON object")
        db = _require_str(entry, "db_id", source)
        names = entry.get("table_names_original")
        columns = entry.get("column_names_original")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise TaskError(source, "table_names_original", "expected a list of table names")
        if not isinstance(columns, list):
            raise TaskError(
                source, "column_names_original", "expected a list of [table index, column]"
            )
        tables: dict[str, list[str]] = {name: [] for name in names}
        for pair in columns:
            if (
                not isinstance(pair, list)
                or len(pair) != 2
                or not isinstance(pair[0], int)
                or not isinstance(pair[1], str)
            ):
                raise TaskError(source, "column_names_original", f"bad entry {pair!r:.60}")
            if pair[0] < 0:  # Spider's (-1, "*") placeholder
                continue
            if pair[0] >= len(names):
                raise TaskError(
                    source, "column_names_original", f"table index {pair[0]} out of range"
                )
            tables[names[pair[0]]].append(pair[1])
        schemas[db] = tables
    return schemas


def load_spider_format(root: Path, split: str = "dev") -> TaskSet:
    """Spider's ``<split>.json`` + ``tables.json`` + ``database/<db>/<db>.sqlite``."""
    records_path = root / f"{split}.json"
    data = _read_json(records_path)
    if not isinstance(data, list):
        raise TaskError(
            str(records_path), "records", f"expected a JSON list, got {type(data).__name__}"
        )
    schemas = _spider_tables(root / "tables.json")
    tasks: dict[str, SqlTask] = {}
    databases: dict[str, DatabaseSource] = {}
    counters: dict[str, int] = {}
    for i, record in enumerate(data):
        source = f"{records_path}[{i}]"
        if not isinstance(record, dict):
            raise TaskError(source, "record", "expected a JSON object")
        db = _require_str(record, "db_id", source)
        task = SqlTask(
            id=_numbered_id(db, counters),
            db=db,
            question=_require_str(record, "question", source),
            gold=_require_str(record, "query", source),
            hardness=None,
            db_tables=schemas.get(db, {}),
        )
        if db not in databases:
            databases[db] = _find_database(db, [root], source)
        _add(tasks, task, source)
    if not tasks:
        raise TaskError(str(records_path), "records", "no tasks in file")
    return TaskSet(tasks, databases, str(records_path))


INTERCODE_PACKAGE = "intercode-bench"


def intercode_package_files() -> tuple[Path, Path]:
    """(question file, MySQL dump) shipped in the installed ``intercode-bench`` package.

    Found without importing the package (its import pulls in Docker and a MySQL driver).
    """
    import importlib.util

    spec = importlib.util.find_spec("intercode")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "tasks_path='intercode-bench' needs InterCode's package: "
            "pip install 'agentenvs[intercode]'"
        )
    datasets = Path(next(iter(spec.submodule_search_locations))) / "assets" / "datasets"
    questions, dump = datasets / "sql_queries.csv", datasets / "spider_dev.sql"
    for needed in (questions, dump):
        if not needed.is_file():
            raise TaskError(str(needed), "path", "not in the installed intercode-bench package")
    return questions, dump


def load_tasks(
    tasks_path: str | Path | None = None, databases_path: str | Path | None = None
) -> TaskSet:
    """Load tasks from ``tasks_path`` (any of the three formats), or the bundled set.

    A folder holding ``tasks.jsonl`` is the bundled format; a folder holding
    ``dev.json`` and ``tables.json`` is Spider; a ``.json``/``.jsonl``/``.csv``/``.tsv``
    file of records without ids is InterCode's format (a ``.jsonl`` whose records have
    ids is read as the bundled format). ``"intercode-bench"`` is the installed package's
    question file and dump. ``databases_path`` (a folder, or a MySQL dump file) is where
    InterCode-format tasks find their databases first.
    """
    if tasks_path is None:
        return load_bundled_format(task_path("intercode_sql", "tasks.jsonl"))
    if str(tasks_path) == INTERCODE_PACKAGE:
        questions, dump = intercode_package_files()
        return load_intercode_format(questions, databases_path=databases_path or dump)
    path = Path(tasks_path)
    if path.is_dir():
        if (path / "tasks.jsonl").is_file():
            return load_bundled_format(path / "tasks.jsonl")
        if (path / "dev.json").is_file() and (path / "tables.json").is_file():
            return load_spider_format(path)
        raise TaskError(
            str(path),
            "tasks_path",
            "folder has neither tasks.jsonl nor Spider's dev.json + tables.json",
        )
    if not path.is_file():
        raise TaskError(str(path), "tasks_path", "no such file or folder")
    if path.suffix == ".jsonl":
        first = next((r for _, r in _read_jsonl(path)), None)
        if isinstance(first, dict) and "id" in first:
            return load_bundled_format(path)
    return load_intercode_format(path, databases_path=databases_path)
