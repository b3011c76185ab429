"""What a database backend offers the InterCode-SQL env, and the parts both backends share.

A ``Backend`` builds each task database's template once and opens one ``Episode`` per
episode: a private copy that the agent's statements may change freely. Results come
back as ``QueryResult`` with values normalized, so that the same data stringifies the
same way on SQLite and on MySQL (the reward compares stringified rows).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from agentenvs.envs.intercode_sql.data import DatabaseSource

Row = tuple[Any, ...]


@dataclass(frozen=True)
class QueryResult:
    """The outcome of one statement.

    ``rows`` is ``None`` when there is no result set (an error, or a statement such as
    ``INSERT`` that returns none); ``error`` holds the message of a failed statement.
    """

    rows: tuple[Row, ...] | None = None
    columns: tuple[str, ...] = ()
    error: str | None = None
    rowcount: int = -1
    #: the statement may have changed the database (whatever it returned)
    wrote: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to every statement an agent runs."""

    #: wall-clock seconds one statement may run
    statement_timeout_s: float = 5.0
    #: a result set with more rows than this is refused (it would not fit in memory)
    max_result_rows: int = 100_000
    #: a result set whose values add up to more bytes than this is refused as it is
    #: fetched (wide rows fill memory long before the row limit or the time limit)
    max_result_bytes: int = 64_000_000
    #: the most an episode's database may hold, in bytes (SQLite: its pages; MySQL: its
    #: tables' files on the server); a write that would take it past this is refused
    max_db_bytes: int = 64_000_000


#: a database that holds more than this is keyed by the writes that made it, not read
#: whole for its content digest each step (every task database is far smaller)
DIGEST_LIMIT_BYTES = 4_000_000


def value_size(value: Any) -> int:
    """About how many bytes a fetched value holds (its text or bytes; 8 for a number)."""
    if isinstance(value, str | bytes | bytearray):
        return len(value) + 8
    return 8


def too_wide(limits: Limits) -> str:
    """The error of a result past ``limits.max_result_bytes``."""
    return (
        f"the result is larger than {limits.max_result_bytes / 1e6:g} MB; narrow the query "
        "(fewer rows or shorter values)"
    )


def too_big(limits: Limits) -> str:
    """The error of a write that would take the database past ``limits.max_db_bytes``."""
    return (
        f"database or disk is full: the database may hold at most "
        f"{limits.max_db_bytes / 1e6:g} MB (delete rows or drop tables to make room)"
    )


def chained_digest(base: str, statements: Sequence[str]) -> str:
    """The key of a database reached from one keyed ``base`` by ``statements`` (writes)."""
    h = hashlib.blake2b(base.encode(), digest_size=12)
    for sql in statements:
        h.update(b"\x04" + sql.encode())
    return "w" + h.hexdigest()


def normalize_value(value: Any) -> Any:
    """One canonical Python value per SQL value, whichever driver produced it.

    Integral numbers become ``int`` (MySQL returns ``Decimal('3.0000')`` where SQLite
    returns ``3.0`` or ``3``), other numbers ``float``; bytes become text; dates and
    times the text SQLite stores them as.
    """
    if value is None or isinstance(value, str | int) and not isinstance(value, bool):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
        return float(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return str(value)
    if isinstance(value, dt.timedelta):  # MySQL TIME
        seconds = int(value.total_seconds())
        sign = "-" if seconds < 0 else ""
        seconds = abs(seconds)
        return f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    if isinstance(value, set | frozenset):  # MySQL SET columns
        return ",".join(sorted(map(str, value)))
    return str(value)


def normalize_rows(rows: Sequence[Sequence[Any]]) -> tuple[Row, ...]:
    return tuple(tuple(normalize_value(v) for v in row) for row in rows)


def content_digest(tables: Sequence[tuple[str, Sequence[str], Sequence[Row]]]) -> str:
    """A digest of database contents that ignores row order and physical layout.

    ``tables`` holds (name, column names, rows); two databases with the same tables,
    columns and multisets of rows get the same digest.
    """
    h = hashlib.blake2b(digest_size=12)
    for name, columns, rows in sorted(tables, key=lambda t: t[0].lower()):
        h.update(f"\x01{name.lower()}\x02{','.join(c.lower() for c in columns)}".encode())
        for line in sorted(repr(row) for row in rows):
            h.update(b"\x03" + line.encode())
    return h.hexdigest()


class Episode(ABC):
    """One episode's private database."""

    @abstractmethod
    def execute(self, sql: str) -> QueryResult:
        """Run one agent statement (its effects last)."""

    @abstractmethod
    def probe(self, sql: str) -> QueryResult:
        """Run one statement and leave the database as it was."""

    def run_gold(self, sql: str) -> QueryResult:
        """Run the task's gold query on this database, leaving it and the agent's session
        as they were (by default: ``probe``)."""
        return self.probe(sql)

    @abstractmethod
    def dump(self) -> Any:
        """The database contents, picklable and self-contained."""

    @abstractmethod
    def load(self, state: Any) -> None:
        """Replace the database contents with a ``dump()``."""

    @abstractmethod
    def fingerprint(self) -> str:
        """Equal for equal contents while the database holds at most
        ``DIGEST_LIMIT_BYTES`` (cheap when nothing was written since last asked); past
        that, the last key chained with the writes since (``chained_digest``), so a step
        never reads a large database whole."""

    @abstractmethod
    def close(self) -> None:
        """Free the database (idempotent)."""

    def discard(self) -> None:
        """Free the database after a fault: whatever state it was left in, it is never
        served to another episode (by default: ``close``)."""
        self.close()

    def fork(self) -> Episode:
        """A new episode whose database holds exactly this one's contents; each is then
        changed and closed on its own."""
        raise NotImplementedError(f"{type(self).__name__} cannot be forked")


class Backend(ABC):
    """Builds templates once and opens per-episode copies of them."""

    name: str
    #: sqlglot dialect the backend speaks
    dialect: str

    @abstractmethod
    def open_episode(self, source: DatabaseSource) -> Episode: ...

    @abstractmethod
    def run_on_template(self, source: DatabaseSource, sql: str) -> QueryResult:
        """Run ``sql`` against a pristine copy of the task database (for gold results)."""

    @abstractmethod
    def schema(self, source: DatabaseSource) -> dict[str, list[str]]:
        """The task database's tables and their columns, named as they can be queried."""

    def translate_gold(self, source: DatabaseSource, gold: str) -> str:
        """The gold query (SQLite dialect) as this backend runs it."""
        return gold

    @abstractmethod
    def close(self) -> None: ...

    def share(self) -> Backend:
        """Count one more env using this backend (a fork's child): ``release`` closes it
        when the last of them lets go."""
        with _SHARING:
            self._users = getattr(self, "_users", 1) + 1
        return self

    def release(self) -> None:
        """One env is done with this backend; the last one closes it."""
        with _SHARING:
            self._users = users = getattr(self, "_users", 1) - 1
        if users <= 0:
            self.close()


#: guards the count of envs sharing a backend
_SHARING = threading.Lock()
