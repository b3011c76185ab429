"""The Docker engine as the docker sandbox backend uses it: the SDK client, the hijacked
exec connection (``_Exec``), and the sweep of containers whose owning process died.

Containers of this project carry ``agentenvs.pool=<owner pid>`` and
``agentenvs.host=<hostname>``; :func:`sweep_orphans` removes this host's containers whose
owner is gone (the docker pool runs it when it first reaches the engine, and
``python -m agentenvs.sandbox.docker sweep`` runs it by hand).
"""

from __future__ import annotations

import os
import selectors
import socket
import struct
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentenvs.core.errors import SandboxError, ServiceUnavailable, require
from agentenvs.core.procs import pid_alive

if TYPE_CHECKING:
    from agentenvs.sandbox._docker_container import _Container

DEFAULT_IMAGE = os.environ.get("AGENTENVS_DOCKER_IMAGE", "agentenvs/python:latest")
#: containers of this project carry this label, valued with the owning process id
POOL_LABEL = "agentenvs.pool"
HOST_LABEL = "agentenvs.host"

# --------------------------------------------------------------------------- engine


def _docker_module() -> Any:
    return require("docker", "docker")


def _client(timeout: float = 60.0) -> Any:
    docker = _docker_module()
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # the SDK raises several kinds; all mean "no engine"
        raise ServiceUnavailable(
            f"cannot reach a Docker engine ({exc}); install and start Docker, then build the "
            "sandbox images with `bash sandboxes/build_images.sh` (docs/sandboxes.md)"
        ) from exc
    return client


def docker_available(image: str = DEFAULT_IMAGE) -> tuple[bool, str]:
    """Whether the docker backend can run here: the SDK imports, the engine answers, and
    ``image`` is present. The reason says which is missing (or what was found)."""
    try:
        docker = _docker_module()
    except ImportError as exc:
        return False, str(exc)
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:
        return False, f"no Docker engine answers ({type(exc).__name__}: {exc})"
    try:
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            return False, (
                f"Docker engine is up but image {image!r} is missing; "
                "build it with `bash sandboxes/build_images.sh`"
            )
        version = client.version().get("Version", "?")
    except Exception as exc:
        return False, f"Docker engine error ({type(exc).__name__}: {exc})"
    finally:
        client.close()
    return True, f"Docker engine {version} with image {image}"


def _engine_address(client: Any) -> tuple[int, Any]:
    """(socket family, address) of the engine, for hijacked exec connections."""
    adapter = getattr(client.api, "_custom_adapter", None)
    path = getattr(adapter, "socket_path", None)
    if path:
        return socket.AF_UNIX, path
    base = str(client.api.base_url)
    if base.startswith("http://"):
        host, _, port = base.removeprefix("http://").rstrip("/").partition(":")
        return socket.AF_INET, (host, int(port or 2375))
    raise ServiceUnavailable(
        f"the docker backend needs a local socket or plain TCP engine address, not {base!r}"
    )


def sweep_orphans(client: Any | None = None) -> int:
    """Remove this host's sandbox containers whose owning process is dead; how many."""
    own = client is None
    client = client or _client()
    removed = 0
    try:
        found = client.api.containers(all=True, filters={"label": POOL_LABEL})
        for info in found:
            labels = info.get("Labels") or {}
            try:
                owner = int(labels.get(POOL_LABEL, ""))
            except ValueError:
                continue
            if labels.get(HOST_LABEL) != socket.gethostname() or pid_alive(owner):
                continue
            try:
                client.api.remove_container(info["Id"], force=True)
                removed += 1
            except Exception:  # already gone, or being removed by another sweep
                pass
    finally:
        if own:
            client.close()
    return removed


# --------------------------------------------------------------------------- exec


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
        container: _Container,
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
