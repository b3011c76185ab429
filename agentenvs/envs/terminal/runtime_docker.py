"""The ``docker`` runtime: each episode in a fresh container of the task's own image.

Images: every task's Dockerfile is built once per machine and tagged
``agentenvs/tb-<task>:<hash>``, the hash covering the build context, the mode and the
base images' ids, so an edited task or a rebuilt base gives a new image and an
unchanged one is reused. Online (an engine that can pull), the Dockerfile is built as
written, with network. Offline (``offline=True``, ``AGENTENVS_OFFLINE=1``, or an engine
that cannot reach its registry), each ``FROM`` resolves to a local image through the
image map and RUN steps go through the offline stand-ins, with no network (see
``images``); a base that cannot be had is reported, with the reason, as unsupported.
Bundled tasks build ``FROM ${BASE_IMAGE}``, passed as ``agentenvs/terminal:latest``.

Network at run time (:func:`network_plan`): online, the official defaults (TB1's compose
network, Harbor's ``network_mode``, both give the agent and the tests the internet);
``network="tests-only"`` cuts the agent off and reconnects the container for the
tests; offline (or ``network="none"``), containers never have network, and the tests'
bootstraps are served by the stand-ins. Commands and tests run in the image's own
environment (its ``ENV``, ``WORKDIR``), as ``docker exec`` gives it.

Containers: a task may write anywhere, so a container serves one episode (or one
restore) and is removed after it. Next sessions (containers of the same image with the
agent's shell started and the starting state placed) are opened in the background while
the agent works, as many as the runtime's recent demand asks (see ``spares_wanted``), so a
reset pays for neither a container start nor an exec. They run as root (the container is the boundary) with no network, only the
capabilities file-administration tasks need (``task_container.CAPABILITIES``), no new privileges,
memory/pids/CPU limits, and Docker's init to reap orphaned jobs. They carry the labels
of the docker sandbox backend, so :func:`agentenvs.sandbox.docker.sweep_orphans` removes
those of dead processes. The agent's shell is a :class:`ShellSession` over one exec.

Compose services (``TerminalTask.services``): each other service of the task's
``docker-compose.yaml`` runs as a sidecar container of its own image (built offline like
the task's, or a base-like image: present, mapped, or pulled online) with the same labels,
limits and capabilities. A holder container of the task's image owns the network
namespace (its ``/etc/hosts`` maps every service name to 127.0.0.1); the task's container
and the sidecars join it (``network_mode="container:<holder>"``), so ``kv:6390`` works
with no bridge and offline, and the grader's restart of the task's container leaves the
sidecars reachable. They start and go with the task's container (spare, fresh verdict
sandboxes and restores too, afresh each time); at the tests, one that the engine's events
show stopped, killed or removed from outside is a Fault, one that ended otherwise is only
reported (``service_status``).

Faults: the runtime holds the engine's event stream for its containers open
(:class:`~agentenvs.envs.terminal.faults.EngineWatch`), and :meth:`DockerRuntime.diagnose`
tells a failure of the agent's (its container ended from inside) from the infrastructure's
(a container killed or removed through the API, an engine that restarted, does not answer
or refused a request), as ``faults`` says. Base images are pulled by name before the
build (through ``registry``, for the names the engine's Docker Hub mirror does not serve:
see ``images``); a pull the registry failed (no answer in time, unreachable, credentials
refused, 429 too many requests) is a ``registry`` fault naming the image and the registry,
never the task's; the registry's answer that it has no such image is the task's.
"""

from __future__ import annotations

import atexit
import gc
import math
import os
import queue
import re
import shutil
import statistics
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentenvs.core.errors import Fault, SandboxError, ServiceUnavailable
from agentenvs.envs.terminal import faults, images, offline
from agentenvs.envs.terminal import offline as offline_tools
from agentenvs.envs.terminal.copies import DEFAULT_COPY_LIMITS, CopyLimits
from agentenvs.envs.terminal.data import (
    BASE_IMAGE,
    DEFAULT_PATH,
    ComposeService,
    TerminalTask,
)
from agentenvs.envs.terminal.grading_docker import FreezingDocker
from agentenvs.envs.terminal.images_docker import BUILD_TIMEOUT_S, DockerImages
from agentenvs.envs.terminal.needs import NETWORKS, ONLINE_NETWORK, network_plan
from agentenvs.envs.terminal.shell import ShellSession
from agentenvs.envs.terminal.task_container import (
    _ShellProcess,
    _TaskContainer,
)
from agentenvs.envs.terminal.verifier import tree as verifier_tree
from agentenvs.sandbox.base import Limits
from agentenvs.sandbox.docker import (
    DockerProcess,
    _client,
    docker_available,
    sweep_orphans,
)

#: each runtime's containers carry its own token: its event stream selects them by it
RUNTIME_LABEL = "agentenvs.terminal-runtime"
#: what an engine's refusal to start a container says when the image lacks its command
IMAGE_LACKS = ("executable file not found", "no such file or directory")

#: (image, task id, exec environment, shell init text, output cap, network, work dir)
_SpareKey = tuple[str, str, tuple[tuple[str, str], ...], str, int, str, str]
_Spare = tuple[_SpareKey, "tuple[_TaskContainer, ShellSession] | _Pending"]

#: ``prestart`` modes: spares sized to demand, the one spare of the last key, none
PRESTARTS = ("demand", "one", "off")
#: how many of a runtime's latest sessions its demand is judged on
DEMAND_WINDOW = 8
#: what a start is taken to last before one was timed (seconds)
FIRST_START_S = 1.0
#: what an idle spare (a sleeping container and its shell) is counted to hold in memory
SPARE_MEMORY_MB = 64
#: how long no session may have begun before a background start or removal goes on
#: (seconds): a burst of resets finds the interpreter free of them
QUIET_S = 0.02
#: the longest a background start or removal waits for that (seconds)
QUIET_MOST_S = 1.0
#: what ``md5sum`` of a whole work dir prints
_MD5 = re.compile(r"[0-9a-f]{32}  -")


def default_max_spares() -> int:
    """``AGENTENVS_TB_MAX_SPARES``, else the machine's core count (at least 2)."""
    value = os.environ.get("AGENTENVS_TB_MAX_SPARES", "").strip()
    if value:
        return max(0, int(value))
    return max(2, os.cpu_count() or 1)


def spares_wanted(
    sessions: Sequence[tuple[float, _SpareKey]], now: float, start_s: float, limit: int
) -> dict[_SpareKey, int]:
    """How many spares of each key to hold, from a runtime's latest ``sessions`` ((time,
    key), oldest first) and what a start lasts (``start_s``): a key gets the sessions it
    is expected to open while one start runs (its rate: the sessions after its first in
    the window over the time since that first, now included, so a key no longer asked for
    fades), at least
    one for the latest key and for a key that came back, at most ``limit`` in all (the
    latest key first, then the most asked)."""
    if not sessions or limit <= 0:
        return {}
    first: dict[_SpareKey, float] = {}
    count: dict[_SpareKey, int] = {}
    for when, key in sessions:
        first.setdefault(key, when)
        count[key] = count.get(key, 0) + 1
    latest = sessions[-1][1]
    want: dict[_SpareKey, int] = {}
    for key, n in count.items():
        # sessions a second between its first and now (a single one: no rate yet)
        rate = (n - 1) / max(now - first[key], 1e-3)
        floor = 1 if key == latest or n >= 2 else 0
        want[key] = max(floor, math.ceil(rate * start_s - 1e-9))
    out: dict[_SpareKey, int] = {}
    left = limit
    for key in sorted(want, key=lambda k: (k != latest, -count[k])):
        take = min(want[key], left)
        if take > 0:
            out[key] = take
            left -= take
    return out


class _Sessions:
    """When this process's latest session began: the background work of every runtime
    (spare starts, removals, retired shells) waits for a moment with none beginning, so
    that a burst of resets, each taking a ready spare, holds the interpreter alone (a
    background thread given it mid-burst, to build an engine request, is what the
    slowest reset waited on). A session only writes the time: no lock, no wake-up."""

    began = 0.0

    @classmethod
    def wait_quiet(cls) -> None:
        """Return once no session has begun for ``QUIET_S``, or after ``QUIET_MOST_S``
        (sessions that never stop beginning do not hold background work back longer)."""
        end = time.monotonic() + QUIET_MOST_S
        while (now := time.monotonic()) < end and (left := cls.began + QUIET_S - now) > 0:
            time.sleep(min(left, end - now))

    @classmethod
    def tidy(cls) -> None:
        """Collect the young generations of the cyclic garbage collector, once quiet: the
        background work's engine requests leave thousands of objects behind, and the
        collection they are due is otherwise run by whichever thread allocates next,
        often a reset of the next burst (a millisecond in a 0.2 ms reset). The
        collector's settings are left as they are; a disabled collector is not run."""
        cls.wait_quiet()
        if gc.isenabled():
            gc.collect(1)

    @classmethod
    def run(cls, work: Callable[[], None], left: queue.SimpleQueue[Any]) -> None:
        """One piece of a background thread's work, once quiet (a failure leaves the next
        to run); then, with nothing more in ``left`` (its queue), ``tidy``."""
        try:
            cls.wait_quiet()
            work()
        except Exception:  # noqa: BLE001 - a failed start or removal leaves the next to run
            pass
        if left.empty():
            cls.tidy()


class _Pending:
    """A spare asked for and not made yet: ``began`` once a starter took it up, ``done``
    set once it is kept among the spares or given up."""

    __slots__ = ("began", "done", "key")

    def __init__(self, key: _SpareKey) -> None:
        self.key = key
        self.began = False
        self.done = threading.Event()


class _SpareCount:
    """The spares of every runtime of this process, against the host's memory; and the
    process's starter threads, as many as the machine's cores, that open them (a reset's
    own requests wait behind no more than that many background starts). The starters are
    started with the first spare asked for and stay: a reset only queues its spares, as a
    thread's start waits for the new thread to run, which under a burst of resets holding
    the interpreter is what the slowest reset waited on."""

    lock = threading.Lock()
    held = 0
    starts: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
    starters = 0

    @classmethod
    def after_fork(cls) -> None:
        # a forked child has none of its parent's spares nor the threads starting them
        cls.lock = threading.Lock()
        cls.held = 0
        cls.starts = queue.SimpleQueue()
        cls.starters = 0

    @classmethod
    def take(cls, wanted: int, cap: int) -> int:
        """How many of ``wanted`` new spares fit under ``cap``, counted as held."""
        with cls.lock:
            room = max(0, min(wanted, cap - cls.held))
            cls.held += room
        return room

    @classmethod
    def submit(cls, work: Callable[[], None]) -> None:
        """Queue ``work`` (a spare's start) for the process's starters, started the first
        time."""
        with cls.lock:
            new = 0 if cls.starters else max(2, os.cpu_count() or 1)
            cls.starters += new
            starts = cls.starts
        starts.put(work)
        for _ in range(new):
            threading.Thread(
                target=cls._start_loop, args=(starts,), daemon=True, name="agentenvs-tb-prestart"
            ).start()

    @staticmethod
    def _start_loop(starts: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            _Sessions.run(starts.get(), starts)


def unsupported_reason(task: TerminalTask) -> str | None:
    """Why the docker runtime cannot run ``task``, known without the engine (None: it can)."""
    if task.problems:
        return "; ".join(task.problems)
    # a [verifier] user: the tests run as it under official grading; safe grading refuses
    # it (TerminalBenchEnv._grading_reason)
    return None


#: the names ``docker exec --user`` gives root
ROOT_USERS = frozenset({"root", "0", "0:0", "root:root"})


def offline_default() -> bool | None:
    """``AGENTENVS_OFFLINE`` (1/true/yes or 0/false/no); None when unset."""
    value = os.environ.get("AGENTENVS_OFFLINE", "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return None


class DockerRuntime(DockerImages, FreezingDocker):
    """Task images built on demand; a fresh container per shell session, the next ones
    opened ahead.

    ``session`` removes the previous episode's container (in the background) and
    starts the shell in a new one (a spare, when one of the same key is ready);
    ``close`` removes every container, spares included (also at exit). ``prestart``:
    ``"demand"`` (spares sized to recent demand, at most ``max_spares``: see
    ``spares_wanted``), ``"one"`` (one spare of the last key) or ``"off"``.
    """

    name = "docker"
    #: what a copy of the container's files into the host may take (see ``copies``)
    copy_limits: CopyLimits = DEFAULT_COPY_LIMITS

    def __init__(
        self,
        limits: Limits,
        *,
        base_image: str = BASE_IMAGE,
        prestart: bool | str = "demand",
        max_spares: int | None = None,
        cpus: float = 1.0,
        offline: bool | None = None,
        network: str = "task",
        image_map: Mapping[str, str] | None = None,
        wheelhouse: str | Path | None = None,
        registry: str | None = None,
        build_wheelhouse: str | Path | None = None,
        force_build: bool = False,
        start_keys: bool = True,
    ) -> None:
        if network not in NETWORKS:
            raise ValueError(f"network must be one of {NETWORKS}, got {network!r}")
        # True / False: the default and none (the earlier spelling)
        mode = "demand" if prestart is True else "off" if prestart is False else prestart
        if mode not in PRESTARTS:
            raise ValueError(f"prestart must be one of {PRESTARTS} or a bool, got {prestart!r}")
        if max_spares is not None and max_spares < 0:
            raise ValueError(f"max_spares must be >= 0, got {max_spares}")
        ok, why = docker_available(base_image)
        if not ok:
            raise ServiceUnavailable(f"the docker runtime cannot run here: {why}")
        self.limits = limits
        self.base_image = base_image
        self.force_build = force_build
        #: "demand" (spares sized to recent demand, starting state placed), "one" (one
        #: spare of the last key, its starting state placed at reset), "off"
        self.prestart = mode
        #: whether a "demand" spare hashes its work dir while it waits, so the state key of
        #: a reset that gets it untouched costs nothing (False: the key is read at reset)
        self.start_keys = start_keys
        #: the most spares this runtime holds at once ("demand")
        self.max_spares = default_max_spares() if max_spares is None else max_spares
        self.cpus = cpus
        self.network = network
        self.image_map = {**images.DEFAULT_IMAGE_MAP, **dict(image_map or {})}
        #: the registry other registries' names are pulled through (``images.via_registry``)
        self.registry = (
            registry if registry is not None else os.environ.get("AGENTENVS_REGISTRY")
        ) or None
        self._mirrors: list[str] | None = None
        # the project's wheelhouse (sandboxes/build_wheelhouse.sh) unless another is named
        default = offline_tools.default_wheelhouse()
        self.wheelhouse = (
            Path(wheelhouse) if wheelhouse is not None else default if default.is_dir() else None
        )
        # the binary wheels offline builds get (sandboxes/build_wheelhouse.sh), likewise
        default = offline_tools.default_build_wheelhouse()
        self.build_wheelhouse = (
            Path(build_wheelhouse)
            if build_wheelhouse is not None
            else default
            if default.is_dir()
            else None
        )
        self.client = _client(timeout=BUILD_TIMEOUT_S)
        sweep_orphans(self.client)
        self.token = uuid.uuid4().hex[:16]
        #: the engine's events for this runtime's containers, from now on (see ``faults``)
        self.watch = faults.EngineWatch(f"{RUNTIME_LABEL}={self.token}")
        self._started = time.time()
        self._offline: bool | None = offline if offline is not None else offline_default()
        self._networkless: bool | None = None
        self._images: dict[str, str] = {}
        #: task id -> what its mapped base images differ in (images.standin_note)
        self._notes: dict[str, str | None] = {}
        self._image_info: dict[str, dict[str, Any]] = {}
        #: task id -> (service, the image it runs) of its compose sidecars, in start order
        self._services: dict[str, list[tuple[ComposeService, str]]] = {}
        #: the episode's sidecars as the tests found them (name -> running / exited (code N))
        self.service_status: dict[str, str] = {}
        #: task id -> (memory MB, CPUs) its containers get, where its task.toml says
        self._resources: dict[str, tuple[int | None, float | None]] = {}
        #: task id -> the user its agent's shell runs as, where its task.toml says
        self._users: dict[str, str] = {}
        self._host: tuple[int, int] | None = None
        self._build_lock = threading.Lock()
        self._lock = threading.Lock()
        self._current: _TaskContainer | None = None
        self._current_key: _SpareKey | None = None
        #: the image's python3 for the verifier, by image
        self._pythons: dict[str, str] = {}
        self._bytecode: dict[str, str | None] = {}
        #: whether task containers get the verifier's read-only dirs (safe grading)
        self.verifier_mounts = False
        #: next sessions, opened ahead (or the threads opening them), oldest first
        self._spares: list[_Spare] = []
        #: (time, key) of the latest sessions, and how long the latest starts took
        self._sessions: deque[tuple[float, _SpareKey]] = deque(maxlen=DEMAND_WINDOW)
        self._start_times: deque[float] = deque(maxlen=DEMAND_WINDOW)
        #: containers whose starting state a spare's preparation already placed
        self._placed: set[str] = set()
        #: container id -> (its shell, the shell's command count, work dir, its files' hash)
        #: as a spare's preparation hashed them
        self._start_files: dict[str, tuple[ShellSession, int, str, str]] = {}
        self._owned: dict[str, _TaskContainer] = {}
        #: how this runtime's sessions got their container: a ready spare ("spare"), one a
        #: starter was opening ("waited", then "spare" or "opened"), or opened then ("opened")
        self.session_starts = {"spare": 0, "waited": 0, "opened": 0}
        self._threads: set[threading.Thread] = set()
        #: the thread that removes containers and closes retired shells, and its queue
        self._remover: threading.Thread | None = None
        self._remover_pid = 0
        self._removals: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._closed = False
        self._pid = os.getpid()
        _live.add(self)

    # ------------------------------------------------------------------ containers
    def _start(
        self, image: str, task_id: str, network: str, *, services: bool = True
    ) -> _TaskContainer:
        """A started container of ``image``; with the task's compose sidecars (unless
        ``services`` is False) a holder container of the same image owns the network
        namespace (with the services' names in /etc/hosts as 127.0.0.1), and the task's
        container and each sidecar join it: a restart of the task's container for grading
        leaves the sidecars reachable."""
        sidecars = self._services.get(task_id, []) if services else []
        memory_mb, cpus = self._resources.get(task_id, (None, None))
        holder: _TaskContainer | None = None
        if sidecars:
            holder = self._start_one(
                image,
                task_id,
                network,
                extra_hosts={s.name: "127.0.0.1" for s, _ in sidecars},
            )
            network = f"container:{holder.id}"
        try:
            box = self._start_one(image, task_id, network, memory_mb=memory_mb, cpus=cpus)
        except BaseException:
            if holder is not None:
                self._discard(holder)
            raise
        box.holder = holder
        try:
            for service, service_image in sidecars:
                box.sidecars.append(
                    self._start_one(service_image, task_id, network, service=service)
                )
        except BaseException:
            self._discard(box)
            raise
        return box

    def _start_one(
        self,
        image: str,
        task_id: str,
        network: str,
        *,
        extra_hosts: Mapping[str, str] | None = None,
        service: ComposeService | None = None,
        memory_mb: int | None = None,
        cpus: float | None = None,
    ) -> _TaskContainer:
        """One container; ``memory_mb`` and ``cpus`` (the task's own, where it declares
        them) over the runtime's limits."""
        binds: dict[str, str] = {}
        host_dir: str | None = None
        if self.verifier_mounts and service is None and not extra_hosts:
            # the verifier's tree and the tests, read-only, empty until a safe grading
            # fills them after the freeze (see verifier)
            host_dir = verifier_tree.container_dirs()
            binds = {
                f"{host_dir}/v": verifier_tree.MOUNT,
                f"{host_dir}/tests": "/tests",
            }
        try:
            box = _TaskContainer(
                self.client,
                self.limits,
                image,
                task_id,
                cpus=cpus if cpus is not None else self.cpus,
                memory_mb=memory_mb,
                network=network,
                labels={RUNTIME_LABEL: self.token},
                extra_hosts=extra_hosts,
                service=service,
                binds=binds,
                host_dir=host_dir,
            )
        except SandboxError as exc:
            if host_dir is not None:  # no container holds it: removed here
                shutil.rmtree(host_dir, ignore_errors=True)
            text = str(exc)
            if any(m in text.lower() for m in IMAGE_LACKS):
                raise  # the image has no `sleep` to run: the task's
            why = self.watch.ping()
            raise Fault(
                f"the Docker engine cannot start a container of {image!r}: {text[:200]}",
                kind="engine" if why is not None else "container",
                evidence=f"ping: {why}" if why is not None else "the engine answers a ping",
            ) from exc
        with self._lock:
            self._owned[box.id] = box
            closed = self._closed
        if closed:
            self._discard(box)
            raise SandboxError("the docker runtime is closed")
        return box

    def _open(self, key: _SpareKey) -> tuple[_TaskContainer, ShellSession]:
        """A new container of ``key``'s image with the agent's shell started in it."""
        image, task_id, env, init, max_output_bytes, network, workdir = key
        box = self._start(image, task_id, network)
        # Harbor's [agent] user: the agent's shell is exec'd as that user
        user = self._users.get(task_id) or "0:0"

        def spawn(argv: Sequence[str]) -> DockerProcess:
            return _ShellProcess(box, argv, user=user, env=dict(env), workdir=workdir)

        try:
            return box, ShellSession(
                spawn, init=init, max_output_bytes=max_output_bytes, workdir=workdir
            )
        except Exception as exc:
            # no agent ever ran in it: a failure with no outside cause is the image's
            fault = self.diagnose(exc, box)
            self._discard(box)
            if fault is not None:
                raise fault from exc
            raise
        except BaseException:
            self._discard(box)
            raise

    def _prestart(self, key: _SpareKey) -> None:
        """Hold the spares that the runtime's demand asks for: drop those no longer
        wanted, open the missing ones in the background ("one": a single spare of ``key``,
        as the runtime once did)."""
        cap = self._spare_cap()
        with self._lock:
            if self._closed:
                return
            if self.prestart == "one":
                want = {key: 1}
            else:
                start_s = (
                    statistics.median(self._start_times) if self._start_times else FIRST_START_S
                )
                want = spares_wanted(list(self._sessions), time.time(), start_s, self.max_spares)
            kept: list[_Spare] = []
            dropped: list[_Spare] = []
            have: dict[_SpareKey, int] = {}
            # the ready ones first, then those under way
            for spare in sorted(self._spares, key=lambda s: isinstance(s[1], _Pending)):
                if have.get(spare[0], 0) < want.get(spare[0], 0):
                    have[spare[0]] = have.get(spare[0], 0) + 1
                    kept.append(spare)
                else:
                    dropped.append(spare)
            self._spares = [s for s in self._spares if any(s is k for k in kept)]
            missing = [k for k, n in want.items() for _ in range(n - have.get(k, 0))]
            missing = missing[: _SpareCount.take(len(missing), cap)]
            pending = [_Pending(k) for k in missing]
            self._spares += [(p.key, p) for p in pending]
        for spare in dropped:
            self._drop_spare(spare)
        for asked in pending:
            _SpareCount.submit(lambda asked=asked: self._make_spare(asked))

    def _spare_cap(self) -> int:
        """How many spares this process may hold at once: half the host's memory at
        ``SPARE_MEMORY_MB`` each."""
        try:
            memory_mb, _ = self.host_resources()
        except Exception:  # noqa: BLE001 - no answer: the engine's failure shows at the start
            memory_mb = 0
        return memory_mb // 2 // SPARE_MEMORY_MB if memory_mb else self.max_spares

    def _make_spare(self, asked: _Pending) -> None:
        """Open the session ``asked`` for ahead (on a starter thread), with its starting
        state placed ("demand"), and keep it unless it stopped being wanted meanwhile (a
        spare given up before it began is not started)."""
        key = asked.key
        made: tuple[_TaskContainer, ShellSession] | None = None
        try:
            with self._lock:
                asked.began = not self._closed and any(s[1] is asked for s in self._spares)
            if asked.began:
                began = time.monotonic()
                try:
                    made = self._open(key)
                    if self.prestart == "demand":
                        _Sessions.wait_quiet()
                        self._place(made[0], made[1])
                        if self.start_keys:
                            _Sessions.wait_quiet()
                            self._hash_start(made[0], made[1], key[6])
                except Exception:
                    if made is not None:
                        made[1].close()
                        self._discard(made[0])
                    made = None  # the next session opens its own
            with self._lock:
                if made is not None:
                    self._start_times.append(time.monotonic() - began)
                at = next((i for i, s in enumerate(self._spares) if s[1] is asked), None)
                if at is not None and made is not None and not self._closed:
                    self._spares[at] = (key, made)
                    return
                if at is not None:
                    del self._spares[at]
            with _SpareCount.lock:
                _SpareCount.held -= 1
            if made is not None:
                made[1].close()
                self._discard(made[0])
        finally:
            asked.done.set()

    def spares_starting(self) -> int:
        """How many of this runtime's spares are asked for and not made yet."""
        with self._lock:
            return sum(isinstance(s[1], _Pending) for s in self._spares)

    def _place(self, box: _TaskContainer, shell: ShellSession) -> None:
        """Put what every session of the image gets before the agent's first command into
        ``box`` (offline, the wheelhouse), as :meth:`starting_state` would."""
        if not self.networkless or self.wheelhouse is None or not self.wheelhouse.is_dir():
            return
        from agentenvs.envs.terminal.images import tar_of

        data = tar_of([(self.wheelhouse, offline.WHEELHOUSE)])
        if self._users.get(box.task_id, "0:0") not in ROOT_USERS:
            # the agent's shell is not root's: the engine writes the files
            try:
                self.client.api.put_archive(box.id, "/", data)
            except Exception as exc:  # noqa: BLE001 - said as a failed tar is
                raise SandboxError(f"cannot place the wheelhouse: {exc}") from exc
            with self._lock:
                self._placed.add(box.id)
            return
        rc, out = shell.control("tar -x -C / --no-same-owner", stdin=data, timeout=120)
        if rc != 0:
            raise SandboxError(f"cannot place the wheelhouse: {out.decode(errors='replace')}")
        with self._lock:
            self._placed.add(box.id)

    def _hash_start(self, box: _TaskContainer, shell: ShellSession, workdir: str) -> None:
        """Hash the prepared spare's work dir as its state key holds it (``state``), kept
        with the shell's command count: valid while nothing has run in it since."""
        from agentenvs.envs.terminal.state import work_dir_files

        where = workdir.rstrip("/") or "/app"  # the env's state dir for this work dir
        try:
            files = work_dir_files(shell, where)
        except SandboxError:
            return  # the reset reads it then
        if _MD5.fullmatch(files) is None:
            return  # timed out or cut short: read at reset instead
        with self._lock:
            self._start_files[box.id] = (shell, shell.commands, where, files)

    def start_files(self, shell: ShellSession, where: str) -> str | None:
        """The hash of ``where``'s files the episode's container had when it was prepared,
        if ``shell`` is its shell and nothing has run in it since (None: read it now)."""
        with self._lock:
            box = self._current
            found = self._start_files.get(box.id) if box is not None else None
        if found is None:
            return None
        own, count, hashed, files = found
        if own is not shell or shell.commands != count or hashed != where:
            return None
        return files

    def _drop_spare(self, spare: _Spare | None) -> None:
        """Remove a spare (in the background); one in flight is removed by its starter,
        which no longer finds it among the spares."""
        if spare is not None and isinstance(spare[1], tuple):
            box, shell = spare[1]
            with _SpareCount.lock:
                _SpareCount.held -= 1
            self.retire_shell(shell)  # a reset that drops it waits for no close
            self._discard_later(box)

    def _take(self, key: _SpareKey) -> tuple[_TaskContainer, ShellSession]:
        """A ready spare of ``key``, else the oldest one a starter is opening once it is
        ready, else a new session opened now (one still queued is given up: opened here,
        it waits behind no other start). ``session_starts`` counts which."""
        for _ in range(2):
            with self._lock:
                ready = next(
                    (s for s in self._spares if s[0] == key and isinstance(s[1], tuple)), None
                )
                flight = next(
                    (s[1] for s in self._spares if s[0] == key and isinstance(s[1], _Pending)),
                    None,
                )
                if ready is not None:
                    self._spares = [s for s in self._spares if s is not ready]
                elif flight is not None and not flight.began:
                    # its starter finds it gone and lets its count go
                    self._spares = [s for s in self._spares if s[1] is not flight]
                    flight = None
            if ready is not None:
                assert isinstance(ready[1], tuple)
                with _SpareCount.lock:
                    _SpareCount.held -= 1
                if self._usable(ready[1][0]):
                    self.session_starts["spare"] += 1
                    return ready[1]
                self.retire_shell(ready[1][1])
                self._discard_later(ready[1][0])
                continue
            if flight is None:
                break
            self.session_starts["waited"] += 1
            flight.done.wait(timeout=60)
        self.session_starts["opened"] += 1
        began = time.monotonic()
        made = self._open(key)
        with self._lock:
            self._start_times.append(time.monotonic() - began)
        return made

    def _usable(self, box: _TaskContainer) -> bool:
        """Whether a spare is still whole as far as the engine's events tell (no container
        event since its start, an unbroken stream)."""
        if self.watch.broken_since(box.created) is not None:
            return False
        return all(
            a in ("create", "start") for b in _group(box) for a, _ in self.watch.events(b.id)
        )

    def _discard(self, box: _TaskContainer) -> None:
        # the sidecars first, the holder of their network namespace last
        for member in [*box.sidecars, box, *([box.holder] if box.holder else [])]:
            member.remove()
            with self._lock:
                self._owned.pop(member.id, None)
                self._placed.discard(member.id)
                self._start_files.pop(member.id, None)
            self.watch.forget(member.id)

    def _discard_later(self, box: _TaskContainer) -> None:
        self._later(lambda: self._discard(box))

    def retire_shell(self, shell: ShellSession) -> None:
        """Close an episode's shell in the background (before its container goes): a
        reset waits for neither."""
        self._later(shell.close)

    def _later(self, work: Callable[[], None]) -> None:
        """Run ``work`` on the runtime's remover thread, in order."""
        self._removals_ready()
        with self._lock:
            closed = self._closed
            if not closed:
                self._removals.put(work)
        if closed:  # close() has let the remover go: done here
            work()

    def _removals_ready(self) -> None:
        """Start the remover thread unless it runs (once, at the runtime's first session,
        not once a removal: a thread's start is what a reset waited on)."""
        with self._lock:
            thread = self._remover
            if self._closed:
                return
            if thread is None or not thread.is_alive() or self._remover_pid != os.getpid():
                self._removals = queue.SimpleQueue()
                thread = threading.Thread(
                    target=self._remove_loop,
                    args=(self._removals,),
                    daemon=True,
                    name="agentenvs-tb-remove",
                )
                self._remover, self._remover_pid = thread, os.getpid()
                self._threads.add(thread)
                thread.start()

    def _remove_loop(self, removals: queue.SimpleQueue[Callable[[], None] | None]) -> None:
        while (work := removals.get()) is not None:
            _Sessions.run(work, removals)
        with self._lock:
            self._threads.discard(threading.current_thread())

    def diagnose(self, exc: BaseException, box: _TaskContainer | None = None) -> Fault | None:
        """The Fault that a failure of the episode's container (or ``box``) is; None: the
        agent's (see ``faults``)."""
        box = box or self._current
        if box is None:
            return faults.docker_verdict(self.watch, None, exc, since=self._started)
        return faults.docker_verdict(
            self.watch, box.id, exc, own_kills=box.own_kills, since=box.created
        )

    def engine_fault(self, exc: BaseException) -> Fault | None:
        """The Fault that a failed engine request outside any container is (None: not one)."""
        return faults.docker_verdict(self.watch, None, exc, since=self._started)

    def abandon(self) -> None:
        """Let go of the episode's container and the spare after a fault (they are removed
        in the background); the next session starts afresh."""
        with self._lock:
            box, self._current = self._current, None
            spares, self._spares = self._spares, []
        if box is not None:
            self._discard_later(box)
        for spare in spares:
            self._drop_spare(spare)

    @property
    def container_ids(self) -> list[str]:
        """Ids of every container this runtime owns now (in use, spare, or being removed)."""
        with self._lock:
            return list(self._owned)

    # ------------------------------------------------------------------ the runtime API
    def workdir(self, task: TerminalTask) -> str:
        """Where the agent starts: Harbor's ``[environment] workdir``, else the image's."""
        if task.workdir_override:
            return task.workdir_override
        return str(self.image_config(task)["workdir"]) or "/"

    def exec_environment(self, task: TerminalTask) -> dict[str, str]:
        """What a command sees besides the image's ENV: offline, the stand-ins first."""
        env = {"TERM": "dumb", **dict(task.environment_env)}
        if self.networkless:
            path = env.get("PATH") or self.image_config(task)["env"].get("PATH", DEFAULT_PATH)
            env.update(offline.environment())
            env["PATH"] = f"{offline.MOUNT}/bin:{path}"
        return env

    def test_environment(self, task: TerminalTask) -> dict[str, str]:
        """The tests' environment: the image's ENV as the official harnesses give it
        (a ``docker exec``), ``TEST_DIR`` as TB1's compose file sets it, and offline, the
        stand-ins first on PATH."""
        env = {"HOME": "/root", **self.image_config(task)["env"]}
        # Harbor's [environment] env is the container's; [verifier] env the tests' own
        env.update(task.environment_env)
        env.update(task.verifier_env)
        env.setdefault("PATH", DEFAULT_PATH)
        if task.layout == "tb1":
            env["TEST_DIR"] = "/tests"
        if self.networkless:
            env.update(offline.environment())
            env["PATH"] = f"{offline.MOUNT}/bin:{env['PATH']}"
        return env

    def verifier_declared(self, task: TerminalTask) -> tuple[str, dict[str, str], str]:
        """(PATH, declared variables, the agent's HOME) of the tests under safe grading:
        the image's ENV, then Harbor's ``[environment] env`` and ``[verifier] env``."""
        path, declared, home = super().verifier_declared(task)
        declared = {**declared, **dict(task.environment_env), **dict(task.verifier_env)}
        return declared.get("PATH", path), declared, home

    def host_resources(self) -> tuple[int, int]:
        """(memory MB, CPUs) of the engine's host, asked once."""
        if self._host is None:
            try:
                found = self.client.info()
            except Exception as exc:  # noqa: BLE001 - an engine that fails: a Fault
                raise self.engine_fault(exc) or SandboxError(str(exc)) from exc
            self._host = (int(found.get("MemTotal") or 0) >> 20, int(found.get("NCPU") or 0))
        return self._host

    def unmet_resources(self, task: TerminalTask) -> str | None:
        """What of the task's ``[environment] memory_mb``/``cpus`` this host cannot give
        (None: it can), named as the task declares it."""
        memory_mb, ncpu = self.host_resources()
        short = []
        if task.memory_mb is not None and memory_mb and task.memory_mb > memory_mb:
            short.append(
                f"it needs {task.memory_mb} MB of memory ([environment] memory_mb) and "
                f"this Docker host has {memory_mb} MB"
            )
        if task.cpus is not None and ncpu and task.cpus > ncpu:
            short.append(
                f"it needs {task.cpus:g} CPUs ([environment] cpus) and this Docker host has {ncpu}"
            )
        return "; ".join(short) or None

    def session(self, task: TerminalTask, init: str, max_output_bytes: int) -> ShellSession:
        """A shell in a fresh container of the task's image (the previous one goes), with
        the memory and CPUs the task declares."""
        if self._closed:
            raise SandboxError("the docker runtime is closed")
        _Sessions.began = time.monotonic()
        if task.memory_mb is not None or task.cpus is not None:
            self._resources[task.id] = (task.memory_mb, task.cpus)
        if task.agent_user is not None:
            self._users[task.id] = task.agent_user
        image = self.image(task)
        self._removals_ready()
        old, self._current = self._current, None
        if old is not None:
            self._discard_later(old)
        mode, _, _ = network_plan(task, offline=self.networkless, network=self.network)
        env = tuple(sorted(self.exec_environment(task).items()))
        key = (image, task.id, env, init, max_output_bytes, mode, self.workdir(task))
        self.service_status = {}
        with self._lock:
            self._sessions.append((time.time(), key))
        self._current, shell = self._take(key)
        self._current_key = key
        if self.prestart == "demand":
            # a spare has its starting state; a session opened now gets it here, so a
            # session (a reset's or a restore's) is the same whichever it was
            with self._lock:
                placed = self._current.id in self._placed
            if not placed:
                self._place(self._current, shell)
        if self.prestart != "off":
            self._prestart(key)
        return shell

    def starting_state(self, task: TerminalTask, shell: ShellSession) -> None:
        """The image holds the starting state (and, built offline, the stand-ins); the
        agent's network is cut for ``network="tests-only"``; a wheelhouse is put in place."""
        _, agent, _ = network_plan(task, offline=self.networkless, network=self.network)
        if self._current is not None and _net(self._current).network != "none" and not agent:
            self.set_network(self._current, False)
        box = self._current
        with self._lock:
            placed = box is not None and box.id in self._placed
        if not placed and box is not None:
            self._place(box, shell)  # a spare's preparation did it already otherwise
        if task.healthcheck is not None:
            from agentenvs.envs.terminal.healthcheck import wait_healthy

            wait_healthy(task.healthcheck, shell)

    def before_tests(self, task: TerminalTask) -> None:
        """Give the container the tests' network (``network="tests-only"``); read how the
        compose sidecars are (``service_status``): one stopped, killed or removed from
        outside (the engine's events say so) raises :class:`Fault`, one that ended
        otherwise (the agent shut it down) is only reported."""
        _, agent, tests = network_plan(task, offline=self.networkless, network=self.network)
        if self._current is not None and tests and not agent:
            self.set_network(self._current, True)
        if self._current is not None:
            self.service_status = self.check_services(self._current)
        if self._current is not None and self._current.disk is not None:
            self._current.disk.check()  # an end state past the disk cap is the agent's loss

    def check_services(self, box: _TaskContainer) -> dict[str, str]:
        """{service: running | exited (code N)} of ``box``'s sidecars (raises the Fault
        that one of them, or the holder of their network, ended from outside is)."""
        status: dict[str, str] = {}
        members = [*([box.holder] if box.holder else []), *box.sidecars]
        for member in members:
            name = member.service.name if member.service is not None else "network holder"
            state, missing = faults._state(self.watch, member.id)
            running = state is not None and faults._running(state)
            if not running and missing is None and state is not None:
                self.watch.wait_for(member.id, ("die", "destroy"))
            events = self.watch.events(member.id)
            outside = faults._outside(events, member.own_kills)
            if missing == "gone" or outside or (state is not None and state.get("Paused")):
                said = ", ".join(dict.fromkeys(a for a, _ in events if a != "create"))
                raise Fault(
                    f"the compose service {name!r} (container {member.short}) was stopped, "
                    "killed or removed from outside the env",
                    kind="container",
                    evidence=f"engine events: {said or 'none'}; "
                    f"state: {missing or faults._state_text(state or {})}",
                )
            if missing is not None:
                raise Fault(
                    f"the Docker engine cannot say what became of the compose service "
                    f"{name!r}: {missing}",
                    kind="engine",
                    evidence=f"inspect failed: {missing}",
                )
            if member.service is not None:
                code = (state or {}).get("ExitCode")
                status[name] = "running" if running else f"exited (code {code})"
        return status

    def set_network(self, box: _TaskContainer, on: bool) -> None:
        """Connect or disconnect a running container's network (never offline)."""
        api = self.client.api
        box = _net(box)
        try:
            if on:
                api.connect_container_to_network(box.id, ONLINE_NETWORK)
            else:
                api.disconnect_container_from_network(box.id, ONLINE_NETWORK)
        except Exception as exc:
            what = "connect" if on else "disconnect"
            raise SandboxError(f"cannot {what} the network of {box.short}: {exc}") from exc

    def close(self) -> None:
        """Remove every container of this runtime; idempotent."""
        with self._lock:
            if self._pid != os.getpid():
                return  # a forked child must not remove its parent's containers
            self._closed = True
            self._current = None
            self._removals.put(None)  # the remover ends after what is queued
            threads = list(self._threads)
            # a spare a starter is opening is removed by it, seeing the runtime closed; one
            # not begun is never started
            asked = [s[1] for s in self._spares if isinstance(s[1], _Pending) and s[1].began]
            bytecode, self._bytecode = list(self._bytecode.values()), {}
        for made in bytecode:  # this runtime's compiled copies of the verifier's packages
            if made is not None:
                shutil.rmtree(made, ignore_errors=True)
        for thread in threads:
            thread.join(timeout=60)
        for pending in asked:
            pending.done.wait(timeout=60)
        with self._lock:
            boxes = list(self._owned.values())
            spares, self._spares = self._spares, []
        for spare in spares:
            if isinstance(spare[1], tuple):
                with _SpareCount.lock:
                    _SpareCount.held -= 1
                spare[1][1].close()
        for box in boxes:
            self._discard(box)
        self.watch.close()
        try:
            self.client.close()
        except Exception:
            pass


def _group(box: _TaskContainer) -> list[_TaskContainer]:
    """The task's container with its sidecars and the holder of their network."""
    return [box, *box.sidecars, *([box.holder] if box.holder else [])]


def _net(box: _TaskContainer) -> _TaskContainer:
    """The container whose network the task's container has (its holder, if it has one)."""
    return box.holder or box


_live: weakref.WeakSet[DockerRuntime] = weakref.WeakSet()
os.register_at_fork(after_in_child=_SpareCount.after_fork)


@atexit.register
def _close_runtimes() -> None:
    for runtime in list(_live):
        runtime.close()
