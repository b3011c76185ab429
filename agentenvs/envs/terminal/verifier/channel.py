"""The verdict's channel: a socket the grader holds, that only the verifier's pytest may use.

The grader listens on a Unix socket in a host directory shown to the grading session
read-only (``<tree>/channel/verdict.sock``). Every process of the sandbox can connect to
it; what makes a connection a *session* of the verdict is checked from outside, at the
moment it connects, while the process waits for the answer (nothing of the agent's has
run in it yet: the plugin connects at pytest's configure, before any test module is
imported):

- its executable and every file it has mapped (the interpreter, its libraries, anything
  preloaded) are ones the agent could not have changed (``trusted(path)``);
- its command line is the verifier's interpreter running the launcher in pytest mode.

Then the grader sends ``ok NONCE``; the session's first line must carry that nonce, so
bytes a process wrote before it turned into a verifier pytest never count. A connection
that fails a check is refused and named in ``refused``. Each session is bounded (lines,
bytes, events); what does not parse is the session's problem, never an exception.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_SESSIONS = 32
MAX_BYTES = 32 << 20
MAX_LINE = 4 << 20


@dataclass
class Session:
    """One pytest run as its plugin reported it."""

    pid: int
    events: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None

    @property
    def started(self) -> dict[str, Any] | None:
        return self.events[0] if self.events and self.events[0].get("ev") == "start" else None

    @property
    def finished(self) -> dict[str, Any] | None:
        last = self.events[-1] if self.events else None
        return last if last is not None and last.get("ev") == "finish" else None


def resolve_in(root: str, path: str, hops: int = 40) -> str:
    """``path`` with every symlink followed inside ``root`` (a process's ``/proc/PID/root``:
    an absolute link target there names the process's root, not the reader's)."""
    parts = [p for p in path.split("/") if p]
    done: list[str] = []
    while parts:
        name = parts.pop(0)
        if name == ".":
            continue
        if name == "..":
            if done:
                done.pop()
            continue
        here = "/" + "/".join([*done, name])
        try:
            target = os.readlink(root + here)
        except OSError:
            done.append(name)
            continue
        hops -= 1
        if hops < 0:
            raise OSError(f"too many links resolving {path}")
        if target.startswith("/"):
            done = []
        parts = [p for p in target.split("/") if p] + parts
    return "/" + "/".join(done)


def same_file(pid: int, a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name the same file in the process's filesystem."""
    root = f"/proc/{pid}/root"
    try:
        return os.path.samefile(root + resolve_in(root, a), root + resolve_in(root, b))
    except OSError:
        return False


def _peer_pid(conn: socket.socket) -> int:
    data = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, _, _ = struct.unpack("3i", data)
    return pid


def _maps(pid: int) -> list[str]:
    out = []
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/"):
                out.append(parts[5])
    return sorted(set(out))


class VerdictChannel:
    """The listener of one grading.

    ``directory``: the host directory shown at ``<tree>/channel``; ``python`` and
    ``boot``: the interpreter and launcher paths as the sandbox sees them; ``trusted(pid,
    maps)``: why the process runs code the agent could have changed (None: it does not),
    from the files it maps as the sandbox sees them (``maps`` is None where this process
    may not read them)."""

    def __init__(
        self,
        directory: str | Path,
        *,
        python: str,
        boot: str,
        trusted: Callable[[int, list[str] | None], str | None],
    ) -> None:
        self.path = os.path.join(directory, "verdict.sock")
        self.python = python
        self.boot = boot
        self.trusted = trusted
        self.sessions: list[Session] = []
        self.refused: list[str] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._closed = False
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        os.chmod(self.path, 0o666)  # the sandbox's user connects (root's: nobody)
        self._server.listen(16)
        self._accepting = threading.Thread(target=self._accept, name="verdict-channel", daemon=True)
        self._accepting.start()

    # ---------------------------------------------------------------- checks
    def check_peer(self, pid: int) -> str | None:
        """Why the process ``pid`` is not the verifier's pytest (None: it is)."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0")[:-1]]
        except OSError as exc:
            return f"cannot read the process: {exc}"
        maps: list[str] | None
        try:
            maps = _maps(pid)
        except PermissionError:
            maps = None  # another user's process (a container's, the engine run as a user)
        except OSError as exc:
            return f"cannot read the process: {exc}"
        if argv[:4] != [self.python, "-I", "-S", self.boot]:
            return f"not the verifier's launcher: {' '.join(argv[:4])[:200]}"
        rest = argv[4:]
        if rest[:1] != ["pytest"] and not (
            rest[:1] == ["python"]
            and any(rest[i : i + 2] == ["-m", "pytest"] for i in range(len(rest)))
        ):
            return "the launcher is not running pytest"
        return self.trusted(pid, maps)

    # ---------------------------------------------------------------- serving
    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                if len(self._threads) >= MAX_SESSIONS:
                    self.refused.append("too many connections")
                    conn.close()
                    continue
                self._conns.append(conn)
                thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
                self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            pid = _peer_pid(conn)
        except OSError as exc:
            self.refused.append(f"no peer credentials: {exc}")
            conn.close()
            return
        why = self.check_peer(pid)
        if why is not None:
            with self._lock:
                self.refused.append(f"pid {pid}: {why}")
            conn.close()
            return
        nonce = secrets.token_hex(16)
        session = Session(pid)
        with self._lock:
            self.sessions.append(session)
        try:
            conn.sendall(f"ok {nonce}\n".encode())
            self._read(conn, session, nonce)
        except OSError as exc:
            session.problem = session.problem or f"the connection failed: {exc}"
        finally:
            conn.close()

    def _read(self, conn: socket.socket, session: Session, nonce: str) -> None:
        buf = b""
        total = 0
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_BYTES:
                session.problem = f"the session wrote more than {MAX_BYTES >> 20} MB"
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if not self._take(session, line, nonce):
                    return
            if len(buf) > MAX_LINE:
                session.problem = "a line longer than the channel takes"
                return
        if buf.strip():
            session.problem = "the session ended inside a line"

    def _take(self, session: Session, line: bytes, nonce: str) -> bool:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            session.problem = "a line that is not JSON"
            return False
        if not isinstance(event, dict) or not isinstance(event.get("ev"), str):
            session.problem = "an event that is not an object with 'ev'"
            return False
        if not session.events and (event.get("ev") != "start" or event.get("nonce") != nonce):
            session.problem = "the session did not start with the grader's nonce"
            return False
        if session.finished is not None:
            session.problem = "events after the session's finish"
            return False
        session.events.append(event)
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Stop listening and wait (bounded) for the sessions' readers; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        try:
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        for thread in threads:
            thread.join(timeout)
        with self._lock:
            for conn in self._conns:
                try:
                    conn.close()
                except OSError:
                    pass
        try:
            os.unlink(self.path)
        except OSError:
            pass
