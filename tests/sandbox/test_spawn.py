"""``Sandbox.spawn``: a long-lived process driven over pipes, on every backend."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from agentenvs.core.errors import SandboxError
from agentenvs.sandbox import Sandbox


def read_until(proc, marker: bytes, timeout: float = 60.0) -> bytes:
    out = b""
    end = time.monotonic() + timeout
    while marker not in out and time.monotonic() < end and not proc.eof:
        out += proc.read(0.2)
    return out


def test_spawn_keeps_state_between_writes(backend: Sandbox) -> None:
    proc = backend.spawn(["bash", "--noprofile", "--norc", "-s"])
    try:
        proc.write(b"cd /tmp && X=42\n")
        proc.write(b'echo "$PWD $X"; echo err >&2; echo END\n')
        out = read_until(proc, b"END")
        assert b"/tmp 42" in out
        assert b"err" in out  # stderr is merged
    finally:
        proc.close()


def test_read_times_out_with_nothing(backend: Sandbox) -> None:
    with backend.spawn(["cat"]) as proc:
        start = time.monotonic()
        assert proc.read(0.3) == b""
        assert time.monotonic() - start >= 0.25
        assert not proc.eof
        proc.write(b"hello\n")
        assert b"hello" in read_until(proc, b"hello")


def test_exit_is_eof(backend: Sandbox) -> None:
    proc = backend.spawn(["sh", "-c", "echo bye"])
    out = read_until(proc, b"never")  # ends at EOF
    assert b"bye" in out and proc.eof
    proc.close()


def test_kill_ends_it_and_its_children(backend: Sandbox) -> None:
    proc = backend.spawn(["bash", "--noprofile", "--norc", "-s"])
    proc.write(b"sleep 300 & echo STARTED\n")
    assert b"STARTED" in read_until(proc, b"STARTED")
    proc.kill()
    proc.kill()  # idempotent
    assert proc.eof
    with pytest.raises(SandboxError):
        proc.write(b"echo\n")
    res = backend.run("ps -eo args | grep -c '^sleep 300' || true")
    assert res.stdout.strip() == "0"


def test_sandbox_close_kills_spawned(local_box: Sandbox, nothing_left) -> None:
    marker = "spawn-marker-7f3a"
    local_box.spawn(["sh", "-c", f"sleep 300 # {marker}"])
    time.sleep(0.2)
    local_box.close()
    nothing_left(marker)


@pytest.mark.bwrap
def test_local_tmpfs_and_ro_binds() -> None:
    from agentenvs.sandbox.local import LocalSandbox

    # a dir the sandbox's uid can enter (pytest's tmp_path is private to its user)
    src = Path(tempfile.mkdtemp(prefix="agentenvs-test-"))
    try:
        src.chmod(0o755)
        (src / "f.txt").write_text("data")
        with LocalSandbox(tmpfs={"/app": 8}, ro_binds={str(src): "/opt/ro"}) as box:
            res = box.run("echo hi > /app/x && cat /app/x /opt/ro/f.txt; echo no > /opt/ro/g")
            assert "hi" in res.stdout and "data" in res.stdout
            assert res.returncode != 0
    finally:
        shutil.rmtree(src)
