"""The server backend: a real MariaDB/MySQL server through PyMySQL (extra ``mysql``).

- **Templates**: each task database is loaded once per server into ``ae_tpl_<db>_<hash>``
  (the hash covers the source, so an edited file gets a new template): a MySQL dump's
  database by the dump's own statements, as InterCode's server has it, any other from the
  SQLite build the embedded backend uses (``mysql_templates``), by one builder at a time
  however many threads, processes and hosts ask at once, and published whole.
  ``$AGENTENVS_MYSQL_TEMPLATE_PREFIX`` replaces ``ae_tpl_`` (``template_prefix``).
- **Episodes**: each episode gets its own database ``ae_ep_<pid>_<host>_<time>_<rand>``
  cloned from the template, and its own user granted only on that database. Before a
  statement is sent, its kind is read from its sqlglot tokens (``statements.classify``):
  one statement per action, of an allowed kind, no executable comments; and its table
  names are spelt as the server stores them (``lower_case_table_names`` 0 or 1 alike).
  It runs with a statement time limit (MariaDB ``max_statement_time``, MySQL
  ``max_execution_time``) backed by a watchdog that kills the query from the admin
  connection, so no statement can lift it, and ``sql_select_limit`` capping result
  sets. Rows come back as the driver gives them (InterCode compares their text); the
  env makes them canonical only in its comparable mode. The database and user are
  dropped at ``close()`` and at exit; ``sweep_orphans`` drops those whose owner process
  is dead (run at start-up).
- **Fast resets** (``spares``, default two per task database opened): a reset takes a
  pristine database made ahead by the pool's threads (each on its own connection), which
  then make the template's next one while the episode runs (one more for each reset
  waiting on the template) and drop finished episodes off the hot path. An episode whose
  statements all only read (``statements.classify``; a restore or a probe of a write
  counts as a write) leaves its database pristine: it is kept as a spare, and the episode
  that takes it connects anew, so no session state (user variables, locks) carries over.
  A written one has its rows copied back from the template off the hot path, or is
  dropped when a table, view or index of it changed (``mysql_pool``). The pool is
  the process's, shared by every backend on the server (so 64 envs reuse each other's
  databases); the least recently used template's spares go first, and a backend's own go
  when it closes. ``spares=0`` builds each episode's database at reset and drops it at
  close.
- **Size cap** (``Limits.max_db_bytes``): MariaDB has no quota per database, so the size
  of the episode's table files (``information_schema.INNODB_SYS_TABLESPACES``, MySQL's
  ``INNODB_TABLESPACES``: exact, about a millisecond) is read before a write, every
  ``SIZE_POLL_S`` while it runs (a write that takes the files past the cap is killed, and
  rolls back; its session too when it runs on ``SIZE_KILL_GRACE_S`` later), and after it. A data change (``INSERT``, ``UPDATE``, ...) runs in a
  transaction the env opens, committed only when the files stay within the cap or did not
  grow; a ``CREATE`` past it has the tables it made dropped. An ``ALTER`` or index that
  grows an existing table past it stays, and every later write that grows the files is
  refused. Files never shrink, so the overshoot is what one write adds before it is seen.
- **Snapshots** dump every table (definition and rows) into a picklable value.
- **Faults**: a connection-level failure (a lost or refused connection, a session or
  statement killed from outside, the server shut down or restarted, the episode's
  database dropped) raises ``Fault(kind="database")``, decided by ``mysql_faults`` from
  which connection failed, what the watchdog did and a health probe; so does the
  server's own failure on any connection (its files, temporary files, storage engine,
  memory or disk: ``mysql_faults.server_failure``); the agent's own errors stay
  results. Idle admin and gold connections are pinged and made anew, a statement that
  never reached the server is sent again on the admin connection only, and the
  databases of faulted episodes are dropped once the server answers again.

This module holds the backend and its episodes (statement policy, limits, snapshots, gold
queries); the rest has its own room: ``mysql_server`` (reaching the server, the admin
connection, one per server and process), ``mysql_pool`` (the pristine databases),
``mysql_templates`` (building a template), ``mysql_databases`` (episode names, making and
dropping a database and its user, the orphan sweep) and ``mysql_faults`` (fault or outcome).
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import hashlib
import os
import re
import threading
import time
import weakref
from typing import Any

from agentenvs.core.errors import Fault, ServiceUnavailable, TaskError
from agentenvs.envs.intercode_sql.backends import mysql_faults as faults
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
from agentenvs.envs.intercode_sql.backends.mysql_databases import (
    _clone,
    _drop,
    _prepare,
    _q,
    _run_on,
    copy_tables,
    episode_name,
    parse_episode_name,
    sweep_orphans,
)
from agentenvs.envs.intercode_sql.backends.mysql_server import (
    _acquire_server,
    _error_text,
    _release_server,
    parse_mysql_url,
    sweep,
)
from agentenvs.envs.intercode_sql.backends.mysql_templates import (
    build_template,
    ensure_template,
    import_dump,
    mysql_schema,
)
from agentenvs.envs.intercode_sql.backends.sqlite import template_bytes
from agentenvs.envs.intercode_sql.data import DatabaseSource
from agentenvs.envs.intercode_sql.statements import (
    classify,
    gold_writes,
    match_table_case,
    sqlite_gold_for_mysql,
)

TEMPLATE_PREFIX = "ae_tpl_"
#: the environment variable that puts a process's templates under another prefix (several
#: projects, or test runs, on one server keep theirs apart)
TEMPLATE_PREFIX_ENV = "AGENTENVS_MYSQL_TEMPLATE_PREFIX"
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9_]{0,15}$")
#: a statement still running this long after its time limit is killed from outside its session
KILL_GRACE_S = 0.5
#: pristine episode databases a backend keeps ready (made ahead, or only read and kept):
#: by default two per task database its episodes opened, at least DEFAULT_SPARES and at
#: most MAX_AUTO_SPARES
DEFAULT_SPARES = 4
MAX_AUTO_SPARES = 64
#: how long a backend waits for another process building the same template
TEMPLATE_LOCK_WAIT_S = 120
#: how often the files of a database that a write is changing are measured
SIZE_POLL_S = 0.02
#: a write past the cap still running this long after its KILL QUERY loses its session
SIZE_KILL_GRACE_S = 0.1
#: statements that commit on their own (a data change runs in a transaction the env opens)
_DDL_KINDS = frozenset({"CREATE", "DROP", "ALTER", "TRUNCATE", "RENAME"})
#: statements that only take data away: never held to the size cap (InnoDB's own
#: bookkeeping may still grow a file a little, and a full database must be able to shrink)
_REMOVING_KINDS = frozenset({"DELETE", "DROP", "TRUNCATE"})
#: rows read from the server at a time (the byte limit is checked after each batch)
_FETCH_CHUNK = 256
#: errors after which the server may have closed the agent's session (a packet too large,
#: a failed read or write of its statement): the session is opened anew
_SESSION_ENDING_CODES = frozenset(range(1153, 1162))

__all__ = [
    "MySQLBackend",
    "MySQLEpisode",
    "episode_name",
    "mysql_schema",
    "parse_episode_name",
    "parse_mysql_url",
    "sweep",
    "sweep_orphans",
    "template_prefix",
]


def template_prefix() -> str:
    """The prefix of the template databases: ``$AGENTENVS_MYSQL_TEMPLATE_PREFIX``, else
    ``ae_tpl_`` (lower-case letters, digits and ``_``, at most 16)."""
    prefix = os.environ.get(TEMPLATE_PREFIX_ENV) or TEMPLATE_PREFIX
    if not _PREFIX_RE.match(prefix):
        raise ValueError(
            f"${TEMPLATE_PREFIX_ENV}={prefix!r}: a template prefix is 1 to 16 lower-case "
            "letters, digits or '_', starting with a letter"
        )
    return prefix


class MySQLEpisode(Episode):
    """One episode's database and least-privilege user on the server."""

    def __init__(
        self, backend: MySQLBackend, source: DatabaseSource, template: str, template_digest: str
    ) -> None:
        self.backend = backend
        self.source = source
        self.template_digest = template_digest
        # the random database name never reaches the agent: it reads as the task's db
        self.alias = source.name
        self.server = backend.server
        self.limits = backend.limits
        self.template = template
        self.name: str | None = None
        self._digest: str | None = template_digest
        #: the last key known and the writes run since (``fingerprint``)
        self._base: str | None = None
        self._since: list[str] = []
        #: the size of the database's files after the last write (None: not measured)
        self._size: int | None = None
        # the statement stopped for growing past the size cap (0: none)
        self._oversized = 0
        #: the statement whose session the size watcher ended (0: none)
        self._session_killed = 0
        #: any statement that may write (or a load) ran: the database is not pristine
        self.dirty = False
        self.conn: Any = None
        self.thread_id = 0
        # the statement now running (0: none), so a late watchdog never hits the next one
        self._running = 0
        self._statements = 0
        self._watch = threading.Lock()
        # the statement the watchdog stopped (0: none): 1317 on any other is a kill from outside
        self._killed = 0
        self._case: dict[str, str] | None = None
        self._password = ""
        # the server's start when the session was opened (for a health probe's verdict)
        self._boot: float | None = None
        try:
            # a pristine database and user made ahead (or now, when none is ready)
            self.name, self._password, self._case = backend.take_prepared(template)
            self.connect()
        except Exception as exc:
            # a database whose session could not be opened is dropped, not served again
            self.discard()
            if isinstance(exc, ServiceUnavailable):
                raise faults.database_fault(
                    "connection of a new episode", exc, self.server.health()
                ) from exc
            raise
        backend.episodes.add(self)

    def connect(self) -> None:
        """A new session as the episode's user: nothing of an earlier session survives."""
        server = self.server
        self._boot = server.boot
        self.conn = server.connect(
            user=self.name,
            password=self._password,
            database=self.name,
            read_timeout=self.limits.statement_timeout_s + 30,  # backstop for the server's limit
            write_timeout=30,
        )
        with server.guard("connection of a new episode"), self.conn.cursor() as cur:
            for statement in server.session_settings(
                self.limits.statement_timeout_s,
                self.limits.max_result_rows,
                comparable=self.backend.comparable,
            ):
                cur.execute(statement)
        self.thread_id = self.conn.thread_id()

    def reconnect(self) -> None:
        """The agent's statement ended its session (it outlived every limit, or sent a
        packet the server refused): stop what is left of it and open a new one."""
        conn, self.conn = self.conn, None
        if conn is not None:
            self.server._close_quietly(conn)
        self.backend.kill_connection(self.thread_id)
        try:
            self.connect()
        except ServiceUnavailable as exc:
            raise faults.database_fault(
                "connection of the episode", exc, self.server.health()
            ) from exc

    def _spelt(self, sql: str) -> str:
        """``sql`` with tables spelt as stored (whatever the server's lower_case_table_names)."""
        if self._case is None:
            self._case = self.backend.table_case(self.name)
        return match_table_case(sql, self._case)

    def execute(self, sql: str) -> QueryResult:
        statement = classify(sql, "mysql")
        if statement.problem is not None:
            return QueryResult(error=statement.problem)
        sql = self._spelt(sql)
        if not statement.writes:
            return self._run(sql)
        if self._digest is not None:
            self._base, self._since = self._digest, []
        self._since.append(sql)
        self._digest = None
        self.dirty = True
        if statement.kind in _REMOVING_KINDS:
            result = self._run(sql)
            self._size = None
        else:
            result = self._write(sql, transaction=statement.kind not in _DDL_KINDS)
        self._case = None  # tables may have come or gone
        return dataclasses.replace(result, wrote=True)

    def _write(self, sql: str, *, transaction: bool) -> QueryResult:
        """Run a statement that may write, within the size cap: a data change in a
        transaction committed only when the files stay within it (or did not grow), the
        tables a statement that commits on its own made dropped when they took it past."""
        backend, cap = self.backend, self.limits.max_db_bytes
        # InnoDB may still be growing a file after an earlier statement: near the cap
        # the size is read afresh (far below it, that growth cannot decide a verdict)
        before = self._size
        if before is None or before > cap // 2:
            before = backend.db_bytes(self.name)
        tables = None if transaction else set(backend.table_case(self.name).values())
        if transaction:
            self._session("START TRANSACTION")
        result = self._run(sql, size_before=before)
        ended = self._session_killed == self._statements
        if ended:
            # the size watcher ended the statement's session (the agent's outcome, however
            # the statement itself reported it): its transaction went with it, and the
            # episode goes on in a new session
            self._session_killed = 0
            self.reconnect()
            result = QueryResult(error=too_big(self.limits))
        after = backend.db_bytes(self.name)
        over = after > cap and after > before
        if transaction and not ended:
            self._session("COMMIT" if result.ok and not over else "ROLLBACK")
        elif over and tables is not None:
            made = set(backend.table_case(self.name).values()) - tables
            for table in sorted(made):
                backend.server.run(f"DROP TABLE IF EXISTS {_q(self.name)}.{_q(table)}")
            after = backend.db_bytes(self.name) if made else after
        self._size = after
        return QueryResult(error=too_big(self.limits)) if over else result

    def _session(self, sql: str) -> None:
        """One of the env's own statements on the agent's session (its transaction)."""
        if self.conn is None:
            return
        with self.server.guard("episode connection"), self.conn.cursor() as cur:
            cur.execute(sql)

    def _watch_size(self, statement: int, before: int, stop: threading.Event) -> None:
        """Kill ``statement`` once the database's files grow past the cap (and past
        ``before``), and its session when it still runs ``SIZE_KILL_GRACE_S`` later (a
        ``CREATE TABLE ... SELECT`` runs on through ``KILL QUERY``); runs beside it until
        ``stop``."""
        killed_at = None
        while not stop.wait(SIZE_POLL_S):
            if killed_at is not None:
                if time.monotonic() - killed_at < SIZE_KILL_GRACE_S:
                    continue
                with self._watch:
                    if self._running == statement:
                        self._session_killed = statement
                        self.backend.kill_connection(self.thread_id)
                return
            try:
                size = self.backend.db_bytes(self.name or "")
            except Exception:  # the server went away: the statement's own failure tells
                return
            if size > self.limits.max_db_bytes and size > before:
                with self._watch:
                    if self._running != statement:
                        return
                    self._oversized = statement
                    self.backend.kill_query(self.thread_id)
                killed_at = time.monotonic()

    def _run(self, sql: str, size_before: int | None = None) -> QueryResult:
        pymysql = self.server.pymysql
        if self.conn is None:
            raise Fault(
                "the episode has no database session (an earlier fault ended it)",
                kind="database",
                evidence="the episode's session was closed after a fault; reset the env",
            )
        # the server's own limit is a session setting; this one lives outside the session,
        # so no statement can lift it: past the limit (and a grace) the query is killed
        with self._watch:
            self._statements += 1
            self._running = statement = self._statements
        watchdog = threading.Timer(
            self.limits.statement_timeout_s + KILL_GRACE_S, self._kill, (statement,)
        )
        watchdog.daemon = True
        sent_at = time.time()
        watchdog.start()
        stop_sizes = threading.Event()
        sizes = None
        if size_before is not None:  # a write: its files are watched while it runs
            sizes = threading.Thread(
                target=self._watch_size, args=(statement, size_before, stop_sizes), daemon=True
            )
            sizes.start()
        wide = False
        failure: Exception | None = None
        try:
            # rows as they arrive (not the whole result buffered first), so a result of
            # wide values stops at the byte limit instead of filling memory
            with self.conn.cursor(pymysql.cursors.SSCursor) as cur:
                cur.execute(sql)
                if cur.description is None:
                    return QueryResult(rows=None, rowcount=cur.rowcount)
                columns = tuple(d[0] for d in cur.description)
                rows, size = [], 0
                while len(rows) <= self.limits.max_result_rows:
                    chunk = cur.fetchmany(_FETCH_CHUNK)
                    if not chunk:
                        break
                    rows.extend(chunk)
                    size += sum(value_size(v) for row in chunk for v in row)
                    if size > self.limits.max_result_bytes:
                        wide = True
                        self._kill(statement)  # the rest is not sent, only its end read
                        break
        except pymysql.err.MySQLError as exc:
            failure = exc
        except (ValueError, TypeError, UnicodeError) as exc:
            return QueryResult(error=str(exc) or type(exc).__name__)
        finally:
            watchdog.cancel()
            stop_sizes.set()
            with self._watch:
                self._running = 0
            if sizes is not None:
                sizes.join(timeout=10)
        if failure is not None:  # decided once no watchdog can fire any more
            return self._failed(failure, statement, wide, sent_at)
        if wide:
            return QueryResult(error=too_wide(self.limits))
        if len(rows) > self.limits.max_result_rows:
            return QueryResult(
                error=f"the result has more than {self.limits.max_result_rows} rows; narrow the query"
            )
        # the driver's values as they are: the reward compares their text (InterCode's rule)
        rows = tuple(tuple(self._hide(v) for v in row) for row in rows)
        return QueryResult(
            rows=rows, columns=tuple(self._hide(c) for c in columns), rowcount=len(rows)
        )

    def _failed(self, exc: Exception, statement: int, wide: bool, sent_at: float) -> QueryResult:
        """The outcome of a statement the server did not complete: the agent's (an error it
        sees) or a ``Fault`` (``mysql_faults``' rules)."""
        pymysql = self.server.pymysql
        code = faults.error_code(exc)
        time_limit = QueryResult(
            error=f"the statement ran past the time limit of {self.limits.statement_timeout_s:g} s"
        )
        if code == 1317:  # interrupted: by the watchdog (time or byte limit), or from outside
            if self._oversized == statement:
                return QueryResult(error=too_big(self.limits))
            if wide:
                return QueryResult(error=too_wide(self.limits))
            if self._killed == statement:
                return time_limit
            raise Fault(
                f"the agent's statement was interrupted from outside: {_error_text(exc)}",
                kind="database",
                evidence="error 1317 on a statement the env's watchdog did not stop (the agent "
                "cannot KILL): a KILL QUERY by another session, or the server stopping it",
            ) from exc
        if code in (1969, 3024):  # MariaDB's / MySQL's statement time limit
            return time_limit
        if self._oversized == statement and faults.is_connection_error(exc, pymysql):
            self._session_killed = 0
            self.reconnect()  # the size watcher ended its session: the agent's outcome
            return QueryResult(error=too_big(self.limits))
        if faults.is_connection_error(exc, pymysql):
            self._close_session()
            session = faults.Session(self.name or "", self.thread_id, self._boot, sent_at)
            health = self.server.health(session=self.thread_id, name=self.name)
            fault = faults.episode_fault(exc, pymysql, health, session)
            if fault is not None:
                raise fault from exc
            self.reconnect()  # its statement outlived its limit: the agent's, as a time limit
            return time_limit
        attribution = faults.server_failure(exc)
        if attribution is not None:  # the server's files, engine or resources failed
            if self._oversized == statement:  # but the size cap stopped it: the agent's
                return QueryResult(error=too_big(self.limits))
            raise faults.server_fault("episode connection", exc, attribution) from exc
        if code in faults.MISSING_CODES:  # a misspelt or dropped table, or a database gone
            fault = faults.missing_fault(exc, faults.names_exist(self.server, self.name or ""))
            if fault is not None:
                raise fault from exc
            table = faults.table_of(exc, self.name or "")
            if table is not None and faults.engine_holds(self.server, self.name or "", table):
                raise faults.definition_lost_fault("episode connection", exc, table) from exc
        elif code in _SESSION_ENDING_CODES:  # the server may have closed the session for it
            self.reconnect()
        return QueryResult(error=self._hide(_error_text(exc)))

    def _close_session(self) -> None:
        conn = self.conn
        if conn is not None:
            self.server._close_quietly(conn)

    def _kill(self, statement: int) -> None:
        with self._watch:  # the statement cannot finish and another start meanwhile
            if self._running == statement:
                self._killed = statement
                self.backend.kill_query(self.thread_id)

    def _hide(self, value: Any) -> Any:
        if isinstance(value, str) and self.name and self.name in value:
            return value.replace(self.name, self.alias)
        return value

    def run_gold(self, sql: str) -> QueryResult:
        """The gold query on this episode's database from the process's gold connection:
        the rows this copy yields, in its order, and nothing of the run reaches the agent's
        session (``FOUND_ROWS()``, warnings, status counters would tell about the gold)."""
        if gold_writes(sql):
            return self.probe(sql)
        if self._case is None:
            self._case = self.backend.table_case(self.name)
        result = self.backend._run_gold(self.name, sql, self._case)
        return dataclasses.replace(result, error=self._hide(result.error))

    def probe(self, sql: str) -> QueryResult:
        statement = classify(sql, "mysql")
        if statement.problem is not None:
            return QueryResult(error=statement.problem)
        sql = self._spelt(sql)
        if not statement.writes:
            return self._run(sql)
        saved = self.dump()
        self.dirty = True
        try:
            return self._write(sql, transaction=False)
        finally:
            self.load(saved)
            self._case = None

    def dump(self) -> list[tuple[str, str, tuple[tuple, ...]]]:
        return self.backend.dump_tables(self.name)

    def load(self, state: Any) -> None:
        self.dirty = True
        self.backend.load_tables(self.name, state)
        self._digest, self._base, self._since, self._size = None, None, [], None
        self._case = None

    def fingerprint(self) -> str:
        if self._digest is None:
            if self._base is not None and self._large():
                self._digest = chained_digest(self._base, self._since)
            else:
                self._digest = self.backend.digest(self.name)
            self._base, self._since = None, []
        return self._digest

    def _large(self) -> bool:
        """The database's files hold more than ``DIGEST_LIMIT_BYTES`` over its template's."""
        size = self._size if self._size is not None else self.backend.db_bytes(self.name)
        return size - self.backend.template_bytes(self.template) > DIGEST_LIMIT_BYTES

    def fork(self) -> MySQLEpisode:
        """A new episode database and user with this one's tables: a pristine one of the
        pool, refilled from this one on the server (definitions and rows) when this one
        was written; rows never travel through this process."""
        child = MySQLEpisode(self.backend, self.source, self.template, self.template_digest)
        if self.dirty:
            try:
                self.backend.copy_tables(self.name, child.name)
            except BaseException:
                child.discard()
                raise
            child.dirty = True
            child._digest = self._digest
            child._base, child._since = self._base, list(self._since)
        return child

    def discard(self) -> None:
        """Close after a fault: the session ends and the database and user are dropped
        (now, or once the server answers again), never served to another episode."""
        conn, self.conn = self.conn, None
        if conn is not None:
            self.server._close_quietly(conn)
        if self.name is None:
            return
        name, self.name = self.name, None
        self.backend.episodes.discard(self)
        self.backend.drop_episode(name)

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass
        if self.name is None:
            return
        name, self.name = self.name, None
        self.backend.episodes.discard(self)
        if self.dirty:
            # written: its rows copied back from the template off the hot path (or, when
            # its tables changed, dropped and a new one made), then it serves again
            self.backend.recycle(self.template, name, self._password)
        else:
            # only read: still pristine, so its database and user serve a later episode
            # (through a new session, so no session state carries over)
            self.backend.give_back(self.template, name, self._password, self._case)


class MySQLBackend(Backend):
    """Templates and per-episode databases on one MariaDB/MySQL server."""

    name = "mysql"
    dialect = "mysql"
    _swept: set[str] = set()  # servers swept by this process

    def __init__(
        self,
        url: str,
        limits: Limits | None = None,
        *,
        comparable: bool = False,
        spares: int | None = None,
    ) -> None:
        self.limits = limits or Limits()
        #: pristine episode databases kept ready, at most this many: ``None`` two per task
        #: database opened (at least ``DEFAULT_SPARES``, at most ``MAX_AUTO_SPARES``);
        #: 0 none, every reset builds its database itself and close drops it at once
        self.spares = None if spares is None else max(0, int(spares))
        self._opened: set[str] = set()  # templates this backend's episodes used
        self._closed = False
        #: session settings that make results comparable with SQLite's (division precision)
        self.comparable = comparable
        # one admin connection per server and process, shared by every backend on it
        self.server = _acquire_server(url)
        self.pool = self.server.pool
        self.pool.join(self)
        self._released = False
        self.episodes: weakref.WeakSet[MySQLEpisode] = weakref.WeakSet()
        # what is known of the server's templates, shared by the process's backends (so 64
        # envs build, hash, digest and translate golds once, not once each)
        self._templates = self.server.templates
        self._source_templates = self.server.source_templates
        self._gold_sql = self.server.gold_sql
        self._case = self.server.case
        key = repr(sorted(self.server.args.items()))
        if key not in MySQLBackend._swept:
            MySQLBackend._swept.add(key)
            sweep_orphans(self.server)
        atexit.register(_close_at_exit, weakref.ref(self))

    # templates -----------------------------------------------------------------
    def template(self, source: DatabaseSource) -> tuple[str, str]:
        """(template database name, content digest), creating the template if needed."""
        # the source's content hash, once per file version (a dump's text is long)
        source_key = (template_prefix(), source.cache_key())
        known = self._source_templates.get(source_key)
        if known is not None:
            return known
        statements: list[str] = []
        if source.kind == "mysql_dump":
            statements = list(source.dump_database().statements())
            data = "\n;\n".join(["mysql dump", *statements]).encode()
        else:
            data = template_bytes(source)
        key = hashlib.blake2b(data, digest_size=6).hexdigest()
        safe = re.sub(r"[^0-9a-z_]", "_", source.name.lower())[:30]
        name = f"{template_prefix()}{safe}_{key}"
        if name in self._templates:
            self._source_templates[source_key] = self._templates[name]
            return self._templates[name]
        server = self.server
        if source.kind == "mysql_dump":

            def fill(conn: Any, db: str) -> None:
                try:
                    import_dump(conn, db, statements)
                except server.pymysql.err.MySQLError as exc:
                    if faults.is_connection_error(exc, server.pymysql) or faults.server_failure(
                        exc
                    ):
                        raise  # the server's failure, not the dump's: a Fault
                    raise TaskError(
                        f"{source.path} (database {source.dump_db})",
                        "database",
                        f"the server refused the dump's statement: {_error_text(exc)}",
                    ) from exc
        else:

            def fill(conn: Any, db: str) -> None:
                build_template(conn, db, data)

        # one builder at a time, whichever thread, process or host asks (mysql_templates)
        ensure_template(server, name, fill, wait_s=TEMPLATE_LOCK_WAIT_S)
        digest = self.digest(name)
        self._templates[name] = (name, digest)
        self._source_templates[source_key] = (name, digest)
        return name, digest

    def table_case(self, db: str) -> dict[str, str]:
        """Lower-cased name → stored name of every table and view of ``db``."""
        rows = self.server.run(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
            "AND TABLE_NAME <> '_ae_ready'",
            (db,),
        )
        return {r[0].lower(): r[0] for r in rows}

    def schema(self, source: DatabaseSource) -> dict[str, list[str]]:
        template, _ = self.template(source)
        rows = self.server.run(
            "SELECT c.TABLE_NAME, c.COLUMN_NAME FROM information_schema.COLUMNS c "
            "JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA "
            "AND t.TABLE_NAME = c.TABLE_NAME WHERE c.TABLE_SCHEMA = %s "
            "AND t.TABLE_TYPE = 'BASE TABLE' AND c.TABLE_NAME <> '_ae_ready' "
            "ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION",
            (template,),
        )
        tables: dict[str, list[str]] = {}
        for table, column in rows:
            tables.setdefault(table, []).append(column)
        return tables

    def _tables(self, db: str) -> list[str]:
        rows = self.server.run(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
            "AND TABLE_TYPE = 'BASE TABLE' AND TABLE_NAME <> '_ae_ready' ORDER BY TABLE_NAME",
            (db,),
        )
        return [r[0] for r in rows]

    def clone_tables(self, template: str, target: str, conn: Any = None) -> None:
        """Copy every table of ``template`` into ``target`` (on ``conn``, else the admin's)."""
        _clone(
            self.server.run if conn is None else functools.partial(_run_on, conn), template, target
        )

    # the pool of pristine episode databases ----------------------------------------
    def spares_limit(self) -> int:
        """How many pristine databases this backend keeps ready (its share of the pool)."""
        if self.spares is not None:
            return self.spares
        return min(max(DEFAULT_SPARES, 2 * len(self._opened) + 2), MAX_AUTO_SPARES)

    def prepare(self, template: str, conn: Any = None) -> tuple[str, str]:
        """A new episode database cloned from ``template`` and its own user, granted only
        on it: (name, password). Runs on ``conn`` (the pool's own), else the admin's."""
        run = self.server.run if conn is None else functools.partial(_run_on, conn)
        return _prepare(run, template, self.server.user_host, self.server.lost)

    def template_case(self, template: str) -> dict[str, str]:
        """Lower-cased name → stored name of the template's tables (its clones spell them
        the same), read once."""
        case = self._case.get(template)
        if case is None:
            case = self._case[template] = self.table_case(template)
        return case

    def take_prepared(self, template: str) -> tuple[str, str, dict[str, str] | None]:
        """A pristine database and user for an episode on ``template``: one made ahead
        (or only read) when there is one, else made now. When it was the template's last,
        the pool makes the next one while the episode runs; episodes that only read give
        their database back, so once warm they cause no DDL at all."""
        self._opened.add(template)
        taken = None
        if self.spares != 0:
            taken = self.pool.take(template, self)
        if taken is None:
            taken = self.prepare(template)
        if self.spares != 0:
            self.pool.want(template, self)
        self._drop_lost()
        return (*taken, self.template_case(template))

    def _drop_lost(self) -> None:
        """The server answers again: drop the episode databases it was away for."""
        lost = self.server.lost
        while lost:
            try:
                name = lost.pop()
            except KeyError:
                break
            self.drop_episode(name)

    def give_back(
        self, template: str, name: str, password: str, case: dict[str, str] | None
    ) -> None:
        """Keep a database that episodes only read for a later episode, else drop it."""
        if self._closed or self.spares == 0 or not self.pool.give(template, name, password, self):
            self.drop_episode(name)

    def recycle(self, template: str, name: str, password: str) -> None:
        """A written episode database: made pristine again by the pool, else dropped."""
        if (
            self._closed
            or self.spares == 0
            or not self.pool.recycle(template, name, password, self)
        ):
            self.drop_episode(name)
            self._want_spare(template)

    def _want_spare(self, template: str) -> None:
        if self.spares != 0 and not self._closed:
            self.pool.want(template, self)

    def dump_tables(self, db: str) -> list[tuple[str, str, tuple[tuple, ...]]]:
        out = []
        for table in self._tables(db):
            create = self.server.run(f"SHOW CREATE TABLE {_q(db)}.{_q(table)}")[0][1]
            rows = tuple(self.server.run(f"SELECT * FROM {_q(db)}.{_q(table)}"))
            out.append((table, create, rows))
        return out

    def load_tables(self, db: str, state: Any) -> None:
        if not isinstance(state, list):
            raise TypeError(f"a MySQL episode loads a table dump, not {type(state).__name__}")
        server = self.server
        with server.lock, server.guard("admin connection"), server.live_admin().cursor() as cur:
            cur.execute("SET SESSION foreign_key_checks = 0")  # tables come back in any order
            for table in self._tables(db):
                cur.execute(f"DROP TABLE {_q(db)}.{_q(table)}")
            views = server.run(
                "SELECT TABLE_NAME FROM information_schema.VIEWS WHERE TABLE_SCHEMA = %s", (db,)
            )
            for (view,) in views:
                cur.execute(f"DROP VIEW {_q(db)}.{_q(view)}")
            cur.execute(f"USE {_q(db)}")
            try:
                for table, create, rows in state:
                    cur.execute(create)
                    if rows:
                        marks = ", ".join(["%s"] * len(rows[0]))
                        cur.executemany(f"INSERT INTO {_q(table)} VALUES ({marks})", list(rows))
            finally:
                cur.execute("SET SESSION foreign_key_checks = 1")
                cur.execute("USE information_schema")

    def copy_tables(self, source: str, target: str) -> None:
        """Make ``target``'s tables and rows those of ``source``, as a restore of
        ``dump_tables(source)`` would (views dropped, tables as ``SHOW CREATE TABLE``
        gives them, their auto-increment counters too), all on the server."""
        server = self.server
        with server.lock, server.guard("admin connection"), server.live_admin().cursor() as cur:
            cur.execute("SET SESSION foreign_key_checks = 0")
            try:
                copy_tables(cur, source, target, self._tables(source), self._tables(target))
            finally:
                cur.execute("SET SESSION foreign_key_checks = 1")
                cur.execute("USE information_schema")

    def digest(self, db: str) -> str:
        tables = []
        for table in self._tables(db):
            server = self.server
            with server.lock, server.guard("admin connection"), server.live_admin().cursor() as cur:
                cur.execute(f"SELECT * FROM {_q(db)}.{_q(table)}")
                columns = [d[0] for d in cur.description]
                tables.append((table, columns, normalize_rows(cur.fetchall())))
        return content_digest(tables)

    # episodes ------------------------------------------------------------------
    def open_episode(self, source: DatabaseSource) -> MySQLEpisode:
        template, digest = self.template(source)
        size = self.template_bytes(template)
        if size > self.limits.max_db_bytes:
            raise TaskError(
                str(source.path),
                "database",
                f"database {source.name!r} takes {size} bytes of files on the server, over "
                f"max_db_bytes={self.limits.max_db_bytes}: raise it",
            )
        return MySQLEpisode(self, source, template, digest)

    def db_bytes(self, db: str) -> int:
        """The size of the files of ``db``'s tables on the server, exact (InnoDB's own
        record of each table's file; a file per table, as MariaDB and MySQL default to)."""
        view = "INNODB_SYS_TABLESPACES" if self.server.is_mariadb else "INNODB_TABLESPACES"
        pattern = re.sub(r"([\\_%])", r"\\\1", db) + "/%"
        size = self.server.scalar(
            f"SELECT COALESCE(SUM(FILE_SIZE), 0) FROM information_schema.{view} "
            "WHERE NAME LIKE %s",
            (pattern,),
        )
        return int(size or 0)

    def template_bytes(self, template: str) -> int:
        """``db_bytes`` of a template (its clones start the same size), read once."""
        sizes = self.server.template_sizes
        if template not in sizes:
            sizes[template] = self.db_bytes(template)
        return sizes[template]

    def kill_connection(self, thread_id: int) -> None:
        """End session ``thread_id`` and the statement it runs."""
        try:
            self.server.run(f"KILL CONNECTION {int(thread_id)}")
        except Exception:  # it ended meanwhile, or the server went away
            pass

    def kill_query(self, thread_id: int) -> None:
        """Stop the statement running on connection ``thread_id`` (the connection stays)."""
        try:
            self.server.run(f"KILL QUERY {int(thread_id)}")
        except Exception:  # it finished meanwhile, or the server went away
            pass

    def drop_episode(self, name: str) -> None:
        """Drop an episode's database and user: in the background while the pool works,
        else now."""
        if self._closed or self.spares == 0 or not self.pool.drop(name):
            try:
                _drop(self.server.run, name, self.server.user_host)
            except Exception:  # the server went away: dropped once it answers again
                self.server.lost.add(name)

    def _run_gold(self, template: str, sql: str, case: dict[str, str] | None = None) -> QueryResult:
        """``sql`` on a template (or on an episode's database, its tables' spelling in
        ``case``), on the server's one gold connection (shared by the process's backends,
        each statement under this backend's limits)."""
        server = self.server
        if case is None:
            if template not in self._case:
                self._case[template] = self.table_case(template)
            case = self._case[template]
        sql = match_table_case(sql, case)
        settings = tuple(
            server.session_settings(
                self.limits.statement_timeout_s,
                self.limits.max_result_rows,
                comparable=self.comparable,
            )
        )
        return server.run_gold(template, sql, settings)

    def translate_gold(self, source: DatabaseSource, gold: str) -> str:
        """The gold query as the server runs it: as written, as InterCode runs it (a gold
        the server refuses, for a reserved word such as ``FROM SHOW`` or a space in
        ``COUNT (*)``, then counts as ``[]``). Only in the comparable mode
        (``comparable=True``) is a gold the server refuses read as SQLite (Spider's gold
        queries are SQLite's) and rewritten by sqlglot, its double-quoted strings kept
        strings (``statements.sqlite_gold_for_mysql``); the rewrite replaces the gold
        only when the server runs it."""
        if not self.comparable:
            return gold
        template, _ = self.template(source)
        key = (template, gold)
        if key not in self._gold_sql:
            chosen = gold
            if not self._run_gold(template, gold).ok:
                names = [n for table, cols in self.schema(source).items() for n in (table, *cols)]
                candidate = sqlite_gold_for_mysql(gold, names)
                if candidate != gold and self._run_gold(template, candidate).ok:
                    chosen = candidate
            self._gold_sql[key] = chosen
        return self._gold_sql[key]

    def run_on_template(self, source: DatabaseSource, sql: str) -> QueryResult:
        template, _ = self.template(source)
        return self._run_gold(template, sql)

    def close(self) -> None:
        for episode in list(self.episodes):
            episode.close()
        if not self._closed:
            self._drop_lost()  # queued before the pool is left, which waits for its drops
            self._closed = True
            # its spares go, and every drop queued so far is done before close returns
            self.pool.leave(self)
        if not self._released:
            self._released = True
            _release_server(self.server)


def _close_at_exit(ref: weakref.ReferenceType[MySQLBackend]) -> None:
    backend = ref()
    if backend is None:
        return
    try:
        if not backend.server.admin.open:
            backend.server.admin = backend.server.connect()
        backend.close()
    except Exception:
        pass
