"""MySQL dumps (``mysqldump`` output, such as InterCode's ``spider_dev.sql``) as task databases.

A dump holds several databases (``CREATE DATABASE``/``USE`` sections), each a list of
``CREATE TABLE`` and ``INSERT`` statements, wrapped in statements that only set up the
importing session (``SET``, ``LOCK TABLES``, ``DROP TABLE IF EXISTS``) and, in InterCode's
dump, a ``CREATE USER``/``GRANT`` for its own server. ``read_dump`` keeps each database's
tables and rows; the account statements are never run.

- On **MySQL** the tables are created and filled by the dump's own statements.
- On **SQLite** each ``CREATE TABLE`` is converted with sqlglot (MySQL → SQLite): column
  types, ``NOT NULL``, defaults, primary and foreign keys stay; MySQL-only parts go
  (``AUTO_INCREMENT`` counters, engine and charset options, column collations, which
  leave SQLite's binary text comparison, as in Spider's own SQLite files); inline
  ``KEY``/``UNIQUE KEY`` become ``CREATE [UNIQUE] INDEX``. Rows are read from each
  ``INSERT``'s parsed values (strings unescaped exactly, numbers, ``NULL``) and inserted
  with parameters, so no text is altered on the way.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.core.errors import TaskError

# quoted strings and identifiers, comments, and the statement separator
_LEXEME = re.compile(
    r"'(?:[^'\\]|\\.|'')*'"
    r'|"(?:[^"\\]|\\.|"")*"'
    r"|`(?:[^`]|``)*`"
    r"|--[^\n]*|#[^\n]*"
    r"|/\*.*?\*/"
    r"|;",
    re.S,
)
_NAME = r"(`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
_CREATE_DB = re.compile(rf"^CREATE\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}", re.I)
_USE = re.compile(rf"^USE\s+{_NAME}", re.I)
_CREATE_TABLE = re.compile(rf"^CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}", re.I)
_INSERT = re.compile(rf"^INSERT\s+(?:IGNORE\s+)?INTO\s+{_NAME}", re.I)
_LEADING_COMMENTS = re.compile(r"^(?:\s+|--[^\n]*\n?|#[^\n]*\n?|/\*(?!!).*?\*/)*", re.S)


def _unquote(name: str) -> str:
    if name.startswith("`"):
        return name[1:-1].replace("``", "`")
    return name


@dataclass
class DumpTable:
    name: str
    create: str
    inserts: list[str] = field(default_factory=list)


@dataclass
class DumpDatabase:
    """One database of a dump: its tables in dump order, with their statements."""

    name: str
    tables: list[DumpTable] = field(default_factory=list)

    def table(self, name: str) -> DumpTable | None:
        return next((t for t in self.tables if t.name == name), None)

    def statements(self) -> list[str]:
        """The statements that rebuild this database in an empty, selected database."""
        out = [t.create for t in self.tables]
        out += [insert for t in self.tables for insert in t.inserts]
        return out


@dataclass
class Dump:
    path: Path
    databases: dict[str, DumpDatabase]
    #: statements that are not about the data (accounts, grants) and are never run
    skipped: list[str]


def split_statements(text: str) -> list[str]:
    """The dump's statements, split on ``;`` outside strings, identifiers and comments."""
    out = []
    start = 0
    for m in _LEXEME.finditer(text):
        if m.group() == ";":
            statement = text[start : m.start()].strip()
            if statement:
                out.append(statement)
            start = m.end()
    tail = text[start:].strip()
    if tail and _LEADING_COMMENTS.sub("", tail):
        out.append(tail)
    return out


_DUMPS: dict[tuple[str, int, int], Dump] = {}
_LOCK = threading.Lock()


def read_dump(path: str | Path) -> Dump:
    """Parse a MySQL dump (cached per file version)."""
    path = Path(path)
    try:
        stat = path.stat()
    except FileNotFoundError as exc:
        raise TaskError(str(path), "path", "file not found") from exc
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    with _LOCK:
        cached = _DUMPS.get(key)
    if cached is not None:
        return cached
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(str(path), "encoding", f"not UTF-8 text: {exc}") from exc
    databases: dict[str, DumpDatabase] = {}
    skipped: list[str] = []
    current: DumpDatabase | None = None
    for raw in split_statements(text):
        statement = _LEADING_COMMENTS.sub("", raw, count=1)
        if not statement:
            continue
        if m := _CREATE_DB.match(statement):
            name = _unquote(m.group(1))
            current = databases.setdefault(name, DumpDatabase(name))
        elif m := _USE.match(statement):
            name = _unquote(m.group(1))
            current = databases.setdefault(name, DumpDatabase(name))
        elif m := _CREATE_TABLE.match(statement):
            if current is None:
                raise TaskError(str(path), "CREATE TABLE", "a table before any CREATE DATABASE/USE")
            name = _unquote(m.group(1))
            existing = current.table(name)
            if existing is not None:  # a later definition replaces the earlier one
                current.tables.remove(existing)
            current.tables.append(DumpTable(name, statement))
        elif m := _INSERT.match(statement):
            table = current.table(_unquote(m.group(1))) if current is not None else None
            if table is None:
                raise TaskError(str(path), "INSERT", f"rows for unknown table {m.group(1)}")
            table.inserts.append(statement)
        elif re.match(
            r"^(CREATE\s+USER|GRANT|REVOKE|FLUSH|ALTER\s+USER|SET\s+PASSWORD)\b", statement, re.I
        ):
            skipped.append(statement)
    if not databases:
        raise TaskError(str(path), "CREATE DATABASE", "no database in this MySQL dump")
    dump = Dump(path, databases, skipped)
    with _LOCK:
        _DUMPS[key] = dump
    return dump


def is_mysql_dump(path: Path) -> bool:
    """A ``.sql`` file that defines databases (rather than an SQLite script of one)."""
    if path.suffix != ".sql" or not path.is_file():
        return False
    with path.open(encoding="utf-8", errors="replace") as f:
        head = f.read(20_000)
    return bool(re.search(r"^\s*(CREATE\s+DATABASE|USE\s+`)", head, re.I | re.M))


# ---------------------------------------------------------------------- to SQLite
def sqlite_create(create: str, table: str) -> list[str]:
    """A MySQL ``CREATE TABLE`` as SQLite statements (the table, then its indexes)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(create, read="mysql")
    except sqlglot.errors.ParseError as exc:
        plain = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # sqlglot underlines with ANSI codes
        raise ValueError(f"sqlglot cannot read it: {plain}") from exc
    schema = tree.this if isinstance(tree.this, exp.Schema) else None
    for prefix in list(tree.find_all(exp.ColumnPrefix)):  # KEY (`col`(255)): the column
        prefix.replace(prefix.this)
    indexes = []

    def index(name: str, columns: list[Any], unique: bool) -> None:
        names = [c.sql(dialect="sqlite") for c in columns]
        if names:
            indexes.append(
                f"CREATE {'UNIQUE ' if unique else ''}INDEX "
                f"{exp.to_identifier(f'{table}__{name}').sql(dialect='sqlite')} "
                f"ON {exp.to_identifier(table).sql(dialect='sqlite')} ({', '.join(names)})"
            )

    if schema is not None:
        for item in list(schema.expressions):
            if isinstance(item, exp.ColumnDef):
                for constraint in list(item.args.get("constraints") or []):
                    kind = constraint.args.get("kind")
                    # column collations (utf8mb4_general_ci ...) do not exist in SQLite
                    if isinstance(
                        kind,
                        exp.CollateColumnConstraint
                        | exp.CharacterSetColumnConstraint
                        | exp.CommentColumnConstraint
                        | exp.OnUpdateColumnConstraint,
                    ):
                        constraint.pop()
            elif isinstance(item, exp.IndexColumnConstraint):  # KEY name (cols)
                name = item.this.name if item.this is not None else f"key{len(indexes)}"
                unique = (item.args.get("kind") or "").upper() == "UNIQUE"
                index(name, list(item.args.get("expressions") or []), unique)
                item.pop()
            elif isinstance(item, exp.UniqueColumnConstraint) and isinstance(
                item.this, exp.Schema
            ):  # UNIQUE KEY name (cols)
                index(item.this.name or f"key{len(indexes)}", list(item.this.expressions), True)
                item.pop()
    tree.set("properties", None)  # ENGINE, AUTO_INCREMENT=, CHARSET, COLLATE
    return [tree.sql(dialect="sqlite"), *indexes]


def _literal(node: Any) -> Any:
    from sqlglot import exp

    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return int(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        return _number(node.this)
    if isinstance(node, exp.Neg):
        value = _literal(node.this)
        if isinstance(value, int | float):
            return -value
    raise ValueError(f"not a plain literal: {node.sql(dialect='mysql')[:60]}")


def _number(text: str) -> int | float:
    return int(text) if re.fullmatch(r"[0-9]+", text) else float(text)


def _rows_from_tokens(insert: str) -> list[tuple[Any, ...]] | None:
    """The rows of a plain ``INSERT INTO t VALUES (...),(...)`` read from sqlglot's tokens
    (strings come back unescaped); None when the statement is anything else."""
    import sqlglot
    from sqlglot.tokens import TokenType

    tokens = sqlglot.Dialect.get_or_raise("mysql").tokenize(insert)
    kinds = [t.token_type for t in tokens]
    try:
        i = kinds.index(TokenType.VALUES) + 1
    except ValueError:
        return None
    if TokenType.L_PAREN in kinds[:i]:  # a column list: leave it to the parser
        return None
    rows: list[tuple[Any, ...]] = []
    n = len(tokens)
    while i < n:
        if kinds[i] != TokenType.L_PAREN:
            return None
        i += 1
        row: list[Any] = []
        while True:
            kind, text = kinds[i], tokens[i].text
            if kind == TokenType.STRING:
                row.append(text)
            elif kind == TokenType.NUMBER:
                row.append(_number(text))
            elif kind == TokenType.NULL:
                row.append(None)
            elif kind == TokenType.DASH and kinds[i + 1] == TokenType.NUMBER:
                i += 1
                row.append(-_number(tokens[i].text))
            else:
                return None
            i += 1
            if kinds[i] == TokenType.COMMA:
                i += 1
                continue
            if kinds[i] == TokenType.R_PAREN:
                i += 1
                break
            return None
        rows.append(tuple(row))
        if i < n and kinds[i] == TokenType.COMMA:
            i += 1
        elif i < n and kinds[i] != TokenType.SEMICOLON:
            return None
        elif i < n:
            break
    return rows


def insert_rows(insert: str) -> tuple[list[str] | None, list[tuple[Any, ...]]]:
    """(column names or None, rows) of a MySQL ``INSERT ... VALUES``, values exactly as written."""
    rows = _rows_from_tokens(insert)
    if rows is not None:
        return None, rows
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(insert, read="mysql")
    if not isinstance(tree, exp.Insert) or not isinstance(tree.expression, exp.Values):
        raise ValueError("not an INSERT ... VALUES")
    target = tree.this
    columns = None
    if isinstance(target, exp.Schema):
        columns = [c.name for c in target.expressions]
    rows = [tuple(_literal(v) for v in row.expressions) for row in tree.expression.expressions]
    return columns, rows


def build_sqlite(conn: sqlite3.Connection, database: DumpDatabase, origin: str) -> None:
    """Create and fill ``database``'s tables in the (empty) SQLite connection."""
    for table in database.tables:
        where = f"{origin} (database {database.name}, table {table.name})"
        try:
            statements = sqlite_create(table.create, table.name)
        except ValueError as exc:
            raise TaskError(where, "CREATE TABLE", str(exc)) from exc
        for statement in statements:
            try:
                conn.execute(statement)
            except sqlite3.Error as exc:
                raise TaskError(
                    where,
                    "CREATE TABLE",
                    f"SQLite refused the converted definition ({exc}): {statement[:200]}",
                ) from exc
    for table in database.tables:
        quoted = '"' + table.name.replace('"', '""') + '"'
        for insert in table.inserts:
            try:
                columns, rows = insert_rows(insert)
            except Exception as exc:
                raise TaskError(
                    f"{origin} (database {database.name}, table {table.name})", "INSERT", str(exc)
                ) from exc
            if not rows:
                continue
            names = ""
            if columns is not None:
                names = " (" + ", ".join('"' + c.replace('"', '""') + '"' for c in columns) + ")"
            marks = ", ".join("?" * len(rows[0]))
            conn.executemany(f"INSERT INTO {quoted}{names} VALUES ({marks})", rows)
