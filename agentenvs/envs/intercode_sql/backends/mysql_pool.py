"""The pool of pristine episode databases: one per server and process, shared by its backends.

A reset takes a pristine database made ahead by the pool's threads (each on its own
connection), which then make the template's next one while the episode runs (one more for
each reset waiting on the template) and drop finished episodes off the hot path. An
episode that only read gives its database back as it is; a written one has its rows copied
back from the template (when no table, view or index of it changed) or is dropped and made
anew. The least recently used template's spares go first, and a backend's own go when it
closes. ``server`` is the process's connection to the server (``mysql_server``), whose
``lost`` set keeps the databases a drop could not reach.
"""

from __future__ import annotations

import collections
import itertools
import os
import queue
import re
import threading
import weakref
from typing import Any, Protocol

from agentenvs.envs.intercode_sql.backends.mysql_databases import _drop, _prepare, _q, _run_on

#: a reset that finds no spare waits this long for the one being made for its template
PREPARE_WAIT_S = 5.0
PRIORITY_PREPARE, PRIORITY_DROP, PRIORITY_STOP = 0, 1, 2
#: threads (each with its own connection) that make spares and drop episodes: the
#: server runs their DDL side by side
POOL_THREADS = 3

_AUTO_INCREMENT = re.compile(r" AUTO_INCREMENT=\d+")


class SpareHolder(Protocol):
    """What the pool asks of a backend whose episodes take and give back its databases."""

    _closed: bool

    def spares_limit(self) -> int: ...


class _Pool:
    """The pristine episode databases of one server, shared by the process's backends.

    ``ready`` holds, per template, databases no statement wrote (made ahead, or given back
    by an episode that only read), each with the backend that holds it; any backend's
    episode may take one. The pool keeps at most the sum of its backends' shares
    (``spares_limit``), the least recently used template's first to go. ``POOL_THREADS``
    threads, each on its own connection, make spares and drop finished databases, so
    neither the reset nor the admin connection (watchdog kills, schema reads) waits
    behind their DDL; a reset that finds no spare asks for one more and waits for it.
    """

    def __init__(self, server: Any) -> None:
        self.server = server
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        # template -> [(name, password, holder)], the most recently given back last
        self.ready: collections.OrderedDict[str, list[tuple[str, str, SpareHolder]]] = (
            collections.OrderedDict()
        )
        self.wanted: collections.Counter[str] = collections.Counter()  # spares being made
        self.shapes: dict[str, dict[str, str]] = {}  # template -> its tables' definitions
        self.backends: weakref.WeakSet[SpareHolder] = weakref.WeakSet()
        # (priority, order, kind, arg): spares are made before finished episodes are dropped
        self.jobs: queue.PriorityQueue[tuple[int, int, str, Any]] = queue.PriorityQueue()
        self.order = itertools.count()
        self.workers: list[threading.Thread] = []
        self.local = threading.local()  # each pool thread's own connection
        self.conns: list[Any] = []
        self.outstanding: set[int] = set()  # order numbers of jobs queued or running
        self.waiting: collections.Counter[str] = (
            collections.Counter()
        )  # resets waiting, by template
        self.pid = os.getpid()
        self.closed = False

    def _forked(self) -> None:
        """In a forked child the parent's spares, thread and connection are not ours."""
        if self.pid != os.getpid():
            self.pid = os.getpid()
            self.ready.clear()
            self.wanted.clear()
            self.waiting.clear()
            self.jobs = queue.PriorityQueue()
            self.workers = []
            self.local = threading.local()
            self.conns = []  # closing them would end the parent's sessions
            self.outstanding = set()

    def join(self, backend: SpareHolder) -> None:
        with self.lock:
            self._forked()
            self.backends.add(backend)

    def _limit(self) -> int:
        return sum(b.spares_limit() for b in list(self.backends) if not b._closed)

    def take(self, template: str, backend: SpareHolder) -> tuple[str, str] | None:
        """A pristine database of ``template``: a ready one, else the next the pool makes
        (one more is asked for each reset waiting); None after ``PREPARE_WAIT_S``."""
        with self.lock:
            self._forked()
            if not self.ready.get(template) and not self.closed:
                self.waiting[template] += 1
                try:
                    if self.wanted[template] < self.waiting[template]:
                        self.wanted[template] += 1
                        self._put(PRIORITY_PREPARE, "prepare", (template, backend))
                    self.changed.wait_for(
                        lambda: self.ready.get(template) or not self.wanted[template],
                        timeout=PREPARE_WAIT_S,
                    )
                finally:
                    self.waiting[template] -= 1
                    if self.waiting[template] <= 0:
                        del self.waiting[template]
            ready = self.ready.get(template)
            if not ready:
                return None
            name, password, _ = ready.pop()
            if not ready:
                del self.ready[template]
            return name, password

    def want(self, template: str, backend: SpareHolder) -> None:
        """Make a spare of ``template`` for ``backend`` unless one is ready or being made."""
        with self.lock:
            self._forked()
            if self.closed or self.ready.get(template) or self.wanted[template]:
                return
            self.wanted[template] += 1
            self._put(PRIORITY_PREPARE, "prepare", (template, backend))

    def recycle(self, template: str, name: str, password: str, backend: SpareHolder) -> bool:
        """Make a written database pristine again in the background (its data copied back
        from the template, when no table, view or index differs from it), else drop it and
        make a new one; False: no pool thread here, the caller drops it."""
        with self.lock:
            if self.closed or self.pid != os.getpid():
                return False
            self.wanted[template] += 1
            self._put(PRIORITY_PREPARE, "recycle", (template, name, password, backend))
        return True

    def give(self, template: str, name: str, password: str, backend: SpareHolder) -> bool:
        """Keep a pristine database for later episodes; False: the caller drops it."""
        with self.lock:
            if self.closed or self.pid != os.getpid():
                return False
            self.ready.setdefault(template, []).append((name, password, backend))
            self.ready.move_to_end(template)
            self._trim()
            self.changed.notify_all()
        return True

    def drop(self, name: str) -> bool:
        """Drop ``name`` in the background; False: no pool thread here, the caller drops it."""
        with self.lock:
            if self.closed or self.pid != os.getpid():
                return False
            self._put(PRIORITY_DROP, "drop", name)
        return True

    def leave(self, backend: SpareHolder) -> None:
        """``backend`` closes: the databases it holds go, and the drops queued so far are
        done before this returns."""
        with self.lock:
            self.backends.discard(backend)
            if self.pid != os.getpid():
                return
            for template in list(self.ready):
                ready = self.ready[template]
                for entry in [e for e in ready if e[2] is backend]:
                    ready.remove(entry)
                    self._put(PRIORITY_DROP, "drop", entry[0])
                if not ready:
                    del self.ready[template]
            self._trim()
        self.settle()

    def forget(self) -> None:
        """The server restarted: the spares made before are dropped (a server started
        afresh may not have them) and made again when wanted."""
        with self.lock:
            if self.pid != os.getpid():
                return
            for template in list(self.ready):
                for entry in self.ready.pop(template):
                    self._put(PRIORITY_DROP, "drop", entry[0])
            self.changed.notify_all()

    def settle(self, timeout: float = 60.0) -> None:
        """Wait until every job queued so far (spares, copies back, drops) is done."""
        with self.lock:
            if self.pid != os.getpid() or not any(w.is_alive() for w in self.workers):
                return
            mark = max(self.outstanding, default=-1)
            self.changed.wait_for(
                lambda: not any(order <= mark for order in self.outstanding), timeout=timeout
            )

    def close(self) -> None:
        """The last backend is gone: stop the thread, drop every spare."""
        with self.lock:
            self.closed = True
            mine = self.pid == os.getpid()
            workers, self.workers = (self.workers if mine else []), []
            spares = [e[0] for ready in self.ready.values() for e in ready] if mine else []
            self.ready.clear()
            for _ in workers:
                self._put(PRIORITY_STOP, "stop", None)  # after every queued drop
        for worker in workers:
            worker.join(timeout=60)
        for name in spares:
            try:
                _drop(self.server.run, name, self.server.user_host)
            except Exception:  # the server went away: the sweep removes it later
                pass
        conns, self.conns = self.conns, []
        for conn in conns if mine else []:
            try:
                conn.close()
            except Exception:
                pass

    # under self.lock ------------------------------------------------------------------
    def _trim(self) -> None:
        """Past the limit, drop extra spares of a template first, then the least recently
        used templates' (oldest first)."""
        over = sum(len(v) for v in self.ready.values()) - self._limit()
        for template in list(self.ready):
            ready = self.ready[template]
            while over > 0 and len(ready) > 1:
                self._put(PRIORITY_DROP, "drop", ready.pop(0)[0])
                over -= 1
        for template in list(self.ready):
            if over <= 0:
                break
            for entry in self.ready.pop(template):
                self._put(PRIORITY_DROP, "drop", entry[0])
                over -= 1

    def _put(self, priority: int, kind: str, arg: Any) -> None:
        order = next(self.order)
        if kind != "stop":
            self.outstanding.add(order)
            self._start()
        self.jobs.put((priority, order, kind, arg))

    def _start(self) -> None:
        self.workers = [w for w in self.workers if w.is_alive()]
        while len(self.workers) < POOL_THREADS:
            worker = threading.Thread(
                target=self._work, args=(self.jobs,), name="mysql-episode-pool", daemon=True
            )
            worker.start()
            self.workers.append(worker)

    # the pool's thread ---------------------------------------------------------------
    def _run(self, sql: str, args: Any = None) -> list[tuple]:
        """``sql`` on this pool thread's own connection (made on first use)."""
        for attempt in (0, 1):
            conn = getattr(self.local, "conn", None)
            if conn is None or not conn.open:
                conn = self.local.conn = self.server.connect()
                with self.lock:
                    self.conns.append(conn)
                # a lock left by an episode's last statement fails the job, not the pool
                _run_on(conn, "SET SESSION lock_wait_timeout = 10")
                _run_on(conn, "SET SESSION innodb_lock_wait_timeout = 10")
            try:
                return _run_on(conn, sql, args)
            except (
                self.server.pymysql.err.OperationalError,
                self.server.pymysql.err.InterfaceError,
            ):
                self.local.conn = None  # the connection broke: once more on a new one
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _work(self, jobs: queue.Queue) -> None:
        while True:
            _, order, kind, arg = jobs.get()
            if kind == "stop":
                break
            try:
                self._job(kind, arg)
            finally:
                with self.lock:
                    self.outstanding.discard(order)
                    self.changed.notify_all()

    def _job(self, kind: str, arg: Any) -> None:
        user_host = self.server.user_host
        lost = self.server.lost
        if kind == "drop":
            try:
                _drop(self._run, arg, user_host)
            except Exception:  # the server went away: dropped once it answers again
                lost.add(arg)
            return
        template, backend = arg[0], arg[-1]
        made = None
        try:
            if kind == "recycle":
                name, password = arg[1], arg[2]
                try:
                    restored = self._restore(template, name)
                except Exception:
                    lost.add(name)
                    raise
                if restored:
                    made = (name, password)
                else:
                    _drop(self._run, name, user_host)
            if made is None:
                made = _prepare(self._run, template, user_host, lost)
                if template not in self.shapes:  # what a fresh copy looks like
                    self.shapes[template] = self._shape(made[0])
        except Exception:  # the server went away: what is left is dropped once it answers
            if made is not None:
                lost.add(made[0])
                made = None
        with self.lock:
            self.wanted[template] -= 1
            if self.wanted[template] <= 0:
                del self.wanted[template]
            keep = made is not None and not self.closed and not backend._closed
            if keep:
                self.ready.setdefault(template, []).append((*made, backend))
                self.ready.move_to_end(template)
                self._trim()
            self.changed.notify_all()
        if made is not None and not keep:
            try:
                _drop(self._run, made[0], user_host)
            except Exception:
                lost.add(made[0])

    def _shape(self, db: str) -> dict[str, str]:
        """Every table and view of ``db``: a table's full definition (auto-increment
        counter included), a view's kind."""
        shape = {}
        for table, kind in self._run(
            "SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s",
            (db,),
        ):
            if kind == "BASE TABLE":
                kind = self._run(f"SHOW CREATE TABLE {_q(db)}.{_q(table)}")[0][1]
            shape[table] = kind
        return shape

    def _restore(self, template: str, name: str) -> bool:
        """Copy the template's rows back into a written episode database in one
        transaction, when its tables, views, indexes and options are those of a fresh
        copy; True when it then equals a fresh copy, auto-increment counters included."""
        fresh = self.shapes.get(template)
        if fresh is None:  # not known yet: the next copy made tells
            return False
        if _uncounted(self._shape(name)) != _uncounted(fresh):
            return False
        self._run("SET SESSION foreign_key_checks = 0")
        try:
            self._run("START TRANSACTION")
            for table, definition in fresh.items():
                if definition.startswith("CREATE"):
                    self._run(f"DELETE FROM {_q(name)}.{_q(table)}")
                    self._run(
                        f"INSERT INTO {_q(name)}.{_q(table)} SELECT * FROM {_q(template)}.{_q(table)}"
                    )
            self._run("COMMIT")
        except Exception:
            self._run("ROLLBACK")
            raise
        finally:
            self._run("SET SESSION foreign_key_checks = 1")
        return self._shape(name) == fresh


def _uncounted(shape: dict[str, str]) -> dict[str, str]:
    return {table: _AUTO_INCREMENT.sub("", definition) for table, definition in shape.items()}


def _uncounted(shape: dict[str, str]) -> dict[str, str]:
    return {table: _AUTO_INCREMENT.sub("", definition) for table, definition in shape.items()}
