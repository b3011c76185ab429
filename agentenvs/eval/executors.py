"""Executors: run keyed jobs on workers that each build their state once.

A *job* is ``Job(key, fn, payload)``. A worker builds its state once with ``setup()``
(an env, a policy, a sandbox: whatever is slow to make) and runs ``fn(state, payload)``
for every job it is sent; the executor streams ``(key, result)`` pairs back as chunks
finish, in no particular order, and never yields a key twice (a chunk that is retried
after its worker died cannot duplicate results). ``setup`` and ``fn`` must pickle by
reference (module-level functions, or ``functools.partial`` of them); payloads should be
plain data: bytes for snapshots (``Snapshot.to_bytes()``), small dataclasses, JSON-like
values. Only the process that iterates the results writes files.

Backends:

- ``InlineExecutor``: in this process (debugging, tiny runs).
- ``LocalPoolExecutor``: a ``multiprocessing`` pool on this machine (the default). Its
  workers die with the driver, however it dies (even SIGKILL), and a run sweeps the
  pool semaphores that runs killed with their resource tracker left in ``/dev/shm``.
  With ``keep_workers=True`` one set of workers serves run after run until closed.
- ``RayExecutor``: Ray actors, on this machine or a cluster (``pip install
  'agentenvs[ray]'``). An actor that dies (OOM, segfault, lost node) is restarted, its
  ``setup`` run again, and its unfinished chunks retried.

    from agentenvs.eval.executors import Job, make_executor

    with make_executor("ray", workers=8) as executor:
        for key, result in executor.run(setup, [Job(k, score_from, snap) for ...]):
            ...
"""

from __future__ import annotations

import math
import multiprocessing as mp
import multiprocessing.util
import os
import sys
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, as_completed, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, NamedTuple

from agentenvs.core.errors import UNKNOWN, AgentEnvsError, Fault, require
from agentenvs.core.procs import THREADS_ENV

BACKENDS = ("local", "ray")

#: where a Ray instance that this process starts listens
LOOPBACK = "127.0.0.1"


class Job(NamedTuple):
    """One unit of work: ``fn(state, payload)`` on a worker; ``key`` names its result."""

    key: Hashable
    fn: Callable[[Any, Any], Any]
    payload: Any


class WorkerLostError(Fault):
    """A worker died more often than the executor retries it; the run can be resumed.

    A fault of kind ``worker``: what killed the process (the OOM killer, a signal from
    outside, a crash in native code) is not known here, so its attribution is
    ``unknown``. The runner and the analyses run the work left on new workers
    (``agentenvs.eval.faults.ride_out_worker_loss``).
    """

    def __init__(self, message: str, *, evidence: str = "") -> None:
        super().__init__(message, kind="worker", attribution=UNKNOWN, evidence=evidence)


def default_chunk_size(jobs: int, workers: int) -> int:
    """About 16 chunks per worker (load balance), at most 64 jobs each (prompt results)."""
    return max(1, min(64, math.ceil(jobs / (max(workers, 1) * 16))))


def chunked(jobs: Sequence[Job], size: int) -> list[list[Job]]:
    return [list(jobs[start : start + size]) for start in range(0, len(jobs), size)]


def run_jobs(state: Any, jobs: Sequence[Job]) -> list[tuple[Hashable, Any]]:
    """Run a chunk on ``state``: what every worker does with what it is sent."""
    return [(job.key, job.fn(state, job.payload)) for job in jobs]


def close_state(state: Any) -> None:
    """Let a worker's state release what it holds (sandboxes, databases)."""
    close = getattr(state, "close", None)
    if callable(close):
        close()


class Executor(ABC):
    """Runs jobs on ``workers`` workers; use it as a context manager (or call ``close``)."""

    workers: int

    @abstractmethod
    def run(
        self,
        setup: Callable[[], Any],
        jobs: Iterable[Job],
        *,
        chunk_size: int | None = None,
        affinity: Callable[[Job], Hashable] | None = None,
    ) -> Iterator[tuple[Hashable, Any]]:
        """Yield ``(key, result)`` for every job, as chunks finish, each key once.

        ``affinity`` (a scheduling hint, computed here, never sent): a chunk goes where
        chunks of its first job's group ran before, where the executor can tell (kept
        local workers), so that what a worker cached for a group (a task) serves it again.

        Workers are started for this call and stopped when the iterator ends or is
        closed (unless the executor keeps them: ``LocalPoolExecutor(keep_workers=True)``);
        an exception from ``fn`` or ``setup`` is raised here.
        """

    def close(self) -> None:  # noqa: B027 - most executors hold nothing between runs
        """Release what the executor holds between runs (a Ray connection it opened)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Dedupe:
    """Passes each key's first result through: a retried chunk cannot duplicate one."""

    def __init__(self) -> None:
        self.seen: set[Hashable] = set()

    def __call__(self, results: Iterable[tuple[Hashable, Any]]) -> Iterator[tuple[Hashable, Any]]:
        for key, result in results:
            if key not in self.seen:
                self.seen.add(key)
                yield key, result


def _check_keys(jobs: Sequence[Job]) -> None:
    if len({job.key for job in jobs}) != len(jobs):
        raise ValueError("job keys must be unique: results are told apart by key")


# ---------------------------------------------------------------- in this process
class InlineExecutor(Executor):
    """Runs every job in this process, one chunk after another."""

    workers = 0

    def run(
        self,
        setup: Callable[[], Any],
        jobs: Iterable[Job],
        *,
        chunk_size: int | None = None,
        affinity: Callable[[Job], Hashable] | None = None,
    ) -> Iterator[tuple[Hashable, Any]]:
        jobs = list(jobs)
        _check_keys(jobs)
        if not jobs:
            return
        unique = _Dedupe()
        state = setup()
        try:
            for chunk in chunked(jobs, chunk_size or default_chunk_size(len(jobs), 1)):
                yield from unique(run_jobs(state, chunk))
        finally:
            close_state(state)


# ---------------------------------------------------------------- local process pool
_POOL_STATE: list[Any] = []
#: how often a pool worker checks that its driver is still alive (seconds)
PARENT_CHECK_INTERVAL = 0.2


class MainModuleError(AgentEnvsError, RuntimeError):
    """Worker processes cannot start from this program's main module (see the message)."""


def _die_with_parent(parent: int) -> None:
    """Exit this worker as soon as ``parent`` (the driver) is gone, however it died.

    A SIGKILLed driver runs no cleanup, so its workers would otherwise live on (and with
    them multiprocessing's resource tracker, which waits for every holder of its pipe
    before it unlinks the pool's semaphores). ``PR_SET_PDEATHSIG`` ends the worker at
    once on Linux; a daemon thread that watches for a new parent pid covers the rest
    (other platforms, or a driver thread that exits before its process).
    """
    import threading
    import time

    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the driver died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_INTERVAL)
        os._exit(1)

    threading.Thread(target=watch, name="agentenvs-parent-watch", daemon=True).start()


def default_workers() -> int:
    """The cores this process may run on (its CPU affinity, as a container or ``taskset``
    sets it; else the CPU count): the local workers a run starts at most by default."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, cpus)


#: set to 1, lets a command start more local workers than usable cores
OVERSUBSCRIBE_VARIABLE = "AGENTENVS_OVERSUBSCRIBE"


class OversubscribeWarning(UserWarning):
    """More local workers were asked for than there are usable cores: fewer were started."""


def capped_workers(workers: int, *, allow_oversubscribe: bool = False) -> int:
    """``workers`` local worker processes, at most one per usable core
    (``default_workers``) unless ``allow_oversubscribe`` (or ``AGENTENVS_OVERSUBSCRIBE=1``
    in the environment): CPU-bound workers beyond the
    cores only wait on each other, and each holds its own env and policy. Warns, saying
    how to insist, when it cuts the count."""
    cores = default_workers()
    if workers <= cores or allow_oversubscribe or os.environ.get(OVERSUBSCRIBE_VARIABLE) == "1":
        return workers
    warnings.warn(
        OversubscribeWarning(
            f"{workers} workers asked for, but this process may use {cores} "
            f"core{'s' if cores != 1 else ''}: running {cores} (more only wait on each other; "
            f"pass allow_oversubscribe=True, or set {OVERSUBSCRIBE_VARIABLE}=1 for the command "
            "line, to start them all)"
        ),
        stacklevel=3,
    )
    return cores


def worker_threads(workers: int) -> int:
    """Threads for each of ``workers`` processes sharing this machine's CPUs (at least 1):
    more threads than cores only make the workers wait on each other."""
    return max(1, default_workers() // max(1, workers))


def _pool_init(
    setup: Callable[[], Any] | None, parent: int | None = None, threads: int | None = None
) -> None:
    if parent is not None:
        _die_with_parent(parent)
    if threads is not None:
        os.environ[THREADS_ENV] = str(threads)
    if setup is None:
        # a kept pool: each run's first chunk on this worker builds that run's state; the
        # last one is closed when the worker leaves (os._exit: no atexit, finalizers run)
        mp.util.Finalize(None, _close_kept_state, exitpriority=10)
        return
    state = setup()
    _POOL_STATE[:] = [state]
    # a pool worker leaves through os._exit (no atexit); its finalizers still run
    mp.util.Finalize(None, close_state, args=(state,), exitpriority=10)


def _pool_run(jobs: Sequence[Job]) -> list[tuple[Hashable, Any]]:
    return run_jobs(_POOL_STATE[0], jobs)


#: a kept pool's worker: [the run its state was built for, that state]
_KEPT_STATE: list[Any] = []


def _close_kept_state() -> None:
    if _KEPT_STATE:
        state = _KEPT_STATE[1]
        _KEPT_STATE.clear()
        close_state(state)


def _kept_pool_run(
    run: int, setup: Callable[[], Any], jobs: Sequence[Job]
) -> list[tuple[Hashable, Any]]:
    if not _KEPT_STATE or _KEPT_STATE[0] != run:
        _close_kept_state()  # the previous run's env and sandboxes, before this run's
        _KEPT_STATE[:] = [run, setup()]
    return run_jobs(_KEPT_STATE[1], jobs)


class LocalPoolExecutor(Executor):
    """A pool of ``workers`` processes (``spawn`` by default: no inherited threads, locks
    or sandboxes from the parent).

    By default each ``run`` starts its workers and stops them at its end. With
    ``keep_workers=True`` the workers are started by the first run and kept until
    ``close()`` (use the executor as a context manager): later runs skip starting
    interpreters and importing the package, and what a process caches (an env's results
    per task, a sandbox runtime) serves them too. A kept worker builds a run's state when
    that run's first chunk reaches it, after closing the previous run's; it is fed two
    chunks at a time, and with ``affinity`` it is given the chunks of the groups it ran
    before first, then those no other worker ran, then any (so none waits idle).

    A worker that dies (killed, out of memory, ``os._exit``) breaks the pool: the run
    stops with ``WorkerLostError`` at once instead of waiting forever for its chunk; what
    was already yielded stays, so a resumable caller picks up from there. (Kept workers
    are then stopped; the next run starts new ones.)
    """

    def __init__(
        self, workers: int, *, start_method: str = "spawn", keep_workers: bool = False
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = int(workers)
        self.start_method = start_method
        self.keep_workers = bool(keep_workers)
        # kept workers: one single-process pool each (its own queue, so chunks can be
        # steered to it), with the affinity groups it has run
        self._lanes: list[tuple[ProcessPoolExecutor, str | None]] = []
        self._warm: list[set[Hashable]] = []
        self._runs = 0

    def _new_pool(self, setup: Callable[[], Any] | None, size: int) -> ProcessPoolExecutor:
        check_main_module(self.start_method)
        sweep_orphan_semaphores()
        return ProcessPoolExecutor(
            size,
            mp_context=mp.get_context(self.start_method),
            initializer=_pool_init,
            initargs=(setup, os.getpid(), worker_threads(self.workers)),
        )

    def run(
        self,
        setup: Callable[[], Any],
        jobs: Iterable[Job],
        *,
        chunk_size: int | None = None,
        affinity: Callable[[Job], Hashable] | None = None,
    ) -> Iterator[tuple[Hashable, Any]]:
        jobs = list(jobs)
        _check_keys(jobs)
        if not jobs:
            return
        chunks = chunked(jobs, chunk_size or default_chunk_size(len(jobs), self.workers))
        unique = _Dedupe()
        if self.keep_workers:
            yield from self._run_kept(setup, chunks, unique, affinity)
            return
        pool = self._new_pool(setup, min(self.workers, len(chunks)))
        registered = _register_pool(pool)
        finished = False
        try:
            futures = [pool.submit(_pool_run, chunk) for chunk in chunks]
            for future in as_completed(futures):
                yield from unique(future.result())
            finished = True
        except BrokenProcessPool as exc:
            raise _lost(exc) from exc
        finally:
            if finished:
                pool.shutdown(wait=True)
                _unregister_pool(registered)
            else:
                # stop now: queued chunks are dropped and running workers killed, as an
                # interrupted or failed run must not keep the machine busy
                _kill_pool(pool, registered)

    def _run_kept(
        self,
        setup: Callable[[], Any],
        chunks: list[list[Job]],
        unique: _Dedupe,
        affinity: Callable[[Job], Hashable] | None,
    ) -> Iterator[tuple[Hashable, Any]]:
        if not self._lanes:
            for _ in range(self.workers):
                pool = self._new_pool(None, 1)
                self._lanes.append((pool, _register_pool(pool)))
            self._warm = [set() for _ in self._lanes]
        self._runs += 1
        run = self._runs
        groups = [affinity(chunk[0]) if affinity is not None else None for chunk in chunks]
        pending = list(range(len(chunks)))
        futures: dict[Future[list[tuple[Hashable, Any]]], int] = {}

        def feed(lane: int) -> None:
            if not pending:
                return
            index = pending.pop(self._choose(lane, [groups[i] for i in pending], affinity))
            if affinity is not None:
                self._warm[lane].add(groups[index])
            pool = self._lanes[lane][0]
            futures[pool.submit(_kept_pool_run, run, setup, chunks[index])] = lane

        finished = False
        try:
            for lane in range(len(self._lanes)):
                feed(lane)
                feed(lane)  # one queued behind the one running: no wait between chunks
            while futures:
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                for future in done:
                    lane = futures.pop(future)
                    results = future.result()
                    feed(lane)
                    yield from unique(results)
            finished = True
        except BrokenProcessPool as exc:
            raise _lost(exc) from exc
        finally:
            if not finished:
                for future in futures:
                    future.cancel()
                lanes, self._lanes, self._warm = self._lanes, [], []
                for pool, registered in lanes:
                    _kill_pool(pool, registered)

    def _choose(
        self, lane: int, groups: list[Hashable], affinity: Callable[[Job], Hashable] | None
    ) -> int:
        """Which pending chunk (by position) ``lane`` runs next."""
        if affinity is None:
            return 0
        warm = self._warm[lane]
        others = [w for i, w in enumerate(self._warm) if i != lane]
        cold = None
        for i, group in enumerate(groups):
            if group in warm:
                return i
            if cold is None and not any(group in w for w in others):
                cold = i
        return 0 if cold is None else cold

    def close(self) -> None:
        """Stop kept workers (each closes its last state first); idempotent."""
        lanes, self._lanes, self._warm = self._lanes, [], []
        for pool, registered in lanes:
            pool.shutdown(wait=True)
            _unregister_pool(registered)


def _lost(exc: BaseException | None = None) -> WorkerLostError:
    return WorkerLostError(
        "a worker process died (killed, out of memory or exited); the results "
        "received so far are kept: run the same work again to resume",
        evidence=f"the process pool broke: {exc}" if exc is not None else "",
    )


def _kill_pool(pool: ProcessPoolExecutor, registered: str | None) -> None:
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.kill()
        process.join(timeout=5)
    _unregister_pool(registered)


def check_main_module(start_method: str) -> None:
    """Refuse, with the reason, to start workers that would die re-running the program.

    With ``spawn`` and ``forkserver`` every worker imports the main script as
    ``__mp_main__``: a script without an ``if __name__ == "__main__":`` guard starts the
    whole run again inside each worker (which multiprocessing refuses, so every worker
    dies), and a script read from stdin cannot be imported at all.
    """
    if start_method == "fork":
        return
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or getattr(main, "__spec__", None) is not None:
        return  # an interactive session, `python -c`, or `python -m module`: nothing to re-run
    how = "; or run in this process (workers=0, --workers 0), or with start_method='fork'"
    if not os.path.isfile(path):
        raise MainModuleError(
            f"worker processes must import the main program, and {path!r} is not a file "
            f"(a script read from stdin?): save it to a file{how}"
        )
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            source = fh.read()
    except OSError:
        return
    if "__main__" not in source:
        raise MainModuleError(
            f"{path} has no `if __name__ == \"__main__\":` guard: every worker process "
            f"({start_method} start method) imports it and would start the run again, and "
            f"die; put the code that starts the run under that guard{how}"
        )


#: where each live pool driver lists the named semaphores of its pool, so that a run
#: can sweep those of drivers that were killed with their resource tracker
POOL_REGISTRY = "agentenvs-pool-semaphores"


def _registry_dir() -> str:
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"{POOL_REGISTRY}-{os.getuid()}")


def _process_start(pid: int) -> str | None:
    """The start time of a live process (None when it is gone): with the pid it names
    one process, whatever pid reuse happens later."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def _pool_semaphores(pool: ProcessPoolExecutor) -> list[str]:
    """The names of the named semaphores behind a pool's queues (5 on Linux)."""
    names = []
    for queue in (getattr(pool, "_call_queue", None), getattr(pool, "_result_queue", None)):
        for attr in ("_rlock", "_wlock", "_sem"):
            semlock = getattr(getattr(queue, attr, None), "_semlock", None)
            name = getattr(semlock, "name", None)
            if name:
                names.append(str(name))
    return names


def _register_pool(pool: ProcessPoolExecutor) -> str | None:
    """List the pool's semaphores under this process's pid and start time."""
    import json

    start = _process_start(os.getpid())
    names = _pool_semaphores(pool)
    if start is None or not names:
        return None  # not Linux, or a multiprocessing without named semaphores
    directory = _registry_dir()
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        path = os.path.join(directory, f"{os.getpid()}-{start}-{id(pool):x}.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"pid": os.getpid(), "start": start, "semaphores": names}, fh)
    except OSError:
        return None
    return path


def _unregister_pool(path: str | None) -> None:
    """Forget a pool that shut down: its queues are gone, so are their semaphores."""
    if path is None:
        return
    try:
        os.unlink(path)
    except OSError:
        pass


def sweep_orphan_semaphores() -> list[str]:
    """Unlink the pool semaphores of drivers that died without cleaning up.

    A pool's semaphores (``/dev/shm/sem.mp-*``) are unlinked by its queues' finalizers,
    or by multiprocessing's resource tracker when the driver dies; when the tracker was
    killed too (a SIGKILL to the whole process group) nothing would. Each pool lists
    its semaphores in a small file under the temp dir, named by the driver's pid and
    start time; a file whose driver is gone is swept here: its semaphores unlinked, the
    file removed. Returns the semaphore names unlinked.
    """
    import json

    directory = _registry_dir()
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    try:
        from _multiprocessing import sem_unlink
    except ImportError:  # no named semaphores on this platform
        return []
    removed = []
    for entry in entries:
        path = os.path.join(directory, entry)
        try:
            with open(path, encoding="utf-8") as fh:
                listed = json.load(fh)
            pid, start, names = int(listed["pid"]), str(listed["start"]), list(listed["semaphores"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being written, or not ours to judge
        if _process_start(pid) == start:
            continue  # its driver is alive
        for name in names:
            try:
                sem_unlink(name)
                removed.append(name)
            except OSError:
                pass  # already unlinked (by its finalizer or the resource tracker)
        _unregister_pool(path)
    return removed


# ---------------------------------------------------------------- Ray actors
class _RayWorker:
    """The body of a Ray actor: builds its state once, then runs the chunks it is sent."""

    def __init__(self, setup: Callable[[], Any]) -> None:
        self._state = setup()

    def run(self, jobs: Sequence[Job]) -> list[tuple[Hashable, Any]]:
        return run_jobs(self._state, jobs)

    def close(self) -> None:
        state, self._state = self._state, None
        close_state(state)


class RayExecutor(Executor):
    """Ray actors, one per worker, each holding its own state.

    Connects to the Ray instance already initialized in this process, else to
    ``address`` (``"auto"``, ``"ray://host:10001"``, ...), else starts a local one; a
    connection it opened is shut down by ``close``. Chunks stream back through
    ``ray.wait``; each actor has ``chunks_in_flight`` chunks queued so it never idles
    while the driver handles a result. An actor that dies is restarted (its ``setup``
    runs again) and its queued chunks are retried, up to ``max_restarts`` times each;
    past that ``WorkerLostError`` is raised. ``workers=None`` means one actor per CPU of
    the cluster. Every node needs agentenvs installed (or a ``runtime_env`` in
    ``init_kwargs``) and the packages that ``setup`` imports.
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        address: str | None = None,
        max_restarts: int = 3,
        chunks_in_flight: int = 2,
        num_cpus_per_worker: float = 1.0,
        init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        from agentenvs.core.errors import ServiceUnavailable

        ray = require("ray", "ray")
        self._ray = ray
        self._owns_ray = False
        if not ray.is_initialized():
            try:
                kwargs = dict(init_kwargs or {})
                if address is None:
                    # an instance started here serves this machine only: keep it on loopback
                    kwargs.setdefault("_node_ip_address", LOOPBACK)
                ray.init(address=address, **kwargs)
            except ConnectionError as exc:
                raise ServiceUnavailable(f"cannot reach Ray at {address!r}: {exc}") from exc
            self._owns_ray = True
        if workers is None:
            workers = int(ray.cluster_resources().get("CPU", 1) // max(num_cpus_per_worker, 1e-9))
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = int(workers)
        self.max_restarts = int(max_restarts)
        self.chunks_in_flight = max(1, int(chunks_in_flight))
        self._actor_class = ray.remote(
            num_cpus=num_cpus_per_worker,
            max_restarts=self.max_restarts,
            # retried only when the actor dies, never for an exception raised by fn
            max_task_retries=self.max_restarts,
        )(_RayWorker)

    def run(
        self,
        setup: Callable[[], Any],
        jobs: Iterable[Job],
        *,
        chunk_size: int | None = None,
        affinity: Callable[[Job], Hashable] | None = None,  # actors are not told apart here
    ) -> Iterator[tuple[Hashable, Any]]:
        ray = self._ray
        jobs = list(jobs)
        _check_keys(jobs)
        if not jobs:
            return
        pending_chunks = chunked(jobs, chunk_size or default_chunk_size(len(jobs), self.workers))
        pending_chunks.reverse()  # pop() from the end keeps the submission order
        actors = [
            self._actor_class.remote(setup)
            for _ in range(min(self.workers, len(pending_chunks)))
        ]
        in_flight: dict[Any, int] = {}  # object ref -> index of the actor running it
        unique = _Dedupe()

        def submit(index: int) -> None:
            if pending_chunks:
                in_flight[actors[index].run.remote(pending_chunks.pop())] = index

        try:
            for _ in range(self.chunks_in_flight):
                for index in range(len(actors)):
                    submit(index)
            while in_flight:
                [ref], _ = ray.wait(list(in_flight), num_returns=1)
                index = in_flight.pop(ref)
                try:
                    results = ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    raise WorkerLostError(
                        f"a Ray worker died and was restarted {self.max_restarts} times, or "
                        f"its setup failed; what finished is kept, so resuming is safe: {exc}",
                        evidence=f"Ray: {type(exc).__name__}",
                    ) from exc
                submit(index)
                yield from unique(results)
        finally:
            for ref in in_flight:
                ray.cancel(ref, force=False)
            self._stop(actors)

    def _stop(self, actors: list[Any]) -> None:
        ray = self._ray
        # close states (sandboxes, databases) first; a dead actor just fails to answer
        closing = [actor.close.remote() for actor in actors]
        try:
            ray.wait(closing, num_returns=len(closing), timeout=30)
        finally:
            for actor in actors:
                ray.kill(actor, no_restart=True)

    def close(self) -> None:
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_ray = False


def make_executor(
    backend: str = "local",
    workers: int = 1,
    *,
    address: str | None = None,
    start_method: str = "spawn",
    keep_workers: bool = False,
) -> Executor:
    """The executor for a backend name: ``local`` (a process pool, or this process when
    ``workers`` is 0) or ``ray`` (``workers`` actors; 0 means one per cluster CPU).
    ``keep_workers``: a local pool keeps its workers from run to run until closed (see
    ``LocalPoolExecutor``)."""
    if backend == "local":
        if address is not None:
            raise ValueError("address is for the ray backend; the local one runs on this machine")
        if workers <= 0:
            return InlineExecutor()
        return LocalPoolExecutor(workers, start_method=start_method, keep_workers=keep_workers)
    if backend == "ray":
        return RayExecutor(workers if workers > 0 else None, address=address)
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
