"""The ``docker`` runtime: each episode in a fresh container of the task's own image.

Images: every task's Dockerfile is built once per machine (classic builder, no network)
with ``BASE_IMAGE=agentenvs/terminal:latest`` (``sandboxes/build_images.sh``) and tagged
``agentenvs/tb-<task>:<hash>``, the hash covering the build context and the base image's
id, so an edited task or a rebuilt base gives a new image and an unchanged one is reused.

Containers: a task may write anywhere, so a container serves one episode (or one
restore) and is removed after it. The next session (a container of the same image with
the agent's shell already started in it) is opened in the background while the agent
works, so a reset pays for neither a container start nor an exec. They run as root (the container is the boundary) with no network, only the
capabilities file-administration tasks need (:data:`CAPABILITIES`), no new privileges,
memory/pids/CPU limits, and Docker's init to reap orphaned jobs. They carry the labels
of the docker sandbox backend, so :func:`agentenvs.sandbox.docker.sweep_orphans` removes
those of dead processes. The agent's shell is a :class:`ShellSession` over one exec.
"""

from __future__ import annotations

import atexit
import os
import re
import socket
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from agentenvs.core.errors import SandboxError, ServiceUnavailable
from agentenvs.envs.terminal.data import BASE_IMAGE, TerminalTask
from agentenvs.envs.terminal.shell import ShellSession
from agentenvs.sandbox.base import Limits
from agentenvs.sandbox.docker import (
    HOST_LABEL,
    POOL_LABEL,
    DockerProcess,
    _client,
    _Container,
    _docker_module,
    _engine_address,
    docker_available,
    sweep_orphans,
)

TASK_LABEL = "agentenvs.terminal-task"
#: root keeps what managing files and its own processes needs (chown, chmod of any
#: file, reading 000 files, killing jobs, su/setpriv); no raw sockets, mknod, chroot,
#: or privileged ports
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETUID", "SETGID")
#: processes beyond Limits.max_processes: init, sleep, the shell supervisor, the tests
PIDS_SLACK = 32
MEMORY_SLACK_MB = 256
BUILD_TIMEOUT_S = 600

#: (image, task id, exec environment, shell init text, output cap) of a session
_SpareKey = tuple[str, str, tuple[tuple[str, str], ...], str, int]
_Spare = tuple[_SpareKey, "tuple[_TaskContainer, ShellSession] | threading.Thread"]


def unsupported_reason(task: TerminalTask) -> str | None:
    """Why the docker runtime cannot run ``task`` (None: it can)."""
    if task.network_problem:
        return f"needs the network: {task.network_problem}"
    return None


def image_tag(task: TerminalTask, base_id: str) -> str:
    """``agentenvs/tb-<task>:<hash of the build context and the base image id>``."""
    import hashlib

    name = re.sub(r"[^a-z0-9._-]+", "-", task.id.lower()).strip("._-") or "task"
    digest = hashlib.blake2b(f"{task.digest()}\0{base_id}".encode(), digest_size=8).hexdigest()
    return f"agentenvs/tb-{name}:{digest}"


class _TaskContainer(_Container):
    """A started container of a task image, with root as the exec user."""

    def __init__(
        self, client: Any, limits: Limits, image: str, task_id: str, *, cpus: float = 1.0
    ) -> None:
        self.client = client
        self.limits = limits
        self.image = image
        self.engine_address = _engine_address(client)
        self.uid = 0
        self.user = "0:0"
        mb = 1024 * 1024
        api = client.api
        host_config = api.create_host_config(
            network_mode="none",
            init=True,
            cap_drop=["ALL"],
            cap_add=list(CAPABILITIES),
            security_opt=["no-new-privileges"],
            mem_limit=(limits.memory_mb + MEMORY_SLACK_MB) * mb,
            memswap_limit=(limits.memory_mb + MEMORY_SLACK_MB) * mb,
            pids_limit=limits.max_processes + PIDS_SLACK,
            nano_cpus=int(cpus * 1e9),
            ulimits=[
                {"Name": "nofile", "Soft": limits.max_open_files, "Hard": limits.max_open_files},
                {"Name": "core", "Soft": 0, "Hard": 0},
            ],
            ipc_mode="private",
        )
        labels = {
            POOL_LABEL: str(os.getpid()),
            HOST_LABEL: socket.gethostname(),
            TASK_LABEL: task_id,
        }
        try:
            self.id: str = api.create_container(
                image=image,
                command=["sleep", "infinity"],
                user="0:0",
                working_dir="/app",
                network_disabled=True,
                host_config=host_config,
                labels=labels,
            )["Id"]
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


class _ShellProcess(DockerProcess):
    """The shell supervisor's exec; killing it drops the connection only, since its
    container is removed right after (a root ``kill -9 -1`` would stop the container)."""

    def kill(self) -> None:
        ex, self._ex = self._ex, None
        self._eof = True
        if ex is not None:
            ex.close()


class DockerRuntime:
    """Task images built on demand; a fresh container per shell session, the next one
    opened ahead.

    ``session`` removes the previous episode's container (in the background) and
    starts the shell in a new one; ``close`` removes every container (also at exit).
    """

    name = "docker"

    def __init__(
        self,
        limits: Limits,
        *,
        base_image: str = BASE_IMAGE,
        prestart: bool = True,
        cpus: float = 1.0,
    ) -> None:
        ok, why = docker_available(base_image)
        if not ok:
            raise ServiceUnavailable(f"the docker runtime cannot run here: {why}")
        self.limits = limits
        self.base_image = base_image
        self.prestart = prestart
        self.cpus = cpus
        self.client = _client(timeout=BUILD_TIMEOUT_S)
        sweep_orphans(self.client)
        self.base_id: str = self.client.api.inspect_image(base_image)["Id"]
        self._images: dict[str, str] = {}
        self._build_lock = threading.Lock()
        self._lock = threading.Lock()
        self._current: _TaskContainer | None = None
        #: the next session, opened ahead (or the thread opening it)
        self._spare: _Spare | None = None
        self._owned: dict[str, _TaskContainer] = {}
        self._threads: set[threading.Thread] = set()
        self._closed = False
        self._pid = os.getpid()
        _live.add(self)

    # ------------------------------------------------------------------ images
    def image(self, task: TerminalTask) -> str:
        """The task's image tag, built first if this machine lacks it."""
        with self._build_lock:
            tag = self._images.get(task.id)
            if tag is not None:
                return tag
            tag = image_tag(task, self.base_id)
            docker = _docker_module()
            try:
                self.client.api.inspect_image(tag)
            except docker.errors.ImageNotFound:
                self._build(task, tag)
            self._images[task.id] = tag
            return tag

    def _build(self, task: TerminalTask, tag: str) -> None:
        dockerfile = task.dockerfile.relative_to(task.context).as_posix()
        log: list[str] = []
        try:
            # the API's classic builder: RUN steps see no network, nothing is pulled
            stream = self.client.api.build(
                path=str(task.context),
                dockerfile=dockerfile,
                tag=tag,
                buildargs={"BASE_IMAGE": self.base_image},
                network_mode="none",
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
                labels={TASK_LABEL: task.id},
            )
            for chunk in stream:
                if "stream" in chunk:
                    log.append(chunk["stream"])
                if "error" in chunk:
                    raise SandboxError(chunk["error"])
        except Exception as exc:
            tail = "".join(log)[-2000:]
            raise SandboxError(
                f"cannot build the image of task {task.id!r}: {exc}\n{tail}"
            ) from exc

    # ------------------------------------------------------------------ containers
    def _start(self, image: str, task_id: str) -> _TaskContainer:
        box = _TaskContainer(self.client, self.limits, image, task_id, cpus=self.cpus)
        with self._lock:
            self._owned[box.id] = box
            closed = self._closed
        if closed:
            self._discard(box)
            raise SandboxError("the docker runtime is closed")
        return box

    def _open(self, key: _SpareKey) -> tuple[_TaskContainer, ShellSession]:
        """A new container of ``key``'s image with the agent's shell started in it."""
        image, task_id, env, init, max_output_bytes = key
        box = self._start(image, task_id)

        def spawn(argv: Sequence[str]) -> DockerProcess:
            return _ShellProcess(box, argv, user="0:0", env=dict(env), workdir="/app")

        try:
            return box, ShellSession(spawn, init=init, max_output_bytes=max_output_bytes)
        except BaseException:
            self._discard(box)
            raise

    def _prestart(self, key: _SpareKey) -> None:
        """Open the next session of ``key`` in the background (one spare at a time)."""

        def work() -> None:
            me = threading.current_thread()
            try:
                made: tuple[_TaskContainer, ShellSession] | None = self._open(key)
            except Exception:
                made = None  # the next session opens its own
            with self._lock:
                self._threads.discard(me)
                mine = self._spare is not None and self._spare[1] is me
                if mine:
                    self._spare = (key, made) if made is not None else None
                    return
            if made is not None:
                made[1].close()
                self._discard(made[0])

        thread = threading.Thread(target=work, daemon=True, name="agentenvs-tb-prestart")
        with self._lock:
            if self._closed:
                return
            old, self._spare = self._spare, (key, thread)
            self._threads.add(thread)
        self._drop_spare(old)
        thread.start()

    def _drop_spare(self, spare: _Spare | None) -> None:
        if spare is not None and isinstance(spare[1], tuple):
            box, shell = spare[1]
            shell.close()
            self._discard_later(box)

    def _take(self, key: _SpareKey) -> tuple[_TaskContainer, ShellSession]:
        with self._lock:
            spare = self._spare
        if spare is not None and spare[0] == key and isinstance(spare[1], threading.Thread):
            spare[1].join(timeout=60)
        with self._lock:
            spare = self._spare
            if spare is not None and spare[0] == key and isinstance(spare[1], tuple):
                self._spare = None
                return spare[1]
        return self._open(key)

    def _discard(self, box: _TaskContainer) -> None:
        box.remove()
        with self._lock:
            self._owned.pop(box.id, None)

    def _discard_later(self, box: _TaskContainer) -> None:
        def work() -> None:
            self._discard(box)
            with self._lock:
                self._threads.discard(threading.current_thread())

        thread = threading.Thread(target=work, daemon=True, name="agentenvs-tb-remove")
        with self._lock:
            self._threads.add(thread)
        thread.start()

    @property
    def container_ids(self) -> list[str]:
        """Ids of every container this runtime owns now (in use, spare, or being removed)."""
        with self._lock:
            return list(self._owned)

    # ------------------------------------------------------------------ the runtime API
    def session(self, task: TerminalTask, init: str, max_output_bytes: int) -> ShellSession:
        """A shell in a fresh container of the task's image (the previous one goes)."""
        if self._closed:
            raise SandboxError("the docker runtime is closed")
        image = self.image(task)
        old, self._current = self._current, None
        if old is not None:
            self._discard_later(old)
        env = tuple(sorted({"HOME": "/root", "TERM": "dumb", **dict(task.env)}.items()))
        key = (image, task.id, env, init, max_output_bytes)
        self._current, shell = self._take(key)
        if self.prestart:
            self._prestart(key)
        return shell

    def starting_state(self, task: TerminalTask, shell: ShellSession) -> None:
        """Nothing to do: the image holds the starting state (setup.sh ran at build)."""

    def close(self) -> None:
        """Remove every container of this runtime; idempotent."""
        with self._lock:
            if self._pid != os.getpid():
                return  # a forked child must not remove its parent's containers
            self._closed = True
            self._current = None
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=60)
        with self._lock:
            boxes = list(self._owned.values())
            spare, self._spare = self._spare, None
        if spare is not None and isinstance(spare[1], tuple):
            spare[1][1].close()
        for box in boxes:
            self._discard(box)
        try:
            self.client.close()
        except Exception:
            pass


_live: weakref.WeakSet[DockerRuntime] = weakref.WeakSet()


@atexit.register
def _close_runtimes() -> None:
    for runtime in list(_live):
        runtime.close()
