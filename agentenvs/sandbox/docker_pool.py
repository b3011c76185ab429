"""A warm pool of sandbox containers, reused across sandboxes after a reset."""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from typing import Any

from agentenvs.core.errors import SandboxError
from agentenvs.sandbox._docker_container import _Container
from agentenvs.sandbox._docker_engine import DEFAULT_IMAGE, _client, sweep_orphans
from agentenvs.sandbox.base import Limits

#: how long acquiring waits for a container being reset before starting a new one
RESET_WAIT_S = 5.0


def _limits_key(limits: Limits) -> tuple[int, ...]:
    # max_output_bytes is read host-side, so it does not change what a container is
    return (
        limits.cpu_seconds,
        limits.memory_mb,
        limits.max_processes,
        limits.max_file_mb,
        limits.max_open_files,
        limits.disk_mb,
        limits.shm_mb,
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

    def drop(self, box: _Container) -> None:
        """Take ``box`` back without reusing it (it failed from outside): it is removed in
        the background, so an engine that does not answer holds up no caller."""
        with self._lock:
            self._resetting = [b for b in self._resetting if b is not box]
            thread = threading.Thread(target=self._discard, args=(box,), daemon=True)
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
            self._threads.discard(threading.current_thread())

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
