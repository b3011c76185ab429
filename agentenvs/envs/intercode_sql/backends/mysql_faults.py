"""What a failed call to the MySQL/MariaDB server is: the agent's outcome, or a fault.

The server backend (``backends.mysql``) asks here whenever a statement fails below SQL: a
lost or refused connection, a session killed, a database gone. The answer is either
nothing (the agent's doing: scored as any outcome) or a
:class:`~agentenvs.core.errors.Fault` of kind ``"database"``, which ``reset``, ``step``
and ``score_action`` raise instead of an observation or a reward.

The evidence, none of which an agent can forge:

- **which connection failed.** The admin connection, the gold connection and the pool's
  connections run only the env's own statements: any connection-level failure of theirs
  is the infrastructure's. Only the episode's connection runs the agent's statements.
- **what the agent cannot do.** Its statements pass ``statements.classify`` first:
  ``KILL``, ``SHUTDOWN``, ``SET``, ``DROP DATABASE`` and locks are refused before the
  server sees them, and its user holds privileges on its own database only; so it cannot
  end its session, kill a statement, stop the server or drop its database.
- **what the env's own watchdog did.** It stops a statement past its time limit with
  ``KILL QUERY`` (the session stays) and records which statement it stopped: error 1317 on
  that statement is the agent's time limit, on any other one a kill from outside.
- **a health probe made after the failure**, on a new admin connection: whether the
  server answers ``SELECT 1``; when it started (``Uptime``; and a new connection's id,
  which grows within one run of the server and starts again at a restart); whether the
  episode's session is still in the process list, and its database and user still exist.

On the episode's connection a lost session is then decided so:

- the statement never reached the server (PyMySQL's 2006 on sending, or a connection
  closed before it): the infrastructure's, whatever the probe finds;
- the server does not answer, or started after the episode connected: the
  infrastructure's when it started before the statement was sent, else ``unknown``: a
  statement that crashed the server looks exactly like a shutdown while it ran;
- the episode's database or user is gone, or its session is gone from a server that kept
  running: the infrastructure's (dropped or killed from outside);
- its session still runs and the client gave up reading (the read timeout, 30 s past the
  statement's limit and its watchdog): the agent's statement outlived its limit, the
  agent's (the session is killed and a new one opened, so the episode goes on);
- anything else: ``unknown``.

An agent's error that names a missing database, table or privilege (1044, 1046, 1049,
1142, 1146) is the agent's (a misspelt or dropped table) unless the probe finds the
episode's database or user gone, or, for a missing table, InnoDB's own dictionary
(``information_schema.INNODB_SYS_TABLES``) still holds the table: its definition file
(``.frm``) is gone from the server's disk, which no statement can do (``DROP TABLE`` and
``RENAME`` change both at once).

**The server's own failures.** A statement can also fail because the server itself did:
its files (table files, definition files, temporary files under ``@@tmpdir``), its
storage engine, its memory, disk or threads. The agent's user reaches only its own
database, through SQL that the guard has read: it cannot touch a file, discard or import
a tablespace (``TABLESPACE`` is refused), pick an engine but InnoDB, or run ``FLUSH``,
``REPAIR`` or ``CHECK``. ``server_failure`` reads such an error on any connection, the
episode's included, as a ``Fault`` (codes as MariaDB 10.11 has them: ``perror`` and the
mysys error list ``mysys_err.h``; MySQL shares them):

- **the server's files or engine broke: infrastructure.** mysys's file errors (below
  1000: 1 can't create/write, 2 read, 3 write, 4 close, 6 delete, 7 rename, 9 unexpected
  end of file, 10/11 lock/unlock, 12 read dir, 13 stat, 14 change size, 15 open stream,
  16/17 working dir, 21 make dir, 24/25 symlink, 26 realpath, 27 sync, 29 file not found,
  33 seek) and the server's (1011 delete, 1013 stat, 1016 open, 1017 can't find, 1018
  read dir, 1023 close, 1024 read, 1025 rename, 1026 write, 1039 unexpected end of
  file); damaged tables and tablespaces (1033 bad ``.frm``, 1034/1035 index corrupt or
  old, 1194/1195 crashed, 1712/1817 index corrupted, 1728/1805 a system table corrupted,
  1812 tablespace missing, 1813 a stray tablespace file, 1814 tablespace discarded, 1877
  table missing or corrupt, 1932 not in the engine, 3000 file corrupted); 1135 no thread
  for a connection (no statement of the agent starts a thread).
- **a resource ran out: unknown.** 5 and 1037/1041/3015/3044 out of memory, 1038 out of
  sort memory, 20/1021 disk full, 23 out of file handles, 1114 table full, 4139 index
  file full, 1206 lock table full, 1878 temporary file write failed: the agent's own
  statement may have used it up (its temporary tables, sorts and memory are under the
  statement time limit only; ``max_db_bytes`` counts its table files).
- a file error's own number decides before its code: an OS error of an exhausted
  resource (12 ``ENOMEM``, 23 ``ENFILE``, 24 ``EMFILE``, 27 ``EFBIG``, 28 ``ENOSPC``) is
  unknown; a storage engine's (``HA_ERR_*``, 120 and up) is read as in 1030 below (a
  rename failing on a foreign key, 150, stays the agent's); any other OS error (2
  ``ENOENT``, 13 ``EACCES``, 5 ``EIO``, ...) is infrastructure.
- **1030 (got error N from the storage engine), 1180/1181 (error N during commit or
  rollback)**: by N. A damaged table or file (126/127 index or table file corrupted, 130
  bad file format, 132 old file, 144/145 crashed, 155 not in the engine, 164 needs
  upgrade, 172 newer format, 175 file too short, 176 wrong checksum, 180 index corrupted,
  190 ``.frm`` and engine disagree, 192 cannot decrypt, 194 tablespace missing) or any OS
  error but those of an exhausted resource: infrastructure; memory or room (128, 135,
  136, 147, 177, 189, and the exhausted OS errors): unknown; any other (a duplicate key, a
  foreign key, a lock wait or deadlock, a full-text query with too many words): the
  agent's, as before.

What stays the agent's, whatever the server says: a syntax error, a missing or dropped
table, a constraint violation, a lock wait or deadlock it caused, its statement's time
limit (1969, and the watchdog's 1317), its size cap (a statement the size watcher
stopped is the size cap's, even when the server also reports a failure).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from agentenvs.core.errors import INFRASTRUCTURE, UNKNOWN, Fault, ServiceUnavailable

#: client and server codes of a connection that is gone: PyMySQL's lost / gone away /
#: out of sync / lost at a system call; the server's "connection was killed" (MariaDB),
#: "shutdown in progress", and "disconnected for inactivity" (MySQL 8)
CONNECTION_CODES = frozenset({2006, 2013, 2014, 2055, 1927, 1053, 4031})
#: the statement could not have reached the server: PyMySQL failed to send it
NOT_SENT_CODES = frozenset({2006})
#: errors an agent's statement gets when a database, table or privilege is missing
MISSING_CODES = frozenset({1044, 1046, 1049, 1142, 1146})
#: mysys's errors (below 1000) of an operation on a file or directory that failed
MYSYS_FILE_CODES = frozenset(
    {1, 2, 3, 4, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 21, 24, 25, 26, 27, 29, 33}
)
#: the server's errors of an operation on a file or directory that failed
SERVER_FILE_CODES = frozenset({1011, 1013, 1016, 1017, 1018, 1023, 1024, 1025, 1026, 1039})
#: the server's errors that carry a storage engine's error number (got error N ...)
ENGINE_ERROR_CODES = frozenset({1030, 1180, 1181})
#: damaged or missing table files, definitions and tablespaces; no thread for a connection
DAMAGE_CODES = frozenset(
    {1033, 1034, 1035, 1135, 1194, 1195, 1712, 1728, 1805, 1812, 1813, 1814, 1817, 1877}
    | {1932, 3000}
)
#: memory, disk, file handles or locks ran out
EXHAUSTED_CODES = frozenset({5, 20, 23, 1021, 1037, 1038, 1041, 1114, 1206, 1878, 3015, 3044, 4139})
#: OS errors of an exhausted resource: ENOMEM, ENFILE, EMFILE, EFBIG, ENOSPC
EXHAUSTED_ERRNOS = frozenset({12, 23, 24, 27, 28})
#: storage engine errors (``HA_ERR_*``) of a damaged table or file
ENGINE_DAMAGE_ERRNOS = frozenset(
    {126, 127, 130, 132, 144, 145, 155, 164, 172, 175, 176, 180, 190, 192, 194}
)
#: storage engine errors of memory or room run out
ENGINE_EXHAUSTED_ERRNOS = frozenset({128, 135, 136, 147, 177, 189})
#: the first storage engine error number (lower ones are the OS's)
ENGINE_ERRNO_FIRST = 120
_ERRNO = re.compile(r"(?:errno|Errcode):? (-?\d+)|Got error (-?\d+)")
_NO_TABLE = re.compile(r"Table '(.*)' doesn't exist")
#: a new connection's id below the episode's, or a start this much later than known: a
#: restart (``Uptime`` counts whole seconds)
BOOT_SLACK_S = 2.0


def error_code(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def is_connection_error(exc: BaseException, pymysql: Any) -> bool:
    """Whether ``exc`` says the connection is gone (rather than a statement refused)."""
    if isinstance(exc, ServiceUnavailable | pymysql.err.InterfaceError):
        return True
    if isinstance(exc, pymysql.err.InternalError):  # a packet out of sequence
        return "sequence" in str(exc).lower()
    return isinstance(exc, pymysql.err.OperationalError) and error_code(exc) in CONNECTION_CODES


def never_sent(exc: BaseException, pymysql: Any) -> bool:
    """The failed statement cannot have reached the server."""
    return isinstance(exc, pymysql.err.InterfaceError) or error_code(exc) in NOT_SENT_CODES


def timed_out(exc: BaseException) -> bool:
    """PyMySQL gave up reading after its read timeout."""
    return isinstance(exc.__context__, TimeoutError) or "timed out" in str(exc)


@dataclass(frozen=True)
class Health:
    """What a probe on a new admin connection found."""

    answered: bool
    #: why the server did not answer
    problem: str = ""
    #: when the server started, on this host's clock (to about a second)
    boot: float | None = None
    #: the probe's own connection id (ids grow within one run of the server)
    connection_id: int | None = None
    #: the user of the asked session in the process list; None: the session is gone
    session_user: str | None = None
    database_exists: bool | None = None
    user_exists: bool | None = None

    def restarted_since(self, boot: float | None, connection_id: int | None) -> bool:
        """The server started again after a session of ``connection_id`` was opened in the
        run that started at ``boot``."""
        if not self.answered:
            return False
        if boot is not None and self.boot is not None and self.boot > boot + BOOT_SLACK_S:
            return True
        return (
            connection_id is not None
            and self.connection_id is not None
            and self.connection_id < connection_id
        )

    def describe(self) -> str:
        if not self.answered:
            return f"the server does not answer a new connection ({self.problem})"
        parts = ["the server answers SELECT 1"]
        if self.boot is not None:
            parts.append(f"up {max(time.time() - self.boot, 0):.0f} s")
        if self.database_exists is False:
            parts.append("the episode's database is gone")
        if self.user_exists is False:
            parts.append("the episode's user is gone")
        return "; ".join(parts)


def probe(server: Any, *, session: int | None = None, name: str | None = None) -> Health:
    """Ask the server, on a new connection, whether it answers, when it started, whether
    session ``session`` still runs and whether database and user ``name`` exist."""
    pymysql = server.pymysql
    try:
        conn = server.connect(connect_timeout=5, read_timeout=10, write_timeout=10)
    except ServiceUnavailable as exc:
        return Health(False, str(exc)[:300])
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            cur.execute("SHOW GLOBAL STATUS LIKE 'Uptime'")
            row = cur.fetchone()
            boot = time.time() - float(row[1]) if row else None
            session_user = database = user = None
            if session is not None:
                cur.execute(
                    "SELECT USER FROM information_schema.PROCESSLIST WHERE ID = %s", (session,)
                )
                found = cur.fetchone()
                session_user = found[0] if found else None
            if name is not None:
                cur.execute(
                    "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
                    (name,),
                )
                database = bool(cur.fetchone()[0])
                cur.execute("SELECT COUNT(*) FROM mysql.user WHERE User = %s", (name,))
                user = bool(cur.fetchone()[0])
            return Health(
                True,
                boot=boot,
                connection_id=conn.thread_id(),
                session_user=session_user,
                database_exists=database,
                user_exists=user,
            )
    except pymysql.err.MySQLError as exc:
        return Health(False, f"{type(exc).__name__}: {exc}"[:300])
    finally:
        try:
            conn.close()
        except Exception:
            pass


def names_exist(server: Any, name: str) -> Health:
    """Whether database and user ``name`` exist, asked on the admin connection (cheaper
    than a new connection, for the agent's every misspelt table; a failure of the admin
    connection is a ``Fault`` of its own)."""
    ((database, user),) = server.run(
        "SELECT (SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s), "
        "(SELECT COUNT(*) FROM mysql.user WHERE User = %s)",
        (name, name),
    )
    return Health(True, database_exists=bool(database), user_exists=bool(user))


def database_fault(connection: str, exc: BaseException, health: Health) -> Fault:
    """The fault of a failed connection that runs only the env's own statements."""
    return Fault(
        f"the MySQL/MariaDB {connection} failed: {_text(exc)}",
        kind="database",
        attribution=INFRASTRUCTURE,
        evidence=f"{connection}, which runs no statement of the agent, failed "
        f"({_text(exc)}); health probe: {health.describe()}",
    )


@dataclass(frozen=True)
class Session:
    """What the episode knows about its own session, for a decision."""

    name: str
    connection_id: int
    #: the server's start (``Health.boot``) when the session was opened
    boot: float | None
    #: when the failed statement was sent, on this host's clock
    sent_at: float


def episode_fault(
    exc: BaseException, pymysql: Any, health: Health, session: Session
) -> Fault | None:
    """The fault that a lost episode session is, per the module's rules; None: the
    agent's (its statement outlived its time limit)."""

    def fault(attribution: str, why: str) -> Fault:
        return Fault(
            f"the episode's MySQL/MariaDB session was lost: {_text(exc)}",
            kind="database",
            attribution=attribution,
            evidence=f"{why}; health probe: {health.describe()}",
        )

    unsent = never_sent(exc, pymysql)
    if unsent:
        why = "the agent's statement never reached the server (the session was gone before)"
    else:
        why = "the session was lost while the agent's statement ran"
    if not health.answered:
        if unsent:
            return fault(INFRASTRUCTURE, why)
        return fault(
            UNKNOWN,
            f"{why}, and the server is down: a shutdown cannot be told from a crash "
            "the statement caused",
        )
    if health.restarted_since(session.boot, session.connection_id):
        restart = health.boot if health.boot is not None else time.time()
        if unsent or restart < session.sent_at - BOOT_SLACK_S:
            return fault(INFRASTRUCTURE, f"{why}; the server restarted before it was sent")
        return fault(
            UNKNOWN,
            "the server restarted while the agent's statement ran: a restart cannot "
            "be told from a crash the statement caused",
        )
    if health.database_exists is False or health.user_exists is False:
        return fault(
            INFRASTRUCTURE, f"{why}; the episode's database or user was dropped from outside"
        )
    alive = health.session_user is not None and health.session_user == session.name
    if not alive:
        return fault(
            INFRASTRUCTURE,
            f"{why}; the session is gone from the process list of a server that kept running: "
            "killed or dropped from outside (the env's watchdog only stops statements, and "
            "the agent cannot end its session)",
        )
    if unsent:
        return fault(INFRASTRUCTURE, why)
    if timed_out(exc):
        return None  # its statement still runs, long past its limit and the watchdog
    return fault(UNKNOWN, f"{why}; the session still runs")


def missing_fault(exc: BaseException, health: Health) -> Fault | None:
    """The fault that an agent's "unknown database/table/privilege" error is when the
    episode's database or user is gone (dropped from outside); None: the agent's."""
    if not health.answered:
        return Fault(
            f"the server failed while checking an error: {_text(exc)}",
            kind="database",
            attribution=INFRASTRUCTURE,
            evidence=f"health probe: {health.describe()}",
        )
    if health.database_exists is False or health.user_exists is False:
        return Fault(
            f"the episode's database or user was dropped from outside: {_text(exc)}",
            kind="database",
            attribution=INFRASTRUCTURE,
            evidence="dropped from outside (the agent cannot drop its database or user); "
            f"health probe: {health.describe()}",
        )
    return None


def errno_of(exc: BaseException) -> int | None:
    """The OS or storage engine error number that the server's message carries."""
    args = getattr(exc, "args", ())
    message = args[1] if len(args) >= 2 and isinstance(args[1], str) else str(exc)
    found = _ERRNO.findall(message)
    if not found:
        return None
    # a file's own number comes last, after its path
    return int(found[-1][0] or found[-1][1])


def _by_errno(errno: int | None, default: str | None) -> str | None:
    if errno is None:
        return default
    if errno in EXHAUSTED_ERRNOS or errno in ENGINE_EXHAUSTED_ERRNOS:
        return UNKNOWN
    if errno in ENGINE_DAMAGE_ERRNOS:
        return INFRASTRUCTURE
    if errno >= ENGINE_ERRNO_FIRST:  # a duplicate key, a foreign key, a lock: a statement's
        return None
    return INFRASTRUCTURE  # the OS refused the server a file (gone, denied, I/O error)


def server_failure(exc: BaseException) -> str | None:
    """The attribution of an error that says the server itself failed (its files, its
    storage engine, its memory, disk or threads), per the module's rules: infrastructure,
    unknown (a resource ran out, which the agent's statement may have done), or None (not
    the server's failure: the statement's outcome)."""
    code = error_code(exc)
    if code is None:
        return None
    if code in DAMAGE_CODES:
        return INFRASTRUCTURE
    if code in EXHAUSTED_CODES:
        return UNKNOWN
    if code in MYSYS_FILE_CODES or code in SERVER_FILE_CODES:
        return _by_errno(errno_of(exc), INFRASTRUCTURE)
    if code in ENGINE_ERROR_CODES:
        errno = errno_of(exc)
        return None if errno is None else _by_errno(errno, None)
    return None


def server_fault(connection: str, exc: BaseException, attribution: str) -> Fault:
    """The fault of a statement that failed because the server did (``server_failure``)."""
    code = error_code(exc)
    if attribution == INFRASTRUCTURE:
        why = (
            f"error {code} says the server's own files or storage engine failed, which no "
            "SQL statement on an episode's own database can cause (its user touches no "
            "file, and tablespace, engine, FLUSH and REPAIR statements are refused)"
        )
    else:
        why = (
            f"error {code} says a resource of the server ran out (memory, disk, file "
            "handles or locks): the agent's own statement may have used it up, or "
            "anything else on the server"
        )
    return Fault(
        f"the MySQL/MariaDB server failed on the {connection}: {_text(exc)}",
        kind="database",
        attribution=attribution,
        evidence=f"{why}; on the {connection}",
    )


def table_of(exc: BaseException, database: str) -> str | None:
    """The table of ``database`` that an "unknown table" error (1146) names."""
    found = _NO_TABLE.search(_text(exc))
    if found is None or not found.group(1).startswith(f"{database}."):
        return None
    return found.group(1)[len(database) + 1 :]


def engine_holds(server: Any, database: str, table: str) -> bool:
    """Whether InnoDB's own dictionary holds ``database.table`` (asked on the admin
    connection): a table the server's SQL layer says does not exist, yet InnoDB still
    holds, lost its definition file on disk. Names InnoDB spells as they are (letters,
    digits, ``_``) only: any other name answers False."""
    if not re.fullmatch(r"\w+", database, re.A) or not re.fullmatch(r"\w+", table, re.A):
        return False
    view = "INNODB_SYS_TABLES" if server.is_mariadb else "INNODB_TABLES"
    found = server.scalar(
        f"SELECT COUNT(*) FROM information_schema.{view} WHERE NAME = %s",
        (f"{database}/{table}",),
    )
    return bool(found)


def definition_lost_fault(connection: str, exc: BaseException, table: str) -> Fault:
    """The fault of an "unknown table" error on a table that InnoDB still holds."""
    return Fault(
        f"a table's definition is gone from the server's disk: {_text(exc)}",
        kind="database",
        attribution=INFRASTRUCTURE,
        evidence=f"the server says table {table} does not exist, yet InnoDB's own dictionary "
        "still holds it: its definition file was removed from outside (DROP TABLE and RENAME "
        f"change both at once); on the {connection}",
    )


def _text(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[1], str):
        return f"({args[0]}) {args[1]}"[:300]
    return (str(exc) or type(exc).__name__)[:300]


__all__ = [
    "CONNECTION_CODES",
    "DAMAGE_CODES",
    "ENGINE_ERROR_CODES",
    "EXHAUSTED_CODES",
    "MISSING_CODES",
    "MYSYS_FILE_CODES",
    "SERVER_FILE_CODES",
    "Health",
    "Session",
    "database_fault",
    "definition_lost_fault",
    "engine_holds",
    "episode_fault",
    "errno_of",
    "error_code",
    "is_connection_error",
    "missing_fault",
    "names_exist",
    "never_sent",
    "probe",
    "server_failure",
    "server_fault",
    "table_of",
]
