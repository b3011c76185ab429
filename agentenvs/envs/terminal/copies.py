"""Bounded copies of a Terminal-Bench sandbox's files into the host.

Every read of the agent's end state into this process or onto the host's disk (the
freeze before safe grading, snapshots and so restores and forks, the verdict's files) is
measured before a byte is copied, and refused past ``CopyLimits`` (``OverLimit``, the
agent's doing): on the local runtime by an fd walk of the namespace's root from the host
(``agentenvs.sandbox._files.measure``), on Docker by ``find`` in the container. Sizes are
apparent sizes (a sparse file's holes count in full), and the copies themselves are
sparse-aware (``tar --sparse``) and cut where they pass what was measured (a file that grew
meanwhile), so neither holes nor growth can expand past the cap.

The defaults (``DEFAULT_COPY_LIMITS``): 256 MiB apparent in all, 100,000 entries, 64 dirs
deep; the largest bundled task's end state is far below each (see ``docs/terminal.md``).
The verdict's own files (Harbor's reward files, the offline log) are read up to
``RESULT_BYTES`` each.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading

from agentenvs.core.errors import SandboxError
from agentenvs.sandbox._files import (
    DEFAULT_COPY_LIMITS,
    CopyLimits,
    OverLimit,
    TreeSize,
    measure,
    measure_command,
    read_measure,
)

__all__ = [
    "DEFAULT_COPY_LIMITS",
    "RESULT_BYTES",
    "CopyLimits",
    "OverLimit",
    "TreeSize",
    "bounded_tar",
    "measure",
    "measure_command",
    "read_measure",
]

#: the most of one verdict file (a reward file, the offline log) the grader reads
RESULT_BYTES = 1 << 20


def bounded_tar(args: list[str], what: str, limit: int, ok: tuple[int, ...] = (0, 1)) -> bytes:
    """``tar -c --sparse ARGS`` by the host's tar (nothing in the sandbox is run), its
    archive read up to ``limit`` bytes: past it (files that grew after they were
    measured) the tar is killed and ``OverLimit`` raised."""
    tar = shutil.which("tar", path="/usr/bin:/bin")
    if tar is None:
        raise SandboxError("no tar on the host")
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                [tar, "-c", "--sparse", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        except OSError as exc:
            raise SandboxError(f"{what}: {exc}") from exc
        timer = threading.Timer(300, proc.kill)
        timer.start()
        chunks: list[bytes] = []
        got = 0
        try:
            assert proc.stdout is not None
            while chunk := proc.stdout.read1(1 << 20):
                got += len(chunk)
                if got > limit:
                    proc.kill()
                    raise OverLimit("bytes", got, limit, f"{what}: the files (grown while copied)")
                chunks.append(chunk)
        finally:
            timer.cancel()
            if proc.stdout is not None:
                proc.stdout.close()
            rc = proc.wait()
        err.seek(0)
        message = err.read()[-500:].decode(errors="replace")
    if rc not in ok or not got:
        raise SandboxError(f"{what}: {message or f'tar ended with status {rc}'}")
    return b"".join(chunks)
