"""How a task database becomes a template on the server.

A database of a MySQL dump (InterCode's ``spider_dev.sql``) is built by the dump's own
``CREATE TABLE`` and ``INSERT`` statements, with its collations and keys, as InterCode's
server has it. Other sources come from the same SQLite build the embedded backend uses:
column types follow the stored values (integers → BIGINT, other numbers → DOUBLE, text →
TEXT, or VARCHAR(255) where keyed), tables and columns are lower-cased, strings use a
binary collation (SQLite compares bytes). A template is complete once its ``_ae_ready``
table exists, written last; one without it is built again. ``server`` is the backend's
connection to the server (``mysql_server``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from agentenvs.envs.intercode_sql.backends.mysql_databases import _q


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


def build_template(server: Any, name: str, data: bytes) -> None:
    """Template ``name`` on ``server`` from the SQLite database ``data`` (the embedded
    backend's build): tables and rows as ``mysql_schema`` makes them."""
    server.run(f"DROP DATABASE IF EXISTS {_q(name)}")
    server.run(f"CREATE DATABASE {_q(name)} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(data)
        tables = mysql_schema(conn)
    finally:
        conn.close()
    with server.lock, server.guard("admin connection"), server.live_admin().cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")
        for table, create, columns, rows in tables:
            cur.execute(create.replace("CREATE TABLE ", f"CREATE TABLE {_q(name)}.", 1))
            if rows:
                marks = ", ".join(["%s"] * len(columns))
                cur.executemany(f"INSERT INTO {_q(name)}.{_q(table)} VALUES ({marks})", rows)
        # written last: a template without it is incomplete and gets rebuilt
        cur.execute(f"CREATE TABLE {_q(name)}._ae_ready (ok INT)")


def import_dump(server: Any, name: str, statements: Sequence[str]) -> None:
    """A template from a MySQL dump's own CREATE TABLE and INSERT statements, as
    InterCode's server imports them (its collations, keys and values)."""
    server.run(f"DROP DATABASE IF EXISTS {_q(name)}")
    server.run(f"CREATE DATABASE {_q(name)} CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
    with server.lock, server.guard("admin connection"), server.live_admin().cursor() as cur:
        cur.execute("SELECT @@SESSION.sql_mode")
        (mode,) = cur.fetchone()
        cur.execute(f"USE {_q(name)}")
        # as the dump's own header sets them: tables refer to each other in any order
        cur.execute("SET SESSION foreign_key_checks = 0")
        cur.execute("SET SESSION sql_mode = 'NO_AUTO_VALUE_ON_ZERO'")
        try:
            for statement in statements:
                cur.execute(statement)
            # written last: a template without it is incomplete and gets rebuilt
            cur.execute("CREATE TABLE _ae_ready (ok INT)")
        finally:
            cur.execute("SET SESSION foreign_key_checks = 1")
            cur.execute("SET SESSION sql_mode = %s", (mode,))
            cur.execute("USE information_schema")
