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
episode's database or user gone.
"""

from __future__ import annotations

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


def _text(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[1], str):
        return f"({args[0]}) {args[1]}"[:300]
    return (str(exc) or type(exc).__name__)[:300]


__all__ = [
    "CONNECTION_CODES",
    "MISSING_CODES",
    "Health",
    "Session",
    "database_fault",
    "episode_fault",
    "error_code",
    "is_connection_error",
    "missing_fault",
    "names_exist",
    "never_sent",
    "probe",
]
