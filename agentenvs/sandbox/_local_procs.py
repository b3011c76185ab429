"""The host's side of a ``local`` sandbox's processes: the seccomp filter handed to bwrap,
killing a sandbox's whole tree, and reading its pipes (capped output, bwrap's status, the
case worker's messages) without ever blocking on them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import selectors
import signal
import subprocess
import time
from typing import Any

from agentenvs.sandbox import _seccomp

_CHUNK = 1 << 16


def _seccomp_fd() -> int | None:
    """A fresh fd holding the seccomp filter for bwrap to read (None: no filter here)."""
    prog = _seccomp_program()
    if prog is None:
        return None
    fd = os.memfd_create("agentenvs-seccomp", os.MFD_CLOEXEC)
    os.write(fd, prog)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@functools.lru_cache(maxsize=1)
def _seccomp_program() -> bytes | None:
    return _seccomp.program()


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill a sandbox: its pid 1 first (the pid namespace dies with it), then bwrap.

    Killing bwrap's child lets bwrap reap it and exit, so no orphaned zombie is left for
    the host's init (which, in a container, may never reap it).
    SIGKILL to bwrap's process group is the fallback.
    """
    if proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                inits = [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            inits = []
        for pid in inits:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if inits:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2)
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            proc.kill()
    with contextlib.suppress(Exception):
        proc.wait(timeout=10)
    # the pipes stay open: whoever reads them sees EOF now; _forget closes them


def _wait_exit(proc: subprocess.Popen[bytes], wait_s: float) -> bool:
    """Wait up to ``wait_s`` for ``proc`` to exit; whether it has. Through a pidfd where
    the kernel has them (woken by the exit itself, where ``Popen.wait`` polls in sleeps
    of up to 50 ms)."""
    if proc.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait_s)
        return proc.returncode is not None
    try:
        poll = select.poll()
        poll.register(fd, select.POLLIN)
        poll.poll(max(wait_s, 0.0) * 1000)
    finally:
        os.close(fd)
    return proc.poll() is not None


def _pid1(proc: subprocess.Popen[bytes]) -> int | None:
    """The host pid of the sandbox's pid 1 (bwrap's one child), if it still runs."""
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            kids = [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return None
    return kids[0] if kids else None


class _Status:
    """The host's end of a pipe that a process inside (or bwrap) reports on: what arrived
    so far. ``json``: bwrap writes its json status there (else nothing does)."""

    def __init__(self, fd: int, *, json: bool = False) -> None:
        self.fd = fd
        self.json = json
        self.text = bytearray()

    def read(self) -> str:
        """Everything written so far (the pipe is drained, never waited on)."""
        if self.fd >= 0:
            with contextlib.suppress(BlockingIOError, OSError):
                while chunk := os.read(self.fd, _CHUNK):
                    self.text += chunk
                    if len(self.text) > 1 << 16:  # no status is this long
                        break
        return self.text.decode(errors="replace")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()


class _Capped:
    """Collects a stream up to ``cap`` bytes, noting whether anything was cut."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.buf)
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(room, 0)]
        self.buf += chunk

    def text(self) -> str:
        return self.buf.decode("utf-8", "replace")


def _pump(
    proc: subprocess.Popen[bytes], data: bytes, deadline: float, cap: int
) -> tuple[_Capped, _Capped, bool]:
    """Feed stdin and collect capped stdout/stderr until both close or the deadline passes."""
    assert proc.stdin and proc.stdout and proc.stderr
    out, err = _Capped(cap), _Capped(cap)
    sel = selectors.DefaultSelector()
    view = memoryview(data)
    if view:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    timed_out = False
    try:
        while len(sel.get_map()) > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(left):
                if key.fileobj is proc.stdin:
                    try:
                        view = view[os.write(key.fd, view[:_CHUNK]) :]
                    except (BrokenPipeError, BlockingIOError) as exc:
                        if isinstance(exc, BlockingIOError):
                            continue
                        view = view[:0]
                    if not view:
                        sel.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                chunk = os.read(key.fd, _CHUNK)
                if chunk:
                    key.data.add(chunk)
                else:
                    sel.unregister(key.fileobj)
        if not timed_out:
            # output closed; the process may still linger an instant (or hold on: timeout)
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        sel.close()
    return out, err, timed_out


class _LineReader:
    """JSON messages from a worker's stdout, each awaited at most a given time, while what
    is queued for its stdin (``feed``) is written as the pipe takes it.

    stderr is drained alongside (so the worker never blocks on it) and its tail kept for
    error messages.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout and proc.stderr and proc.stdin
        self._sel = selectors.DefaultSelector()
        self._sel.register(proc.stdout, selectors.EVENT_READ, "out")
        self._sel.register(proc.stderr, selectors.EVENT_READ, "err")
        self._stdin = proc.stdin.fileno()
        os.set_blocking(self._stdin, False)
        self._pending = bytearray()
        self._writing = False
        self.stdin_broken = False
        self._out_open = True
        self._buf = bytearray()
        self.err_tail = bytearray()

    def feed(self, data: bytes) -> None:
        """Queue ``data`` for the worker's stdin (written now as far as the pipe takes it)."""
        if self.stdin_broken:
            return
        self._pending += data
        self._write_some()

    def _write_some(self) -> None:
        try:
            while self._pending:
                del self._pending[: os.write(self._stdin, self._pending[:_CHUNK])]
        except BlockingIOError:
            pass
        except OSError:
            self.stdin_broken = True
            self._pending.clear()
        want = bool(self._pending)
        if want != self._writing:
            if want:
                self._sel.register(self._stdin, selectors.EVENT_WRITE, "in")
            else:
                self._sel.unregister(self._stdin)
            self._writing = want

    def next(self, wait_s: float) -> dict[str, Any] | None:
        """The next message, or None when the worker ended or stayed silent ``wait_s``."""
        deadline = time.monotonic() + wait_s
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self._out_open:
                return None
            for key, _ in self._sel.select(left):
                if key.data == "in":
                    self._write_some()
                    continue
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    self._sel.unregister(key.fileobj)
                    self._out_open = self._out_open and key.data != "out"
                elif key.data == "out":
                    self._buf += chunk
                else:
                    self.err_tail = (self.err_tail + chunk)[-4096:]
        line, _, rest = bytes(self._buf).partition(b"\n")
        self._buf[:] = rest
        return json.loads(line)

    @property
    def all_written(self) -> bool:
        return not self._pending

    @property
    def ended(self) -> bool:
        """The worker's stdout has closed (it exited, or was killed)."""
        return not self._out_open

    def close(self) -> None:
        self._sel.close()
