"""One sandbox container: how it is created, exec'd in, reset and removed.

Two unprivileged uids of its own serve each container: the *sandbox uid* runs ``run``
and ``spawn`` and owns ``/work``; the *case uid* runs the case worker of
``run_python_cases`` and cannot read ``/work``. A reset kills the processes of both and
removes everything they own in the writable places (``/work``, ``/tmp``, ``/dev/shm``,
``/dev/mqueue``) and in SysV IPC, then checks that nothing is left; a container that is
not clean is not reused.

Nothing of a sandbox container is written onto the host's disk: its root is read-only
(the engine's bind-mounted ``/etc/hosts`` and friends too), every writable place is a
tmpfs with a size (``Limits.disk_mb``, ``Limits.shm_mb``) whose pages are charged to the
container's memory cgroup (memory and swap limits equal: no swap), every file is held
to ``Limits.max_file_mb`` (RLIMIT_FSIZE), and its log is capped (its pid 1, root, prints
nothing, and the sandbox's uid cannot reach its output). So it needs no disk watch
(``agentenvs.sandbox._docker_disk``, which task containers with a writable root have).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from agentenvs.core.errors import SandboxError, ServiceUnavailable
from agentenvs.core.procs import host_identity
from agentenvs.sandbox._docker_disk import log_config
from agentenvs.sandbox._docker_engine import (
    HOST_LABEL,
    POOL_LABEL,
    _docker_module,
    _engine_address,
)
from agentenvs.sandbox._docker_exec import _Deadline, _Exec, _wait_exec
from agentenvs.sandbox._seccomp_docker import security_opt as seccomp_opt
from agentenvs.sandbox.base import WORKDIR, Limits

#: sandboxed code runs as an unprivileged uid of its own per container (from this base
#: up), so per-user limits (RLIMIT_NPROC) are not shared between containers
UID_BASE = 200_000
#: the case uid of a container is its sandbox uid plus this
CASE_UID_OFFSET = 8_000_000
#: the default size of /work (Limits.disk_mb sets it per container)
WORK_TMPFS_MB = 512
TMP_TMPFS_MB = 256
#: extra processes beyond Limits.max_processes: init, sleep, the run wrapper, exec shims
PIDS_SLACK = 16
#: memory beyond Limits.memory_mb for the tmpfs contents and the worker's own parent
MEMORY_SLACK_MB = 256
#: the writable places of a sandbox container (each a tmpfs, or mqueue)
WRITABLE = ("/work", "/tmp", "/dev/shm", "/dev/mqueue")

# Every script that kills or removes things first makes sure it runs where it should: in
# a sandbox container (pid 1 is Docker's init) as an unprivileged uid, never on a host.
_GUARD = (
    '[ "$(cat /proc/1/comm 2>/dev/null)" = docker-init ] && [ "$(id -u)" -ne 0 ] || '
    "{ echo 'refusing to clean up: not a sandbox uid in a sandbox container' >&2; exit 90; }; "
)
_KILL_LOOP = "i=0; while kill -9 -1 2>/dev/null && [ $i -lt 200 ]; do i=$((i+1)); done; "
_KILL_ALL = _KILL_LOOP + "exit 0"
# Clean up after one uid: kill its processes, remove what it owns in the writable places
# (dirs it made unreadable first made readable again) and its SysV IPC objects (POSIX
# queues are files in /dev/mqueue), then exit 0 only when nothing of it is left.
_OWN_IPC = (
    'awk -v u="$u" \'FNR==1{for(i=1;i<=NF;i++)if($i=="uid")c=i;next}'
    " c&&$c==u{f=1} END{exit !f}' /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem"
)
_CLEAN_UID = (
    _GUARD
    + _KILL_LOOP
    + "u=$(id -u); for d in "
    + " ".join(WRITABLE)
    + "; do [ -w $d ] || continue; "
    + "find $d -xdev -mindepth 1 -user $u -type d ! -perm -u+rwx -exec chmod u+rwx {} \\; 2>/dev/null; "
    + "find $d -xdev -mindepth 1 -user $u -delete 2>/dev/null; done; "
    + "ipcrm --all >/dev/null 2>&1; "
    + '[ -z "$(find '
    + " ".join(WRITABLE)
    + ' -xdev -mindepth 1 -user $u 2>/dev/null | head -n 1)" ] && ! '
    + _OWN_IPC
)
# After both uids are clean: nothing at all is left in the writable places or in IPC.
_ALL_CLEAN = (
    '[ -z "$(find '
    + " ".join(WRITABLE)
    + ' -xdev -mindepth 1 -maxdepth 1 2>/dev/null | head -n 1)" ] && '
    + "[ $(cat /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem | wc -l) -eq 3 ]"
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
                # 0700: the case uid (run_python_cases) cannot read the sandbox's files
                WORKDIR: f"rw,exec,nosuid,nodev,size={limits.disk_mb}m,uid={uid},gid={uid},mode=700",
                # run_python_cases and scratch processes work here: the same cap
                "/tmp": f"rw,exec,nosuid,nodev,size={limits.disk_mb}m,mode=1777",
            },
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges", seccomp_opt()],
            "mem_limit": (limits.memory_mb + MEMORY_SLACK_MB) * mb,
            "memswap_limit": (limits.memory_mb + MEMORY_SLACK_MB) * mb,
            "pids_limit": limits.max_processes + PIDS_SLACK,
            "nano_cpus": int(cpus * 1e9),
            "ulimits": [{"Name": n, "Soft": v, "Hard": v} for n, v in ulimits],
            "ipc_mode": "private",
            "shm_size": limits.shm_mb * mb,
            "log_config": log_config(),
            "auto_remove": False,
        },
    }


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
        self.case_uid = self.uid + CASE_UID_OFFSET
        self.case_user = f"{self.case_uid}:{self.case_uid}"
        opts = container_options(limits, image, uid=self.uid, cpus=cpus)
        api = client.api
        host_config = api.create_host_config(**opts.pop("host_config"))
        labels = {POOL_LABEL: str(os.getpid()), HOST_LABEL: host_identity()}
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
        # Docker gives a tmpfs the mode of the image's dir: make /work the sandbox uid's alone
        rc, _, err, _, _ = self.exec(["chmod", "0700", WORKDIR])
        if rc != 0:
            self.remove()
            raise SandboxError(
                f"cannot set up container {self.short}: {err.decode(errors='replace')}"
            )
        #: the container's start as the engine reports it: another one later says it was
        #: restarted (see ``faults``); its pids limit, which the program can fill
        try:
            self.started_at: str | None = api.inspect_container(self.id)["State"]["StartedAt"]
        except Exception:  # noqa: BLE001 - then a restart is not looked for
            self.started_at = None
        self.pids_limit = limits.max_processes + PIDS_SLACK

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

    def clean_uid(self, user: str) -> bool:
        """Kill ``user``'s processes and remove all it owns (files, IPC); whether it worked."""
        try:
            rc, _, _, _, _ = self.exec(["sh", "-c", _CLEAN_UID], user=user, timeout=30)
        except Exception:
            return False
        return rc == 0

    def reset(self) -> bool:
        """Kill every sandbox process and remove everything both uids made: files in the
        writable places, SysV IPC objects, POSIX queues. False when anything is left (the
        pool then removes the container rather than reuse it)."""
        ok = True
        for user in (self.case_user, self.user):
            ok = self.clean_uid(user) and ok
        if not ok:
            return False
        try:
            rc, _, _, _, _ = self.exec(["sh", "-c", _ALL_CLEAN], timeout=30)
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
