"""The ``local`` runtime: the task's starting state rebuilt in a bubblewrap sandbox.

Every episode (and every restore) gets a new pid namespace with private tmpfs dirs at
``/app``, ``/tests``, ``/logs``, ``/root`` and the oracle's ``/oracle`` and ``/solution``
(so a command that fills the disk fills only its own capped tmpfs); the task's ``COPY``
sources are unpacked into ``/app`` and ``setup.sh`` is run there, as the task's
Dockerfile does, and its ``ENV`` (``$PATH`` expanded) is the shell's and the tests'
environment. The system is the host's, read-only; pytest comes from this interpreter's
packages, copied with their bytecode once per process (at the first sandbox) to a
read-only dir on ``PYTHONPATH``; there is no network, and the offline stand-ins serve the
tests' standard bootstraps.

Faults: :meth:`LocalRuntime.diagnose` reads how bwrap ended, as the host's ``wait`` saw it
(see ``faults``): killed by a signal, or its pid 1 killed by one, is the host's doing (a
``sandbox`` fault), since nothing inside can signal either; a sandbox that cannot start
is one too.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentenvs.core.errors import Fault, SandboxError
from agentenvs.envs.terminal import faults, needs, offline
from agentenvs.envs.terminal.copies import (
    DEFAULT_COPY_LIMITS,
    RESULT_BYTES,
    CopyLimits,
    OverLimit,
    bounded_tar,
    measure,
)
from agentenvs.envs.terminal.data import (
    DEFAULT_PATH,
    TerminalTask,
    base_userland,
    missing_binaries,
    standin_base,
)
from agentenvs.envs.terminal.images import tar_of
from agentenvs.envs.terminal.shell import ShellSession
from agentenvs.envs.terminal.verifier.tree import (
    PYTEST_PACKAGES,
    _compile_for_sandbox,
    pytest_dir,
)
from agentenvs.sandbox._leftovers import owned_mkdtemp
from agentenvs.sandbox.base import Limits

PYLIB = "/opt/agentenvs/pylib"
#: the sandbox's writable dirs and their sizes (these bound the disk, with /work's
#: ``Limits.disk_mb``: no file-size limit does; /tmp is set here, not from the file size)
TMPFS_MB = {
    "/tmp": 256,
    "/app": 512,
    "/tests": 64,
    "/logs": 16,
    "/root": 64,
    "/oracle": 16,
    "/solution": 64,
}
_offline_lock = threading.Lock()
_offline_dir: str | None = None


def offline_dir() -> str:
    """A world-readable copy of the offline stand-ins (made once per process): the package
    may be installed under a directory the sandbox's user cannot enter (a 0700 home or
    temp dir), and a bind of such a path leaves the sandbox without its stand-ins."""
    global _offline_dir
    with _offline_lock:
        if _offline_dir is not None:
            return _offline_dir
        root = owned_mkdtemp("agentenvs-pylib-")  # swept by a later start if we are killed
        atexit.register(shutil.rmtree, root, True)
        dest = Path(root) / "offline"
        shutil.copytree(offline.ROOT, dest, ignore=shutil.ignore_patterns("__pycache__"))
        os.chmod(root, 0o755)
        for d, _, files in os.walk(dest):
            os.chmod(d, 0o755)
            for f in files:
                path = os.path.join(d, f)
                os.chmod(path, 0o755 if os.stat(path).st_mode & 0o100 else 0o644)
        _offline_dir = str(dest)
        return _offline_dir


_host_lock = threading.Lock()
_host: tuple[str, str] | None = None


def host_userland() -> tuple[str, str]:
    """(Python ``major.minor``, distribution) of what the sandbox shows: the host's
    ``python3`` on the image PATH and its ``/etc/os-release``."""
    global _host
    with _host_lock:
        if _host is None:
            version = "none"
            python = shutil.which("python3", path=DEFAULT_PATH)
            if python is not None:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    done = subprocess.run(
                        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                        capture_output=True,
                        text=True,
                        timeout=60,
                        check=False,
                    )
                    version = done.stdout.strip() or version
            distro = "an unknown distribution"
            with contextlib.suppress(OSError):
                fields = dict(
                    line.split("=", 1)
                    for line in Path("/etc/os-release").read_text().splitlines()
                    if "=" in line
                )
                distro = fields.get("PRETTY_NAME", distro).strip('"')
            _host = (version, distro)
        return _host


def host_tools() -> dict[str, bool]:
    """Which of the manifest's tools a local sandbox has: the host's, and pytest (given)."""
    from agentenvs.envs.terminal.images import MANIFEST_TOOLS

    found = {t: shutil.which(t, path=DEFAULT_PATH) is not None for t in MANIFEST_TOOLS}
    found["pytest"] = True
    return found


def standin_difference(task: TerminalTask) -> str | None:
    """Where the host's userland differs from the task's base image, in words (None: the
    task is on the project's own base, or nothing differs that is known)."""
    if standin_base(task.base_image) is None:
        return None
    version, distro = host_userland()
    want, family = base_userland(task.base_image)
    said = []
    if want is not None and want != version:
        said.append(f"Python {version} for {want}")
    if not distro.lower().startswith(family.split()[0].lower()) or (
        family != family.split()[0] and family not in distro.replace(" GNU/Linux", "")
    ):
        said.append(f"{distro} for {family}")
    base = standin_base(task.base_image)
    # the manifest's facts of the real image: its work dir where the task sets none, tools
    from agentenvs.envs.terminal.images import fact_differences, image_facts

    facts = image_facts(task.base_image)
    if facts is not None:
        real = task.workdir if task.workdir != "/" else facts.get("workdir")
        have = {"workdir": "/app", "user": "root", "tools": host_tools()}
        said.extend(fact_differences(task.base_image, have, workdir_applied=True))
        if real != "/app":
            said.append(f"work dir /app for {real}")
    if not said:
        return f"base {base} stood in for by the host's {distro} (Python {version})"
    return f"base {base} stood in for by the host's userland: " + ", ".join(said)


_provides: tuple[frozenset[str], frozenset[str]] | None = None


def sandbox_provides() -> tuple[frozenset[str], frozenset[str]]:
    """(Debian packages, Python distributions) a local sandbox has: the host's installed
    packages and its ``python3``'s distributions, plus the pytest packages it is given."""
    global _provides
    with _host_lock:
        if _provides is None:
            debs, dists = "", ""
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                debs = subprocess.run(
                    ["dpkg-query", "-W", "-f=${Package} ${Status}\\n"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                ).stdout
            python = shutil.which("python3", path=DEFAULT_PATH)
            if python is not None:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    dists = subprocess.run(
                        [
                            python,
                            "-c",
                            "import importlib.metadata as m; "
                            "print(' '.join(d.metadata['Name'] or '' for d in m.distributions()))",
                        ],
                        capture_output=True,
                        text=True,
                        timeout=60,
                        check=False,
                        env={"PATH": DEFAULT_PATH},
                    ).stdout
            installed = {
                line.split()[0].split(":", 1)[0]
                for line in debs.splitlines()
                if line.endswith("install ok installed")
            }
            names = {needs.normalize(n) for n in (*dists.split(), *PYTEST_PACKAGES)}
            _provides = (frozenset(installed), frozenset(names))
        return _provides


def test_time_needs(task: TerminalTask) -> list[str]:
    """Packages the task's tests install that a local sandbox cannot provide (it has no
    wheelhouse and no network), and downloads they make."""
    debs, dists = sandbox_provides()
    found: list[str] = []
    for path, text in needs.test_texts(task):
        if path.suffix == ".py":
            continue
        rel = path.relative_to(task.path).as_posix()
        found += [
            f"the Python package {p!r} at test time (in {rel})"
            for p in needs.pip_installs(text)
            if p not in dists
        ]
        found += [
            f"the Debian package {p!r} at test time (in {rel})"
            for p in needs.apt_installs(text)
            if p not in debs and p not in needs.STAND_IN_PACKAGES
        ]
    return list(dict.fromkeys(found))


def host_resources() -> tuple[int, int]:
    """(memory MB, CPUs) of this host (0 where unknown)."""
    memory_mb = 0
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_mb = int(line.split()[1]) >> 10
    return memory_mb, len(os.sched_getaffinity(0))


def unmet_resources(task: TerminalTask) -> str | None:
    """What of the task's ``[environment] memory_mb``/``cpus`` this host cannot give (None:
    it can: the sandbox's cgroup then holds the task to them where cgroups are delegated)."""
    memory_mb, ncpu = host_resources()
    short = []
    if task.memory_mb is not None and memory_mb and task.memory_mb > memory_mb:
        short.append(
            f"it needs {task.memory_mb} MB of memory ([environment] memory_mb) and this "
            f"host has {memory_mb} MB"
        )
    if task.cpus is not None and ncpu and task.cpus > ncpu:
        short.append(f"it needs {task.cpus:g} CPUs ([environment] cpus) and this host has {ncpu}")
    return "; ".join(short) or None


def unsupported_reason(task: TerminalTask) -> str | None:
    """Why the local runtime cannot run ``task`` (None: it can)."""
    if task.problems:
        return "; ".join(task.problems)
    users = [
        f"[{name}] user = {user!r}"
        for name, user in (("agent", task.agent_user), ("verifier", task.verifier_user))
        if user is not None and user not in ("root", "0", "0:0", "root:root")
    ]
    if users:
        return (
            f"task.toml: {', '.join(users)}, and the local runtime runs every command as "
            "one user (root in its namespace): use the docker runtime"
        )
    short = unmet_resources(task)
    if short is not None:
        return short
    if task.local_problem:
        return f"needs the docker runtime: {task.local_problem}"
    missing = missing_binaries(task)
    if missing:
        return f"needs {', '.join(missing)} on the host (tags {list(task.tags)})"
    unmet = test_time_needs(task)
    if unmet:
        return "needs offline (the local sandbox has no wheelhouse): " + "; ".join(unmet)
    # the copy itself waits for the first sandbox (a driver process that only lists
    # tasks never makes it)
    if importlib.util.find_spec("pytest") is None:
        return "pytest is not installed in this interpreter (the tests need it)"
    return None


class LocalRuntime:
    """Starting states of tasks in a local sandbox; one shell session at a time."""

    name = "local"
    #: what a copy of the sandbox's files into the host may take (see ``copies``)
    copy_limits: CopyLimits = DEFAULT_COPY_LIMITS

    def __init__(self, limits: Limits) -> None:
        from agentenvs.sandbox.local import LocalSandbox

        lib = pytest_dir()
        binds = {offline_dir(): offline.MOUNT}
        if lib:
            binds[lib] = PYLIB
        try:
            self.box = LocalSandbox(limits, tmpfs=TMPFS_MB, ro_binds=binds)
        except SandboxError as exc:
            raise Fault(
                f"the local sandbox cannot run here: {exc}",
                kind="sandbox",
                evidence="bubblewrap's probe failed before any sandbox started",
                retryable=False,
            ) from exc
        #: the process of the latest session (the agent's, or the grader's after a freeze)
        self._proc: subprocess.Popen[bytes] | None = None
        #: (shell, its command count, digest of the files unpacked) of a starting state
        #: that is those files alone in an empty /app; digest -> the hash of /app's files
        self._start: tuple[ShellSession, int, str] | None = None
        self._start_hashes: dict[str, str] = {}
        #: what the next session binds besides the sandbox's own (the verifier's, once)
        self._binds: dict[str, str] = {}
        self.env = {
            "HOME": "/root",
            "TERM": "dumb",
            "PYTHONPATH": PYLIB,
            "PYTHONDONTWRITEBYTECODE": "1",
        }

    def session(self, task: TerminalTask, init: str, max_output_bytes: int) -> ShellSession:
        """A new namespace with an empty /app and a shell in it (the old one is ended)."""
        self.box._kill_all()
        self._proc = None
        self._start = None
        self._task_limits(task)
        env = {**self.env, **dict(task.env), **dict(task.environment_env)}
        binds, self._binds = self._binds, {}

        def spawn(argv: list[str]) -> Any:
            # a fresh /work too: the host dir would outlive the namespace
            proc = self.box.spawn(argv, env=env, cwd="/app", scratch=True, ro_binds=binds)
            self._proc = getattr(proc, "_proc", None)
            return proc

        try:
            return ShellSession(spawn, init=init, max_output_bytes=max_output_bytes)
        except Exception as exc:
            # nothing of the agent's runs in a sandbox before its shell does
            proc = self._proc
            fault = faults.local_verdict(
                (lambda: proc.poll()) if proc is not None else (lambda: 0),
                exc,
                started=False,
            )
            self.box._kill_all()
            self._proc = None
            assert fault is not None
            raise fault from exc

    def _task_limits(self, task: TerminalTask) -> None:
        """Hold the sandbox's cgroup to the task's ``memory_mb``/``cpus`` (its own limits
        for a task that declares none); without a cgroup, the per-process rlimits hold
        (``unsupported_reason`` refused a task that wants more than the host has)."""
        cgroup = self.box._cgroup
        if cgroup is None:
            return
        try:
            cgroup.set_task_limits(task.memory_mb, task.cpus)
        except OSError as exc:
            raise Fault(
                f"cannot set the sandbox's cgroup to the task's memory and CPUs: {exc}",
                kind="sandbox",
                evidence="a write to the sandbox's own cgroup failed",
            ) from exc

    def diagnose(self, exc: BaseException) -> Fault | None:
        """The Fault that a failure of the latest session's sandbox is; None: the agent's
        (see ``faults``). Asked before the session is closed: closing it kills pid 1."""
        proc = self._proc
        if proc is None or proc not in self.box._procs:
            return None  # ended by this runtime itself
        return faults.local_verdict(proc.poll, exc)

    def abandon(self) -> None:
        """End every process of the sandbox after a fault; the next session starts afresh."""
        self.box._kill_all()
        self._proc = None

    def workdir(self, task: TerminalTask) -> str:
        return "/app"

    def test_environment(self, task: TerminalTask) -> dict[str, str]:
        """The Dockerfile's ENV over the base's, pytest's packages, ``TEST_DIR``, and the
        offline stand-ins first on PATH."""
        env = {"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", **dict(task.env)}
        # Harbor's [environment] env is the container's; [verifier] env the tests' own
        env.update(task.environment_env)
        env.update(task.verifier_env)
        env.update(
            {
                "TEST_DIR": "/tests",
                "APP_DIR": "/app",
                "PYTHONPATH": PYLIB,
                "PYTHONDONTWRITEBYTECODE": "1",
                **offline.environment(),
            }
        )
        env["PATH"] = f"{offline.MOUNT}/bin:{env['PATH']}:{PYLIB}/bin"
        return env

    def starting_state(self, task: TerminalTask, shell: ShellSession) -> None:
        """Fill /app as the task's Dockerfile does: its COPY sources, then setup.sh."""
        pairs = []
        for src, dest in task.copies:
            path = (task.context / src).resolve()
            if not path.exists() or task.context.resolve() not in [path, *path.parents]:
                raise SandboxError(f"{task.dockerfile}: COPY source {src!r} not in the context")
            pairs.append((path, dest))
        data = tar_of(pairs)
        rc, out = shell.control("tar -x -C / --no-same-owner", stdin=data, timeout=60)
        if rc != 0:
            raise SandboxError(f"cannot unpack the task's files: {out.decode(errors='replace')}")
        if not task.runs_setup and task.healthcheck is None:
            # the same bytes unpacked into an empty /app: the same files, whose hash (the
            # state key's) is read once (``start_files``)
            self._start = (shell, shell.commands, hashlib.sha256(data).hexdigest())
        if task.runs_setup:
            rc, out = shell.control(
                "rm -f /app/.keep; if [ -f /app/setup.sh ]; then cd /app && APP_DIR=/app "
                "bash /app/setup.sh && rm -f /app/setup.sh; fi",
                timeout=120,
            )
            if rc != 0:
                raise SandboxError(
                    f"{task.id}: setup.sh failed: {out.decode(errors='replace')[-2000:]}"
                )
        if task.healthcheck is not None:
            from agentenvs.envs.terminal.healthcheck import wait_healthy

            wait_healthy(task.healthcheck, shell)

    def start_files(self, shell: ShellSession, where: str) -> str | None:
        """The hash of /app's files (``state.work_dir_files``) of a starting state that is
        the task's files alone, unpacked by ``shell`` with nothing run since: read at the
        first such state of the same files, then reused (None: read it now)."""
        start = self._start
        if where != "/app" or start is None or start[0] is not shell:
            return None
        if shell.commands != start[1]:
            return None
        files = self._start_hashes.get(start[2])
        if files is None:
            from agentenvs.envs.terminal.state import work_dir_files

            try:
                files = work_dir_files(shell, where)
            except SandboxError:
                return None
            if re.fullmatch(r"[0-9a-f]{32}  -", files) is None:
                return None  # timed out or cut short: not kept
            self._start_hashes[start[2]] = files
            self._start = (shell, shell.commands, start[2])  # the read changed nothing
        return files

    def freeze(
        self,
        task: TerminalTask,
        shell: ShellSession,
        reopen: Callable[[], ShellSession],
        stage: Any = None,
    ) -> LocalFrozen:
        """Stop every process of ``shell``'s sandbox, copy its writable dirs out and unpack
        them into a new sandbox (its session is ``reopen()``): the grader's. With a
        verifier ``stage``, that sandbox also shows the verifier's tree, its channel and
        the task's tests, read-only."""
        stopped, survivors = stop_all(shell)
        if survivors:
            raise SandboxError(f"cannot freeze the sandbox: {survivors} processes survived")
        state = _read_state(shell, limits=self.copy_limits)
        if stage is not None:
            from agentenvs.envs.terminal.verifier import tree

            python = self.verifier_python()
            self._binds = {
                self.verifier_tree(): tree.MOUNT,
                str(stage.channel): f"{tree.MOUNT}/channel",
                str(stage.tests): "/tests",
            }
        try:
            grader = reopen()
        finally:
            self._binds = {}
        rc, out = grader.control(
            "tar -x -p --no-same-owner --delay-directory-restore -C /", stdin=state, timeout=120
        )
        if rc != 0:
            raise SandboxError(f"cannot unpack the end state: {out.decode(errors='replace')}")
        frozen = LocalFrozen(grader, stopped, state)
        if stage is not None:
            frozen.python = python
        return frozen

    def read_dir(self, shell: ShellSession, where: str) -> bytes:
        """A snapshot's tar of ``where`` (a dir of the sandbox), read by the host's ``tar``
        through the namespace's root: a channel of its own (the shell's pipe carries the
        agent's output too), and nothing in the sandbox is run."""
        parent, name = where.rstrip("/").rsplit("/", 1)
        root = _namespace_root(shell) + (parent or "/")
        try:
            size = measure(root, [name], self.copy_limits, where=f"the files of {where}")
        except OSError as exc:
            raise SandboxError(f"cannot read {where}: {exc}") from exc
        return bounded_tar(
            [
                "--format=posix",
                "--pax-option=delete=atime,delete=ctime",
                "--sort=name",
                "--numeric-owner",
                "-C",
                root,
                name,
            ],
            f"cannot read {where}",
            self.copy_limits.archive_bytes(size),
            ok=(0,),
        )

    def verifier_declared(self, task: TerminalTask) -> tuple[str, dict[str, str], str]:
        """(PATH, declared variables, the agent's HOME) of the tests: the Dockerfile's ENV,
        then Harbor's ``[environment] env`` and ``[verifier] env``."""
        declared = {**dict(task.env), **dict(task.environment_env), **dict(task.verifier_env)}
        return declared.get("PATH", DEFAULT_PATH), declared, "/root"

    def verifier_python(self) -> str:
        """The interpreter the verifier runs: the host's ``python3`` (read-only inside)."""
        python = shutil.which("python3", path=DEFAULT_PATH)
        if python is None:
            raise SandboxError("no python3 on the host for the verifier")
        return python

    def verifier_tree(self) -> str:
        """The verifier's tree for this host's ``python3`` (laid out once per process)."""
        return local_tree(self.verifier_python())

    def close(self) -> None:
        self.box.close()


#: the writable dirs of a local sandbox that hold the task's end state
STATE_DIRS = ("app", "root", "tmp", "logs", "oracle", "solution")
#: every process of the namespace but pid 1, the supervisor and this script, SIGKILLed
#: until none is left (a fork bomb is outrun: each round kills what the last one missed);
#: each process is counted once; the agent's shell and the subshell holding it are not
_STOP_ALL = (
    "me=$$; sup=$PPID; n=0; left=1; round=0; seen=' '; "
    'while [ "$round" -lt 200 ]; do round=$((round + 1)); hit=0; '
    "for d in /proc/[0-9]*; do p=${d#/proc/}; "
    'case $p in 1|"$me"|"$sup") continue ;; esac; '
    'read -r s 2>/dev/null < "$d/stat" || continue; set -- ${s##*) }; '
    '[ "$1" = Z ] && continue; '
    'kill -s KILL "$p" 2>/dev/null || continue; hit=1; '
    'case $seen in *" $p "*) ;; *) seen="$seen $p "; n=$((n + 1)) ;; esac; done; '
    '[ "$hit" -eq 0 ] && { left=0; break; }; done; '
    # still some after 200 rounds: give the dying a second, then count the living
    '[ "$left" -eq 0 ] || { sleep 1; left=0; for d in /proc/[0-9]*; do p=${d#/proc/}; '
    'case $p in 1|"$me"|"$sup") continue ;; esac; '
    'read -r s 2>/dev/null < "$d/stat" || continue; set -- ${s##*) }; '
    '[ "$1" = Z ] || [ "$2" = "$me" ] || left=$((left + 1)); done; }; '
    'echo "stopped $n left $left"'
)


def _namespace_root(shell: ShellSession) -> str:
    """``/proc/<pid>/root`` of the sandbox's pid 1: its files as the host sees them."""
    proc = getattr(shell.proc, "_proc", None)
    if proc is None or proc.poll() is not None:
        raise SandboxError("the sandbox is gone")
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            init = int(f.read().split()[0])
    except (OSError, ValueError, IndexError) as exc:
        raise SandboxError("the sandbox has no process left") from exc
    return f"/proc/{init}/root"


def _read_state(
    shell: ShellSession,
    dirs: tuple[str, ...] = STATE_DIRS,
    limits: CopyLimits = DEFAULT_COPY_LIMITS,
) -> bytes:
    """A tar of the writable dirs of a frozen sandbox, read by the host's tar through the
    namespace's root (no symlink is followed; nothing in the sandbox is run), measured
    first: ``OverLimit`` past ``limits``, nothing copied."""
    root = _namespace_root(shell)
    try:
        size = measure(root, dirs, limits, where="the end state's files")
    except OverLimit:
        raise
    except OSError as exc:
        raise SandboxError(f"cannot read the sandbox's end state: {exc}") from exc
    return bounded_tar(
        [
            "--format=posix",
            "--numeric-owner",
            "--ignore-failed-read",
            # anchored: an unanchored pattern is tried at every '/' of every member's
            # path, which a tree thousands of dirs deep makes minutes of work
            "--anchored",
            "--exclude=./logs/verifier",
            "--exclude=logs/verifier",
            "-C",
            root,
            *dirs,
        ],
        "cannot read the sandbox's end state",
        limits.archive_bytes(size),
    )


def stop_all(shell: ShellSession) -> tuple[int, int]:
    """SIGKILL every process of ``shell``'s sandbox but its own plumbing: (stopped besides
    the agent's shell, 1 when some could not be stopped)."""
    bash = shell.bash_pid
    rc, out = shell.control(_STOP_ALL, timeout=120)
    lines = out.decode(errors="replace").strip().splitlines()
    words = lines[-1].split() if lines else []
    if rc != 0 or len(words) < 4 or words[0] != "stopped":
        raise SandboxError("cannot stop the sandbox's processes")
    # the agent's bash and the supervisor's subshell that holds it
    return max(0, int(words[1]) - (2 if bash else 0)), int(words[3])


_trees: dict[str, str] = {}
_trees_lock = threading.Lock()


def local_tree(python: str) -> str:
    """The verifier's tree for the host's ``python`` (once per process, in a dir named
    like pytest's copy: reaped at exit, swept by a later start if this one is killed)."""
    from agentenvs.envs.terminal.verifier import tree
    from agentenvs.sandbox._leftovers import owned_mkdtemp

    with _trees_lock:
        if python not in _trees:
            root = Path(owned_mkdtemp("agentenvs-pylib-"))
            atexit.register(shutil.rmtree, root, True)
            wheelhouse = offline.default_wheelhouse()
            laid = tree.lay_out(root / "v", python, wheelhouse if wheelhouse.is_dir() else None)
            _compile_for_sandbox(str(laid / "pylib"))  # bytecode for the host's python3
            tree.readable(laid)
            os.chmod(root, 0o755)
            _trees[python] = str(laid)
        return _trees[python]


class LocalFrozen:
    """The grader's view of a frozen local sandbox: a new sandbox holding the end state."""

    #: the verifier's interpreter as the sandbox sees it (set by ``freeze``)
    python: str = ""

    def __init__(self, shell: ShellSession, stopped: int, state: bytes) -> None:
        self.shell = shell
        self.stopped = stopped
        self._state = state

    def links(self) -> dict[str, str]:
        """The symlinks of the end state (path -> target), from the freeze's copy."""
        found: dict[str, str] = {}
        with tarfile.open(fileobj=io.BytesIO(self._state), mode="r:") as tar:
            for member in tar:
                if member.issym():
                    found["/" + member.name.lstrip("./")] = member.linkname
        return found

    def open(self) -> ShellSession:
        return self.shell

    def channel_dir(self, stage: Any) -> str:
        return str(stage.channel)

    def trusted(self, pid: int, maps: list[str] | None) -> str | None:
        """Why a process of this sandbox runs code the agent could have changed (None:
        it does not): its executable or a file it maps lies on one of the sandbox's
        writable mounts (everything else is the host's, read-only)."""
        root = f"/proc/{pid}/root"
        writable = set()
        # the tests are bound read-only from the host in the grader's sandbox
        for d in (*(d for d in TMPFS_MB if d != "/tests"), "/tmp", "/work", "/dev/shm"):
            with contextlib.suppress(OSError):
                writable.add(os.stat(root + d).st_dev)
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError as exc:
            return f"cannot read its executable: {exc}"
        if maps is None:
            return "cannot read the files it maps"
        for path in [exe, *maps]:
            if path.endswith(" (deleted)"):
                return f"it maps a deleted file {path}"
            try:
                dev = os.stat(root + path).st_dev
            except OSError as exc:
                return f"cannot check {path}: {exc.strerror}"
            if dev in writable:
                return f"it runs {path}, a file of the agent's"
        from agentenvs.envs.terminal.verifier.channel import same_file

        if not same_file(pid, exe, self.python):
            return f"its executable {exe} is not the verifier's interpreter"
        return None

    def fetch(self, path: str) -> bytes | None:
        """A regular file of the grader's sandbox now (None: absent or not a regular file)."""
        q = shlex.quote(path)
        rc, out = self.shell.control(
            f"if [ -f {q} ] && [ ! -L {q} ]; then head -c {RESULT_BYTES + 1} < {q} | "
            "base64 -w0; else echo -n -; fi",
            timeout=60,
        )
        text = out.strip()
        if rc != 0 or text == b"-":
            return None
        data = base64.b64decode(text)
        if len(data) > RESULT_BYTES:
            raise OverLimit("bytes", len(data), RESULT_BYTES, f"the verdict file {path}")
        return data

    def stop(self) -> int:
        """Stop what the tests left running (programs of the agent they started)."""
        return stop_all(self.shell)[0]

    def resume(self) -> ShellSession:
        """The session, with a new bash (``stop`` ended the old one)."""
        self.shell.restart()
        return self.shell
