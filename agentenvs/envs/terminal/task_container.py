"""A container of a Terminal-Bench task's image, as the ``docker`` runtime starts it.

It runs as root (the container is the boundary) with only the capabilities that managing
files and its own processes needs (:data:`CAPABILITIES`), no new privileges, Docker's init,
and limits: memory (no swap beyond it), pids, CPU, the size of one file
(``Limits.max_file_mb``, RLIMIT_FSIZE: none in practice by default, as in Harbor's
containers), ``/dev/shm`` (``Limits.shm_mb``), its log, and the host disk its writable layer and bind-mounted files may fill (``Limits.disk_mb``: a
storage quota where the engine's driver has one, and a :class:`DiskWatch` that stops the
container past it, see ``agentenvs.sandbox._docker_disk``). It carries the docker sandbox
backend's labels (so its orphan sweep removes those of dead processes) and the task's id.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

from agentenvs.core.errors import SandboxError
from agentenvs.sandbox._docker_disk import DiskWatch, log_config, quota_supported
from agentenvs.sandbox._seccomp_docker import security_opt as seccomp_opt
from agentenvs.sandbox.base import Limits
from agentenvs.sandbox.docker import (
    HOST_LABEL,
    POOL_LABEL,
    DockerProcess,
    _Container,
    _engine_address,
)

TASK_LABEL = "agentenvs.terminal-task"
#: root keeps what managing files and its own processes needs (chown, chmod of any
#: file, reading 000 files, killing jobs, su/setpriv); no raw sockets, mknod, chroot,
#: or privileged ports
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETUID", "SETGID")
#: processes beyond Limits.max_processes: init, sleep, the shell supervisor, the tests
PIDS_SLACK = 32
MEMORY_SLACK_MB = 256


class _TaskContainer(_Container):
    """A started container of a task image, with root as the exec user."""

    def __init__(
        self,
        client: Any,
        limits: Limits,
        image: str,
        task_id: str,
        *,
        cpus: float = 1.0,
        memory_mb: int | None = None,
        network: str = "none",
        labels: Mapping[str, str] | None = None,
        extra_hosts: Mapping[str, str] | None = None,
        service: Any = None,
        binds: Mapping[str, str] | None = None,
        host_dir: str | None = None,
    ) -> None:
        """``service`` (a ``data.ComposeService``): a sidecar running that service's own
        command (its image's user, entrypoint and command unless the compose file says),
        with the same limits and capabilities; ``network`` is then ``container:<id>``.
        ``binds``: host dirs shown read-only (host path -> container path); ``host_dir``:
        a host dir of this container's, removed with it. ``memory_mb``: the task's own
        memory (Harbor ``[environment] memory_mb``), exactly, over ``limits.memory_mb``
        and its slack."""
        self.host_dir = host_dir
        self.client = client
        self.limits = limits
        self.image = image
        self.task_id = task_id
        self.engine_address = _engine_address(client)
        self.uid = 0
        self.user = "0:0"
        mb = 1024 * 1024
        memory = (memory_mb if memory_mb is not None else limits.memory_mb + MEMORY_SLACK_MB) * mb
        api = client.api
        self.network = network
        host_config = api.create_host_config(
            network_mode=network,
            extra_hosts=dict(extra_hosts) if extra_hosts else None,
            init=True,
            cap_drop=["ALL"],
            cap_add=list(CAPABILITIES),
            security_opt=["no-new-privileges", seccomp_opt(CAPABILITIES)],
            mem_limit=memory,
            memswap_limit=memory,
            pids_limit=limits.max_processes + PIDS_SLACK,
            nano_cpus=int(cpus * 1e9),
            ulimits=[
                {"Name": "nofile", "Soft": limits.max_open_files, "Hard": limits.max_open_files},
                {"Name": "fsize", "Soft": limits.max_file_mb * mb, "Hard": limits.max_file_mb * mb},
                {"Name": "core", "Soft": 0, "Hard": 0},
            ],
            ipc_mode="private",
            shm_size=limits.shm_mb * mb,
            log_config=log_config(),
            binds={h: {"bind": c, "mode": "ro"} for h, c in (binds or {}).items()} or None,
            **_storage(client, image, limits),
        )
        labels = {
            POOL_LABEL: str(os.getpid()),
            HOST_LABEL: socket.gethostname(),
            TASK_LABEL: task_id,
            **dict(labels or {}),
        }
        #: when it was made (wall clock), and how many kill events this env caused on it
        self.created = time.time()
        self.own_kills = 0
        #: the sidecars started in its network namespace, and the container holding that
        #: namespace (set by the runtime)
        self.sidecars: list[_TaskContainer] = []
        self.holder: _TaskContainer | None = None
        self.service = service
        options: dict[str, Any] = {"command": ["sleep", "infinity"], "user": "0:0"}
        if service is not None:
            cmd, entry = service.command, service.entrypoint
            options = {
                "command": list(cmd) if isinstance(cmd, tuple) else cmd,
                "entrypoint": list(entry) if isinstance(entry, tuple) else entry,
                "environment": dict(service.environment) or None,
                "working_dir": service.working_dir,
            }
        try:
            self.id: str = api.create_container(
                image=image,
                # a disabled network gets no /etc/hosts (mode none alone has only loopback)
                network_disabled=network == "none" and not extra_hosts,
                host_config=host_config,
                labels=labels,
                **options,
            )["Id"]
        except Exception as exc:
            raise SandboxError(f"cannot create a container from {image!r}: {exc}") from exc
        self.short = self.id[:12]
        self.removed = False
        self._remove_lock = threading.Lock()
        self.disk: DiskWatch | None = None
        try:
            api.start(self.id)
            disk = DiskWatch(api, self.id, limits.disk_mb, self._stop_for_disk)
        except Exception as exc:
            self.remove()
            raise SandboxError(f"cannot start container {self.short}: {exc}") from exc
        self.disk = disk
        disk.start()

    def _stop_for_disk(self) -> None:
        """Kill the container through the engine (an own kill: the agent's outcome)."""
        self.own_kills += 1
        try:
            self.client.api.kill(self.id)
        except Exception:
            self.own_kills -= 1  # stopped already: no kill event
            raise

    def remove(self) -> None:
        if self.disk is not None:
            self.disk.close()
        try:
            super().remove()
        finally:
            if self.host_dir is not None:
                shutil.rmtree(self.host_dir, ignore_errors=True)


def _storage(client: Any, image: str, limits: Limits) -> dict[str, Any]:
    """``storage_opt`` holding the writable layer to ``Limits.disk_mb`` where the engine's
    storage driver has a quota (elsewhere the :class:`DiskWatch` alone holds it)."""
    labels = {POOL_LABEL: str(os.getpid()), HOST_LABEL: socket.gethostname()}
    if quota_supported(client, image, labels):
        return {"storage_opt": {"size": f"{limits.disk_mb}m"}}
    return {}


class _ShellProcess(DockerProcess):
    """The shell supervisor's exec; killing it drops the connection only, since its
    container is removed right after (a root ``kill -9 -1`` would stop the container).
    ``check_limits`` (asked by the shell after each command) raises
    :class:`~agentenvs.sandbox._docker_disk.DiskLimitExceeded` once the container is past
    its disk cap."""

    def check_limits(self) -> None:
        disk = getattr(self._box, "disk", None)
        if disk is not None:
            disk.check()

    def kill(self) -> None:
        ex, self._ex = self._ex, None
        self._eof = True
        if ex is not None:
            ex.close()
