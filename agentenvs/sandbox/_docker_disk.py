"""The host disk a Docker container may fill, and the watch that holds it to a cap.

A container writes onto its host's disk in four places: its writable layer (overlay2's
upperdir), the files the engine bind-mounts into it (``/etc/hosts``, ``/etc/hostname``,
``/etc/resolv.conf``: writable for a root that is not read-only), its log (whatever its
pid 1 prints, which a root inside can reach through ``/proc/1/fd/1``), and the volumes it
is given (none here). Every tmpfs is memory, charged to the container's memory cgroup.

- The log is capped by its driver's options (:func:`log_config`).
- The writable layer gets ``storage_opt={"size": ...}`` where the engine's storage driver
  has a per-container quota (overlay2 on xfs with ``pquota``, btrfs, zfs, devicemapper):
  :func:`quota_supported` asks each engine once, by creating a container with one.
- Everywhere, :class:`DiskWatch` measures the layer and the bind-mounted files from the
  host (never from inside: the container is the agent's) while the container lives, at
  a bounded interval, and at once when asked (after each command, before grading). The
  walk is iterative over directory fds, never follows a symlink, and counts allocated
  blocks (``st_blocks * 512``, so a sparse file counts what it costs), each inode once.
  Past the cap the container is stopped and the reason kept (:class:`DiskLimitExceeded`).

The watch also holds the layer to :data:`MAX_ENTRIES` files and dirs (inodes are a
resource of the host's filesystem too, and the walk's time grows with them) and to
:data:`MAX_DEPTH` nested dirs (the walk holds one fd a level).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentenvs.core.errors import SandboxError

#: files and dirs a writable layer may hold (a large node_modules has ~100k)
MAX_ENTRIES = 500_000
#: nested dirs a writable layer may hold below its root
MAX_DEPTH = 256
#: the watch measures at most this often ...
MIN_INTERVAL_S = 0.25
#: ... and spends at most about this share of one core on it (a big layer is measured
#: less often: the pause after a walk is at least (1 - share) / share times its length)
WALK_SHARE = 0.05
#: a container's log (json-file, one file): what its pid 1 prints, kept to this size
LOG_MAX = "1m"

_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class DiskLimitExceeded(SandboxError):
    """A container's files on the host passed their cap; it was stopped (the agent's
    outcome, never a fault of the infrastructure)."""


@dataclass(frozen=True)
class DiskUse:
    """What a measure found (the walk stops as soon as it is past a cap, so ``bytes``
    and ``entries`` are then lower bounds)."""

    bytes: int
    entries: int
    #: a dir lies deeper than MAX_DEPTH below the layer's root
    too_deep: bool = False

    def past(self, cap_bytes: int) -> bool:
        return self.bytes > cap_bytes or self.entries > MAX_ENTRIES or self.too_deep


def allocated(root: str, *, stop_bytes: int | None = None) -> DiskUse:
    """The bytes allocated to ``root`` and everything below it, and how many entries.

    ``root`` itself must not be a symlink; below it nothing is followed (each dir is
    opened relative to its parent's fd with ``O_NOFOLLOW``), so renames and symlinks made
    meanwhile by the container cannot lead the walk elsewhere. Hard links count once.
    The walk stops early once past ``stop_bytes``, :data:`MAX_ENTRIES` or :data:`MAX_DEPTH`.
    An entry removed during the walk is skipped.
    """
    top = os.open(root, _O_DIR)
    total = os.fstat(top).st_blocks * 512
    entries = 0
    seen: set[int] = set()
    # one frame a level: the dir's fd and the names of its subdirs still to walk
    frames: list[tuple[int, list[str]]] = []
    fd: int | None = top
    try:
        while True:
            if fd is not None:
                subdirs: list[str] = []
                with os.scandir(fd) as listing:
                    for entry in listing:
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        entries += 1
                        if stat.S_ISDIR(st.st_mode):
                            subdirs.append(entry.name)
                        elif st.st_nlink > 1:
                            if st.st_ino in seen:
                                continue
                            seen.add(st.st_ino)
                        total += st.st_blocks * 512
                        if entries > MAX_ENTRIES or (stop_bytes is not None and total > stop_bytes):
                            return DiskUse(total, entries)
                frames.append((fd, subdirs))
                fd = None
                if len(frames) > MAX_DEPTH and subdirs:
                    return DiskUse(total, entries, too_deep=True)
            if not frames:
                return DiskUse(total, entries)
            parent, pending = frames[-1]
            if not pending:
                os.close(parent)
                frames.pop()
                continue
            try:
                fd = os.open(pending.pop(), _O_DIR, dir_fd=parent)
            except OSError:  # removed, or replaced by a non-dir, meanwhile
                fd = None
    finally:
        if fd is not None:
            os.close(fd)
        for held, _ in frames:
            os.close(held)


def log_config() -> dict[str, Any]:
    """The log options of a container: its pid 1's output kept to :data:`LOG_MAX`."""
    return {"type": "json-file", "config": {"max-size": LOG_MAX, "max-file": "1"}}


_quota_lock = threading.Lock()
#: engine address -> whether its storage driver holds a container's layer to a size
_quota: dict[str, bool] = {}


def quota_supported(client: Any, image: str, labels: dict[str, str]) -> bool:
    """Whether the engine of ``client`` honours ``storage_opt`` size: asked once per
    engine, by creating (never starting) a container of ``image`` with one."""
    from agentenvs.sandbox._docker_engine import _engine_address

    key = _engine_address(client)
    with _quota_lock:
        if key in _quota:
            return _quota[key]
        api = client.api
        try:
            made = api.create_container(
                image=image,
                command=["true"],
                labels=labels,
                network_disabled=True,
                host_config=api.create_host_config(
                    network_mode="none", storage_opt={"size": "64m"}
                ),
            )
        except Exception as exc:  # noqa: BLE001 - the answer is in the refusal
            text = str(exc).lower()
            if "storage" in text or "quota" in text or "size" in text:
                _quota[key] = False  # the driver has no quota (overlay2 on ext4, vfs)
            return False  # e.g. the image is missing: asked again next time
        try:
            api.remove_container(made["Id"], force=True)
        except Exception:  # noqa: BLE001 - labelled: the orphan sweep removes it
            pass
        _quota[key] = True
        return True


class DiskWatch:
    """Holds a container's files on the host to ``cap_mb``: a thread measures them at a
    bounded interval while the container lives, :meth:`check` at once. Past the cap it
    calls ``stop`` (which ends every process of the container) once, and :meth:`check`
    raises :class:`DiskLimitExceeded` from then on."""

    def __init__(self, api: Any, container: str, cap_mb: int, stop: Callable[[], None]) -> None:
        info = api.inspect_container(container)
        data = (info.get("GraphDriver") or {}).get("Data") or {}
        self.upper: str | None = data.get("UpperDir")
        #: the engine's files bind-mounted into the container, and its log
        self.files = [
            p
            for p in (info.get(k) for k in ("HostsPath", "HostnamePath", "ResolvConfPath", "LogPath"))
            if p
        ]
        self.cap_mb = cap_mb
        self.cap_bytes = cap_mb << 20
        self._stop = stop
        self._lock = threading.Lock()
        self._closed = threading.Event()
        #: why the container was stopped (None: it was not)
        self.exceeded: str | None = None
        self.measures = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._loop, daemon=True, name="agentenvs-disk-watch"
        )
        self._thread.start()

    def measure(self) -> DiskUse:
        """The container's files on the host now (the walk stops once past the cap)."""
        self.measures += 1
        extra = 0
        for path in self.files:
            try:
                extra += os.stat(path, follow_symlinks=False).st_blocks * 512
            except OSError:
                pass
        if self.upper is None:
            return DiskUse(extra, 0)
        use = allocated(self.upper, stop_bytes=self.cap_bytes - extra)
        return DiskUse(use.bytes + extra, use.entries, use.too_deep)

    def check(self) -> None:
        """Measure now; raise :class:`DiskLimitExceeded` (the container then stopped) when
        it is, or was before, past the cap."""
        if self.exceeded is None and not self._closed.is_set():
            try:
                use = self.measure()
            except OSError:
                return  # the layer is gone: the container was removed
            if use.past(self.cap_bytes):
                self._exceed(use)
        if self.exceeded is not None:
            raise DiskLimitExceeded(self.exceeded)

    def close(self) -> None:
        self._closed.set()

    def _exceed(self, use: DiskUse) -> None:
        with self._lock:
            if self.exceeded is not None:
                return
            if use.too_deep:
                what = f"a directory tree deeper than its cap of {MAX_DEPTH} levels"
            elif use.entries > MAX_ENTRIES:
                what = f"more than its cap of {MAX_ENTRIES} files and dirs"
            else:
                what = (
                    f"at least {use.bytes / (1 << 20):.0f} MiB, past its cap of "
                    f"{self.cap_mb} MiB (Limits.disk_mb)"
                )
            self.exceeded = f"disk cap: the container's files on the host held {what}; it was stopped"
            try:
                self._stop()
            except Exception:  # noqa: BLE001 - gone already
                pass

    def _loop(self) -> None:
        pause = MIN_INTERVAL_S
        while not self._closed.wait(pause):
            began = time.monotonic()
            try:
                use = self.measure()
            except OSError:
                return  # the layer is gone
            if use.past(self.cap_bytes):
                self._exceed(use)
                return
            spent = time.monotonic() - began
            pause = max(MIN_INTERVAL_S, spent * (1 - WALK_SHARE) / WALK_SHARE)
