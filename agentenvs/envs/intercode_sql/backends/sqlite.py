"""The embedded backend: each episode gets its own in-memory SQLite copy of the task DB.

A template is built once per process from the task's SQL script (or SQLite file) and
kept serialized; an episode deserializes it into a fresh ``:memory:`` connection, which
costs a memory copy, not a re-run of the script. Writes never leave the episode.

Safety: a progress handler aborts statements past the time limit; an authorizer
refuses ``ATTACH``/``DETACH`` (and so ``VACUUM INTO``), transaction control, temporary
objects, pragmas other than schema reads, and the functions ``fts3_tokenizer`` (raw
pointers: a forged one crashes the process) and ``load_extension``;
``SQLITE_LIMIT_ATTACHED`` is 0, string/blob and SQL sizes are capped, and a result is
fetched in chunks and refused past ``Limits.max_result_bytes``. The database cannot grow
past ``Limits.max_db_bytes``: ``PRAGMA max_page_count`` is set on every episode connection
before the authorizer is, and the authorizer refuses every pragma that sets anything, so a
write past it fails as SQLite's own ``database or disk is full`` and rolls back.

Faults: none. The database lives in the env's own process, with no connection, server
or file to lose, so every failed statement is the agent's outcome and this backend never
raises :class:`~agentenvs.core.errors.Fault` (the MySQL backend's faults are in
``mysql_faults``).
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import threading
import time
from typing import Any

from agentenvs.core.errors import TaskError
from agentenvs.envs.intercode_sql.backends.base import (
    DIGEST_LIMIT_BYTES,
    Backend,
    Episode,
    Limits,
    QueryResult,
    chained_digest,
    content_digest,
    normalize_rows,
    too_big,
    too_wide,
    value_size,
)
from agentenvs.envs.intercode_sql.data import DatabaseSource

_TEMPLATES: dict[tuple[str, int, int, str], bytes] = {}
_DIGESTS: dict[tuple[str, int, int, str], str] = {}
_GOLD_SQL: dict[tuple[tuple[str, int, int, str], str], str] = {}
_LOCK = threading.Lock()

# pragmas an agent may use (schema inspection, all read-only); every other pragma is refused
_READ_PRAGMAS = frozenset(
    {
        "table_info",
        "table_xinfo",
        "table_list",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "collation_list",
        "function_list",
    }
)
_WRITES = frozenset(
    {
        sqlite3.SQLITE_INSERT,
        sqlite3.SQLITE_UPDATE,
        sqlite3.SQLITE_DELETE,
        sqlite3.SQLITE_CREATE_INDEX,
        sqlite3.SQLITE_CREATE_TABLE,
        sqlite3.SQLITE_CREATE_TRIGGER,
        sqlite3.SQLITE_CREATE_VIEW,
        sqlite3.SQLITE_DROP_INDEX,
        sqlite3.SQLITE_DROP_TABLE,
        sqlite3.SQLITE_DROP_TRIGGER,
        sqlite3.SQLITE_DROP_VIEW,
        sqlite3.SQLITE_ALTER_TABLE,
        sqlite3.SQLITE_REINDEX,
        sqlite3.SQLITE_ANALYZE,
        sqlite3.SQLITE_CREATE_VTABLE,
        sqlite3.SQLITE_DROP_VTABLE,
    }
)
_REFUSED = {
    sqlite3.SQLITE_ATTACH: "ATTACH is not allowed",
    sqlite3.SQLITE_DETACH: "DETACH is not allowed",
    sqlite3.SQLITE_TRANSACTION: "transaction control is not available (every statement commits)",
    sqlite3.SQLITE_SAVEPOINT: "savepoints are not available (every statement commits)",
    sqlite3.SQLITE_CREATE_TEMP_TABLE: "temporary tables are not supported; create a regular table",
    sqlite3.SQLITE_CREATE_TEMP_INDEX: "temporary objects are not supported",
    sqlite3.SQLITE_CREATE_TEMP_TRIGGER: "temporary objects are not supported",
    sqlite3.SQLITE_CREATE_TEMP_VIEW: "temporary views are not supported; create a regular view",
    sqlite3.SQLITE_DROP_TEMP_TABLE: "temporary objects are not supported",
    sqlite3.SQLITE_DROP_TEMP_INDEX: "temporary objects are not supported",
    sqlite3.SQLITE_DROP_TEMP_TRIGGER: "temporary objects are not supported",
    sqlite3.SQLITE_DROP_TEMP_VIEW: "temporary objects are not supported",
}
#: SQL functions no statement may call: ``fts3_tokenizer`` hands out (one argument) and
#: takes (two) raw C pointers, so a forged one crashes the process, or worse; extensions
#: are native code
_REFUSED_FUNCTIONS = {
    "fts3_tokenizer": "fts3_tokenizer() is not allowed (it reads and sets raw memory addresses)",
    "load_extension": "load_extension() is not allowed",
}
_FETCH_CHUNK = 256
_MAX_VALUE_BYTES = 10_000_000
_MAX_SQL_BYTES = 1_000_000

# MySQL-style inspection statements agents habitually send, answered from sqlite_master
_SHOW_TABLES = re.compile(r"^\s*show\s+(full\s+)?tables\s*;?\s*$", re.I)
_DESCRIBE = re.compile(
    r"^\s*(?:describe|desc|show\s+columns\s+from|show\s+fields\s+from)\s+[`\"\[]?(\w+)[`\"\]]?\s*;?\s*$",
    re.I,
)


def _mysql_inspection(sql: str) -> str | None:
    if _SHOW_TABLES.match(sql):
        return "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    m = _DESCRIBE.match(sql)
    if m:
        table = m.group(1).replace("'", "''")
        return (
            'SELECT name AS "Field", type AS "Type", CASE "notnull" WHEN 1 THEN \'NO\' ELSE \'YES\' END AS "Null", '
            "CASE pk WHEN 0 THEN '' ELSE 'PRI' END AS \"Key\", dflt_value AS \"Default\" "
            f"FROM pragma_table_info('{table}')"
        )
    return None


def _build_template(source: DatabaseSource) -> bytes:
    conn = sqlite3.connect(":memory:")
    try:
        try:
            source.build_sqlite(conn)
        except sqlite3.Error as exc:  # a script SQLite cannot run names its file
            raise TaskError(
                f"{source.path}" + (f" (database {source.dump_db})" if source.dump_db else ""),
                "database",
                f"SQLite cannot build database {source.name!r}: {exc}",
            ) from exc
        return conn.serialize()
    finally:
        conn.close()


def template_bytes(source: DatabaseSource) -> bytes:
    """The task database, serialized, built at most once per process and file version."""
    key = source.cache_key()
    with _LOCK:
        data = _TEMPLATES.get(key)
    if data is None:
        data = _build_template(source)
        with _LOCK:
            _TEMPLATES[key] = data
    return data


def _digest(conn: sqlite3.Connection) -> str:
    tables = []
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    for name in names:
        quoted = '"' + name.replace('"', '""') + '"'
        cur = conn.execute(f"SELECT * FROM {quoted}")
        cols = [d[0] for d in cur.description]
        tables.append((name, cols, normalize_rows(cur.fetchall())))
    return content_digest(tables)


class SqliteEpisode(Episode):
    """An in-memory copy of a template, guarded by an authorizer and a time limit."""

    def __init__(self, template: bytes, limits: Limits, template_digest: str | None = None):
        self.limits = limits
        self._deadline = float("inf")
        self._refusal: str | None = None
        self._wrote = False
        self._read_only = False
        self._trusted = False
        self._digest = template_digest
        #: the last key known, and the writes run since (``fingerprint``)
        self._base: str | None = None
        self._since: list[str] = []
        self.conn = self._connect(template)

    def _connect(self, data: bytes) -> sqlite3.Connection:
        # no statement cache: the authorizer runs when a statement is prepared, and a
        # cached one would run again unseen (a write taken for a read, a probe that writes)
        conn = sqlite3.connect(
            ":memory:", isolation_level=None, check_same_thread=False, cached_statements=0
        )
        conn.deserialize(data)
        # the cap, before the authorizer: no statement of the agent can set a pragma
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {max(1, self.limits.max_db_bytes // page_size)}")
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _MAX_VALUE_BYTES)
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, _MAX_SQL_BYTES)
        conn.set_authorizer(self._authorize)
        conn.set_progress_handler(self._over_time, 1000)
        return conn

    # sqlite3 callbacks -------------------------------------------------------
    def _authorize(self, action: int, arg1: Any, arg2: Any, _db: Any, _trigger: Any) -> int:
        if self._trusted:  # the env's own size reads
            return sqlite3.SQLITE_OK
        reason = _REFUSED.get(action)
        if action == sqlite3.SQLITE_FUNCTION:
            reason = _REFUSED_FUNCTIONS.get(str(arg2).lower())
        if action == sqlite3.SQLITE_PRAGMA and str(arg1).lower() not in _READ_PRAGMAS:
            reason = (
                f"PRAGMA {arg1} is not allowed (read-only schema pragmas such as table_info are)"
            )
        if action in _WRITES:
            if self._read_only:
                reason = "write refused in a read-only probe"
            else:
                self._wrote = True
        if reason is not None:
            self._refusal = reason
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def _over_time(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    # running statements ----------------------------------------------------
    def _run(self, conn: sqlite3.Connection, sql: str) -> QueryResult:
        sql = _mysql_inspection(sql) or sql
        self._refusal = None
        self._deadline = time.monotonic() + self.limits.statement_timeout_s
        try:
            cur = conn.execute(sql)
            if cur.description is None:
                return QueryResult(rows=None, rowcount=cur.rowcount)
            columns = tuple(d[0] for d in cur.description)
            rows: list[tuple] = []
            size = 0
            # in chunks, so a result of wide values stops at the byte limit, not in memory
            while len(rows) <= self.limits.max_result_rows:
                chunk = cur.fetchmany(_FETCH_CHUNK)
                if not chunk:
                    break
                rows.extend(chunk)
                size += sum(value_size(v) for row in chunk for v in row)
                if size > self.limits.max_result_bytes:
                    return QueryResult(error=too_wide(self.limits))
            if len(rows) > self.limits.max_result_rows:
                return QueryResult(
                    error=f"the result has more than {self.limits.max_result_rows} rows; "
                    "narrow the query"
                )
            # the driver's values as they are: the reward compares their text (InterCode's rule)
            return QueryResult(rows=tuple(rows), columns=columns, rowcount=len(rows))
        except sqlite3.ProgrammingError as exc:
            if "one statement at a time" in str(exc):
                return QueryResult(error="only one SQL statement per action is allowed")
            return QueryResult(error=str(exc))
        except sqlite3.Error as exc:
            message = str(exc)
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                message = too_big(self.limits)
            elif message == "interrupted" and time.monotonic() > self._deadline:
                message = f"the statement ran past the time limit of {self.limits.statement_timeout_s:g} s"
            elif self._refusal is not None:
                message = f"not authorized: {self._refusal}"
            return QueryResult(error=message)
        except (ValueError, OverflowError, MemoryError) as exc:
            return QueryResult(error=str(exc) or type(exc).__name__)
        finally:
            self._deadline = float("inf")

    def execute(self, sql: str) -> QueryResult:
        self._wrote = False
        result = self._run(self.conn, sql)
        if self._wrote:  # the cached content digest is stale
            if self._digest is not None:
                self._base, self._since = self._digest, []
            self._since.append(sql)
            self._digest = None
            # the authorizer saw a write, whatever came back (DELETE ... RETURNING has rows)
            result = dataclasses.replace(result, wrote=True)
        return result

    def probe(self, sql: str) -> QueryResult:
        self._read_only = True
        try:
            result = self._run(self.conn, sql)
            refused_write = self._refusal == "write refused in a read-only probe"
        finally:
            self._read_only = False
            self._wrote = False
        if not refused_write:
            return result
        # a statement that writes runs on a scratch copy, so the episode stays as it was
        scratch = self._connect(self.conn.serialize())
        try:
            return self._run(scratch, sql)
        finally:
            self._wrote = False
            scratch.close()

    # state -------------------------------------------------------------------
    def dump(self) -> bytes:
        return self.conn.serialize()

    def load(self, state: Any) -> None:
        if not isinstance(state, bytes | bytearray):
            raise TypeError(f"an SQLite episode loads serialized bytes, not {type(state).__name__}")
        # deserialize() attaches internally, which the authorizer would refuse: reconnect
        old, self.conn = self.conn, self._connect(bytes(state))
        old.close()
        self._digest, self._base, self._since = None, None, []

    def used_bytes(self) -> int:
        """The bytes the database's pages in use hold (free pages left out)."""
        self._trusted = True
        try:
            pages, free, size = (
                self.conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("page_count", "freelist_count", "page_size")
            )
        finally:
            self._trusted = False
        return (pages - free) * size

    def fingerprint(self) -> str:
        if self._digest is None:
            if self._base is not None and self.used_bytes() > DIGEST_LIMIT_BYTES:
                self._digest = chained_digest(self._base, self._since)
            else:
                self._digest = _digest(self.conn)
            self._base, self._since = None, []
        return self._digest

    def fork(self) -> SqliteEpisode:
        """A new in-memory database with this one's contents: its in-memory image copied
        whole (``serialize``/``deserialize``), as fast as SQLite's backup API copying it
        page by page on a task database (``benchmarks/bench_fork.py``), and the copy
        stays an in-memory image like every episode's (a backup's copy would not be one,
        and its ``serialize`` reads a table the authorizer refuses)."""
        child = SqliteEpisode(self.conn.serialize(), self.limits, self._digest)
        child._base, child._since = self._base, list(self._since)
        return child

    def close(self) -> None:
        conn, self.conn = self.conn, None  # type: ignore[assignment]
        if conn is not None:
            conn.close()


class SqliteBackend(Backend):
    """In-process SQLite; nothing to start, nothing to clean up but memory."""

    name = "sqlite"
    dialect = "sqlite"

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()

    def _template_digest(self, source: DatabaseSource, data: bytes) -> str:
        key = source.cache_key()
        with _LOCK:
            digest = _DIGESTS.get(key)
        if digest is None:
            conn = sqlite3.connect(":memory:")
            try:
                conn.deserialize(data)
                digest = _digest(conn)
            finally:
                conn.close()
            with _LOCK:
                _DIGESTS[key] = digest
        return digest

    def open_episode(self, source: DatabaseSource) -> SqliteEpisode:
        data = template_bytes(source)
        if len(data) > self.limits.max_db_bytes:
            raise TaskError(
                str(source.path),
                "database",
                f"database {source.name!r} holds {len(data)} bytes, over max_db_bytes="
                f"{self.limits.max_db_bytes}: raise it",
            )
        return SqliteEpisode(data, self.limits, self._template_digest(source, data))

    def schema(self, source: DatabaseSource) -> dict[str, list[str]]:
        conn = sqlite3.connect(":memory:")
        try:
            conn.deserialize(template_bytes(source))
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
                )
            ]
            return {
                name: [r[1] for r in conn.execute("SELECT * FROM pragma_table_info(?)", (name,))]
                for name in names
            }
        finally:
            conn.close()

    def translate_gold(self, source: DatabaseSource, gold: str) -> str:
        """The gold as written when SQLite accepts it, else sqlglot's SQLite version of it
        read as MySQL (InterCode's gold queries are MySQL's; Spider's run as written)."""
        key = (source.cache_key(), gold)
        with _LOCK:
            chosen = _GOLD_SQL.get(key)
        if chosen is None:
            chosen = gold
            if not self.run_on_template(source, gold).ok:
                import sqlglot

                try:
                    candidate = sqlglot.transpile(gold, read="mysql", write="sqlite")[0]
                except Exception:  # sqlglot cannot read it either: the error stays the gold's
                    candidate = gold
                if self.run_on_template(source, candidate).ok:
                    chosen = candidate
            with _LOCK:
                _GOLD_SQL[key] = chosen
        return chosen

    def run_on_template(self, source: DatabaseSource, sql: str) -> QueryResult:
        episode = SqliteEpisode(template_bytes(source), self.limits)
        try:
            return episode.execute(sql)
        finally:
            episode.close()

    def close(self) -> None:
        """Nothing to release: templates are shared by the process."""
