"""The ``docker`` sandbox backend: containers from ``sandboxes/`` driven by the Docker SDK.

Every container runs with no network (``network_mode="none"``), a read-only root file
system, tmpfs at ``/work`` (the work dir) and ``/tmp``, no capabilities, no new
privileges, memory/pids/CPU limits and rlimits from :class:`Limits`. Its main process is
an idle ``sleep`` under Docker's init (which reaps orphans); everything the sandbox runs
is exec'd as the unprivileged user ``sandbox`` (uid 1000), so ``kill -9 -1`` as that user
ends every process a run left behind while the container itself lives on.

Speed: commands go through exec instances whose output is read from a hijacked
connection to the engine (no CLI process per run), and containers come from a warm
:class:`DockerPool`: closing a pooled sandbox resets its container (kill processes, wipe
``/work`` and ``/tmp``) and keeps it for the next sandbox. Pools remove their containers
at ``close()`` and at exit; containers carry the label ``agentenvs.pool=<pid>`` so
:func:`sweep_orphans` can remove those of dead processes.

The module is split along its seams: ``_docker_engine`` (the SDK client, hijacked
execs, the orphan sweep), ``_docker_container`` (one container: options, exec, reset),
``docker_pool`` (the warm pool) and this file (the ``Sandbox`` itself); the names of all
of them are importable from here.

Images are built offline by ``sandboxes/build_images.sh`` (debootstrap + ``docker
import``); ``python -m agentenvs.sandbox.docker check`` says whether this machine can
run the backend, ``... sweep`` removes orphaned containers.
"""

from __future__ import annotations

import io
import posixpath
import shlex
import tarfile
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

from agentenvs.core.errors import Fault, SandboxError, ServiceUnavailable
from agentenvs.sandbox import faults
from agentenvs.sandbox._case_results import case_run, read_answer, unanswered
from agentenvs.sandbox._docker_container import (
    _KILL_ALL,
    MEMORY_SLACK_MB,
    PIDS_SLACK,
    TMP_TMPFS_MB,
    UID_BASE,
    WORK_TMPFS_MB,
    WRITABLE,
    _Container,
    container_options,
)
from agentenvs.sandbox._docker_engine import (
    DEFAULT_IMAGE,
    HOST_LABEL,
    POOL_LABEL,
    _client,
    _docker_module,
    _engine_address,
    docker_available,
    sweep_orphans,
)
from agentenvs.sandbox._docker_exec import _Deadline, _Exec, _wait_exec
from agentenvs.sandbox._files import (
    DEFAULT_COPY_LIMITS,
    OverLimit,
    measure_command,
    read_measure,
    split_path,
)
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
from agentenvs.sandbox.docker_pool import RESET_WAIT_S, DockerPool

__all__ = [
    "CASE_SLACK_S",
    "CASE_START_S",
    "DEFAULT_IMAGE",
    "HOST_LABEL",
    "MEMORY_SLACK_MB",
    "PIDS_SLACK",
    "POOL_LABEL",
    "RESET_WAIT_S",
    "TMP_TMPFS_MB",
    "UID_BASE",
    "WORK_TMPFS_MB",
    "DockerPool",
    "DockerProcess",
    "DockerSandbox",
    "container_options",
    "docker_available",
    "main",
    "sweep_orphans",
    # used by the Terminal-Bench and MariaDB containers
    "_Container",
    "_client",
    "_docker_module",
    "_engine_address",
]

#: seconds for the test-case worker to start and compile, and per case beyond its timeout
#: (the worker's own kill-and-reap of a case's leftovers may take up to 5 s)
CASE_START_S = 30.0
CASE_SLACK_S = 10.0


# Runs argv with an inner time limit (a backstop for the host's deadline), then kills
# whatever it left behind (background jobs, daemons) and exits with argv's status. `kill`
# as the sandbox's uid cannot reach the root-owned init, and never signals its caller.
# $0 is the inner limit; a `run` puts rlimits before it (see DockerSandbox._prelude).
_RUN_WRAPPER = (
    'timeout -s KILL "$0" "$@"; rc=$?; '
    "i=0; while kill -9 -1 2>/dev/null && [ $i -lt 200 ]; do i=$((i+1)); done; "
    "exit $rc"
)
# A scratch process's fresh dir of its own as cwd, HOME and TMPDIR (the case worker makes
# its own: see ``harness.main``).
_SCRATCH_DIR = (
    'd=$(mktemp -d /tmp/cases.XXXXXXXX) && cd "$d" || exit 125; export HOME="$d" TMPDIR="$d"; '
)
# File access inside the container ($1: a path relative to /work, already checked for
# `..`): symlinks are refused as the local backend refuses them (a path must resolve to
# itself). Exit 3 symlink, 4 missing, 5 not a regular file, 6 bad directory.
_NO_LINKS = '[ "$(realpath -m -- "$1")" = "$(realpath -m -s -- "$1")" ] || exit 3; '
_READ = (
    'p=/work/$1; set -- "$p"; '
    + _NO_LINKS
    + '[ -e "$p" ] || exit 4; [ -f "$p" ] || exit 5; exec cat -- "$p"'
)
# written to a temp file renamed into place, which replaces (never follows) what is there
_WRITE = (
    'p=/work/$1; m=$2; d=$(dirname -- "$p"); set -- "$d"; '
    + _NO_LINKS
    + 'mkdir -p -- "$d" 2>/dev/null || exit 6; t="$d/.agentenvs-$$.tmp"; '
    + 'cat > "$t" && chmod "$m" "$t" && mv -fT -- "$t" "$p" || { rm -f -- "$t"; exit 5; }'
)
_SNAPSHOT = "cd /work && find . -mindepth 1 -type f -print0 | tar -cf - --null --no-recursion -T -"
_RESTORE = (
    "chmod -R u+rwX /work 2>/dev/null; find /work -mindepth 1 -delete && "
    "tar -C /work -xpf - --no-same-owner"
)


# --------------------------------------------------------------------------- sandbox


def _answer_cap(max_output: int) -> int:
    """The longest answer line the worker writes: stdout and stderr of ``max_output`` bytes
    each, every byte written as a 6-byte ``\\uXXXX`` at worst, and a value of the same size
    at 3 bytes a byte (non-ASCII text), with room to spare."""
    return 16 * max_output + (1 << 20)


def _work_path(path: str) -> str:
    """``path`` relative to the work dir (``a/b`` or ``/work/a/b``); SandboxError if it
    leaves it (the same rule as the local backend's)."""
    return "/".join(split_path(path))


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class DockerProcess(SandboxProcess):
    """A long-lived exec in a container, on a hijacked connection (stderr merged).

    ``kill`` ends every process of the exec's user in the container (the exec's pid is
    not known inside); a sandbox's own container has that one user.
    """

    def __init__(
        self,
        box: _Container,
        argv: Sequence[str],
        *,
        user: str,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        on_kill: Callable[[], None] | None = None,
        on_fault: Callable[[BaseException | None], Fault | None] | None = None,
    ) -> None:
        self._box = box
        self._user = user
        self._on_kill = on_kill
        self._on_fault = on_fault
        self._ex: _Exec | None = _Exec(box, argv, user=user, env=env, workdir=workdir)
        self._eof = False
        self._error: BaseException | None = None

    @property
    def eof(self) -> bool:
        return self._eof

    def write(self, data: bytes) -> None:
        if self._ex is None:
            raise SandboxError("the process was killed")
        try:
            self._ex.write_now(data)
        except Exception as exc:
            self._error = exc
            raise

    def read(self, timeout: float) -> bytes:
        if self._ex is None or self._eof:
            return b""
        try:
            frame = self._ex.read(time.monotonic() + max(timeout, 0.0))
        except _Deadline:
            return b""
        except OSError as exc:  # the engine's connection failed: its end, to be judged
            self._error = exc
            frame = None
        if frame is None:
            self._eof = True
            return b""
        return frame[1]

    def fault(self) -> Fault | None:
        if self._ex is None or self._on_fault is None:
            return None
        return self._on_fault(self._error)

    def kill(self) -> None:
        ex, self._ex = self._ex, None
        self._eof = True
        if ex is None:
            return
        ex.close()
        if self._box.removed:
            return
        if self._on_kill is not None:
            self._on_kill()
            return
        api = self._box.client.api
        try:
            kill_id = api.exec_create(self._box.id, ["sh", "-c", _KILL_ALL], user=self._user)["Id"]
            api.exec_start(kill_id, detach=True)
            _wait_exec(api, kill_id)
        except Exception:  # the container is gone or going: nothing left to kill
            pass


class DockerSandbox(Sandbox):
    """A sandbox in a Docker container (see the module docstring for the isolation).

    ``pool``: a :class:`DockerPool` to take the container from and give it back to at
    ``close()``; None (the default) uses the process-wide pool of ``image``; False gives
    the sandbox a container of its own, removed at ``close()``.
    """

    backend = "docker"

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        image: str = DEFAULT_IMAGE,
        pool: DockerPool | Literal[False] | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.image = image
        if pool is None:
            pool = DockerPool.shared(image)
        elif pool is not False and pool.image != image:
            raise ValueError(f"pool serves image {pool.image!r}, not {image!r}")
        self._pool: DockerPool | None = pool or None
        self._own_client: Any = None
        self._closed = False
        self._box: _Container | None = None
        if self._pool is None:
            self._own_client = _client()
        try:
            self._adopt(self._new_container())
        except BaseException:
            if self._own_client is not None:
                self._own_client.close()
            raise

    def _new_container(self) -> _Container:
        if self._pool is not None:
            return self._pool.acquire(self.limits)
        return _Container(self._own_client, self.limits, self.image)

    def _adopt(self, box: _Container) -> None:
        """Make ``box`` the sandbox's container, given back at close or exit."""
        old = getattr(self, "_finalizer", None)
        if old is not None:
            old.detach()
        self._box = box
        self._finalizer = weakref.finalize(
            self, DockerSandbox._release, self._pool, box, self._own_client
        )

    @property
    def _prelude(self) -> str:
        # the same per-process rlimits as the local backend's; dash spells -u as -p
        lim = self.limits
        return (
            f"ulimit -t {lim.cpu_seconds} && ulimit -v {lim.memory_mb * 1024} && "
            f"ulimit -f {lim.max_file_mb * 2048} && ulimit -n {lim.max_open_files} && "
            f"{{ ulimit -u {lim.max_processes} 2>/dev/null || ulimit -p {lim.max_processes}; }} "
            "&& ulimit -c 0 || { echo 'sandbox: cannot set limits' >&2; exit 125; }; "
        )

    @property
    def container_id(self) -> str:
        return self._container().id

    def _container(self) -> _Container:
        if self._closed:
            raise SandboxError("the sandbox is closed")
        if self._box is None:  # the last one failed from outside: a new one
            try:
                box = self._new_container()
            except (SandboxError, ServiceUnavailable) as exc:
                # this sandbox had a container: an engine or image gone since is a fault
                raise faults.no_container(exc, self.image) from exc
            self._adopt(box)
        assert self._box is not None
        return self._box

    def _fault(self, box: _Container, what: str, exc: BaseException | None = None) -> Fault | None:
        """The Fault that a failure in ``box`` is (``faults.container_fault``); None: the
        program's, or this sandbox's own doing (closed, its container removed)."""
        if box.removed or self._closed:
            return None

        def probe() -> BaseException | None:
            try:
                rc, _, err, _, _ = box.exec(["true"], timeout=10)
            except Exception as failed:  # noqa: BLE001 - what failed is the evidence
                return failed
            return None if rc == 0 else SandboxError(f"a probe exited {rc}: {_decode(err)}")

        fault = faults.container_fault(
            box.client.api,
            box.id,
            what=what,
            started_at=box.started_at,
            pids_limit=box.pids_limit,
            exc=exc,
            probe=probe,
        )
        if fault is not None:
            self._drop(box)
        return fault

    def _drop(self, box: _Container) -> None:
        """After a fault: ``box`` is never used again (removed); the next use gets a new one."""
        if self._box is box:
            self._finalizer.detach()
            self._box = None
        if self._pool is not None:
            self._pool.drop(box)
        else:
            box.remove()

    def _exec(
        self, what: str, argv: Sequence[str], **kwargs: Any
    ) -> tuple[int | None, bytes, bytes, bool, bool]:
        """``_Container.exec``, with an engine failure or an exec that ended without an exit
        status (or by a signal) judged: the Fault it is, raised, or the result as it came."""
        box = self._container()
        try:
            result = box.exec(argv, **kwargs)
        except Exception as exc:
            fault = self._fault(box, what, exc)
            if fault is not None:
                raise fault from exc
            raise
        rc, timed_out = result[0], result[4]
        if not timed_out and (rc is None or rc > 128):
            fault = self._fault(box, what)
            if fault is not None:
                raise fault
        return result

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
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("empty command")
        if isinstance(stdin, str):
            stdin = stdin.encode()
        workdir = cwd if posixpath.isabs(cwd) else posixpath.join(WORKDIR, cwd)
        # cd in the shell rather than the exec's workdir: a missing dir is then a normal
        # error on stderr, not an engine failure
        where = shlex.quote(workdir)
        cd = f"cd -- {where} 2>/dev/null || {{ echo 'sandbox: no directory '{where} >&2; exit 126; }}; "
        wrapped = ["/bin/sh", "-c", cd + self._prelude + _RUN_WRAPPER, f"{timeout + 1:.3f}", *argv]
        start = time.monotonic()
        rc, out, err, truncated, timed_out = self._exec(
            "a command",
            wrapped,
            stdin=stdin,
            env=env,
            workdir=WORKDIR,
            timeout=timeout,
            max_output=self.limits.max_output_bytes,
        )
        duration = time.monotonic() - start
        if rc is not None and rc > 128 and rc - 128 < 65:
            rc = -(rc - 128)  # killed by a signal: subprocess's convention
        return RunResult(
            returncode=None if timed_out else rc,
            stdout=_decode(out),
            stderr=_decode(err),
            timed_out=timed_out,
            output_truncated=truncated,
            duration_s=duration,
        )

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str = WORKDIR,
        scratch: bool = False,
    ) -> SandboxProcess:
        if not argv:
            raise ValueError("empty command")
        box = self._container()
        if scratch:
            # the case uid (which cannot read /work) in a fresh dir of its own; killing
            # the process removes everything that uid made, or replaces the container
            wrapped = ["/bin/sh", "-c", _SCRATCH_DIR + self._prelude + 'exec "$@" 2>&1']
            return self._spawned(
                box,
                [*wrapped, "sh", *argv],
                user=box.case_user,
                env=env,
                on_kill=self._clean_scratch,
            )
        workdir = cwd if posixpath.isabs(cwd) else posixpath.join(WORKDIR, cwd)
        where = shlex.quote(workdir)
        cd = f"cd -- {where} 2>/dev/null || {{ echo 'sandbox: no directory '{where} >&2; exit 126; }}; "
        wrapped = ["/bin/sh", "-c", cd + self._prelude + 'exec "$@" 2>&1', "sh", *argv]
        return self._spawned(box, wrapped, user=box.user, env=env)

    def _spawned(self, box: _Container, argv: list[str], **kwargs: Any) -> DockerProcess:
        def judge(exc: BaseException | None) -> Fault | None:
            return self._fault(box, "a process", exc)

        try:
            return DockerProcess(box, argv, on_fault=judge, **kwargs)
        except Exception as exc:
            fault = judge(exc)
            if fault is not None:
                raise fault from exc
            raise

    def _clean_scratch(self) -> None:
        """Remove what the case uid left; a container where that fails is replaced."""
        if self._box is not None and not self._box.clean_uid(self._box.case_user):
            if self._fault(self._box, "a process's clean-up") is None:
                self._replace_container()

    def run_python_cases(
        self,
        source: str,
        cases: Sequence[PyCase],
        *,
        timeout_per_case: float = 6.0,
    ) -> Iterator[CaseRun]:
        return self._cases(source, list(cases), timeout_per_case)

    def _cases(
        self, source: str, cases: list[PyCase], timeout_per_case: float
    ) -> Iterator[CaseRun]:
        from agentenvs.sandbox import harness

        if not cases:
            return
        box = self._container()
        # The worker is the exec's own process (no shell or `timeout` around it holds the
        # exec's pipes): the only process of the case uid that holds the protocol, and it
        # is not dumpable, so a case can neither open its pipes through /proc nor trace
        # it. Its text goes in argv, so nothing in the sandbox can alter it between calls;
        # no rlimits on the worker itself: it sets them for each case it forks.
        argv = harness.worker_argv("python3")
        total = CASE_START_S + len(cases) * (timeout_per_case + CASE_SLACK_S)
        # a fresh dir of its own, an inner time limit (a backstop for the host's deadlines)
        # and, at its end, everything the case uid left removed (exit 0 only then)
        header = harness.encode_header(
            source,
            timeout_per_case,
            self.limits,
            scratch="/tmp",
            deadline_s=total,
            clean_up=WRITABLE,
            deny_tracing=True,
        )
        what = "a program's test cases"
        try:
            ex = _Exec(box, argv, user=box.case_user, workdir="/tmp")
        except Exception as exc:
            fault = self._fault(box, what, exc)
            if fault is not None:
                raise fault from exc
            raise
        faulted = False
        done = 0
        ready = ended = False
        clean: bool | None = None
        stderr = bytearray()
        line_cap = _answer_cap(self.limits.max_output_bytes)
        pending = bytearray()

        def next_line(deadline: float) -> bytes | None:
            """The worker's next answer line (b"" for one over the cap, whose rest is
            dropped), or None: it ended or went silent."""
            nonlocal ended, stderr
            seen = 0  # bytes of pending known to hold no newline
            over = False
            while (nl := pending.find(b"\n", seen)) < 0:
                seen = len(pending)
                if seen > line_cap:
                    over = True
                    pending.clear()
                    seen = 0
                try:
                    frame = ex.read(deadline)
                except _Deadline:
                    return None
                if frame is None:
                    ended = True
                    return None
                stream, data = frame
                if stream != 1:
                    stderr = (stderr + data)[-4096:]
                    continue
                pending.extend(data)
            line = bytes(pending[:nl])
            del pending[: nl + 1]
            return b"" if over else line

        try:
            ex.queue(header)
            # one case ahead: the next case's input waits in the exec's stdin pipe, which
            # only the worker reads, once the case before is over
            ex.queue(harness.encode_case(cases[0]))
            line = next_line(time.monotonic() + CASE_START_S)
            msg = None if line is None else read_answer(line)
            ready = bool(msg and msg.get("ready") is True)
            for i in range(len(cases)) if ready else ():
                if i + 1 < len(cases):
                    ex.queue(harness.encode_case(cases[i + 1]))
                # due within one case's timeout plus the worker's own clean-up of it
                line = next_line(time.monotonic() + timeout_per_case + CASE_SLACK_S)
                if line is None:
                    break
                done += 1
                # a line that is not an answer is this case's failure, never the call's
                yield case_run(read_answer(line))
            if done < len(cases):
                # the worker ended, went silent or never started: its container stopped,
                # removed or paused from outside, or an engine that failed, is a fault; a
                # worker a case killed (they share a uid) is the program's
                fault = self._fault(box, what)
                if fault is not None:
                    faulted = True
                    raise fault
            if done == len(cases):
                # end of input ends the worker, which then cleans up after its uid
                ex.end_input()
                while not ended and next_line(time.monotonic() + CASE_SLACK_S + 30) is not None:
                    pass
                rc = ex.exit_code() if ended else None
                # only the worker's own 0 says its clean-up was complete: a worker a case
                # killed (137) or stopped never ran it
                clean = rc == 0
        except (Fault, GeneratorExit):
            raise
        except Exception as exc:  # the engine's connection or an exec request failed
            fault = self._fault(box, what, exc)
            if fault is None:
                raise
            faulted = True
            raise fault from exc
        finally:
            ex.close()
            # a faulted container is dropped already: nothing in it is used again
            if not faulted and not clean:
                # early stop, a worker that died, hung or did not finish its clean-up
                clean = box.clean_uid(box.case_user)
            if not faulted and not clean and self._box is box:
                # what the call left cannot be removed: the next call gets a new container
                self._replace_container()
        if not ready:
            why = _decode(bytes(stderr)).strip() or "no answer"
            raise SandboxError(f"the case worker did not start: {why}")
        yield from unanswered(len(cases) - done)

    # -- files

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        rel = _work_path(path)
        if isinstance(data, str):
            data = data.encode()
        rc, _, err, _, _ = self._exec(
            "a file write",
            ["sh", "-c", _WRITE, "sh", rel, f"{mode & 0o777:o}"],
            stdin=data,
            workdir=WORKDIR,
        )
        self._file_status(rc, err, path)

    def read_file(self, path: str) -> bytes:
        rel = _work_path(path)
        rc, out, err, _, _ = self._exec(
            "a file read", ["sh", "-c", _READ, "sh", rel], workdir=WORKDIR
        )
        self._file_status(rc, err, path)
        return out

    @staticmethod
    def _file_status(rc: int | None, err: bytes, path: str) -> None:
        if rc == 0:
            return
        if rc == 3:
            raise SandboxError(f"path {path!r} goes through a symlink")
        if rc == 4:
            raise FileNotFoundError(path)
        if rc == 5:
            raise SandboxError(f"{path!r} is not a regular file")
        if rc == 6:
            raise SandboxError(f"a directory of {path!r} is not a plain directory")
        raise SandboxError(f"file {path!r}: exit {rc}: {_decode(err).strip()}")

    def snapshot_files(self) -> FilesSnapshot:
        # measured in the container first, the archive then cut at what was measured:
        # neither holes nor growth reach this process past the copy limits
        limits, what = DEFAULT_COPY_LIMITS, "the work dir's files"
        rc, out, err, _, _ = self._exec(
            "a snapshot", ["sh", "-c", measure_command("/work", limits)], timeout=60
        )
        size = read_measure(out, limits, what)
        cap = limits.archive_bytes(size) if size is not None else limits.max_bytes
        rc, out, err, _, _ = self._exec(
            "a snapshot",
            ["sh", "-c", f"{{ {_SNAPSHOT} || echo __AE_TAR_FAILED >&2; }} | head -c {cap + 1}"],
            timeout=60,
        )
        if rc != 0 or b"__AE_TAR_FAILED" in err:
            raise SandboxError(f"snapshot failed (exit {rc}): {_decode(err).strip()}")
        if len(out) > cap:
            raise OverLimit("bytes", len(out), cap, f"{what} (grown while copied)")
        files: dict[str, tuple[int, bytes]] = {}
        with tarfile.open(fileobj=io.BytesIO(out), mode="r:") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                fobj = tar.extractfile(member)
                assert fobj is not None
                files[posixpath.normpath(member.name)] = (member.mode & 0o777, fobj.read())
        return FilesSnapshot(files)

    def restore_files(self, snapshot: FilesSnapshot) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as tar:
            for path, (mode, data) in sorted(snapshot.files.items()):
                info = tarfile.TarInfo(_work_path(path))
                info.size = len(data)
                info.mode = mode & 0o777
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(data))
        rc, _, err, _, _ = self._exec(
            "a restore", ["sh", "-c", _RESTORE], stdin=buf.getvalue(), timeout=60
        )
        if rc != 0:
            raise SandboxError(f"restore failed (exit {rc}): {_decode(err).strip()}")

    # -- life cycle

    def _replace_container(self) -> None:
        """Give the container back (the pool resets or removes it) and take another."""
        old = self._container()
        self._finalizer.detach()
        self._box = None
        if self._pool is not None:
            self._pool.release(old)
        else:
            old.remove()
        self._adopt(self._new_container())

    def reset(self) -> None:
        box = self._container()
        if not box.reset():
            fault = self._fault(box, "a reset")
            if fault is not None:
                raise fault
            raise SandboxError(f"cannot reset container {box.short}")

    @staticmethod
    def _release(pool: DockerPool | None, box: _Container | None, client: Any) -> None:
        if box is None:
            return
        if pool is not None:
            pool.release(box)
        else:
            box.remove()
            if client is not None:
                client.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        box, self._box = self._box, None
        if box is not None:
            self._finalizer()
        elif self._own_client is not None:  # its container was dropped after a fault
            self._own_client.close()

    def __repr__(self) -> str:
        state = self._box.short if self._box else "closed"
        return f"DockerSandbox(image={self.image!r}, container={state})"


def main(argv: Sequence[str] | None = None) -> int:
    """``check``: can this machine run the backend? ``sweep``: remove orphaned containers."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m agentenvs.sandbox.docker")
    parser.add_argument("action", choices=["check", "sweep"])
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    args = parser.parse_args(argv)
    if args.action == "check":
        ok, why = docker_available(args.image)
        print(("ok: " if ok else "unavailable: ") + why)
        return 0 if ok else 1
    print(f"removed {sweep_orphans()} orphaned container(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
