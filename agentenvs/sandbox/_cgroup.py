"""One cgroup per local sandbox: its memory (tmpfs contents included, no swap), its process
count and its CPU share held by the kernel for the sandbox as a whole.

rlimits bound each process: a program that forks 64 children of 1 GB each holds 64 GB
under a 1 GB ``RLIMIT_AS``. A cgroup bounds them together. Every process a
:class:`~agentenvs.sandbox.local.LocalSandbox` starts (bwrap, and so everything inside)
joins the sandbox's cgroup before it executes anything: the child of ``fork`` writes ``0``
("me") to the cgroup's ``cgroup.procs`` through a descriptor the host opened, then
executes bwrap. Nothing inside a sandbox sees a cgroup file system, so nothing inside can
leave its cgroup. Pages a process touches are charged to its cgroup, the pages of the
sandbox's tmpfs mounts too, so a tmpfs full of files counts against the sandbox's memory.

Which cgroups: where the host has a cgroup v2 hierarchy with the ``memory`` and ``pids``
controllers, a child of ``$AGENTENVS_CGROUP`` (a delegated cgroup: ``systemd-run --user
--scope -p Delegate=yes``) or of this process's own cgroup; where it has the v1
``memory`` and ``pids`` hierarchies (and may write there), a child of this process's
cgroup in each, and in ``cpu`` where it may. Otherwise (no delegation, a read-only cgroup
file system) the per-process rlimits stay the only limits, and the sandbox says so
(:attr:`Scope.why`). ``AGENTENVS_CGROUP=off`` chooses that fallback.

Going over is the program's outcome: the kernel's OOM killer picks a process of the
sandbox, never of the host, and a fork fails with ``EAGAIN``. The OOM kills are counted
by the kernel in the cgroup (``oom_kill``), which is the evidence that a sandbox process
killed by ``SIGKILL`` died of its own memory, not from outside (``faults``).

A cgroup is named ``agentenvs-<pid>-<start>-<ns>-<n>`` after its owner (its pid
namespace included: ``_leftovers``); the first sandbox of a process removes those of dead
owners of its own pid namespace (their processes died with them: bwrap's
``--die-with-parent``), never one of another namespace, whose owner it cannot see.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from agentenvs.sandbox import _leftovers

ENV = "AGENTENVS_CGROUP"
PREFIX = "agentenvs-"
#: memory beyond ``Limits.memory_mb`` for the tmpfs contents, bwrap and the sandbox's own
#: pid 1 (the same slack as a Docker sandbox's container)
MEMORY_SLACK_MB = 256
#: processes (threads count) beyond ``Limits.max_processes``: bwrap, pid 1, warm servers
PIDS_SLACK = 16
#: and threads per core: a numeric library starts one per core on import, in each of the
#: programs a sandbox may run at once (DeepCoder-MT grades up to 4 in parallel); each
#: process stays under ``RLIMIT_NPROC`` = ``max_processes`` of its own
PIDS_PER_CORE = 4


def pids_max(max_processes: int) -> int:
    """The process (and thread) limit of a sandbox as a whole."""
    return max_processes + PIDS_SLACK + PIDS_PER_CORE * (os.cpu_count() or 1)


_NAME = re.compile(r"^agentenvs-(?P<pid>\d+)-(?P<start>\d+)-(?P<ns>\d+)-(\d+|host)$")
_counter = itertools.count()
_swept: set[str] = set()
_lock = threading.Lock()


@dataclass(frozen=True)
class Scope:
    """What bounds a sandbox as a whole: ``kind`` is ``"cgroup2"``, ``"cgroup1"`` or
    ``"rlimits"`` (per process only; ``why`` then says why there is no cgroup)."""

    kind: str
    memory_mb: int | None = None
    max_processes: int | None = None
    why: str = ""

    def as_info(self) -> dict[str, object]:
        out: dict[str, object] = {"scope": "sandbox" if self.kind != "rlimits" else "process"}
        out["enforced_by"] = self.kind
        if self.memory_mb is not None:
            out["memory_mb"] = self.memory_mb
            out["max_processes"] = self.max_processes
        if self.why:
            out["why"] = self.why
        return out


# ----------------------------------------------------------------------------- the host
def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, super options) of each cgroup file system."""
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3 or rfields[0] not in ("cgroup", "cgroup2"):
            continue
        point = fields[4].replace("\\040", " ")
        out.append((point, rfields[0], set(rfields[2].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """This process's cgroup per hierarchy: ``""`` for v2, else each v1 controller."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def _read(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read()


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _v2_base(point: str, own: str) -> tuple[str | None, str]:
    """The v2 cgroup under which sandboxes go, with memory and pids enabled for its
    children, or (None, why)."""
    given = os.environ.get(ENV, "")
    base = given if given.startswith("/") else os.path.join(point, own.lstrip("/"))
    try:
        available = set(_read(os.path.join(base, "cgroup.controllers")).split())
    except OSError as exc:
        return None, f"cannot read the cgroup {base}: {exc.strerror}"
    missing = {"memory", "pids"} - available
    if missing:
        return None, f"the cgroup {base} has no {' or '.join(sorted(missing))} controller"
    if not os.access(base, os.W_OK):
        return None, (
            f"the cgroup {base} is not delegated to this user (run under `systemd-run --user "
            f"--scope -p Delegate=yes`, or set ${ENV} to a delegated cgroup)"
        )
    want = ["memory", "pids"] + (["cpu"] if "cpu" in available else [])
    ctl = os.path.join(base, "cgroup.subtree_control")

    def enable() -> OSError | None:
        try:
            on = set(_read(ctl).split())
            for c in want:
                if c not in on:
                    _write(ctl, f"+{c}")
        except OSError as exc:
            return exc
        return None

    exc = enable()
    if exc is not None and exc.errno == errno.EBUSY:
        # processes live in base (this one among them): a cgroup with processes cannot
        # enable controllers for children. This process moves to a leaf of its own, as a
        # container's init does; where others live in base too, that is not enough
        leaf = os.path.join(base, f"{PREFIX}{_owner()}-host")
        try:
            os.makedirs(leaf, exist_ok=True)
            _write(os.path.join(leaf, "cgroup.procs"), "0")
        except OSError:
            pass
        exc = enable()
    if exc is not None:
        on = set()
        with contextlib.suppress(OSError):
            on = set(_read(ctl).split())
        if {"memory", "pids"} <= on:
            return base, ""
        return None, f"cannot enable memory and pids for children of {base}: {exc.strerror}"
    return base, ""


@dataclass(frozen=True)
class _Hierarchy:
    version: int  # 0: none
    #: controller -> the dir under which sandbox cgroups go ("" for v2's one dir)
    bases: dict[str, str]
    why: str = ""


_hierarchy_cache: _Hierarchy | None = None


def hierarchy() -> _Hierarchy:
    """Where this host lets the project make sandbox cgroups (found once per process)."""
    global _hierarchy_cache
    with _lock:
        if _hierarchy_cache is None:
            _hierarchy_cache = _find()
        return _hierarchy_cache


def _find() -> _Hierarchy:
    if os.environ.get(ENV, "").lower() in ("off", "0", "no", "false"):
        return _Hierarchy(0, {}, f"${ENV}=off")
    mounts = _mounts()
    own = _own_paths()
    why = []
    for point, fstype, _ in mounts:
        if fstype == "cgroup2" and "" in own:
            base, reason = _v2_base(point, own[""])
            if base is not None:
                return _Hierarchy(2, {"": base})
            why.append(reason)
    v1: dict[str, str] = {}
    for point, fstype, opts in mounts:
        if fstype != "cgroup":
            continue
        for c in ("memory", "pids", "cpu"):
            if c in opts and c in own and c not in v1:
                base = os.path.join(point, own[c].lstrip("/"))
                if os.path.isdir(base) and os.access(base, os.W_OK):
                    v1[c] = base
    if "memory" in v1 and "pids" in v1:
        return _Hierarchy(1, v1)
    if mounts and not why:
        why.append("the cgroup file system is not writable by this user")
    return _Hierarchy(0, {}, "; ".join(why) or "no cgroup file system is mounted")


def _owner() -> str:
    return _leftovers.owner_tag()


# ----------------------------------------------------------------------------- a cgroup
class SandboxCgroup:
    """The cgroups of one sandbox (one dir on v2, one per controller on v1)."""

    def __init__(self, memory_mb: int, max_processes: int) -> None:
        h = hierarchy()
        if h.version == 0:
            raise OSError(h.why)
        self.version = h.version
        self.memory_mb = memory_mb + MEMORY_SLACK_MB
        self.pids_max = pids_max(max_processes)
        name = f"{PREFIX}{_owner()}-{next(_counter)}"
        for base in h.bases.values():
            _sweep(base)
        self.dirs: dict[str, str] = {}
        self._fds: list[int] = []
        try:
            for c, base in h.bases.items():
                path = os.path.join(base, name)
                os.mkdir(path, 0o755)
                self.dirs[c] = path
            self._configure()
            for path in self.dirs.values():
                procs = os.path.join(path, "cgroup.procs")
                self._fds.append(os.open(procs, os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            self.remove()
            raise

    def _configure(self) -> None:
        mem = self.memory_mb << 20
        if self.version == 2:
            d = self.dirs[""]
            _write(os.path.join(d, "memory.max"), str(mem))
            if os.path.exists(os.path.join(d, "memory.swap.max")):
                _write(os.path.join(d, "memory.swap.max"), "0")
            _write(os.path.join(d, "pids.max"), str(self.pids_max))
            return
        m = self.dirs["memory"]
        _write(os.path.join(m, "memory.limit_in_bytes"), str(mem))
        sw = os.path.join(m, "memory.memsw.limit_in_bytes")
        if os.path.exists(sw):  # swap accounting on: memory + swap capped alike, no swap
            _write(sw, str(mem))
        with contextlib.suppress(OSError):
            _write(os.path.join(m, "memory.swappiness"), "0")
        _write(os.path.join(self.dirs["pids"], "pids.max"), str(self.pids_max))

    @property
    def scope(self) -> Scope:
        return Scope(f"cgroup{self.version}", self.memory_mb, self.pids_max)

    def set_task_limits(self, memory_mb: int | None, cpus: float | None) -> bool:
        """Hold the sandbox to a task's own memory (exactly, no slack) and CPUs, or back to
        its own limits (None); returns whether a CPU limit could be set where one was asked
        (the ``cpu`` controller is not always delegated)."""
        mem = (memory_mb if memory_mb is not None else self.memory_mb) << 20
        period = 100_000
        quota = str(max(1000, int(cpus * period))) if cpus is not None else None
        if self.version == 2:
            d = self.dirs[""]
            _write(os.path.join(d, "memory.max"), str(mem))
            path = os.path.join(d, "cpu.max")
            if not os.path.exists(path):
                return cpus is None
            _write(path, f"{quota or 'max'} {period}")
            return True
        m = self.dirs["memory"]
        sw = os.path.join(m, "memory.memsw.limit_in_bytes")
        # memory + swap may never be below memory: lower the one, raise the other, in order
        order = [sw, os.path.join(m, "memory.limit_in_bytes")]
        if os.path.exists(sw) and int(_read(sw).strip() or 0) > mem:
            order.reverse()
        for path in order:
            if os.path.exists(path):
                _write(path, str(mem))
        c = self.dirs.get("cpu")
        if c is None:
            return cpus is None
        _write(os.path.join(c, "cpu.cfs_period_us"), str(period))
        _write(os.path.join(c, "cpu.cfs_quota_us"), quota or "-1")
        return True

    def preexec(self) -> Callable[[], None]:
        """What the child of ``fork`` runs before it executes: join this cgroup."""
        fds = tuple(self._fds)

        def join() -> None:
            for fd in fds:
                os.write(fd, b"0")

        return join

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer took in this cgroup so far."""
        if self.version == 2:
            path, key = os.path.join(self.dirs[""], "memory.events"), "oom_kill"
        else:
            path, key = os.path.join(self.dirs["memory"], "memory.oom_control"), "oom_kill"
        try:
            for line in _read(path).splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def refusals(self) -> int:
        """OOM kills plus forks refused at the process limit in this cgroup so far: the
        kernel's own counts of the sandbox running out of what it was given."""
        total = self.oom_kills()
        d = self.dirs.get("") or self.dirs.get("pids")
        if d:
            with contextlib.suppress(OSError, ValueError):
                for line in _read(os.path.join(d, "pids.events")).splitlines():
                    name, _, value = line.partition(" ")
                    if name == "max":
                        total += int(value)
        return total

    def memory_peak(self) -> int | None:
        """The most memory the sandbox held at once, in bytes (None where not kept)."""
        names = (
            [(self.dirs.get(""), "memory.peak")]
            if self.version == 2
            else [(self.dirs.get("memory"), "memory.max_usage_in_bytes")]
        )
        for d, n in names:
            with contextlib.suppress(OSError, ValueError, TypeError):
                return int(_read(os.path.join(d, n)).split()[0])  # type: ignore[arg-type]
        return None

    def pids(self) -> list[int]:
        d = self.dirs.get("") or self.dirs.get("pids") or ""
        try:
            return [int(p) for p in _read(os.path.join(d, "cgroup.procs")).split()]
        except (OSError, ValueError):
            return []

    def remove(self) -> None:
        """Kill what is left in it and remove its dirs (idempotent)."""
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []
        dirs, self.dirs = self.dirs, {}
        _remove(list(dirs.values()))


def _remove(dirs: list[str], wait_s: float = 2.0) -> bool:
    deadline = time.monotonic() + wait_s
    left = list(dirs)
    while left:
        for d in list(left):
            kill = os.path.join(d, "cgroup.kill")
            if os.path.exists(kill):
                with contextlib.suppress(OSError):
                    _write(kill, "1")
            with contextlib.suppress(OSError, ValueError):
                for pid in _read(os.path.join(d, "cgroup.procs")).split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), signal.SIGKILL)
            try:
                os.rmdir(d)
                left.remove(d)
            except FileNotFoundError:
                left.remove(d)
            except OSError:
                pass
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    return not left


def _sweep(base: str) -> None:
    """Remove the cgroups under ``base`` whose owner process is gone (once per process)."""
    with _lock:
        if base in _swept:
            return
        _swept.add(base)
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        m = _NAME.match(name)
        if m is None:
            continue
        if _leftovers.owner_alive(int(m["pid"]), int(m["start"]), int(m["ns"])):
            continue  # alive, or of another pid namespace (never judged from here)
        _remove([os.path.join(base, name)], wait_s=0.5)


def make(memory_mb: int, max_processes: int) -> tuple[SandboxCgroup | None, Scope]:
    """A sandbox's cgroup and its scope, or (None, the per-process fallback and why)."""
    try:
        cg = SandboxCgroup(memory_mb, max_processes)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.filename:
            why = f"{why}: {exc.filename}"
        return None, Scope("rlimits", why=why)
    return cg, cg.scope
