"""The host's side of the local sandbox's warm fork servers (``forkserver.py``).

``LocalSandbox.spawn_warm(preload, entry, imports, as_if_imported)`` returns a ``SandboxProcess`` like
``spawn`` does, but the process is a fork of a server that has already started its
interpreter and imported ``imports`` inside its own sandbox (a scratch tmpfs at
``/work``, as ``spawn(scratch=True)``), so a program starts in milliseconds. Each process
talks to the host over pipes of its own, made for it; ``kill()`` asks the server to kill
everything the program started and put the sandbox back as it was; a server that cannot
(``clean`` false), that does not answer or that died is retired, and a fresh one serves
the next program. Idle servers are kept per ``(preload, entry, imports)``.

How many servers run is capped (``cap``, by default the CPUs this process may use): a
caller that finds no idle server while the cap is reached waits in a FIFO queue for one
to come back instead of starting a cold one, so throughput grows with callers up to the
cores and holds beyond them. An idle server of another kind is retired to make room. Two
cases start one beyond the cap rather than wait: a caller that already holds a program
of this sandbox (it cannot give one back while it waits), and a caller that waited
``QUEUE_PATIENCE_S`` (callers that wait on each other outside the sandbox must not
deadlock); a server beyond the cap is retired when its program ends. ``cap=None`` is the
unbounded behaviour: a cold server whenever none is idle.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentenvs.core.errors import Fault, SandboxError
from agentenvs.sandbox import faults, forkserver
from agentenvs.sandbox._local_procs import _CHUNK
from agentenvs.sandbox.base import SandboxProcess

if TYPE_CHECKING:
    import subprocess

    from agentenvs.sandbox.local import LocalSandbox

#: a server's start (bwrap, the interpreter, the imports) on a loaded machine
_START_S = 60.0
#: a server's answer to run/end/ping (killing a program's processes included)
_ANSWER_S = 30.0
#: how long a caller waits in the queue before it starts a server beyond the cap
QUEUE_PATIENCE_S = 20.0
_LIMIT_FIELDS = ("cpu_seconds", "memory_mb", "max_processes", "max_file_mb", "max_open_files")

#: (preload, entry, imports, as_if_imported)
Key = tuple[str, str, tuple[str, ...], tuple[str, ...]]


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _Server:
    """One fork server: its bwrap process and the host's end of its control socket."""

    def __init__(self, box: LocalSandbox, key: Key, owner: WarmServers | None = None) -> None:
        self.box = box
        self.key = key
        self.owner = owner
        host, inner = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctl = host
        try:
            argv = forkserver.server_argv(box._python, inner.fileno())
            self.proc: subprocess.Popen[bytes] = box._popen(
                argv, scratch=True, pass_fds=(inner.fileno(),)
            )
        except BaseException:
            host.close()
            raise
        finally:
            inner.close()
        preload, entry, imports, as_if = key
        limits = {k: getattr(box.limits, k) for k in _LIMIT_FIELDS}
        hello = {
            "preload": preload,
            "entry": entry,
            "imports": list(imports),
            "as_if_imported": list(as_if),
            "limits": limits,
        }
        answer = self.ask(hello, wait_s=_START_S)
        if answer is None or not answer.get("ready"):
            self._not_started()

    def _not_started(self) -> None:
        err = b""
        with contextlib.suppress(Exception):
            assert self.proc.stderr is not None
            os.set_blocking(self.proc.stderr.fileno(), False)
            err = self.proc.stderr.read() or b""
        text = err.decode(errors="replace")
        fault = self.box._end_fault(self.proc, "the warm server", stderr=text, wait_s=1.0)
        self.retire()
        if fault is not None:
            raise fault
        raise SandboxError(
            f"the sandbox's warm server did not start: {text.strip()[-500:] or 'no answer'}"
        )

    def ask(
        self, request: dict[str, Any], *, fds: Sequence[int] = (), wait_s: float = _ANSWER_S
    ) -> dict[str, Any] | None:
        """Send ``request`` (with ``fds`` attached); its answer, None if none came."""
        try:
            self.ctl.settimeout(wait_s)
            socket.send_fds(self.ctl, [json.dumps(request).encode()], list(fds))
            data = self.ctl.recv(1 << 16)
        except OSError:
            return None
        if not data:
            return None
        try:
            answer = json.loads(data)
        except ValueError:
            return None
        if "id" in request and answer.get("id") != request["id"]:
            return None
        return answer

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and self.ctl.fileno() >= 0

    def retire(self) -> None:
        self.box._forget(self.proc)
        self.ctl.close()
        if self.owner is not None:
            self.owner._discard(self)


class WarmServers:
    """A local sandbox's fork servers, by what they preload: at most ``cap`` of them
    (None: no cap), callers beyond it queued first come, first served."""

    def __init__(self, box: LocalSandbox, cap: int | None = None) -> None:
        if cap is not None and (isinstance(cap, bool) or int(cap) < 1):
            raise ValueError(f"the warm server cap must be a positive integer or None, got {cap!r}")
        self.box = box
        self.cap = None if cap is None else int(cap)
        self._idle: dict[Key, list[_Server]] = {}
        self._live: set[_Server] = set()
        self._starting = 0
        self._queue: deque[object] = deque()
        # programs held, by the thread that took them (such a caller never waits)
        self._held: dict[int, int] = {}
        self._closed = False
        self._lock = threading.Condition(threading.RLock())
        #: servers started so far, and the most alive at once (for tests and benchmarks)
        self.started = 0
        self.peak = 0

    def _count(self) -> int:
        return len(self._live) + self._starting

    def _idle_server(self, key: Key) -> _Server | None:
        idle = self._idle.get(key, [])
        while idle:
            server = idle.pop()
            if server.alive:
                return server
            server.retire()  # died idle (reset, closed, killed): no program ran there
        return None

    def _evict(self) -> _Server | None:
        """An idle server of any kind, taken out of the count (the caller retires it)."""
        for idle in self._idle.values():
            while idle:
                server = idle.pop(0)
                self._live.discard(server)
                return server
        return None

    def take(self, key: Key) -> _Server:
        me = threading.get_ident()
        ticket = object()
        patience_until = time.monotonic() + QUEUE_PATIENCE_S
        victim = None
        with self._lock:
            self._queue.append(ticket)
            try:
                while True:
                    if self._closed:
                        raise SandboxError("the sandbox is closed")
                    if self._queue[0] is ticket:
                        server = self._idle_server(key)
                        if server is not None:
                            self._held[me] = self._held.get(me, 0) + 1
                            return server
                        if self.cap is None or self._count() < self.cap:
                            break
                        victim = self._evict()
                        if victim is not None:
                            break
                    left = patience_until - time.monotonic()
                    if self._held.get(me, 0) or left <= 0:
                        break  # beyond the cap rather than a deadlock
                    self._lock.wait(left)
                self._starting += 1
                self.peak = max(self.peak, self._count())
            finally:
                self._queue.remove(ticket)
                self._lock.notify_all()
        try:
            if victim is not None:
                victim.retire()
            server = _Server(self.box, key, self)
        except BaseException:
            with self._lock:
                self._starting -= 1
                self._lock.notify_all()
            raise
        with self._lock:
            self._starting -= 1
            self._live.add(server)
            self.started += 1
            self._held[me] = self._held.get(me, 0) + 1
        return server

    def _release(self, thread: int) -> None:
        with self._lock:
            left = self._held.get(thread, 0) - 1
            if left > 0:
                self._held[thread] = left
            else:
                self._held.pop(thread, None)

    def _discard(self, server: _Server) -> None:
        """A server is gone (retired): its place is free."""
        with self._lock:
            self._live.discard(server)
            self._lock.notify_all()

    def give_back(self, server: _Server) -> None:
        with self._lock:
            over = self.cap is not None and self._count() > self.cap
            if not over and not self._closed:
                self._idle.setdefault(server.key, []).append(server)
                self._lock.notify_all()
                return
        server.retire()  # beyond the cap (or closed): the place goes to the queue

    def close(self) -> None:
        with self._lock:
            self._closed = True
            servers = [s for group in self._idle.values() for s in group]
            self._idle.clear()
            self._lock.notify_all()
        for server in servers:
            server.retire()

    def spawn(
        self,
        preload: str,
        entry: str,
        imports: Sequence[str],
        as_if_imported: Sequence[str] = (),
    ) -> SandboxProcess:
        key = (preload, entry, tuple(imports), tuple(as_if_imported))
        for attempt in range(2):
            server = self.take(key)
            thread = threading.get_ident()
            try:
                return WarmProcess(self, server, thread)
            except _ServerGone:
                # nothing of the program ran: a server that died idle is replaced once
                self._release(thread)
                fault = self.box._end_fault(server.proc, "the warm server", wait_s=1.0)
                server.retire()
                if attempt and fault is not None:
                    raise fault from None
                if attempt:
                    raise SandboxError("the sandbox's warm server does not answer") from None
            except BaseException:
                self._release(thread)
                server.retire()
                raise
        raise AssertionError("unreachable")


class _ServerGone(Exception):
    """The server did not start the program (it died or hangs): nothing of it ran."""


class WarmProcess(SandboxProcess):
    """A program forked by a warm server, on pipes of its own (stderr goes nowhere)."""

    def __init__(self, servers: WarmServers, server: _Server, thread: int) -> None:
        self._servers = servers
        self._server = server
        self._thread = thread
        req_r, self._req_w = os.pipe()
        self._ans_r, ans_w = os.pipe()
        try:
            answer = server.ask({"op": "run", "id": secrets.token_hex(8)}, fds=(req_r, ans_w))
        finally:
            os.close(req_r)
            os.close(ans_w)
        if answer is None or not answer.get("started"):
            os.close(self._req_w)
            os.close(self._ans_r)
            raise _ServerGone
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._ans_r, selectors.EVENT_READ)
        self._eof = False
        self._killed = False

    @property
    def eof(self) -> bool:
        return self._eof

    def write(self, data: bytes) -> None:
        if self._killed:
            raise SandboxError("the process was killed")
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._req_w, view) :]
        except OSError as exc:
            raise SandboxError(f"the process has exited: {exc}") from exc

    def read(self, timeout: float) -> bytes:
        if self._eof or self._killed:
            return b""
        if not self._sel.select(max(timeout, 0.0)):
            return b""
        try:
            chunk = os.read(self._ans_r, _CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            self._eof = True
        return chunk

    def fault(self) -> Fault | None:
        """The program's end is a fault only when its server (the sandbox's pid 1) went
        with it: nothing inside can kill or stop pid 1."""
        if self._killed:
            return None
        server = self._server
        if server.alive and server.ask({"op": "ping", "id": secrets.token_hex(8)}, wait_s=5.0):
            return None
        wait_s = faults.LOCAL_EXIT_WAIT_S if server.proc.poll() is None else 0.0
        return server.box._end_fault(server.proc, "a program", wait_s=min(wait_s, 2.0))

    def kill(self) -> None:
        if self._killed:
            return
        self._killed = self._eof = True
        self._sel.close()
        for fd in (self._req_w, self._ans_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        server = self._server
        self._servers._release(self._thread)
        answer = None
        if server.alive:
            answer = server.ask({"op": "end", "id": secrets.token_hex(8)})
        if answer is not None and answer.get("clean"):
            self._servers.give_back(server)
        else:
            server.retire()
