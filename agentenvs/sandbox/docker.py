"""The ``docker`` sandbox backend: containers from ``sandboxes/`` driven by the Docker SDK.

Every container runs with no network (``network_mode="none"``), a read-only root file
system, tmpfs at ``/work`` (the work dir) and ``/tmp``, no capabilities, no new
privileges, memory/pids/CPU limits and rlimits from :class:`Limits`. Its main process is
an idle ``sleep`` under Docker's init (which reaps orphans); everything the sandbox runs
is exec'd as the unprivileged user ``sandbox`` (uid 1000), so ``kill -9 -1`` as that user
ends every process a run left behind while the container itself lives on.

Speed: commands go through exec instances whose output is read from a hijacked
connection to the engine (no CLI process per run), and containers come from a warm
:class:`DockerPool`: closing a pooled sandbox resets its container (kill processes, wipe
``/work`` and ``/tmp``) and keeps it for the next sandbox. Pools remove their containers
at ``close()`` and at exit; containers carry the label ``agentenvs.pool=<pid>`` so
:func:`sweep_orphans` can remove those of dead processes.

Images are built offline by ``sandboxes/build_images.sh`` (debootstrap + ``docker
import``); ``python -m agentenvs.sandbox.docker check`` says whether this machine can
run the backend, ``... sweep`` removes orphaned containers.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import posixpath
import selectors
import shlex
import socket
import struct
import tarfile
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from agentenvs.core.errors import SandboxError, ServiceUnavailable, require
from agentenvs.sandbox._files import split_path
from agentenvs.sandbox.base import (
    WORKDIR,
    CaseRun,
    FilesSnapshot,
    Limits,
    PyCase,
    RunResult,
    Sandbox,
    SandboxProcess,
)

DEFAULT_IMAGE = os.environ.get("AGENTENVS_DOCKER_IMAGE", "agentenvs/python:latest")
#: containers of this project carry this label, valued with the owning process id
POOL_LABEL = "agentenvs.pool"
HOST_LABEL = "agentenvs.host"
#: sandboxed code runs as an unprivileged uid of its own per container (from this base
#: up), so per-user limits (RLIMIT_NPROC) are not shared between containers
UID_BASE = 200_000
WORK_TMPFS_MB = 512
TMP_TMPFS_MB = 256
#: extra processes beyond Limits.max_processes: init, sleep, the run wrapper, exec shims
PIDS_SLACK = 16
#: memory beyond Limits.memory_mb for the tmpfs contents and the worker's own parent
MEMORY_SLACK_MB = 256
#: seconds for the test-case worker to start and compile, and per case beyond its timeout
#: (the worker's own kill-and-reap of a case's leftovers may take up to 5 s)
CASE_START_S = 30.0
CASE_SLACK_S = 10.0
#: how long acquiring waits for a container being reset before starting a new one
RESET_WAIT_S = 5.0

# Runs argv with an inner time limit (a backstop for the host's deadline), then kills
# whatever it left behind (background jobs, daemons) and exits with argv's status. `kill`
# as the sandbox's uid cannot reach the root-owned init, and never signals its caller.
# $0 is the inner limit; a `run` puts rlimits before it (see DockerSandbox._prelude).
_RUN_WRAPPER = (
    'timeout -s KILL "$0" "$@"; rc=$?; '
    "i=0; while kill -9 -1 2>/dev/null && [ $i -lt 200 ]; do i=$((i+1)); done; "
    "exit $rc"
)
_KILL_ALL = "i=0; while kill -9 -1 2>/dev/null && [ $i -lt 200 ]; do i=$((i+1)); done; exit 0"
# Reset: stop every sandbox process, then empty the writable places (a run may have
# removed its own permissions on a dir, hence the chmod).
_RESET = (
    _KILL_ALL.removesuffix("exit 0")
    + "for d in /work /tmp /dev/shm; do chmod -R u+rwX $d 2>/dev/null; "
    + "find $d -mindepth 1 -delete 2>/dev/null; done; "
    + '[ -z "$(ls -A /work)" ] && [ -z "$(ls -A /tmp)" ]'
)
# File access inside the container ($1: a path relative to /work, already checked for
# `..`): symlinks are refused as the local backend refuses them (a path must resolve to
# itself). Exit 3 symlink, 4 missing, 5 not a regular file, 6 bad directory.
_NO_LINKS = '[ "$(realpath -m -- "$1")" = "$(realpath -m -s -- "$1")" ] || exit 3; '
_READ = (
    'p=/work/$1; set -- "$p"; '
    + _NO_LINKS
    + '[ -e "$p" ] || exit 4; [ -f "$p" ] || exit 5; exec cat -- "$p"'
)
# written to a temp file renamed into place, which replaces (never follows) what is there
_WRITE = (
    'p=/work/$1; m=$2; d=$(dirname -- "$p"); set -- "$d"; '
    + _NO_LINKS
    + 'mkdir -p -- "$d" 2>/dev/null || exit 6; t="$d/.agentenvs-$$.tmp"; '
    + 'cat > "$t" && chmod "$m" "$t" && mv -fT -- "$t" "$p" || { rm -f -- "$t"; exit 5; }'
)
_SNAPSHOT = "cd /work && find . -mindepth 1 -type f -print0 | tar -cf - --null --no-recursion -T -"
_RESTORE = (
    "chmod -R u+rwX /work 2>/dev/null; find /work -mindepth 1 -delete && "
    "tar -C /work -xpf - --no-same-owner"
)


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
            f"cannot reach a Docker engine ({exc}); start one, e.g. `bash .ci/services/docker.sh`"
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


def container_options(
    limits: Limits, image: str, *, uid: int = 1000, cpus: float = 1.0
) -> dict[str, Any]:
    """``create_container``/host-config keyword arguments for a sandbox container whose
    code runs as ``uid``."""
    mb = 1024 * 1024
    ulimits = [
        ("nofile", limits.max_open_files),
        ("fsize", limits.max_file_mb * mb),
        ("core", 0),
    ]
    return {
        "image": image,
        "command": ["sleep", "infinity"],
        # the idle init is root (without capabilities) so that killing everything the
        # sandbox's uid runs cannot stop the container; runs are exec'd as that uid
        "user": "0:0",
        "working_dir": WORKDIR,
        "network_disabled": True,
        "host_config": {
            "network_mode": "none",
            "init": True,
            "read_only": True,
            # exec: programs may build and run binaries or scripts in /work, as locally
            "tmpfs": {
                WORKDIR: f"rw,exec,nosuid,nodev,size={WORK_TMPFS_MB}m,uid={uid},gid={uid},mode=755",
                "/tmp": f"rw,exec,nosuid,nodev,size={TMP_TMPFS_MB}m,mode=1777",
            },
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "mem_limit": (limits.memory_mb + MEMORY_SLACK_MB) * mb,
            "memswap_limit": (limits.memory_mb + MEMORY_SLACK_MB) * mb,
            "pids_limit": limits.max_processes + PIDS_SLACK,
            "nano_cpus": int(cpus * 1e9),
            "ulimits": [{"Name": n, "Soft": v, "Hard": v} for n, v in ulimits],
            "ipc_mode": "private",
            "auto_remove": False,
        },
    }


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
            if labels.get(HOST_LABEL) != socket.gethostname() or _pid_alive(owner):
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
        if not self._stdin:
            self._close_stdin()
        else:
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


# --------------------------------------------------------------------------- containers

_uid_lock = threading.Lock()
_uid_counter = 0


def _next_uid() -> int:
    """A uid for the next container: by process and counter, so concurrent containers
    (of this process, and almost surely of others) differ."""
    global _uid_counter
    with _uid_lock:
        _uid_counter += 1
        return UID_BASE + (os.getpid() % 4096) * 1024 + _uid_counter % 1024


class _Container:
    """One started sandbox container and the means to exec in it."""

    def __init__(self, client: Any, limits: Limits, image: str, *, cpus: float = 1.0) -> None:
        self.client = client
        self.limits = limits
        self.image = image
        self.engine_address = _engine_address(client)
        self.uid = _next_uid()
        self.user = f"{self.uid}:{self.uid}"
        opts = container_options(limits, image, uid=self.uid, cpus=cpus)
        api = client.api
        host_config = api.create_host_config(**opts.pop("host_config"))
        labels = {POOL_LABEL: str(os.getpid()), HOST_LABEL: socket.gethostname()}
        docker = _docker_module()
        try:
            self.id: str = api.create_container(host_config=host_config, labels=labels, **opts)[
                "Id"
            ]
        except docker.errors.ImageNotFound as exc:
            raise ServiceUnavailable(
                f"image {image!r} is missing; build it with `bash sandboxes/build_images.sh`"
            ) from exc
        except Exception as exc:
            raise SandboxError(f"cannot create a container from {image!r}: {exc}") from exc
        self.short = self.id[:12]
        self.removed = False
        self._remove_lock = threading.Lock()
        try:
            api.start(self.id)
        except Exception as exc:
            self.remove()
            raise SandboxError(f"cannot start container {self.short}: {exc}") from exc

    def exec(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes = b"",
        user: str | None = None,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        timeout: float = 30.0,
        max_output: int | None = None,
    ) -> tuple[int | None, bytes, bytes, bool, bool]:
        """(returncode, stdout, stderr, truncated, timed_out) of one exec.

        Past ``timeout``, or past ``max_output`` bytes on a stream, every sandbox process
        is killed (the container stays).
        """
        ex = _Exec(self, argv, user=user or self.user, env=env, workdir=workdir)
        bufs = {1: bytearray(), 2: bytearray()}
        truncated = timed_out = False
        kill_id: str | None = None
        try:
            ex.send(stdin)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    frame = ex.read(deadline)
                except _Deadline:
                    if kill_id is not None:  # killed, yet the output did not end
                        break
                    timed_out = True
                    # if the kill cannot start (e.g. no pids left), the inner time limit
                    # of the run wrapper still ends the output
                    kill_id = self._try_kill()
                    deadline = time.monotonic() + 10
                    continue
                if frame is None:
                    break
                stream, data = frame
                buf = bufs.get(stream, bufs[2])
                room = len(data) if max_output is None else max_output - len(buf)
                buf += data[: max(room, 0)]
                if len(data) > room and not truncated:
                    truncated = True
                    if kill_id is None:  # the rest would be dropped: stop the writer now
                        kill_id = self._try_kill()
                        deadline = time.monotonic() + 10
            rc = None if timed_out else ex.exit_code()
        finally:
            ex.close()
            if kill_id:
                # the kill must be over before anything else runs, or it could hit that
                _wait_exec(self.client.api, kill_id)
        return rc, bytes(bufs[1]), bytes(bufs[2]), truncated, timed_out

    def _try_kill(self) -> str:
        """kill_all(wait=False), or "" when the kill could not be started."""
        try:
            return self.kill_all(wait=False)
        except Exception:
            return ""

    def kill_all(self, *, wait: bool = True) -> str:
        """SIGKILL every process of the sandbox's uid (the container keeps running).

        ``wait=False`` returns at once with the exec id: the engine may hold the kill's
        completion until the output of a killed exec is drained, so a caller reading
        that output goes on reading and waits afterwards.
        """
        api = self.client.api
        kill_id = api.exec_create(self.id, ["sh", "-c", _KILL_ALL], user=self.user)["Id"]
        api.exec_start(kill_id, detach=True)
        if wait:
            _wait_exec(api, kill_id)
        return kill_id

    def reset(self) -> bool:
        """Kill every sandbox process and empty /work, /tmp, /dev/shm; False if it failed."""
        try:
            rc, _, _, _, _ = self.exec(["sh", "-c", _RESET], timeout=30)
        except Exception:
            return False
        return rc == 0

    def remove(self) -> None:
        """Force-remove the container and wait until the engine no longer lists it."""
        with self._remove_lock:  # a second caller waits for the first to finish
            if self.removed:
                return
            self.removed = True
            docker = _docker_module()
            api = self.client.api
            end = time.monotonic() + 30
            while True:
                try:
                    api.remove_container(self.id, force=True)
                    return
                except docker.errors.NotFound:
                    return  # gone already (swept, or the engine restarted)
                except Exception:
                    # e.g. "removal already in progress", or a dropped connection
                    if time.monotonic() > end:
                        return
                    time.sleep(0.1)
            pass


# --------------------------------------------------------------------------- pool


def _limits_key(limits: Limits) -> tuple[int, ...]:
    # max_output_bytes is read host-side, so it does not change what a container is
    return (
        limits.cpu_seconds,
        limits.memory_mb,
        limits.max_processes,
        limits.max_file_mb,
        limits.max_open_files,
    )


class DockerPool:
    """Warm containers of one image, reused across sandboxes after a reset.

    ``acquire`` hands out an idle container (or starts one); ``release`` resets it in
    the background (so closing a sandbox costs its caller nothing) and keeps up to
    ``size`` idle ones, removing the rest; ``acquire`` waits for a reset under way rather
    than start a new container. A container serves one sandbox at a time, with the limits
    it was created with (idle ones with other limits are not reused for a request).
    ``close`` (also at exit) removes every container the pool started, idle or handed
    out. :meth:`shared` gives the process-wide pool of an image.
    """

    _shared: dict[str, DockerPool] = {}
    _shared_lock = threading.Lock()

    def __init__(
        self, size: int | None = None, *, image: str = DEFAULT_IMAGE, cpus: float = 1.0
    ) -> None:
        if size is None:
            size = int(os.environ.get("AGENTENVS_DOCKER_POOL_SIZE", "4"))
        if size < 0:
            raise ValueError(f"pool size must be >= 0, got {size}")
        self.size = size
        self.image = image
        self.cpus = cpus
        self._client: Any = None
        self._idle: list[_Container] = []
        self._all: dict[str, _Container] = {}
        self._resetting: list[_Container] = []
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._client_lock = threading.Lock()
        self._closed = False
        # a forked child must neither use nor remove its parent's containers
        self._pid = os.getpid()
        _live_pools.add(self)

    @classmethod
    def shared(cls, image: str = DEFAULT_IMAGE) -> DockerPool:
        """The process-wide pool for ``image`` (made on first use)."""
        with cls._shared_lock:
            pool = cls._shared.get(image)
            if pool is None or pool._closed or pool._pid != os.getpid():
                pool = cls._shared[image] = DockerPool(image=image)
            return pool

    @property
    def client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                self._client = _client()
                sweep_orphans(self._client)
            return self._client

    def acquire(self, limits: Limits) -> _Container:
        """A reset container with ``limits`` for one sandbox."""
        if self._closed:
            raise SandboxError("the Docker pool is closed")
        if self._pid != os.getpid():
            raise SandboxError("a Docker pool cannot be used across fork; make one per process")
        key = _limits_key(limits)
        end = time.monotonic() + RESET_WAIT_S
        with self._cond:
            while not self._closed:
                for i, box in enumerate(self._idle):
                    if _limits_key(box.limits) == key:
                        return self._idle.pop(i)
                # a reset takes tens of ms, a new container hundreds: wait for the reset
                if not any(_limits_key(b.limits) == key for b in self._resetting):
                    break
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
        box = _Container(self.client, limits, self.image, cpus=self.cpus)
        with self._lock:
            self._all[box.id] = box
        if self._closed:  # closed while this one was starting
            box.remove()
            raise SandboxError("the Docker pool is closed")
        return box

    def release(self, box: _Container, *, wait: bool = False) -> None:
        """Take ``box`` back: reset it (in the background unless ``wait``) and keep it
        idle, or remove it when the pool is full or closed."""
        with self._lock:
            keep = (
                not self._closed
                and not box.removed
                and len(self._idle) + len(self._resetting) < self.size
            )
            if keep:
                self._resetting.append(box)
        if not keep:
            self._discard(box)
        elif wait:
            self._finish_reset(box)
        else:
            thread = threading.Thread(target=self._finish_reset, args=(box,), daemon=True)
            with self._lock:
                self._threads.add(thread)
            thread.start()

    def _finish_reset(self, box: _Container) -> None:
        ok = box.reset()
        with self._cond:
            self._threads.discard(threading.current_thread())
            if box in self._resetting:
                self._resetting.remove(box)
            if ok and not self._closed and box.id in self._all:
                self._idle.append(box)
                self._cond.notify_all()
                return
            self._cond.notify_all()  # waiters for this one: start a new container
        self._discard(box)

    def prewarm(self, n: int | None = None, limits: Limits | None = None) -> None:
        """Start idle containers until ``n`` (default ``size``) are waiting."""
        limits = limits or Limits()
        n = self.size if n is None else n
        while True:
            with self._lock:
                if len(self._idle) >= n:
                    return
            box = _Container(self.client, limits, self.image, cpus=self.cpus)
            with self._lock:
                self._all[box.id] = box
                self._idle.append(box)

    def _discard(self, box: _Container) -> None:
        box.remove()
        with self._lock:
            self._all.pop(box.id, None)

    @property
    def container_ids(self) -> list[str]:
        """Ids of every container the pool owns now (idle or handed out)."""
        with self._lock:
            return list(self._all)

    @property
    def idle_count(self) -> int:
        with self._lock:
            return len(self._idle)

    def close(self) -> None:
        """Remove every container of the pool; idempotent."""
        with self._cond:
            self._closed = True
            boxes = list(self._all.values())
            self._all.clear()
            self._idle.clear()
            self._cond.notify_all()
            threads = list(self._threads)
        for box in boxes:
            box.remove()
        # resets under way fail on their removed containers; let them end before the
        # client they use is closed
        for thread in threads:
            thread.join(timeout=30)
        if self._client is not None:
            try:
                self._client.close()
            except Exception:
                pass
            self._client = None

    def __enter__(self) -> DockerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_live_pools: weakref.WeakSet[DockerPool] = weakref.WeakSet()


@atexit.register
def _close_pools() -> None:
    for pool in list(_live_pools):
        if pool._pid == os.getpid():
            pool.close()


# --------------------------------------------------------------------------- sandbox


def _work_path(path: str) -> str:
    """``path`` relative to the work dir (``a/b`` or ``/work/a/b``); SandboxError if it
    leaves it (the same rule as the local backend's)."""
    return "/".join(split_path(path))


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class DockerProcess(SandboxProcess):
    """A long-lived exec in a container, on a hijacked connection (stderr merged).

    ``kill`` ends every process of the exec's user in the container (the exec's pid is
    not known inside); a sandbox's own container has that one user.
    """

    def __init__(
        self,
        box: _Container,
        argv: Sequence[str],
        *,
        user: str,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
    ) -> None:
        self._box = box
        self._user = user
        self._ex: _Exec | None = _Exec(box, argv, user=user, env=env, workdir=workdir)
        self._eof = False

    @property
    def eof(self) -> bool:
        return self._eof

    def write(self, data: bytes) -> None:
        if self._ex is None:
            raise SandboxError("the process was killed")
        self._ex.write_now(data)

    def read(self, timeout: float) -> bytes:
        if self._ex is None or self._eof:
            return b""
        try:
            frame = self._ex.read(time.monotonic() + max(timeout, 0.0))
        except _Deadline:
            return b""
        if frame is None:
            self._eof = True
            return b""
        return frame[1]

    def kill(self) -> None:
        ex, self._ex = self._ex, None
        self._eof = True
        if ex is None:
            return
        ex.close()
        if self._box.removed:
            return
        api = self._box.client.api
        try:
            kill_id = api.exec_create(self._box.id, ["sh", "-c", _KILL_ALL], user=self._user)["Id"]
            api.exec_start(kill_id, detach=True)
            _wait_exec(api, kill_id)
        except Exception:  # the container is gone or going: nothing left to kill
            pass


class DockerSandbox(Sandbox):
    """A sandbox in a Docker container (see the module docstring for the isolation).

    ``pool``: a :class:`DockerPool` to take the container from and give it back to at
    ``close()``; None (the default) uses the process-wide pool of ``image``; False gives
    the sandbox a container of its own, removed at ``close()``.
    """

    backend = "docker"

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        image: str = DEFAULT_IMAGE,
        pool: DockerPool | Literal[False] | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.image = image
        if pool is None:
            pool = DockerPool.shared(image)
        elif pool is not False and pool.image != image:
            raise ValueError(f"pool serves image {pool.image!r}, not {image!r}")
        self._pool: DockerPool | None = pool or None
        self._own_client: Any = None
        if self._pool is not None:
            self._box: _Container | None = self._pool.acquire(self.limits)
        else:
            self._own_client = _client()
            try:
                self._box = _Container(self._own_client, self.limits, image)
            except BaseException:
                self._own_client.close()
                raise
        self._finalizer = weakref.finalize(
            self, DockerSandbox._release, self._pool, self._box, self._own_client
        )

    @property
    def _prelude(self) -> str:
        # the same per-process rlimits as the local backend's; dash spells -u as -p
        lim = self.limits
        return (
            f"ulimit -t {lim.cpu_seconds} && ulimit -v {lim.memory_mb * 1024} && "
            f"ulimit -f {lim.max_file_mb * 2048} && ulimit -n {lim.max_open_files} && "
            f"{{ ulimit -u {lim.max_processes} 2>/dev/null || ulimit -p {lim.max_processes}; }} "
            "&& ulimit -c 0 || { echo 'sandbox: cannot set limits' >&2; exit 125; }; "
        )

    @property
    def container_id(self) -> str:
        return self._container().id

    def _container(self) -> _Container:
        if self._box is None:
            raise SandboxError("the sandbox is closed")
        return self._box

    # -- running

    def run(
        self,
        command: Sequence[str] | str,
        *,
        stdin: bytes | str = b"",
        timeout: float = 10.0,
        env: Mapping[str, str] | None = None,
        cwd: str = WORKDIR,
    ) -> RunResult:
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("empty command")
        if isinstance(stdin, str):
            stdin = stdin.encode()
        workdir = cwd if posixpath.isabs(cwd) else posixpath.join(WORKDIR, cwd)
        # cd in the shell rather than the exec's workdir: a missing dir is then a normal
        # error on stderr, not an engine failure
        where = shlex.quote(workdir)
        cd = f"cd -- {where} 2>/dev/null || {{ echo 'sandbox: no directory '{where} >&2; exit 126; }}; "
        wrapped = ["/bin/sh", "-c", cd + self._prelude + _RUN_WRAPPER, f"{timeout + 1:.3f}", *argv]
        start = time.monotonic()
        rc, out, err, truncated, timed_out = self._container().exec(
            wrapped,
            stdin=stdin,
            env=env,
            workdir=WORKDIR,
            timeout=timeout,
            max_output=self.limits.max_output_bytes,
        )
        duration = time.monotonic() - start
        if rc is not None and rc > 128 and rc - 128 < 65:
            rc = -(rc - 128)  # killed by a signal: subprocess's convention
        return RunResult(
            returncode=None if timed_out else rc,
            stdout=_decode(out),
            stderr=_decode(err),
            timed_out=timed_out,
            output_truncated=truncated,
            duration_s=duration,
        )

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str = WORKDIR,
    ) -> SandboxProcess:
        if not argv:
            raise ValueError("empty command")
        workdir = cwd if posixpath.isabs(cwd) else posixpath.join(WORKDIR, cwd)
        where = shlex.quote(workdir)
        cd = f"cd -- {where} 2>/dev/null || {{ echo 'sandbox: no directory '{where} >&2; exit 126; }}; "
        box = self._container()
        wrapped = ["/bin/sh", "-c", cd + self._prelude + 'exec "$@" 2>&1', "sh", *argv]
        return DockerProcess(box, wrapped, user=box.user, env=env)

    def run_python_cases(
        self,
        source: str,
        cases: Sequence[PyCase],
        *,
        timeout_per_case: float = 6.0,
    ) -> Iterator[CaseRun]:
        return self._cases(source, list(cases), timeout_per_case)

    def _cases(
        self, source: str, cases: list[PyCase], timeout_per_case: float
    ) -> Iterator[CaseRun]:
        from agentenvs.sandbox import harness

        if not cases:
            return
        box = self._container()
        # the worker's text goes in argv, so nothing in the sandbox can alter it between calls
        worker = harness.worker_argv("python3")
        total = CASE_START_S + len(cases) * (timeout_per_case + CASE_SLACK_S)
        # no rlimits on the worker itself: it sets them for each case it forks
        argv = ["/bin/sh", "-c", _RUN_WRAPPER, f"{total:.3f}", *worker]
        ex = _Exec(box, argv, user=box.user, workdir=WORKDIR)
        done = 0
        ready = clean = False
        stderr = bytearray()
        try:
            ex.send(harness.encode_request(source, cases, timeout_per_case, self.limits))
            line_cap = 8 * self.limits.max_output_bytes + (1 << 20)
            pending = bytearray()
            deadline = time.monotonic() + CASE_START_S
            while True:
                try:
                    frame = ex.read(deadline)
                except _Deadline:
                    break
                if frame is None:
                    # the wrapper has exited, so its clean-up cannot hit a later run
                    clean = True
                    break
                stream, data = frame
                if stream != 1:
                    stderr = (stderr + data)[-4096:]
                    continue
                pending += data
                if len(pending) > line_cap:
                    break
                while b"\n" in pending and done < len(cases):
                    line, _, rest = bytes(pending).partition(b"\n")
                    pending = bytearray(rest)
                    msg = json.loads(line)
                    # each answer is due within one case's timeout plus the worker's
                    # own clean-up of that case
                    deadline = time.monotonic() + timeout_per_case + CASE_SLACK_S
                    if msg.get("ready"):
                        ready = True
                        continue
                    done += 1
                    yield CaseRun(
                        stdout=msg.get("stdout", ""),
                        stderr=msg.get("stderr", ""),
                        value=msg.get("value"),
                        error=msg.get("error"),
                        duration_s=float(msg.get("duration_s", 0.0)),
                    )
        finally:
            # early stop, worker death or a hung worker: end every process it left, with
            # our end of its output closed first so the engine need not drain it
            ex.close()
            if not clean:
                box.kill_all()
        if not ready:
            why = _decode(bytes(stderr)).strip() or "no answer"
            raise SandboxError(f"the case worker did not start: {why}")
        for _ in range(done, len(cases)):
            yield CaseRun(stdout="", error="worker died")

    # -- files

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        rel = _work_path(path)
        if isinstance(data, str):
            data = data.encode()
        rc, _, err, _, _ = self._container().exec(
            ["sh", "-c", _WRITE, "sh", rel, f"{mode & 0o777:o}"], stdin=data, workdir=WORKDIR
        )
        self._file_status(rc, err, path)

    def read_file(self, path: str) -> bytes:
        rel = _work_path(path)
        rc, out, err, _, _ = self._container().exec(["sh", "-c", _READ, "sh", rel], workdir=WORKDIR)
        self._file_status(rc, err, path)
        return out

    @staticmethod
    def _file_status(rc: int | None, err: bytes, path: str) -> None:
        if rc == 0:
            return
        if rc == 3:
            raise SandboxError(f"path {path!r} goes through a symlink")
        if rc == 4:
            raise FileNotFoundError(path)
        if rc == 5:
            raise SandboxError(f"{path!r} is not a regular file")
        if rc == 6:
            raise SandboxError(f"a directory of {path!r} is not a plain directory")
        raise SandboxError(f"file {path!r}: exit {rc}: {_decode(err).strip()}")

    def snapshot_files(self) -> FilesSnapshot:
        rc, out, err, _, _ = self._container().exec(["sh", "-c", _SNAPSHOT], timeout=60)
        if rc != 0:
            raise SandboxError(f"snapshot failed (exit {rc}): {_decode(err).strip()}")
        files: dict[str, tuple[int, bytes]] = {}
        with tarfile.open(fileobj=io.BytesIO(out), mode="r:") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                fobj = tar.extractfile(member)
                assert fobj is not None
                files[posixpath.normpath(member.name)] = (member.mode & 0o777, fobj.read())
        return FilesSnapshot(files)

    def restore_files(self, snapshot: FilesSnapshot) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as tar:
            for path, (mode, data) in sorted(snapshot.files.items()):
                info = tarfile.TarInfo(_work_path(path))
                info.size = len(data)
                info.mode = mode & 0o777
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(data))
        rc, _, err, _, _ = self._container().exec(
            ["sh", "-c", _RESTORE], stdin=buf.getvalue(), timeout=60
        )
        if rc != 0:
            raise SandboxError(f"restore failed (exit {rc}): {_decode(err).strip()}")

    # -- life cycle

    def reset(self) -> None:
        box = self._container()
        if not box.reset():
            raise SandboxError(f"cannot reset container {box.short}")

    @staticmethod
    def _release(pool: DockerPool | None, box: _Container | None, client: Any) -> None:
        if box is None:
            return
        if pool is not None:
            pool.release(box)
        else:
            box.remove()
            if client is not None:
                client.close()

    def close(self) -> None:
        if self._box is None:
            return
        self._box = None
        self._finalizer()

    def __repr__(self) -> str:
        state = self._box.short if self._box else "closed"
        return f"DockerSandbox(image={self.image!r}, container={state})"


def main(argv: Sequence[str] | None = None) -> int:
    """``check``: can this machine run the backend? ``sweep``: remove orphaned containers."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m agentenvs.sandbox.docker")
    parser.add_argument("action", choices=["check", "sweep"])
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    args = parser.parse_args(argv)
    if args.action == "check":
        ok, why = docker_available(args.image)
        print(("ok: " if ok else "unavailable: ") + why)
        return 0 if ok else 1
    print(f"removed {sweep_orphans()} orphaned container(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
