"""The ``local`` sandbox: Linux namespaces through bubblewrap, no daemon needed.

Every command runs under ``bwrap --unshare-all`` (own user, pid, net, ipc, uts and mount
namespaces; only loopback networking) with a private host temp dir bound read-write at
``/work`` and a read-only view of the system (``/usr``, ``/etc``) and of the Python
runtime the project provisions for it (``runtime.py``: an interpreter, its stdlib and
numpy/pandas at pinned versions, at ``/opt/agentenvs/python``; never the host's
site-packages, the user's site or this package); home dirs and the host ``/tmp`` are not
mounted, ``/proc`` and ``/dev`` are new, and the environment is cleared. When the host process is root, bwrap itself is started
as the unprivileged ``nobody`` uid so that root-only host files stay unreadable even
where they are visible. rlimits come from a shell ``ulimit`` prelude (``run``) or from
the forking worker (``run_python_cases``, see ``harness.py``). Pid 1 of each namespace
is our own (``--as-pid-1``): a shell that runs the command as its child, or the case
worker, which signals from inside cannot kill. A timeout kills that pid 1, which takes
the whole pid namespace along, then bwrap's process group as a fallback.

Also on everything it starts: a seccomp filter (``_seccomp.py``) refusing the kernel
surface no test program needs (``ptrace``, ``bpf``, ``io_uring``, mounts, the keyring, ...),
``/dev/shm`` as a tmpfs of ``Limits.shm_mb`` and a private ``/dev/mqueue`` (with the IPC
namespace, nothing outlives the process tree). ``run_python_cases`` and
``spawn(scratch=True)`` see a fresh tmpfs of ``Limits.disk_mb`` at ``/work`` instead of the
host dir, so a program can neither leave files for the next one nor fill the host's disk.
The host dir is named after this process (pid and start time); a later process sweeps the
dirs of dead owners (``_leftovers.py``).

Where user namespaces are not permitted, constructing a sandbox raises ``SandboxError``
naming the likely cause; nothing ever runs unsandboxed.

Its rooms: ``_local_bwrap`` (finding and probing bwrap, the system's read-only view),
``_local_masks`` (what of the host's installs and task files is masked), ``_local_procs``
(the seccomp fd, killing a tree, reading the pipes); this module builds the command line
and runs commands, processes and test cases.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from agentenvs.core.errors import Fault, SandboxError
from agentenvs.sandbox import _cgroup, _files, _launcher, _leftovers, faults, harness, runtime
from agentenvs.sandbox._case_results import case_run, unanswered
from agentenvs.sandbox._local_bwrap import (
    _PATH,
    BWRAP_ENV,
    NOBODY,
    _hardening,
    _has_json_status,
    _host_ids,
    _probe,
    _reachable,
    _system_binds,
    _usable_bwrap,
    find_bwrap,
    local_available,
)
from agentenvs.sandbox._local_masks import _hidden_paths, hide_from_sandboxes
from agentenvs.sandbox._local_procs import (
    _CHUNK,
    _close_pipes,
    _kill_tree,
    _LineReader,
    _pid1,
    _pump,
    _seccomp_fd,
    _Status,
    _wait_exit,
)
from agentenvs.sandbox._local_warm import WarmServers, usable_cpus
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

__all__ = [
    "BWRAP_ENV",
    "NOBODY",
    "TEMP_PREFIX",
    "LocalSandbox",
    "find_bwrap",
    "hide_from_sandboxes",
    "local_available",
]

TEMP_PREFIX = "agentenvs-sbx-"
# startup allowance for a worker (bwrap + interpreter) on a loaded machine
_WORKER_START_S = 20.0
#: how long a worker that has answered every case may take to exit before it is killed
_REAP_S = 1.0


# ----------------------------------------------------------------------------- processes
#: a host file system with less free space than this is full
_FULL_BELOW = 1 << 20


def _free_bytes(path: str) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _cleanup(
    procs: set[subprocess.Popen[bytes]],
    killed: set[subprocess.Popen[bytes]],
    lock: threading.Lock,
    workdir: str,
    cgroup: _cgroup.SandboxCgroup | None,
) -> None:
    """Kill what still runs and remove the work dir and the cgroup; shared by close() and
    the finalizer."""
    with lock:
        live = list(procs)
        procs.clear()
        killed.update(live)
    for proc in live:
        _kill_tree(proc)
    if cgroup is not None:
        cgroup.remove()
    shutil.rmtree(workdir, ignore_errors=True)
    if os.path.lexists(workdir):
        with contextlib.suppress(Exception):
            _files.clear_dir(workdir)
            os.rmdir(workdir)


# ----------------------------------------------------------------------------- the sandbox
class LocalSandbox(Sandbox):
    """A bubblewrap sandbox around a private host temp dir, seen inside as ``/work``.

    Arguments:
        limits: rlimits and output caps for everything run inside.
        workdir_parent: where the host temp dir goes (default: the system temp dir).
        bwrap: the bwrap binary (default: ``find_bwrap()``).
        tmpfs: more private writable dirs, sandbox path -> size in MB (e.g. ``/app``);
            their contents live as long as one process's namespace.
        ro_binds: host paths shown read-only inside, host path -> sandbox path.
        warm_servers: at most this many warm fork servers (``spawn_warm``) at once; a
            caller beyond them waits for one to come back (``_local_warm``). Default
            ``"cpus"``: the CPUs this process may use; None: no cap, a cold server
            whenever none is idle.
        strict_spares: case workers (``run_python_cases``) kept started ahead, at most
            this many: a call takes one that has read nothing yet instead of starting
            bwrap and the worker itself. Once its answers are in, the used worker is
            ended and reaped on a thread of its own, which starts the next spare (both
            wait while other calls of the sandbox run). A spare is its own sandbox (pid
            1 of its own namespaces, a fresh ``/work``), so no program reaches it; 0: a
            fresh worker started by each call.
    """

    backend = "local"

    def __init__(
        self,
        limits: Limits = Limits(),  # noqa: B008 - frozen dataclass, safe as a default
        *,
        workdir_parent: str | os.PathLike[str] | None = None,
        bwrap: str | None = None,
        tmpfs: Mapping[str, int] | None = None,
        ro_binds: Mapping[str, str] | None = None,
        warm_servers: int | Literal["cpus"] | None = "cpus",
        strict_spares: int = 1,
    ) -> None:
        if (
            isinstance(strict_spares, bool)
            or not isinstance(strict_spares, int)
            or strict_spares < 0
        ):
            raise ValueError(f"strict_spares must be an integer >= 0, got {strict_spares!r}")
        if warm_servers == "cpus":
            warm_servers = usable_cpus()
        elif warm_servers is not None and (
            isinstance(warm_servers, bool) or not isinstance(warm_servers, int) or warm_servers < 1
        ):
            raise ValueError(
                f"warm_servers must be a positive integer, 'cpus' or None, got {warm_servers!r}"
            )
        self.limits = limits
        self._tmpfs = dict(tmpfs or {})
        self._ro_binds = dict(ro_binds or {})
        bwrap = bwrap or find_bwrap()
        ok, why = _probe(bwrap)
        if not ok:
            raise SandboxError(f"the local sandbox is not available: {why}")
        assert bwrap is not None
        self._ids = _host_ids()
        self._bwrap = _usable_bwrap(bwrap, self._ids)
        # the Python the project provisions for the sandbox (agentenvs.sandbox.runtime)
        self.runtime = runtime.sandbox_runtime()
        if not _reachable(self.runtime.prefix, self._ids):
            raise SandboxError(
                f"the sandbox's Python runtime at {self.runtime.prefix} cannot be entered by "
                f"uid {self._ids[0] if self._ids else os.getuid()}; set "
                f"${runtime.ROOT_ENV} to a directory every user can traverse"
            )
        self._python = self.runtime.sandbox_python
        parent = os.fspath(workdir_parent) if workdir_parent else tempfile.gettempdir()
        if not _reachable(parent, self._ids):
            who = f"uid {self._ids[0]}" if self._ids else "this user"
            raise SandboxError(
                f"workdir_parent {parent!r} cannot be entered by {who}, which bwrap runs as; "
                "choose a directory every user can traverse (e.g. the system temp dir)"
            )
        # named after this process: a later start sweeps it if this one is killed
        self.workdir = _leftovers.owned_mkdtemp(TEMP_PREFIX, parent)
        if self._ids is not None:
            os.chown(self.workdir, *self._ids)
        os.chmod(self.workdir, 0o700)
        self._procs: set[subprocess.Popen[bytes]] = set()
        #: each running process's bwrap status pipe, and those this sandbox killed itself
        self._status: dict[subprocess.Popen[bytes], _Status] = {}
        self._killed: set[subprocess.Popen[bytes]] = set()
        #: the OOM kills and refused forks of the sandbox's cgroup when each process started
        self._oom_at: dict[subprocess.Popen[bytes], int] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._close_lock = threading.Lock()
        # one cgroup for everything the sandbox runs (``_cgroup``), where the host allows
        self._cgroup, self.scope = _cgroup.make(limits.memory_mb, limits.max_processes)
        self._finalizer = weakref.finalize(
            self, _cleanup, self._procs, self._killed, self._lock, self.workdir, self._cgroup
        )
        self._warm = WarmServers(self, warm_servers)
        # case workers started ahead, each with the key of its command line; the threads
        # starting one
        self._spares_max = strict_spares
        self._spares: list[tuple[tuple[str, ...], subprocess.Popen[bytes]]] = []
        self._spare_starts: set[threading.Thread] = set()
        self._spare_lock = threading.Lock()
        # a spare arriving, and how many callers wait for one
        self._spare_came = threading.Condition(self._spare_lock)
        self._spare_waiters = 0
        # case workers whose call has returned, reaped on a thread of their own: each
        # stays in the sandbox's cgroup (its limits) until it is gone
        self._reaping: set[subprocess.Popen[bytes]] = set()
        self._reaped = threading.Condition()
        # calls under way, and the workers of calls over that wait for them to end
        self._running = 0
        self._held: list[tuple[subprocess.Popen[bytes], Any]] = []
        #: where the next spare starts: when a call's last answer is in (False), or when a
        #: call takes its worker (True, as before); whether a call waits for its worker's
        #: exit itself (True, as before) instead of leaving it to a reaping thread
        self._spare_at_call_start = False
        self._reap_on_call = False

    # -- command lines
    def _bwrap_argv(
        self,
        cwd: str,
        env: Mapping[str, str] | None,
        *,
        seccomp_fd: int | None,
        scratch: bool = False,
        ro_binds: Mapping[str, str] | None = None,
    ) -> list[str]:
        """bwrap's argv; ``scratch``: a fresh tmpfs at ``/work`` instead of the work dir;
        ``ro_binds``: more host paths shown read-only (after the sandbox's own, so one may
        cover a tmpfs dir)."""
        tmp_bytes = max(self.limits.max_file_mb, 16) << 20
        args = [
            self._bwrap,
            "--unshare-all",
            *_hardening(self._bwrap),
            "--die-with-parent",
            "--new-session",
            # no bwrap init: our own pid 1 (the shell below, the case worker) is reaped by
            # bwrap directly, where bwrap's init would be orphaned to the host's init
            "--as-pid-1",
            "--hostname",
            "sandbox",
            *_system_binds(),
            "--size",
            str(tmp_bytes),
            "--tmpfs",
            "/tmp",
            # /dev/shm would otherwise live in /dev's tmpfs, outside every limit
            "--size",
            str(self.limits.shm_mb << 20),
            "--tmpfs",
            "/dev/shm",
            "--mqueue",
            "/dev/mqueue",
        ]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        for path, size_mb in self._tmpfs.items():
            args += ["--size", str(int(size_mb) << 20), "--tmpfs", path]
        for host, path in [*self._ro_binds.items(), *(ro_binds or {}).items()]:
            args += ["--ro-bind", host, path]
        rt = self.runtime
        args += ["--ro-bind", rt.prefix, runtime.SANDBOX_PREFIX]
        if rt.site:
            args += ["--ro-bind", rt.site, rt.sandbox_site]
        args += ["--dir", "/opt/agentenvs/bin"]
        for name in ("python", "python3", f"python{rt.short_version}"):
            args += ["--symlink", self._python, f"/opt/agentenvs/bin/{name}"]
        # this host's Python installs and task data: dirs under an empty read-only tmpfs,
        # files under /dev/null
        for path in _hidden_paths():
            if os.path.isdir(path):
                args += ["--size", "4096", "--tmpfs", path, "--remount-ro", path]
            else:
                args += ["--ro-bind", "/dev/null", path]
        if scratch:
            args += ["--size", str(self.limits.disk_mb << 20), "--tmpfs", WORKDIR]
        else:
            args += ["--bind", self.workdir, WORKDIR]
        # the root tmpfs bwrap builds stays writable otherwise: freeze it, /tmp and /work stay rw
        args += ["--remount-ro", "/"]
        args += ["--uid", str(NOBODY), "--gid", str(NOBODY), "--chdir", cwd, "--clearenv"]
        base = {"PATH": _PATH, "HOME": WORKDIR, "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
        if self.runtime.libdir_needed:  # a shared libpython, found through its runpath on the host
            base["LD_LIBRARY_PATH"] = f"{runtime.SANDBOX_PREFIX}/lib"
        for k, v in {**base, **(env or {})}.items():
            args += ["--setenv", k, v]
        return [*args, "--"]

    def _ulimit_prelude(self) -> str:
        lim = self.limits
        # ulimit without -H/-S sets both, so the program cannot raise them back;
        # dash spells the process limit -p, bash -u; file size is in 512-byte blocks
        return (
            f"ulimit -t {lim.cpu_seconds} && ulimit -v {lim.memory_mb * 1024} && "
            f"ulimit -f {lim.max_file_mb * 2048} && ulimit -n {lim.max_open_files} && "
            f"{{ ulimit -u {lim.max_processes} 2>/dev/null || ulimit -p {lim.max_processes}; }} "
            "&& ulimit -c 0 || { echo 'sandbox: cannot set limits' >&2; exit 125; }\n"
        )

    def _popen(
        self,
        command: list[str],
        *,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        scratch: bool = False,
        merge_stderr: bool = False,
        pass_fds: tuple[int, ...] = (),
        ro_binds: Mapping[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``command`` under bwrap (with the seccomp filter, where there is one);
        ``pass_fds`` are inherited by the sandbox's pid 1. Fault when bwrap cannot be run."""
        self._check_open()
        kw: dict[str, Any] = {}
        if self._ids is not None:
            kw = {"user": self._ids[0], "group": self._ids[1], "extra_groups": []}
        filt = _seccomp_fd()
        # bwrap's json status (its pid 1's exit, or nothing when the sandbox never ran it)
        # on a pipe of the host's alone: bwrap does not pass it to the sandbox
        status_r, status_w = os.pipe()
        os.set_blocking(status_r, False)
        extra = (status_w, *pass_fds) if filt is None else (filt, status_w, *pass_fds)
        cg = self._cgroup
        if cg is not None:
            # joined by the child before it executes bwrap: nothing runs outside it
            kw["preexec_fn"] = cg.preexec()
        oom_at = cg.refusals() if cg is not None else 0
        try:
            argv = self._bwrap_argv(cwd, env, seccomp_fd=filt, scratch=scratch, ro_binds=ro_binds)
            if _has_json_status(self._bwrap):
                argv[1:1] = ["--json-status-fd", str(status_w)]
            # forked from the one thread that lives as long as the process: bwrap's
            # --die-with-parent follows the thread that forks it, not the process
            proc = _launcher.popen(
                [*argv, *command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                start_new_session=True,  # our handle on the whole tree: killpg(bwrap's pid)
                close_fds=True,
                pass_fds=extra,
                # bwrap's init is visible inside (/proc/1/environ): it must not carry our env
                env={"PATH": _PATH},
                **kw,
            )
        except OSError as exc:
            os.close(status_r)
            # bwrap was there when the sandbox was made: something removed or broke it
            raise Fault(
                f"the local sandbox cannot start bwrap: {exc}",
                kind="sandbox",
                evidence=f"starting {self._bwrap} failed ({type(exc).__name__}) before "
                "anything ran in the sandbox",
            ) from exc
        finally:
            os.close(status_w)
            if filt is not None:
                os.close(filt)
        with self._lock:
            self._procs.add(proc)
            self._status[proc] = _Status(status_r, json=_has_json_status(self._bwrap))
            self._oom_at[proc] = oom_at
        return proc

    def _end_fault(
        self,
        proc: subprocess.Popen[bytes],
        what: str,
        *,
        reported: frozenset[int] | None = None,
        stderr: str = "",
        wait_s: float = faults.LOCAL_EXIT_WAIT_S,
    ) -> Fault | None:
        """The Fault that ``proc``'s end is (``faults.local_fault``), once bwrap exited
        (waited for up to ``wait_s``); None: the program's, or this sandbox's own kill."""
        with self._lock:
            status = self._status.get(proc)
            ours = proc in self._killed
        if status is None or ours:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait_s)
        with self._lock:
            if proc in self._killed:  # reset or closed meanwhile
                return None
        if proc.returncode is None:
            return faults.local_stopped(_pid1(proc) or proc.pid, what)
        fault = faults.local_fault(
            proc.returncode,
            status.read() if status.json else None,
            what=what,
            reported=reported,
            stderr=stderr,
        )
        if fault is not None and self._cgroup is not None:
            with self._lock:
                before = self._oom_at.get(proc, 0)
            if self._cgroup.refusals() > before:
                # the kernel's OOM killer took processes of this sandbox's own cgroup, or
                # refused it a fork, while it ran: its processes filled the memory or the
                # process count the sandbox was given (bwrap itself may be what failed)
                return None
        return fault

    def _forget(self, proc: subprocess.Popen[bytes]) -> None:
        _kill_tree(proc)
        _close_pipes(proc)
        with self._lock:
            self._procs.discard(proc)
            self._killed.discard(proc)
            self._oom_at.pop(proc, None)
            status = self._status.pop(proc, None)
        if status is not None:
            status.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("the sandbox is closed")

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
        if isinstance(stdin, str):
            stdin = stdin.encode()
        if isinstance(command, str):
            command = ["/bin/sh", "-c", command]
        elif not command:
            raise ValueError("empty command")
        # the shell stays pid 1 (reaping orphans, never exec'd away) so the command itself
        # keeps ordinary signal semantics; when it ends, the namespace ends with it
        # pid 1 reports its command's status on a pipe before it exits with it: a status
        # above 128 that it did not report is pid 1's own death by a signal (see faults)
        report_r, report_w = os.pipe()
        os.set_blocking(report_r, False)
        if self._ids is not None:  # pid 1 reopens it through /proc as the sandbox's uid
            os.fchown(report_w, *self._ids)
        script = f'"$@"\ns=$?; echo "$s" >/proc/self/fd/{report_w}; exit "$s"'
        shell = [self._ulimit_prelude() + script, "sh", *command]
        start = time.monotonic()
        free_before = _free_bytes(self.workdir)
        try:
            proc = self._popen(["/bin/sh", "-c", *shell], cwd=cwd, env=env, pass_fds=(report_w,))
        except BaseException:
            os.close(report_r)
            raise
        finally:
            os.close(report_w)
        report = _Status(report_r)
        try:
            out, err, timed_out = _pump(proc, stdin, start + timeout, self.limits.max_output_bytes)
            rc = None if timed_out else proc.wait()
            if not timed_out:
                said = frozenset(int(w) for w in report.read().split() if w.isdigit())
                fault = self._end_fault(
                    proc, "a command", reported=said, stderr=err.text(), wait_s=0.0
                )
                if fault is not None:
                    raise fault
        finally:
            report.close()
            self._forget(proc)
        # once every process of the sandbox is gone (no file of it held open any more)
        self._check_workdir(free_before)
        return RunResult(
            returncode=rc,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            output_truncated=out.truncated or err.truncated,
            duration_s=time.monotonic() - start,
        )

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str = WORKDIR,
        scratch: bool = False,
        ro_binds: Mapping[str, str] | None = None,
    ) -> SandboxProcess:
        if not argv:
            raise ValueError("empty command")
        # as in run(): a shell as pid 1 under the rlimits, the process its child; killing
        # that pid 1 ends the namespace with every process started in it. pid 1 never
        # exits above 128 of itself (a child killed by a signal gives 128), so bwrap's 129
        # and up says pid 1 was killed by a signal, which nothing inside can send it
        shell = [
            self._ulimit_prelude() + '"$@"\ns=$?; [ "$s" -le 128 ] || s=128; exit "$s"',
            "sh",
            *argv,
        ]
        proc = self._popen(
            ["/bin/sh", "-c", *shell],
            cwd=cwd,
            env=env,
            scratch=scratch,
            merge_stderr=True,
            ro_binds=ro_binds,
        )
        return _LocalProcess(self, proc)

    def spawn_warm(
        self,
        preload: str,
        entry: str,
        imports: Sequence[str] = (),
        as_if_imported: Sequence[str] = (),
    ) -> SandboxProcess:
        """A process as ``spawn(scratch=True)`` gives one, forked from a warm server that
        has run ``preload`` and imported ``imports`` already: it calls ``entry(request_fd,
        answer_fd)`` of ``preload``, whose pipes are what ``write`` and ``read`` reach (fds
        0-2 are ``/dev/null``). ``as_if_imported``: modules it does not import but whose
        address space it reserves, so that the memory limit leaves it the room a server
        that imported them would. Nothing of one such process reaches the next (see
        ``forkserver.py``)."""
        self._check_open()
        return self._warm.spawn(preload, entry, imports, as_if_imported)

    def run_python_cases(
        self,
        source: str,
        cases: Sequence[PyCase],
        *,
        timeout_per_case: float = 6.0,
    ) -> Iterator[CaseRun]:
        self._check_open()
        return self._stream_cases(source, list(cases), timeout_per_case)

    # -- case workers started ahead
    def _worker_start(self) -> tuple[tuple[str, ...], list[str]]:
        """A case worker's command and its key: everything its bwrap command line is made
        of (limits, binds, masks, the worker's own text), so that a spare started for
        another is never taken."""
        command = harness.worker_argv(self._python)
        line = self._bwrap_argv(WORKDIR, None, seccomp_fd=None, scratch=True)
        return (*line, *command), command

    def _take_spare(self, key: tuple[str, ...]) -> subprocess.Popen[bytes] | None:
        """A spare started for ``key`` that still waits untouched, or None; every other
        spare (dead, or started for another key) is discarded."""
        with self._spare_came:
            # a spare on its way is nearer than a start of the caller's own: wait for it,
            # one caller for each (the others start their own at once)
            deadline = time.monotonic() + _WORKER_START_S
            while (
                not self._spares
                and len(self._spare_starts) > self._spare_waiters
                and not self._closed
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._spare_waiters += 1
                try:
                    self._spare_came.wait(left)
                finally:
                    self._spare_waiters -= 1
            spares, self._spares = self._spares, []
        took, keep, drop = None, [], []
        for k, proc in spares:
            if k != key or not self._spare_waits(proc):
                drop.append(proc)
            elif took is None:
                took = proc
            else:
                keep.append((k, proc))
        with self._spare_lock:
            self._spares[:0] = keep
        for proc in drop:
            self._forget(proc)
        return took

    @staticmethod
    def _spare_waits(proc: subprocess.Popen[bytes]) -> bool:
        """Still running, and silent: a worker says nothing before it has read a program,
        so anything on its stdout (its end, closed) means it was killed or has exited."""
        assert proc.stdout is not None
        if proc.poll() is not None:
            return False
        poll = select.poll()
        poll.register(proc.stdout.fileno(), select.POLLIN)
        return not poll.poll(0)

    def _start_spares(self, key: tuple[str, ...], command: list[str]) -> None:
        """Start spares in the background up to ``strict_spares``."""
        with self._spare_lock:
            want = self._spares_max - len(self._spares) - len(self._spare_starts)
            if self._closed or want <= 0:
                return
            for _ in range(want):
                t = threading.Thread(
                    target=self._start_spare,
                    args=(key, command),
                    name="agentenvs-spare",
                    daemon=True,
                )
                self._spare_starts.add(t)
                t.start()

    def _start_spare(self, key: tuple[str, ...], command: list[str]) -> None:
        me = threading.current_thread()
        proc = None
        try:
            # through _popen like any worker: the launcher thread forks it, the cgroup
            # holds it, close() and the finalizer kill it
            proc = self._popen(command, scratch=True)
        except Exception:  # closed meanwhile, or bwrap failed: the next call starts its own
            pass
        finally:
            with self._spare_came:
                self._spare_came.notify_all()
                self._spare_starts.discard(me)
                keep = proc is not None and not self._closed
                if keep:
                    assert proc is not None
                    self._spares.append((key, proc))
        if proc is not None and not keep:
            self._forget(proc)

    def _drop_spares(self) -> None:
        """Wait for the spares being started, then kill every spare."""
        with self._spare_lock:
            starting = list(self._spare_starts)
        for t in starting:
            t.join(_WORKER_START_S)
        with self._spare_lock:
            spares, self._spares = self._spares, []
        for _, proc in spares:
            self._forget(proc)

    def _call_done(self, proc: subprocess.Popen[bytes] | None, spare: Any) -> bool:
        """A call is over. ``proc``: its worker, which has answered every case, to end
        (its input closed) and leave to a thread that starts the next spare (``spare``:
        its key and command, or None), waits for the worker's exit and kills what is left
        of it. While other calls still run, that waits until the last of them is over,
        so that neither a worker's exit nor a spare's start competes with them. False:
        the sandbox is closed (the caller forgets the worker itself)."""
        dropped: list[tuple[subprocess.Popen[bytes], Any]] = []
        with self._reaped:
            self._running -= 1
            closed = self._closed
            if closed:
                # the workers other calls left here are this call's to forget: close()
                # may have taken the list before they came
                dropped, self._held = self._held, []
            else:
                if proc is not None:
                    self._held.append((proc, spare))
                if self._running > 0:
                    return proc is not None
                ending, self._held = self._held, []
                self._reaping.update(p for p, _ in ending)
        if closed:
            for p, _ in dropped:
                self._forget(p)
            return False
        for p, sp in ending:
            assert p.stdin is not None
            with contextlib.suppress(OSError):
                p.stdin.close()  # end of input ends the worker
            threading.Thread(
                target=self._reap, args=(p, sp), name="agentenvs-reap", daemon=True
            ).start()
        return proc is not None

    def _reap(self, proc: subprocess.Popen[bytes], spare: Any) -> None:
        try:
            if spare is not None:
                # beside the worker's exit, no call's work: and on its way before the
                # worker counts as gone, so a call waiting for that waits for the spare
                # too, rather than starting a worker of its own
                self._start_spares(*spare)
            _wait_exit(proc, _REAP_S)
        finally:
            self._forget(proc)
            with self._reaped:
                self._reaping.discard(proc)
                self._reaped.notify_all()

    def _await_reaps(self) -> None:
        """Wait until every worker whose call had returned before now is gone: what such a
        worker still holds (its tmpfs ``/work`` is memory of the sandbox's cgroup) never
        takes from the call that follows."""
        with self._reaped:
            pending = set(self._reaping)
            # a worker is killed _REAP_S after its call, and the kill waits 12 s at most
            deadline = time.monotonic() + _REAP_S + 15.0
            while pending & self._reaping:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._reaped.wait(left)

    def _stream_cases(self, source: str, cases: list[PyCase], timeout: float) -> Iterator[CaseRun]:
        if not cases:
            return
        self._await_reaps()
        # a fresh tmpfs work dir per call: nothing of an earlier call (another episode,
        # another program) is there, and its size is capped in total. A spare is such a
        # worker started ahead, that has read nothing yet
        key, command = self._worker_start()
        proc = self._take_spare(key) if self._spares_max else None
        spare = proc is not None
        if proc is not None and self._cgroup is not None:
            # the cgroup's OOM kills and refused forks count from the call, not the start
            with self._lock:
                self._oom_at[proc] = self._cgroup.refusals()
        if proc is None:
            proc = self._popen(command, scratch=True)
        if self._spares_max and self._spare_at_call_start:
            self._start_spares(key, command)
        assert proc.stdin and proc.stdout and proc.stderr
        done = 0
        reader: _LineReader | None = None
        reaping = faulted = False
        with self._reaped:
            self._running += 1
        counted = True
        try:
            # the program and its first case in one write. One case ahead: the next
            # case's input waits in the pipe (kernel memory no case can reach; the worker
            # reads it only once the case before is over), so the host's round trip is
            # off the critical path
            first = harness.encode_header(source, timeout, self.limits)
            first += harness.encode_case(cases[0])
            reader = _LineReader(proc)
            reader.feed(first)
            ready = reader.next(_WORKER_START_S)
            if spare and ready is None and reader.ended:
                # the spare ended before it said ready (killed from outside while it
                # waited): nothing of the program ran, so a fresh worker takes the call
                reader.close()
                reader = None
                self._forget(proc)
                proc = self._popen(command, scratch=True)
                reader = _LineReader(proc)
                reader.feed(first)
                ready = reader.next(_WORKER_START_S)
            if ready is None or not ready.get("ready"):
                self._not_started(proc, reader)
            for i in range(len(cases)):
                if i + 1 < len(cases):
                    reader.feed(harness.encode_case(cases[i + 1]))
                # the worker enforces each timeout; this only guards against a stuck worker
                msg = reader.next(timeout + 5.0)
                if msg is None:
                    # ended (its output closed) or silent: killed or stopped from outside
                    # is a fault; anything else, e.g. a case that wrecked it, the program's
                    err = reader.err_tail.decode(errors="replace")
                    wait_s = faults.LOCAL_EXIT_WAIT_S if reader.ended else 0.0
                    fault = self._end_fault(
                        proc, "a program's test cases", stderr=err, wait_s=wait_s
                    )
                    if fault is not None:
                        raise fault
                    break
                run = case_run(msg)
                if i + 1 == len(cases) and not self._reap_on_call:
                    # every answer is in, so the worker's exit says nothing more: it is
                    # ended and left to a thread of its own before the last answer goes
                    # out, since a caller may stop there
                    spare_after = None
                    if self._spares_max and not self._spare_at_call_start:
                        spare_after = (key, command)
                    counted = False
                    reaping = self._call_done(proc, spare_after)
                yield run
                done += 1
            if done == len(cases) and not reaping:
                # end of input ends the worker; let bwrap end on its own
                with contextlib.suppress(OSError):
                    proc.stdin.close()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=_REAP_S)
            yield from unanswered(len(cases) - done)
        except Fault:
            # something outside is killing or stopping the sandbox's processes: the spares
            # go too, and the next call starts its own
            faulted = True
            self._drop_spares()
            raise
        finally:
            if reader is not None:
                reader.close()
            if not reaping:
                self._forget(proc)
            if counted:
                spare_after = None
                if self._spares_max and not self._spare_at_call_start and not faulted:
                    # the next spare starts once this call is over, not beside it
                    spare_after = (key, command)
                self._call_done(None, None)
                if spare_after is not None:
                    self._start_spares(*spare_after)

    def _not_started(self, proc: subprocess.Popen[bytes], reader: _LineReader) -> None:
        """Raise why the case worker did not say it was ready: nothing of the program has
        run yet (it is only compiled), so a sandbox that did not start is a Fault."""
        err = reader.err_tail.decode(errors="replace")
        if not reader.ended:
            fault = self._end_fault(proc, "the case worker", stderr=err, wait_s=0.0)
            _kill_tree(proc)
            raise fault or Fault(
                f"the case worker did not start within {_WORKER_START_S:.0f} s",
                kind="sandbox",
                evidence="it was silent; nothing of the program runs before it is ready "
                "(the program is only compiled)",
            )
        fault = self._end_fault(proc, "the case worker", stderr=err)
        if fault is not None:
            raise fault
        _kill_tree(proc)
        raise SandboxError(
            f"the case worker did not start: {err.strip() or f'exit status {proc.returncode}'}"
        )

    # -- files
    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        self._check_open()
        raw = data.encode() if isinstance(data, str) else data
        _files.write_file(self.workdir, path, raw, mode, owner=self._ids)

    def read_file(self, path: str) -> bytes:
        self._check_open()
        return _files.read_file(self.workdir, path)

    def snapshot_files(self) -> FilesSnapshot:
        self._check_open()
        return FilesSnapshot(files=_files.snapshot(self.workdir))

    def restore_files(self, snapshot: FilesSnapshot) -> None:
        self._check_open()
        _files.clear_dir(self.workdir)
        for path, (mode, data) in snapshot.files.items():
            _files.write_file(self.workdir, path, data, mode, owner=self._ids)

    def _check_workdir(self, free_before: int | None) -> None:
        """Fault when the host work dir was removed, or its file system filled by something
        other than the sandbox: the command's writes failed for a reason not its own."""
        if not os.path.isdir(self.workdir):
            raise Fault(
                "the local sandbox's host work dir was removed from outside",
                kind="sandbox",
                evidence=f"{self.workdir} is gone; the sandbox sees it only as its /work "
                "mount point, which it cannot remove",
            )
        free = _free_bytes(self.workdir)
        if free is None or free_before is None or free > _FULL_BELOW:
            return
        # the sandbox writes to that file system through its work dir alone: space gone
        # beyond all the work dir holds was taken by something else
        used = _files.tree_bytes(self.workdir)
        if free_before - free > used + _FULL_BELOW:
            raise Fault(
                "the file system of the local sandbox's host work dir was filled from outside",
                kind="sandbox",
                evidence=f"{free_before - free} bytes were taken while the command ran; the "
                f"work dir, the sandbox's only way to that file system, holds {used}",
            )

    def reset(self) -> None:
        self._check_open()
        self._kill_all()
        if not os.path.isdir(self.workdir):  # removed from outside: made anew
            os.makedirs(self.workdir, mode=0o700, exist_ok=True)
            if self._ids is not None:
                os.chown(self.workdir, *self._ids)
        _files.clear_dir(self.workdir)

    def _kill_all(self) -> None:
        # spares stay: they have read nothing of any episode
        with self._spare_lock:
            spares = {proc for _, proc in self._spares}
        with self._lock:
            live = [p for p in self._procs if p not in spares]
            self._procs.difference_update(live)
            # what this kills ends by our own hand: never a fault
            self._killed.update(live)
        for proc in live:
            _kill_tree(proc)

    def close(self) -> None:
        # a second caller waits until the first one's cleanup is done
        with self._close_lock:
            with self._reaped:
                self._closed = True
            self._drop_spares()
            self._warm.close()
            self._finalizer()
            # the workers still being reaped were killed with the rest: their threads end
            self._await_reaps()
            with self._reaped:
                held, self._held = self._held, []
            for proc, _ in held:
                self._forget(proc)


class _LocalProcess(SandboxProcess):
    """A spawned process: bwrap with its own pid namespace, read through a selector."""

    def __init__(self, box: LocalSandbox, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin and proc.stdout
        self._box = box
        self._proc = proc
        self._fd = proc.stdout.fileno()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._fd, selectors.EVENT_READ)
        self._eof = False
        self._killed = False

    @property
    def eof(self) -> bool:
        return self._eof

    def write(self, data: bytes) -> None:
        if self._killed:
            raise SandboxError("the process was killed")
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise SandboxError(f"the process has exited: {exc}") from exc

    def read(self, timeout: float) -> bytes:
        if self._eof or self._killed:
            return b""
        if not self._sel.select(max(timeout, 0.0)):
            return b""
        try:
            chunk = os.read(self._fd, _CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            self._eof = True
        return chunk

    def fault(self) -> Fault | None:
        if self._killed:
            return None
        # pid 1, the shell that runs the process, never exits above 128 by itself (spawn)
        return self._box._end_fault(self._proc, "a process", reported=frozenset())

    def kill(self) -> None:
        if self._killed:
            return
        self._killed = self._eof = True
        self._sel.close()
        self._box._forget(self._proc)
