"""Episode databases and users on the server: their names, how one is made from a template
and dropped, and the sweep of those whose owner process is gone.

An episode's database and its user share one name, ``ae_ep_<pid>_<host>_<time>_<rand>``
(base 36, at most 32 characters): the owner's pid and host tag tell whether it still
runs, so a process that starts sweeps what dead ones left (another host's once a day
old). A template is built in a database named the same way with ``ae_bld_`` in front
(``build_name``), so one whose builder was killed is swept likewise. A database is cloned table by table from its template, and its user is granted
only on it. The functions run their statements through ``run`` (the admin connection's,
or a pool thread's own), so they serve the backend and the pool alike.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
from collections.abc import Sequence
from typing import Any

from agentenvs.core.procs import host_identity, pid_alive

EPISODE_PREFIX = "ae_ep_"
#: a template being built (``mysql_templates``), before its tables move to the template
BUILD_PREFIX = "ae_bld_"
#: episodes of another host are swept once they are this old (their pid means nothing here)
FOREIGN_ORPHAN_AGE_S = 24 * 3600

#: this host and pid namespace (``core.procs.host_identity``): names of another
#: namespace's processes are foreign, swept by age only
_HOST_TAG = hashlib.blake2b(host_identity().encode(), digest_size=2).hexdigest()
_NAME = re.compile(r"^(ae_ep_|ae_bld_)([0-9a-z]+)_([0-9a-f]{4})_([0-9a-z]+)_[0-9a-z]+$")


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def _owned_name(prefix: str) -> str:
    return (
        f"{prefix}{_b36(os.getpid())}_{_HOST_TAG}_{_b36(int(time.time()))}_{secrets.token_hex(3)}"
    )


def episode_name() -> str:
    """``ae_ep_<pid>_<host>_<unix time>_<random>`` in base 36: at most 32 characters."""
    return _owned_name(EPISODE_PREFIX)


def build_name() -> str:
    """``ae_bld_<pid>_<host>_<unix time>_<random>``: where this process builds a template."""
    return _owned_name(BUILD_PREFIX)


def _parse(name: str) -> tuple[str, int, str, int] | None:
    m = _NAME.match(name)
    if not m:
        return None
    return m.group(1), int(m.group(2), 36), m.group(3), int(m.group(4), 36)


def parse_episode_name(name: str) -> tuple[int, str, int] | None:
    """(pid, host tag, creation time) of an episode database or user name."""
    parsed = _parse(name)
    if parsed is None or parsed[0] != EPISODE_PREFIX:
        return None
    return parsed[1:]


def is_orphan(name: str, now: float | None = None) -> bool:
    """Whether the episode or build database ``name`` belongs to a process that is gone."""
    parsed = _parse(name)
    if parsed is None:
        return False
    _, pid, host, created = parsed
    if host == _HOST_TAG:
        return not pid_alive(pid)
    return (now or time.time()) - created > FOREIGN_ORPHAN_AGE_S


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _run_on(conn: Any, sql: str, args: Any = None) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall()) if cur.description else []


def _clone(run: Any, template: str, target: str) -> None:
    tables = [
        r[0]
        for r in run(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
            "AND TABLE_TYPE = 'BASE TABLE' AND TABLE_NAME <> '_ae_ready' ORDER BY TABLE_NAME",
            (template,),
        )
    ]
    for table in tables:
        run(f"CREATE TABLE {_q(target)}.{_q(table)} LIKE {_q(template)}.{_q(table)}")
        run(f"INSERT INTO {_q(target)}.{_q(table)} SELECT * FROM {_q(template)}.{_q(table)}")


def copy_tables(
    cur: Any, source: str, target: str, tables: Sequence[str], old: Sequence[str]
) -> None:
    """On the admin's cursor ``cur`` (foreign key checks off): drop ``target``'s tables
    ``old`` and views, then create ``source``'s ``tables`` there as ``SHOW CREATE TABLE``
    gives them and fill them with ``INSERT ... SELECT``."""
    for table in old:
        cur.execute(f"DROP TABLE {_q(target)}.{_q(table)}")
    cur.execute(
        "SELECT TABLE_NAME FROM information_schema.VIEWS WHERE TABLE_SCHEMA = %s", (target,)
    )
    for (view,) in cur.fetchall():
        cur.execute(f"DROP VIEW {_q(target)}.{_q(view)}")
    cur.execute(f"USE {_q(target)}")
    for table in tables:
        cur.execute(f"SHOW CREATE TABLE {_q(source)}.{_q(table)}")
        cur.execute(cur.fetchone()[1])  # unqualified: made in target
        cur.execute(f"INSERT INTO {_q(table)} SELECT * FROM {_q(source)}.{_q(table)}")


def _prepare(
    run: Any, template: str, user_host: str, lost: set[str] | None = None
) -> tuple[str, str]:
    """A new episode database cloned from ``template`` and its own user, granted only on
    it: (name, password). A half-made one that cannot be dropped goes into ``lost``."""
    name = episode_name()
    password = secrets.token_urlsafe(18)
    try:
        run(f"CREATE DATABASE {_q(name)} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        _clone(run, template, name)
        run("CREATE USER %s@%s IDENTIFIED BY %s", (name, user_host, password))
        run(
            "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, CREATE VIEW, SHOW VIEW "
            f"ON {_q(name)}.* TO %s@%s",
            (name, user_host),
        )
    except Exception:
        try:
            _drop(run, name, user_host)
        except Exception:
            if lost is not None:
                lost.add(name)
        raise
    return name, password


def _drop(run: Any, name: str, user_host: str) -> None:
    run(f"DROP DATABASE IF EXISTS {_q(name)}")
    run("DROP USER IF EXISTS %s@%s", (name, user_host))


def sweep_orphans(server: Any) -> list[str]:
    """Drop episode databases and users, and template builds, whose owner process is gone
    (on ``server``, the ``mysql_server`` connection); return their names."""
    dropped = []
    dbs = [r[0] for r in server.run("SHOW DATABASES LIKE 'ae\\_ep\\_%'")]
    dbs += [r[0] for r in server.run("SHOW DATABASES LIKE 'ae\\_bld\\_%'")]
    users = [
        (r[0], r[1])
        for r in server.run("SELECT User, Host FROM mysql.user WHERE User LIKE 'ae\\_ep\\_%'")
    ]
    now = time.time()
    for db in dbs:
        if is_orphan(db, now):
            server.run(f"DROP DATABASE IF EXISTS {_q(db)}")
            dropped.append(db)
    for user, host in users:
        if is_orphan(user, now):
            server.run("DROP USER IF EXISTS %s@%s", (user, host))
            if user not in dropped:
                dropped.append(user)
    return dropped
