"""The sandbox interface every backend implements (local namespaces, Docker).

A sandbox owns a private writable work dir, runs commands in it with a wall-clock
timeout and resource limits, reads and writes its files, snapshots and restores them,
and runs a Python program against many test cases through a warm worker that forks per
case (``run_python_cases``), so a case does not pay an interpreter start.

Closing is idempotent and also happens at exit; nothing is left behind.

A failure that is not the program's (the sandbox killed, stopped or removed from outside, a
sandbox that cannot start, an engine that fails) raises
:class:`~agentenvs.core.errors.Fault` out of ``run``, ``run_python_cases`` and ``spawn``
(and ``SandboxProcess.fault`` says it), never an outcome; the rules are in
``agentenvs.sandbox.faults``. What the program does (its timeout, limits, crash, exit) stays
an outcome.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from agentenvs.core.errors import Fault

#: where the work dir appears inside every sandbox
WORKDIR = "/work"


@dataclass(frozen=True)
class Limits:
    """Resource limits for everything a sandbox runs (per process unless said otherwise)."""

    cpu_seconds: int = 10
    memory_mb: int = 1024
    max_processes: int = 64
    max_file_mb: int = 64
    max_open_files: int = 256
    #: stdout and stderr are each cut to this many bytes (the result says so)
    max_output_bytes: int = 1 << 20
    #: the work dir of ``run_python_cases`` (and of every Docker sandbox): a tmpfs of this
    #: size in total, not only per file
    disk_mb: int = 512
    #: ``/dev/shm`` (POSIX shared memory), a tmpfs of this size
    shm_mb: int = 64


@dataclass(frozen=True)
class RunResult:
    """The outcome of one command."""

    returncode: int | None  # None when killed for the timeout
    stdout: str
    stderr: str
    timed_out: bool = False
    #: stdout or stderr was cut at Limits.max_output_bytes
    output_truncated: bool = False
    duration_s: float = 0.0


@dataclass(frozen=True)
class PyCase:
    """One test case for ``run_python_cases``.

    ``kind="stdin"``: the program runs as a script with ``stdin`` as its standard input.
    ``kind="call"``: after the program is loaded, ``func`` is called with ``args`` (JSON
    values); when the program defines ``class Solution`` with that method, the method of
    a fresh ``Solution()`` is called instead.
    """

    kind: Literal["stdin", "call"]
    stdin: str = ""
    func: str = ""
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class CaseRun:
    """What one case did; comparing it with the expected output is the caller's job."""

    stdout: str
    stderr: str = ""
    #: the JSON-encodable return value of a ``call`` case (None for ``stdin`` cases)
    value: Any = None
    #: None on a clean run, else "timeout", "memory", "output limit", "crashed: <how>",
    #: "exception: <type>: <message>", "compile error: <message>", "worker died"
    error: str | None = None
    duration_s: float = 0.0


@dataclass(frozen=True)
class FilesSnapshot:
    """The files of a work dir: relative path -> (mode, bytes); picklable, self-contained."""

    files: Mapping[str, tuple[int, bytes]] = field(default_factory=dict)


class SandboxProcess(abc.ABC):
    """A long-lived process in a sandbox, driven over pipes (from ``Sandbox.spawn``).

    Its stderr is merged into its stdout, as a terminal shows both. It is killed, with
    everything it started, by ``kill()``, ``close()``, and the sandbox's reset or close.
    """

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Write all of ``data`` to its stdin (SandboxError once the process is gone)."""

    @abc.abstractmethod
    def read(self, timeout: float) -> bytes:
        """Output that arrives within ``timeout`` seconds: b"" when none did, or at EOF."""

    @property
    @abc.abstractmethod
    def eof(self) -> bool:
        """Its output has ended (the process exited, or was killed)."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Kill it and what it started; idempotent."""

    def fault(self) -> Fault | None:
        """Once its output has ended (or a write failed): the Fault that its end was, when
        that was not its own doing (its sandbox killed or stopped from outside, a sandbox
        that never started it, an engine that failed; see ``agentenvs.sandbox.faults``);
        None when it ended by itself, by what it ran, or by ``kill()``. Ask before
        ``kill()``, which ends the evidence."""
        return None

    def close(self) -> None:
        self.kill()

    def __enter__(self) -> SandboxProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Sandbox(abc.ABC):
    """One isolated work dir and the means to run things in it."""

    backend: ClassVar[str]
    limits: Limits

    @abc.abstractmethod
    def run(
        self,
        command: Sequence[str] | str,
        *,
        stdin: bytes | str = b"",
        timeout: float = 10.0,
        env: Mapping[str, str] | None = None,
        cwd: str = WORKDIR,
    ) -> RunResult:
        """Run ``command`` (argv, or a string for ``/bin/sh -c``) in the sandbox."""

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str = WORKDIR,
        scratch: bool = False,
    ) -> SandboxProcess:
        """Start ``argv`` as a long-lived process with stdin/stdout pipes (a shell, a REPL).

        It runs under the sandbox's limits (no wall-clock timeout: the caller reads with
        its own timeouts and kills it) until it exits or is killed.

        ``scratch=True`` runs it as ``run_python_cases`` runs a call: in a fresh, empty
        work dir of its own (``Limits.disk_mb`` in total), with nothing of the sandbox's
        files visible and everything it made (files, processes, IPC objects) gone once
        it is killed. For untrusted programs that must not leave anything for the next.
        """
        raise NotImplementedError(f"the {self.backend} backend cannot spawn processes")

    @abc.abstractmethod
    def run_python_cases(
        self,
        source: str,
        cases: Sequence[PyCase],
        *,
        timeout_per_case: float = 6.0,
    ) -> Iterator[CaseRun]:
        """Run ``source`` on each case in order, yielding results as they finish.

        One warm worker per call forks per case; each case has its own timeout and
        cannot see another's effects. Each case's input enters the sandbox only when
        that case runs, and results come back on a channel the program cannot write
        while it runs (see ``harness``). The call runs in a fresh, empty work dir of its
        own (``Limits.disk_mb`` in total) with fresh ``/tmp`` and ``/dev/shm``: files
        persist between the cases of one call and nothing persists after it; the
        sandbox's own work dir (``write_file``, ``run``) is not visible to it. Closing
        the iterator early stops the worker (early stop on the first failure costs
        nothing more).
        """

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        """Write a file under the work dir (``path`` relative to it)."""

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes:
        """Read a file under the work dir."""

    @abc.abstractmethod
    def snapshot_files(self) -> FilesSnapshot:
        """Every regular file under the work dir."""

    @abc.abstractmethod
    def restore_files(self, snapshot: FilesSnapshot) -> None:
        """Make the work dir hold exactly ``snapshot``'s files."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Kill what runs and empty the work dir, ready for reuse (pools call this)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release everything; idempotent, also run at interpreter exit."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
