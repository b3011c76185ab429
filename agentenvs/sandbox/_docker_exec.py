"""A process exec'd in a sandbox container, on a hijacked engine connection of its own.

Below both the engine module (client, labels, sweep) and the container module: an exec
needs of its container only the engine client, the container's id and the engine's
address (``ExecHost``), so neither module needs the other to describe it.
"""

from __future__ import annotations

import selectors
import socket
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from agentenvs.core.errors import SandboxError


class ExecHost(Protocol):
    """What an exec needs of the container it runs in (``_docker_container._Container``)."""

    client: Any
    id: str
    short: str
    engine_address: tuple[int, Any]


class _Deadline(Exception):
    """The exec's deadline passed before its output ended."""


class _Exec:
    """One exec instance on a hijacked engine connection: write stdin, read frames.

    The SDK's own socket mode reads the HTTP head through a buffered reader, which can
    swallow the first output bytes; here the upgrade is done by hand on a plain socket,
    so every byte after the head is ours.
    """

    def __init__(
        self,
        container: ExecHost,
        argv: Sequence[str],
        *,
        user: str,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
    ) -> None:
        self.container = container
        api = container.client.api
        kwargs: dict[str, Any] = {"stdin": True, "stdout": True, "stderr": True, "user": user}
        if env:
            kwargs["environment"] = dict(env)
        if workdir:
            kwargs["workdir"] = workdir
        try:
            self.id = api.exec_create(container.id, list(argv), **kwargs)["Id"]
        except Exception as exc:
            raise SandboxError(
                f"cannot start a process in container {container.short}: {exc}"
            ) from exc
        family, address = container.engine_address
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        try:
            self.sock.connect(address)
            body = b'{"Detach":false,"Tty":false}'
            head = (
                f"POST /v{api._version}/exec/{self.id}/start HTTP/1.1\r\nHost: docker\r\n"
                "Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            self.sock.sendall(head + body)
            self._buf = bytearray(self._read_head())
        except Exception:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.sock, selectors.EVENT_READ)
        self._stdin = bytearray()
        self._stdin_done = False  # stdin is closed on our side
        self._close_when_written = False
        self._eof = False

    def _read_head(self) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise SandboxError(f"engine closed the exec connection: {data[:200]!r}")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0].split()
        if len(status) < 2 or not (status[1].startswith(b"1") or status[1].startswith(b"2")):
            raise SandboxError(f"engine refused the exec: {head.decode(errors='replace')[:300]}")
        return rest

    def send(self, data: bytes) -> None:
        """Queue ``data`` as the whole of stdin (written while reading), then close it."""
        self._stdin += data
        self._close_when_written = True
        if not self._stdin:
            self._close_stdin()
        else:
            self._sel.modify(self.sock, selectors.EVENT_READ | selectors.EVENT_WRITE)

    def queue(self, data: bytes) -> None:
        """Queue ``data`` for stdin, written while reading; stdin stays open (``end_input``)."""
        if self._stdin_done:
            return
        self._stdin += data
        if self._stdin:
            self._sel.modify(self.sock, selectors.EVENT_READ | selectors.EVENT_WRITE)

    def _close_stdin(self) -> None:
        self._stdin_done = True
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def read(self, deadline: float) -> tuple[int, bytes] | None:
        """The next (stream, bytes) frame (1 stdout, 2 stderr), or None once output ends.

        Writes pending stdin meanwhile. Raises _Deadline when ``deadline`` (a
        ``time.monotonic()`` value) passes first.
        """
        while True:
            if len(self._buf) >= 8:
                stream, size = struct.unpack(">BxxxL", self._buf[:8])
                if len(self._buf) >= 8 + size:
                    data = bytes(self._buf[8 : 8 + size])
                    del self._buf[: 8 + size]
                    return stream, data
            if self._eof:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Deadline
            for _key, mask in self._sel.select(remaining):
                if mask & selectors.EVENT_WRITE:
                    self._write_some()
                if mask & selectors.EVENT_READ:
                    try:
                        chunk = self.sock.recv(262144)
                    except BlockingIOError:
                        continue
                    except ConnectionResetError:
                        chunk = b""
                    if chunk:
                        self._buf += chunk
                    else:
                        self._eof = True

    def _write_some(self) -> None:
        try:
            sent = self.sock.send(self._stdin[:262144])
            del self._stdin[:sent]
        except BlockingIOError:
            return
        except (BrokenPipeError, ConnectionResetError):
            self._stdin.clear()  # the process ended without reading all its input
        if not self._stdin:
            self._sel.modify(self.sock, selectors.EVENT_READ)
            if self._close_when_written:
                self._close_stdin()

    def end_input(self) -> None:
        """Close the process's stdin once what is queued is written."""
        if self._stdin_done:
            return
        self._close_when_written = True
        if not self._stdin:
            self._close_stdin()

    def write_now(self, data: bytes, timeout: float = 30.0) -> None:
        """Write ``data`` to stdin, keeping it open (for long-lived processes)."""
        view = memoryview(data)
        end = time.monotonic() + timeout
        while view:
            if time.monotonic() > end:
                raise SandboxError("the process does not read its input")
            try:
                sent = self.sock.send(view[:262144])
            except BlockingIOError:
                time.sleep(0.001)
                continue
            except OSError as exc:
                raise SandboxError(f"the process has exited: {exc}") from exc
            view = view[sent:]

    def exit_code(self) -> int | None:
        """The process's exit status once the engine has it (None if it never says)."""
        return _wait_exec(self.container.client.api, self.id)

    def close(self) -> None:
        self._sel.close()
        self.sock.close()


def _wait_exec(api: Any, exec_id: str, timeout: float = 5.0) -> int | None:
    """Wait for an exec to finish; its exit code (None if it did not finish in time)."""
    end = time.monotonic() + timeout
    while True:
        info = api.exec_inspect(exec_id)
        if not info.get("Running"):
            return info.get("ExitCode")
        if time.monotonic() > end:
            return None
        time.sleep(0.002)
