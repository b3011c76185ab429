"""The MySQL/MariaDB server as the process knows it: how to reach it, its admin connection,
and one such connection per server and process, however many backends use it.

The admin connection runs only the env's own statements (templates, watchdog kills,
schema reads, dumps); idle for ``PING_IDLE_S`` it is pinged and made anew when it does not
answer, and a statement that never reached the server is sent once more. A failure of
its connection is a ``Fault(kind="database")`` (``mysql_faults``), and a health probe that
finds the server restarted makes the process forget what it knew of its templates and
spares. Over a unix socket TLS is off; over TCP the first connection's choice and context
serve every later one. A unix socket that another local user could replace (its
directory, or one above it, writable by everyone and not sticky) is not used: whoever put
their own socket there would catch the login, which for ``root`` has no password.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from agentenvs.core.errors import Fault, ServiceUnavailable, require
from agentenvs.envs.intercode_sql.backends import mysql_faults as faults
from agentenvs.envs.intercode_sql.backends.base import QueryResult
from agentenvs.envs.intercode_sql.backends.mysql_databases import _drop, _q, sweep_orphans
from agentenvs.envs.intercode_sql.backends.mysql_pool import _Pool

#: the server's private database (episode users hold no privilege on it): it keeps the key
#: that makes the names of the template build locks unguessable
META_DB = "ae_meta"
#: an admin connection idle this long is pinged before use (a server restarted meanwhile
#: then costs a new connection, not a fault)
PING_IDLE_S = 1.0


def parse_mysql_url(url: str) -> dict[str, Any]:
    """PyMySQL connection arguments from ``mysql://user:pw@host:port/?unix_socket=...``."""
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mariadb", "mysql+pymysql"):
        raise ValueError(f"mysql_url must start with mysql://, got {url!r}")
    query = parse_qs(parts.query)
    args: dict[str, Any] = {
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
    }
    if "unix_socket" in query:
        args["unix_socket"] = query["unix_socket"][0]
    else:
        args["host"] = parts.hostname or "localhost"
        args["port"] = parts.port or 3306
    return args


def socket_problem(path: str) -> str | None:
    """Why another local user could replace the unix socket at ``path`` (a directory on
    its way that everyone can reach and write, without the sticky bit), or None."""
    directory = os.path.dirname(os.path.abspath(path))
    chain = [directory]
    while os.path.dirname(chain[-1]) != chain[-1]:
        chain.append(os.path.dirname(chain[-1]))
    for d in reversed(chain):  # from / down: a directory others cannot enter guards the rest
        try:
            mode = os.stat(d).st_mode
        except OSError:  # the connection says what is missing
            return None
        if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
            return f"{d} is writable by every local user and not sticky"
        if not mode & stat.S_IXOTH:
            return None
    return None


class _Server:
    """What we know about the server and how to reach it."""

    def __init__(self, url: str) -> None:
        self.pymysql = require("pymysql", "mysql")
        self.args = parse_mysql_url(url)
        if "unix_socket" in self.args:
            problem = socket_problem(self.args["unix_socket"])
            if problem is not None:
                raise ServiceUnavailable(
                    f"will not log in over {self.args['unix_socket']}: {problem}, so another "
                    "user could put their own socket there"
                )
        # an episode user connects from wherever we connect from
        local = "unix_socket" in self.args or self.args.get("host") in ("localhost",)
        self.user_host = "localhost" if local else "%"
        self.lock = threading.RLock()
        # PyMySQL builds a new TLS context (reading the system's CA store: tens of ms) on
        # every connect that does not say otherwise. Over a unix socket TLS secures
        # nothing; over TCP the first connection's choice (TLS when the server offers it)
        # and its context are reused, so episodes connect as fast and as securely.
        self.tls: dict[str, Any] = (
            {"ssl_disabled": True} if local and "unix_socket" in self.args else {}
        )
        self.admin = self.connect()
        self.admin_used = time.monotonic()
        if not self.tls:
            import ssl

            ctx = getattr(self.admin, "ctx", None)
            encrypted = isinstance(getattr(self.admin, "_sock", None), ssl.SSLSocket)
            self.tls = {"ssl": ctx} if encrypted and ctx is not None else {"ssl_disabled": True}
        version = self.scalar("SELECT VERSION()")
        self.is_mariadb = "mariadb" in str(version).lower()
        self.pool = _Pool(self)
        # templates: by name, by (prefix, source); their table-name case; translated golds
        self.templates: dict[str, tuple[str, str]] = {}
        self.source_templates: dict[tuple, tuple[str, str]] = {}
        self.case: dict[str, dict[str, str]] = {}
        self.gold_sql: dict[tuple[str, str], str] = {}
        #: the size of each template's files (``MySQLBackend.template_bytes``)
        self.template_sizes: dict[str, int] = {}
        # gold queries on templates, for every backend of the process
        self.gold_lock = threading.Lock()
        self.gold_conn: Any = None
        self.gold_settings: tuple[str, ...] = ()
        self.lock_key: str | None = None
        #: when the server started (this host's clock, to a second), and the first
        #: connection id seen in that run: a probe that finds a later start, or a new
        #: connection with a lower id, tells a restart
        self.boot: float | None = None
        self.boot_connection: int | None = None
        # episode databases whose drop failed (the server was away): dropped once it answers
        self.lost: set[str] = set()
        self._note_boot(faults.probe(self))

    def template_lock_name(self, template: str) -> str:
        """The named lock under which ``template`` is built: every process with the admin's
        privileges derives the same name, no episode user can (named locks are the server's,
        open to every session: a name taken from public data could be held to stall us)."""
        with self.lock:
            if self.lock_key is None:
                self.run(f"CREATE DATABASE IF NOT EXISTS {_q(META_DB)}")
                self.run(
                    f"CREATE TABLE IF NOT EXISTS {_q(META_DB)}.lock_key "
                    "(id TINYINT PRIMARY KEY, secret CHAR(32) NOT NULL)"
                )
                # the first process to get here sets it; every later one reads the same
                self.run(
                    f"INSERT IGNORE INTO {_q(META_DB)}.lock_key VALUES (1, %s)",
                    (secrets.token_hex(16),),
                )
                self.lock_key = str(
                    self.scalar(f"SELECT secret FROM {_q(META_DB)}.lock_key WHERE id = 1")
                )
        digest = hashlib.blake2b(f"{self.lock_key}\0{template}".encode(), digest_size=16)
        return f"ae_lock_{digest.hexdigest()}"

    def connect(self, **overrides: Any) -> Any:
        args = {
            **self.args,
            "autocommit": True,
            "charset": "utf8mb4",
            "connect_timeout": 5,
            **self.tls,
            **overrides,
        }
        try:
            return self.pymysql.connect(**args)
        except self.pymysql.err.OperationalError as exc:
            where = args.get("unix_socket") or f"{args.get('host')}:{args.get('port')}"
            raise ServiceUnavailable(f"cannot connect to MySQL/MariaDB at {where}: {exc}") from exc

    def live_admin(self) -> Any:
        """The admin connection, made anew when it is closed or does not answer a ping
        after being idle (call under ``self.lock``): a statement is never sent on a
        connection known to be gone."""
        now = time.monotonic()
        if self.admin.open and now - self.admin_used > PING_IDLE_S:
            try:
                self.admin.ping(reconnect=False)
            except self.pymysql.err.MySQLError:
                self._close_quietly(self.admin)
        if not self.admin.open:
            self.admin = self.connect()
        self.admin_used = now
        return self.admin

    @contextlib.contextmanager
    def guard(self, connection: str) -> Iterator[None]:
        """Raise a connection-level failure of the env's own ``connection`` (the admin's,
        the gold's) as ``Fault(kind="database")``, decided by a health probe: these
        connections run none of the agent's statements; and the server's own failure
        (its files, engine, memory or disk: ``mysql_faults.server_failure``) on any."""
        try:
            yield
        except Fault:
            raise
        except (ServiceUnavailable, self.pymysql.err.MySQLError) as exc:
            if not faults.is_connection_error(exc, self.pymysql):
                attribution = faults.server_failure(exc)
                if attribution is None:
                    raise
                raise faults.server_fault(connection, exc, attribution) from exc
            raise faults.database_fault(connection, exc, self.health()) from exc

    def health(self, **asked: Any) -> faults.Health:
        """A health probe (``mysql_faults.probe``); a restart it finds is noted: what the
        process knew of the server's templates and spares is checked again."""
        health = faults.probe(self, **asked)
        if health.restarted_since(self.boot, self.boot_connection):
            self._note_boot(health)
            self.templates.clear()
            self.source_templates.clear()
            self.lock_key = None  # a server started afresh keeps it again
            self.pool.forget()
        return health

    def _note_boot(self, health: faults.Health) -> None:
        if health.answered:
            self.boot, self.boot_connection = health.boot, health.connection_id

    def run(self, sql: str, args: Any = None) -> list[tuple]:
        with self.lock, self.guard("admin connection"):
            for attempt in (0, 1):
                try:
                    with self.live_admin().cursor() as cur:
                        cur.execute(sql, args)
                        return list(cur.fetchall()) if cur.description else []
                except self.pymysql.err.MySQLError as exc:
                    # never sent (the connection was gone): safe to send once more
                    if attempt or not faults.never_sent(exc, self.pymysql):
                        raise
                    self._close_quietly(self.admin)
        raise AssertionError("unreachable")

    @staticmethod
    def _close_quietly(conn: Any) -> None:
        try:
            conn.close()
        except Exception:
            pass

    def scalar(self, sql: str, args: Any = None) -> Any:
        rows = self.run(sql, args)
        return rows[0][0] if rows else None

    def run_gold(self, db: str, sql: str, settings: tuple[str, ...]) -> QueryResult:
        """``sql`` on database ``db`` (a template, or an episode's) over the process's one
        gold connection, made anew when it went away while idle; ``settings`` are the
        session settings of the asking backend's limits, applied when they changed."""
        pymysql = self.pymysql
        with self.gold_lock, self.guard("gold connection"):
            conn = self.gold_conn
            if conn is not None and conn.open:
                try:  # one that went away while idle (a server restarted) is made anew
                    conn.ping(reconnect=False)
                except pymysql.err.MySQLError:
                    self._close_quietly(conn)
            if conn is None or not conn.open:
                self.gold_conn, self.gold_settings = self.connect(), ()
            with self.gold_conn.cursor() as cur:
                if self.gold_settings != settings:
                    for statement in settings:
                        cur.execute(statement)
                    self.gold_settings = settings
                try:
                    cur.execute(f"USE {_q(db)}")
                except pymysql.err.MySQLError as exc:
                    if faults.is_connection_error(exc, pymysql) or faults.server_failure(exc):
                        raise  # the guard's
                    # the template or the episode's database is gone: no agent can drop it
                    raise Fault(
                        f"the database the gold query runs on is gone: {_error_text(exc)}",
                        kind="database",
                        evidence=f"USE {db} failed on the gold connection, which runs "
                        f"no statement of the agent: {_error_text(exc)}",
                    ) from exc
                try:
                    cur.execute(sql)
                    if cur.description is None:
                        return QueryResult(rows=None, rowcount=cur.rowcount)
                    return QueryResult(
                        rows=tuple(cur.fetchall()), columns=tuple(d[0] for d in cur.description)
                    )
                except pymysql.err.MySQLError as exc:
                    if faults.is_connection_error(exc, pymysql) or faults.server_failure(exc):
                        raise  # the guard's
                    if faults.error_code(exc) in faults.MISSING_CODES:
                        table = faults.table_of(exc, db)
                        if table is not None and faults.engine_holds(self, db, table):
                            raise faults.definition_lost_fault(
                                "gold connection", exc, table
                            ) from exc
                    return QueryResult(error=_error_text(exc))

    def session_settings(
        self, timeout_s: float, max_rows: int, *, comparable: bool = False
    ) -> list[str]:
        settings = [
            f"SET SESSION sql_select_limit = {int(max_rows) + 1}",
            "SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'",
        ]
        if self.is_mariadb:
            settings.append(f"SET SESSION max_statement_time = {float(timeout_s)}")
        else:
            settings.append(f"SET SESSION max_execution_time = {int(timeout_s * 1000)}")
        if comparable:
            # AVG and division keep SQLite's precision, so floats come out the same
            settings.append("SET SESSION div_precision_increment = 30")
        return settings


def _error_text(exc: Exception) -> str:
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[1], str):
        return args[1]
    return str(exc) or type(exc).__name__


_SERVERS: dict[tuple[int, str], list[Any]] = {}  # (pid, url) -> [server, backends using it]
_SERVERS_LOCK = threading.Lock()


def _acquire_server(url: str) -> _Server:
    """The process's connection to the server at ``url`` (one admin connection, however
    many envs: 64 envs stay within a server's default limit of 151 connections)."""
    key = (os.getpid(), url)
    with _SERVERS_LOCK:
        entry = _SERVERS.get(key)
        if entry is None:
            entry = _SERVERS[key] = [_Server(url), 0]
        elif not entry[0].admin.open:  # the server went away meanwhile: connect anew
            with entry[0].lock:
                entry[0].admin = entry[0].connect()
        entry[1] += 1
        return entry[0]


def _release_server(server: _Server) -> None:
    """One backend less on ``server``; the last one stops its pool and closes its
    connections."""
    with _SERVERS_LOCK:
        for key, entry in list(_SERVERS.items()):
            if entry[0] is server:
                entry[1] -= 1
                if entry[1] > 0:
                    return
                del _SERVERS[key]
                break
    server.pool.close()
    for name in list(server.lost):  # the pool's last drops that found the server away
        try:
            _drop(server.run, name, server.user_host)
            server.lost.discard(name)
        except Exception:  # still away: the sweep of a later process drops it
            pass
    for conn in (server.gold_conn, server.admin):
        try:
            if conn is not None and conn.open:
                conn.close()
        except Exception:
            pass


def sweep(url: str) -> list[str]:
    """Connect to the server at ``url`` and sweep orphaned episodes."""
    server = _Server(url)
    try:
        return sweep_orphans(server)
    finally:
        server.admin.close()
