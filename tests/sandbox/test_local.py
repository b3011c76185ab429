"""The ``local`` (bubblewrap) backend: run details, files, snapshots, reset, close, errors, leaks."""

from __future__ import annotations

import gc
import os
import pickle
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentenvs.core.errors import SandboxError
from agentenvs.sandbox import FilesSnapshot, Limits, PyCase, make_sandbox
from agentenvs.sandbox.local import BWRAP_ENV, TEMP_PREFIX, LocalSandbox, local_available

# tests that start a sandbox are marked ``bwrap`` (those asking for ``local_box`` are
# marked by it); the ones about a bwrap that is missing or refused run everywhere


# ----------------------------------------------------------------------------- run
def test_run_basics(local_box: LocalSandbox) -> None:
    r = local_box.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (r.returncode, r.stdout, r.stderr, r.timed_out) == (3, "out\n", "err\n", False)
    assert local_box.run("echo $((6 * 7))").stdout == "42\n"
    assert local_box.run(["no-such-command"]).returncode == 127


def test_run_stdin_env_cwd(local_box: LocalSandbox) -> None:
    big = "x" * (3 << 20)
    assert len(local_box.run(["wc", "-c"], stdin=big).stdout.split()[0]) == len(str(len(big)))
    assert local_box.run("echo $GREETING", env={"GREETING": "hi"}).stdout == "hi\n"
    local_box.write_file("sub/f.txt", "in sub")
    assert local_box.run(["cat", "f.txt"], cwd="/work/sub").stdout == "in sub"


def test_run_identity_and_limits(local_box: LocalSandbox) -> None:
    r = local_box.run("id -u; hostname; ulimit -v; ulimit -n; ulimit -t; echo $HOME; pwd")
    uid, host, mem, nofile, cpu, home, cwd = r.stdout.split()
    lim = local_box.limits
    assert uid == "65534" and host == "sandbox"
    assert (int(mem), int(nofile), int(cpu)) == (
        lim.memory_mb * 1024,
        lim.max_open_files,
        lim.cpu_seconds,
    )
    assert home == cwd == "/work"
    # hard limits: the program cannot raise them again
    assert local_box.run(f"ulimit -n {lim.max_open_files * 2}").returncode != 0


@pytest.mark.bwrap
def test_custom_limits() -> None:
    with LocalSandbox(Limits(memory_mb=256, max_output_bytes=10)) as box:
        r = box.run("printf 0123456789abcdef")
        assert r.stdout == "0123456789" and r.output_truncated
        (c,) = box.run_python_cases("x = bytearray(300 << 20)", [PyCase("stdin")])
        assert c.error == "memory"
    with LocalSandbox(Limits(max_file_mb=1, max_processes=4, cpu_seconds=1)) as box:
        big = "open('f', 'wb').write(b'x' * (2 << 20))"
        r = box.run(["python3", "-c", big])
        assert r.returncode != 0 and os.path.getsize(os.path.join(box.workdir, "f")) <= 1 << 20
        (c,) = box.run_python_cases(big, [PyCase("stdin")])
        assert c.error is not None and c.error != "timeout"
        spawn = "import subprocess\nps = [subprocess.Popen(['sleep', '5']) for _ in range(10)]"
        (c,) = box.run_python_cases(spawn, [PyCase("stdin")])
        assert c.error is not None and "BlockingIOError" in c.error
        # the 1 s CPU limit stops the loops long before the wall-clock limits, however
        # loaded the machine (a CPU second may then take several seconds of wall clock)
        r = box.run(["python3", "-c", "while True: pass"], timeout=120)
        assert r.returncode == 128 + 9 or r.returncode == 128 + 24, r  # CPU limit, not timeout
        (c,) = box.run_python_cases("while True: pass", [PyCase("stdin")], timeout_per_case=120)
        assert c.error == "timeout" and c.duration_s < 60


def test_python_inside(local_box: LocalSandbox) -> None:
    r = local_box.run(["python", "-c", "import sys; print(sys.version_info[0])"])
    assert r.stdout == "3\n"


# ----------------------------------------------------------------------------- files
def test_files_round_trip(local_box: LocalSandbox) -> None:
    local_box.write_file("a.txt", "hello")
    local_box.write_file("/work/d/e/b.sh", b"#!/bin/sh\necho run\n", mode=0o755)
    assert local_box.read_file("/work/a.txt") == b"hello"
    assert local_box.run(["./d/e/b.sh"]).stdout == "run\n"
    # the sandbox can change what the host wrote, and the host reads what it made
    assert local_box.run("echo more >> a.txt && mkdir -p out && echo made > out/c").returncode == 0
    assert local_box.read_file("a.txt") == b"hellomore\n"
    assert local_box.read_file("out/c") == b"made\n"
    with pytest.raises(FileNotFoundError):
        local_box.read_file("missing")


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "", "a/../../b", "/work"])
def test_paths_outside_rejected(local_box: LocalSandbox, path: str) -> None:
    with pytest.raises(SandboxError):
        local_box.read_file(path)
    with pytest.raises(SandboxError):
        local_box.write_file(path, "x")


def test_planted_symlinks_and_fifos_are_not_followed(
    local_box: LocalSandbox, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("host data")
    r = local_box.run(
        f"ln -s {victim} link && ln -s / root && ln -s /etc/hostname hn && mkfifo pipe && echo ok"
    )
    assert r.stdout == "ok\n"
    for bad in ("link", "root/etc/hostname", "hn", "pipe"):
        with pytest.raises(SandboxError):
            local_box.read_file(bad)
    local_box.write_file("link", "replaced")  # replaces the link, never writes through it
    assert victim.read_text() == "host data"
    assert local_box.read_file("link") == b"replaced"
    with pytest.raises(SandboxError):
        local_box.write_file("root/tmp/x", "through a symlinked dir")
    assert set(local_box.snapshot_files().files) == {"link"}  # links and fifos are not files


def test_snapshot_restore(local_box: LocalSandbox) -> None:
    local_box.write_file("keep.txt", "v1")
    local_box.write_file("bin/tool", "#!/bin/sh\necho tool\n", mode=0o750)
    snap = local_box.snapshot_files()
    assert snap.files == {
        "keep.txt": (0o644, b"v1"),
        "bin/tool": (0o750, b"#!/bin/sh\necho tool\n"),
    }
    assert pickle.loads(pickle.dumps(snap)) == snap
    local_box.run(
        "echo v2 > keep.txt; rm bin/tool; mkdir -p new/deep; echo x > new/deep/f; chmod 0 new"
    )
    local_box.restore_files(snap)
    assert local_box.snapshot_files() == snap
    assert local_box.run(["bin/tool"]).stdout == "tool\n"
    assert sorted(os.listdir(local_box.workdir)) == ["bin", "keep.txt"]
    local_box.restore_files(FilesSnapshot())
    assert os.listdir(local_box.workdir) == []


def test_reset_kills_running_work_and_empties(local_box: LocalSandbox) -> None:
    local_box.write_file("f", "x")
    it = local_box.run_python_cases(
        "import time\ntime.sleep(float(input()))", [PyCase("stdin", stdin=s) for s in ("0", "30")]
    )
    assert next(it).error is None
    local_box.reset()
    assert next(it).error == "worker died"
    assert os.listdir(local_box.workdir) == []
    assert local_box.run("echo again").stdout == "again\n"


# ----------------------------------------------------------------------------- lifetime
@pytest.mark.bwrap
def test_close_is_idempotent_and_removes_everything(nothing_left: Callable[[str], None]) -> None:
    box = make_sandbox("local")
    assert isinstance(box, LocalSandbox)
    workdir = box.workdir
    box.write_file("x", "y")
    it = box.run_python_cases("import time\ntime.sleep(30)", [PyCase("stdin")] * 2)
    threading.Timer(0.5, box.close).start()
    assert next(it).error == "worker died"
    box.close()
    box.close()
    assert not os.path.exists(workdir)
    nothing_left(workdir)
    with pytest.raises(SandboxError):
        box.run("true")
    with pytest.raises(SandboxError):
        box.write_file("x", "y")


@pytest.mark.bwrap
def test_finalizer_cleans_up_forgotten_sandbox() -> None:
    box = LocalSandbox()
    workdir = box.workdir
    del box
    gc.collect()
    assert not os.path.exists(workdir)


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A temp dir any uid can traverse (bwrap may run as nobody), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="agentenvs-test-parent-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.mark.bwrap
def test_unreachable_workdir_parent(tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    if os.geteuid() != 0:
        pytest.skip("only root hands bwrap to another uid")
    with pytest.raises(SandboxError, match="cannot be entered"):
        LocalSandbox(workdir_parent=tmp_path)


@pytest.mark.bwrap
@pytest.mark.parametrize(
    "runs", [pytest.param(30, id="short"), pytest.param(300, id="long", marks=pytest.mark.long)]
)
def test_no_leaks_over_many_runs(
    open_parent: Path, nothing_left: Callable[[str], None], runs: int
) -> None:
    # a leak of one fd a run shows in the short run too (the bound is 2)
    tmp_path = open_parent
    fds_before = len(os.listdir("/proc/self/fd"))
    with LocalSandbox(workdir_parent=tmp_path) as box:
        for i in range(runs):
            assert box.run(["true"] if i % 2 else "sleep 100 & echo $((1 + 1))").returncode == 0
        for _ in range(runs // 10):
            got = list(box.run_python_cases("print(input())", [PyCase("stdin", stdin="a")] * 5))
            assert [r.stdout for r in got] == ["a\n"] * 5
        nothing_left(box.workdir)  # bwrap's argv names the work dir
    assert [p for p in os.listdir(tmp_path) if p.startswith(TEMP_PREFIX)] == []
    time.sleep(0.1)
    assert len(os.listdir("/proc/self/fd")) <= fds_before + 2


# ----------------------------------------------------------------------------- no namespaces
NO_USERNS = (
    "bwrap: No permissions to create a new namespace, likely because the kernel does not "
    "allow non-privileged user namespaces. On e.g. debian this can be enabled with "
    "'sysctl kernel.unprivileged_userns_clone=1'."
)


def failing_bwrap(tmp_path: Path, message: str) -> str:
    script = tmp_path / f"bwrap-{abs(hash(message))}-{time.monotonic_ns()}"
    script.write_text(f'#!/bin/sh\necho "{message}" >&2\nexit 1\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(script)


def test_refused_namespaces_raise_a_clear_error(tmp_path: Path) -> None:
    bwrap = failing_bwrap(tmp_path, NO_USERNS)
    ok, why = local_available(bwrap)
    assert not ok and "namespaces" in why and "likely cause" in why
    with pytest.raises(SandboxError, match="not available.*No permissions to create"):
        LocalSandbox(bwrap=bwrap)


def test_bwrap_chosen_by_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bwrap = failing_bwrap(tmp_path, "bwrap: setting up uid map: Permission denied")
    monkeypatch.setenv(BWRAP_ENV, bwrap)
    with pytest.raises(SandboxError, match="uid map: Permission denied"):
        make_sandbox("local")


def test_missing_bwrap(tmp_path: Path) -> None:
    copies = set(Path(tempfile.gettempdir()).glob("agentenvs-bwrap-*"))
    ok, why = local_available(str(tmp_path / "no-bwrap-here"))
    assert not ok and "cannot run bwrap" in why
    assert set(Path(tempfile.gettempdir()).glob("agentenvs-bwrap-*")) == copies


def test_no_nested_user_namespaces(local_box: LocalSandbox) -> None:
    if not shutil.which("unshare"):
        pytest.skip("no unshare binary to try with")
    r = local_box.run("unshare -U true")
    assert r.returncode != 0


def test_worker_is_out_of_reach_of_cases(local_box: LocalSandbox) -> None:
    # the worker is pid 1 of the namespace: signals from inside cannot kill it
    src = (
        "import os, signal\nn = int(input())\n"
        "if n == 1:\n    os.kill(os.getppid(), signal.SIGKILL)\n"
        "if n == 2:\n    try:\n        os.kill(-1, signal.SIGKILL)\n    except OSError:\n        pass\n"
        "print(n)"
    )
    got = list(local_box.run_python_cases(src, [PyCase("stdin", stdin=s) for s in "0123"]))
    assert [r.stdout for r in got] == ["0\n", "1\n", "2\n", "3\n"]


SYSCALLS = """
import ctypes, errno, json
libc = ctypes.CDLL(None, use_errno=True)
out = {}
for name, nr, args in [("ptrace", 101, (16, 1, 0, 0)), ("unshare", 272, (0x20000,)),
                       ("io_uring_setup", 425, (1, 0)), ("bpf", 321, (0, 0, 0)),
                       ("process_vm_readv", 310, (1, 0, 0, 0, 0, 0)), ("getpid", 39, ())]:
    rc = libc.syscall(nr, *args)
    out[name] = "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
print(json.dumps(out))
"""


def test_seccomp_filter_refuses_kernel_surface(local_box: LocalSandbox) -> None:
    import json
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("the syscall numbers below are x86_64's")
    for got in (
        json.loads(local_box.run(["python3", "-c", SYSCALLS]).stdout),
        json.loads(local_box.run_python_cases(SYSCALLS, [PyCase("stdin")]).__next__().stdout),
    ):
        assert got.pop("getpid") == "ok"
        assert got == dict.fromkeys(got, "EPERM")
    assert "Seccomp:\t2" in local_box.run("cat /proc/self/status").stdout


@pytest.mark.bwrap
def test_shm_and_case_workdir_are_capped() -> None:
    with LocalSandbox(Limits(disk_mb=8, shm_mb=4)) as box:
        r = box.run("df -k /dev/shm /tmp | tail -n 2")
        assert r.stdout.split()[1] == "4096"
        fill = "import os\nn = 0\ntry:\n    with open(input(), 'wb') as f:\n        while n < 64:\n"
        fill += "            f.write(b'x' * (1 << 20)); f.flush(); n += 1\nexcept OSError:\n    pass\nprint(n)"
        got = list(
            box.run_python_cases(fill, [PyCase("stdin", stdin=p) for p in ("big", "/dev/shm/big")])
        )
        wrote = [int(r.stdout) for r in got]
        assert 0 < wrote[0] <= 8 and 0 < wrote[1] <= 4, wrote
        assert os.listdir(box.workdir) == []  # the host's work dir saw none of it
