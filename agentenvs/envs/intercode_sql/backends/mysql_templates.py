"""How a task database becomes a template on the server, built once however many threads,
processes and hosts ask for it at the same time.

A database of a MySQL dump (InterCode's ``spider_dev.sql``) is built by the dump's own
``CREATE TABLE`` and ``INSERT`` statements, with its collations and keys, as InterCode's
server has it. Other sources come from the same SQLite build the embedded backend uses:
column types follow the stored values (integers → BIGINT, other numbers → DOUBLE, text →
TEXT, or VARCHAR(255) where keyed), tables and columns are lower-cased, strings use a
binary collation (SQLite compares bytes).

A build (``ensure_template``) excludes every other: the threads of a process by a lock of
the process's per template, other processes and hosts by the server's named lock, taken
on a connection of the build's own (a server lets one session take its own lock again, so
a lock taken on a connection that threads share excludes none of them). The tables are
made in a database of the builder's own (``mysql_databases.build_name``) and then moved
into the template by one ``RENAME TABLE``, its ``_ae_ready`` marker last: a template is
complete once ``_ae_ready`` exists, and one without it (a build that died before the
move) is dropped and built again. A builder killed half-way leaves its own database only,
swept with the orphaned episodes; its connection's end frees the lock.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any

from agentenvs.core.errors import Fault, ServiceUnavailable, TaskError
from agentenvs.envs.intercode_sql.backends import mysql_faults as faults
from agentenvs.envs.intercode_sql.backends.mysql_databases import _q, _run_on, build_name

#: the table written last into a template: without it a template is incomplete
READY_TABLE = "_ae_ready"
#: server error codes that say the admin user lacks a privilege (no retry helps)
_DENIED_CODES = frozenset({1044, 1045, 1142, 1227})

# one lock per (server, template) in this process: its threads wait on it rather than
# each holding a connection to wait on the server's lock
_BUILD_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_BUILD_LOCKS_GUARD = threading.Lock()


def _sqlite_affinity(declared: str) -> str:
    t = declared.upper()
    if "INT" in t:
        return "int"
    if any(k in t for k in ("CHAR", "CLOB", "TEXT")):
        return "text"
    if "BLOB" in t or not t:
        return "blob"
    if any(k in t for k in ("REAL", "FLOA", "DOUB")):
        return "real"
    return "numeric"


def _column_type(declared: str, values: Sequence[Any], keyed: bool) -> str:
    present = [v for v in values if v is not None]
    if present:
        if all(isinstance(v, int) for v in present):
            return "BIGINT"
        if all(isinstance(v, int | float) for v in present):
            return "DOUBLE"
        if all(isinstance(v, bytes) for v in present):
            return "LONGBLOB"
        long = max(len(str(v)) for v in present) > 255
        return "VARCHAR(255)" if keyed and not long else "LONGTEXT"
    affinity = _sqlite_affinity(declared)
    return {
        "int": "BIGINT",
        "real": "DOUBLE",
        "numeric": "DOUBLE",
        "blob": "LONGTEXT",
        "text": "VARCHAR(255)" if keyed else "LONGTEXT",
    }[affinity]


def mysql_schema(conn: sqlite3.Connection) -> list[tuple[str, str, list[str], list[tuple]]]:
    """(table, CREATE TABLE for MySQL, columns, rows) for every table of an SQLite db."""
    out = []
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        )
    ]
    for table in tables:
        quoted = '"' + table.replace('"', '""') + '"'
        info = conn.execute(f"PRAGMA table_info({quoted})").fetchall()
        columns = [r[1] for r in info]
        rows = conn.execute(f"SELECT * FROM {quoted}").fetchall()
        pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5] > 0]
        pk_values = [tuple(row[columns.index(c)] for c in pk) for row in rows]
        use_pk = (
            bool(pk)
            and len(set(pk_values)) == len(pk_values)
            and all(None not in v for v in pk_values)
        )
        defs = []
        for i, (_, name, declared, notnull, _, _) in enumerate(info):
            values = [row[i] for row in rows]
            kind = _column_type(declared or "", values, use_pk and name in pk)
            null = (
                " NOT NULL" if (notnull or (use_pk and name in pk)) and None not in values else ""
            )
            defs.append(f"{_q(name.lower())} {kind}{null}")
        if use_pk:
            defs.append(f"PRIMARY KEY ({', '.join(_q(c.lower()) for c in pk)})")
        create = f"CREATE TABLE {_q(table.lower())} (\n  " + ",\n  ".join(defs) + "\n)"
        out.append((table.lower(), create, [c.lower() for c in columns], rows))
    return out


def build_template(conn: Any, name: str, data: bytes) -> None:
    """The tables of the SQLite database ``data`` (the embedded backend's build) in the new
    database ``name``, on the PyMySQL connection ``conn``: as ``mysql_schema`` makes them,
    ``_ae_ready`` last."""
    run = _runner(conn)
    run(f"DROP DATABASE IF EXISTS {_q(name)}")
    run(f"CREATE DATABASE {_q(name)} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    db = sqlite3.connect(":memory:")
    try:
        db.deserialize(data)
        tables = mysql_schema(db)
    finally:
        db.close()
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")
        for table, create, columns, rows in tables:
            cur.execute(create.replace("CREATE TABLE ", f"CREATE TABLE {_q(name)}.", 1))
            if rows:
                marks = ", ".join(["%s"] * len(columns))
                cur.executemany(f"INSERT INTO {_q(name)}.{_q(table)} VALUES ({marks})", rows)
        cur.execute(f"CREATE TABLE {_q(name)}.{READY_TABLE} (ok INT)")


def import_dump(conn: Any, name: str, statements: Sequence[str]) -> None:
    """A MySQL dump's own CREATE TABLE and INSERT statements run in the new database
    ``name`` on the PyMySQL connection ``conn``, as InterCode's server imports them (its
    collations, keys and values), ``_ae_ready`` last."""
    run = _runner(conn)
    run(f"DROP DATABASE IF EXISTS {_q(name)}")
    run(f"CREATE DATABASE {_q(name)} CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
    with conn.cursor() as cur:
        cur.execute("SELECT @@SESSION.sql_mode")
        (mode,) = cur.fetchone()
        cur.execute(f"USE {_q(name)}")
        # as the dump's own header sets them: tables refer to each other in any order
        cur.execute("SET SESSION foreign_key_checks = 0")
        cur.execute("SET SESSION sql_mode = 'NO_AUTO_VALUE_ON_ZERO'")
        try:
            for statement in statements:
                cur.execute(statement)
            cur.execute(f"CREATE TABLE {READY_TABLE} (ok INT)")
        finally:
            cur.execute("SET SESSION foreign_key_checks = 1")
            cur.execute("SET SESSION sql_mode = %s", (mode,))
            cur.execute("USE information_schema")


def _runner(conn: Any) -> Callable[..., list[tuple]]:
    return lambda sql, args=None: _run_on(conn, sql, args)


def is_ready(run: Callable[..., list[tuple]], name: str) -> bool:
    """Whether template ``name`` is complete (its ``_ae_ready`` table exists)."""
    rows = run(
        "SELECT COUNT(*) FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (name, READY_TABLE),
    )
    return bool(rows and rows[0][0])


def publish(conn: Any, built: str, name: str) -> None:
    """Move the tables of the complete build ``built`` into template ``name`` (made anew,
    with ``built``'s character set and collation): one ``RENAME TABLE``, which moves them
    in order, ``_ae_ready`` last, so a reader that sees the marker sees every table."""
    run = _runner(conn)
    tables = [
        r[0]
        for r in run(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
            "AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
            (built,),
        )
    ]
    if READY_TABLE not in tables:
        raise RuntimeError(f"the build {built} of template {name} is incomplete")
    tables = [t for t in tables if t != READY_TABLE] + [READY_TABLE]
    charset, collation = run(
        "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME "
        "FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
        (built,),
    )[0]
    # what is there without the marker is a build that died half-way: never used
    run(f"DROP DATABASE IF EXISTS {_q(name)}")
    run(f"CREATE DATABASE {_q(name)} CHARACTER SET {charset} COLLATE {collation}")
    run("RENAME TABLE " + ", ".join(f"{_q(built)}.{_q(t)} TO {_q(name)}.{_q(t)}" for t in tables))


def _build_lock(server: Any, name: str) -> threading.Lock:
    key = (repr(sorted(server.args.items())), name)
    with _BUILD_LOCKS_GUARD:
        lock = _BUILD_LOCKS.get(key)
        if lock is None:
            lock = _BUILD_LOCKS[key] = threading.Lock()
        return lock


def ensure_template(
    server: Any, name: str, fill: Callable[[Any, str], None], *, wait_s: float
) -> None:
    """Make sure template ``name`` is complete on ``server`` (``mysql_server``'s), built
    by ``fill(conn, database)`` when it is not (``fill`` makes ``database`` with its
    tables and ``_ae_ready`` last, on the PyMySQL connection ``conn``), by one builder at
    a time across threads, processes and hosts. A builder that cannot take the server's
    lock within ``wait_s`` raises ``ServiceUnavailable``; a failure of the server raises
    ``Fault(kind="database")`` in one line; a ``TaskError`` of ``fill`` passes through."""
    if is_ready(server.run, name):
        return
    with _build_lock(server, name):
        if is_ready(server.run, name):  # another thread of this process built it meanwhile
            return
        with server.guard("template build connection"):
            try:
                _build_exclusively(server, name, fill, wait_s)
            except (TaskError, ServiceUnavailable, Fault):
                raise
            except server.pymysql.err.MySQLError as exc:
                if faults.is_connection_error(exc, server.pymysql) or faults.server_failure(exc):
                    raise  # the guard decides (a health probe; the server's own failure)
                raise _refused(name, exc) from exc


def _build_exclusively(
    server: Any, name: str, fill: Callable[[Any, str], None], wait_s: float
) -> None:
    lock = server.template_lock_name(name)
    # its own session: the server's lock then excludes every other builder, this
    # process's threads included, and is freed when the connection ends however it ends
    conn = server.connect()
    try:
        got = _run_on(conn, "SELECT GET_LOCK(%s, %s)", (lock, wait_s))
        if not got or got[0][0] != 1:
            raise ServiceUnavailable(
                f"could not build template {name}: another session has held its build lock "
                f"for {wait_s:g} s"
            )
        try:
            if is_ready(_runner(conn), name):  # another process built it meanwhile
                return
            built = build_name()
            try:
                fill(conn, built)
                publish(conn, built, name)
            finally:
                _quietly(conn, f"DROP DATABASE IF EXISTS {_q(built)}")  # else swept later
        finally:
            _quietly(conn, "SELECT RELEASE_LOCK(%s)", (lock,))  # else freed as it closes
    finally:
        server._close_quietly(conn)


def _quietly(conn: Any, sql: str, args: Any = None) -> None:
    """A statement of the build's clean-up: one that fails must not hide why the build did."""
    try:
        if conn.open:
            _run_on(conn, sql, args)
    except Exception:
        pass


def _refused(name: str, exc: BaseException) -> Fault:
    code = faults.error_code(exc)
    text = " ".join(faults._text(exc).split())
    return Fault(
        f"could not build template {name}: the MySQL/MariaDB server refused it: {text}",
        kind="database",
        evidence=f"the template build's own statements (no agent's) were refused: error {code}",
        retryable=code not in _DENIED_CODES,
    )
