"""The docker backend: runs, files, snapshots, the warm pool, isolation, and no leaks.

Every test needs a Docker engine with the project image (``bash .ci/services/docker.sh``)
and skips with the reason otherwise (a failure in CI, see tests/conftest.py).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from _services import require_docker

from agentenvs.core.errors import SandboxError
from agentenvs.sandbox import FilesSnapshot, Limits, PyCase, make_sandbox

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def docker_mod():  # noqa: ANN201 - the module, imported only when the engine is usable
    require_docker()
    from agentenvs.sandbox import docker

    return docker


@pytest.fixture(scope="module")
def pool(docker_mod) -> Iterator:  # noqa: ANN001
    with docker_mod.DockerPool(size=2) as p:
        yield p


@pytest.fixture
def box(docker_mod, pool) -> Iterator:  # noqa: ANN001
    sandbox = docker_mod.DockerSandbox(pool=pool)
    try:
        yield sandbox
    finally:
        sandbox.close()


def own_containers(docker_mod) -> list[str]:  # noqa: ANN001
    """Ids of every container (running or not) labelled as this process's."""
    client = docker_mod._client()
    try:
        found = client.api.containers(
            all=True, filters={"label": f"{docker_mod.POOL_LABEL}={os.getpid()}"}
        )
    finally:
        client.close()
    return [c["Id"] for c in found]


# ----------------------------------------------------------------------------- running
def test_run_argv_string_stdin_env_cwd(box) -> None:  # noqa: ANN001
    r = box.run(["python3", "-c", "import sys; print(sys.stdin.read()[::-1])"], stdin="abc")
    assert (r.returncode, r.stdout, r.stderr, r.timed_out) == (0, "cba\n", "", False)
    r = box.run("echo out; echo err >&2; exit 3")
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")
    box.run("mkdir -p sub")
    r = box.run('echo "$GREETING"; pwd', env={"GREETING": "hi"}, cwd="sub")
    assert r.stdout == "hi\n/work/sub\n"


def test_large_stdin_and_output(box) -> None:  # noqa: ANN001
    # more than any pipe or socket buffer holds, both ways at once, under the output cap
    data = os.urandom(400 << 10).hex()
    r = box.run(["sh", "-c", "tee /dev/stderr"], stdin=data)
    assert r.returncode == 0 and not r.output_truncated
    assert r.stdout == data and r.stderr == data


def test_timeout_kills_everything(box) -> None:  # noqa: ANN001
    start = time.monotonic()
    r = box.run("sleep 300 & setsid sleep 300 & sleep 300", timeout=1)
    assert r.timed_out and r.returncode is None
    assert 1 <= time.monotonic() - start < 60  # far from the 300 s of a wait for the sleeps
    left = box.run("ps -eo user=,args= | grep -v root | grep -c '[s]leep 300' || true")
    assert left.stdout.strip() == "0"


def test_output_cap(docker_mod, pool) -> None:  # noqa: ANN001
    with docker_mod.DockerSandbox(Limits(max_output_bytes=1000), pool=pool) as small:
        r = small.run("yes", timeout=120)
        assert r.output_truncated and len(r.stdout) == 1000
        assert not r.timed_out  # a runaway writer is stopped at the cap, not by the clock
        r = small.run("head -c 999 /dev/zero")
        assert not r.output_truncated and len(r.stdout) == 999


def test_signal_exit_and_background_jobs(box) -> None:  # noqa: ANN001
    r = box.run(["python3", "-c", "import os; os.kill(os.getpid(), 9)"])
    assert r.returncode in (-9, 137)
    r = box.run("sleep 100 & echo started")
    assert r.stdout == "started\n" and r.duration_s < 60  # no wait for the 100 s job
    assert "sleep 100" not in box.run("ps -eo args=").stdout


def test_python_cases(box) -> None:  # noqa: ANN001
    src = (
        "def add(a, b):\n    return a + b\nif __name__ == '__main__':\n    print(int(input()) * 2)"
    )
    cases = [PyCase("stdin", stdin=str(i)) for i in range(20)] + [
        PyCase("call", func="add", args=(2, 3))
    ]
    got = list(box.run_python_cases(src, cases, timeout_per_case=30))
    assert [r.stdout for r in got[:20]] == [f"{2 * i}\n" for i in range(20)]
    assert got[20].value == 5 and all(r.error is None for r in got)


def test_python_cases_early_stop_kills_worker(box) -> None:  # noqa: ANN001
    it = box.run_python_cases("print(input())", [PyCase("stdin", stdin="x")] * 500)
    assert next(it).stdout == "x\n"
    it.close()
    assert "python3" not in box.run("ps -eo args=").stdout


# ----------------------------------------------------------------------------- files
def test_files_round_trip(box) -> None:  # noqa: ANN001
    blob = bytes(range(256)) * 100
    box.write_file("a/b/c.bin", blob, mode=0o600)
    box.write_file("/work/t.txt", "text")
    assert box.read_file("a/b/c.bin") == blob and box.read_file("t.txt") == b"text"
    assert box.run("stat -c %a a/b/c.bin").stdout.strip() == "600"
    assert box.run(["cat", "t.txt"]).stdout == "text"
    with pytest.raises(FileNotFoundError):
        box.read_file("missing")
    for bad in ("../etc/passwd", "/etc/passwd", "a/../../x", ""):
        with pytest.raises(SandboxError):
            box.read_file(bad)
    box.run("ln -s /etc/hostname link; ln -s /tmp a/dirlink; mkdir d")
    with pytest.raises(SandboxError):
        box.read_file("link")
    with pytest.raises(SandboxError):
        box.write_file("a/dirlink/x", "x")
    with pytest.raises(SandboxError):
        box.read_file("d")
    assert box.run("ls -A /tmp").stdout == ""


def test_snapshot_restore(box) -> None:  # noqa: ANN001
    box.write_file("keep.txt", "v1")
    box.write_file("dir/run.sh", "#!/bin/sh\necho ran\n", mode=0o755)
    snap = box.snapshot_files()
    assert snap.files == {
        "keep.txt": (0o644, b"v1"),
        "dir/run.sh": (0o755, b"#!/bin/sh\necho ran\n"),
    }
    box.write_file("keep.txt", "v2")
    box.run("rm -r dir; echo new > extra.txt; mkdir -p empty/x")
    box.restore_files(pickle.loads(pickle.dumps(snap)))
    assert box.snapshot_files() == snap
    assert box.run("./dir/run.sh; ls").stdout == "ran\ndir\nkeep.txt\n"
    box.restore_files(FilesSnapshot())
    assert box.run("ls -A").stdout == ""


# ----------------------------------------------------------------------------- pool
def test_pool_reuses_a_reset_container(docker_mod) -> None:  # noqa: ANN001
    with docker_mod.DockerPool(size=1) as pool:
        first = docker_mod.DockerSandbox(pool=pool)
        cid = first.container_id
        first.write_file("secret.txt", "from the first episode")
        first.run("echo tmp > /tmp/t; sleep 300 >/dev/null 2>&1 &")
        first.close()
        first.close()  # idempotent
        with docker_mod.DockerSandbox(pool=pool) as second:
            assert second.container_id == cid
            assert second.run("ls -A /work /tmp").stdout == "/tmp:\n\n/work:\n"
            assert "sleep 300" not in second.run("ps -eo args=").stdout
        with pytest.raises(SandboxError):
            first.run("true")


def test_reset_in_place(box) -> None:  # noqa: ANN001
    box.write_file("x", "1")
    box.reset()
    assert box.snapshot_files().files == {}
    assert box.run("echo ok").stdout == "ok\n"


def test_no_leaks_after_many_runs(docker_mod) -> None:  # noqa: ANN001
    before = set(own_containers(docker_mod))
    pool = docker_mod.DockerPool(size=2)
    boxes = [docker_mod.DockerSandbox(pool=pool) for _ in range(3)]
    boxes.append(docker_mod.DockerSandbox(pool=False))
    for i, sandbox in enumerate(boxes):
        assert sandbox.run(f"echo {i}").stdout == f"{i}\n"
        sandbox.close()
    for _ in range(5):  # reuse: no new containers past the pool size
        with docker_mod.DockerSandbox(pool=pool) as sandbox:
            sandbox.run("true")
    assert len(pool.container_ids) == 2
    pool.close()
    assert set(own_containers(docker_mod)) == before


def test_exit_removes_containers_and_sweep_finds_orphans(docker_mod) -> None:  # noqa: ANN001
    code = (
        "from agentenvs.sandbox.docker import DockerSandbox, DockerPool\n"
        "b = DockerSandbox(pool=DockerPool(1)); print(b.container_id, flush=True)\n"
        "import os; os._exit(0) if __import__('sys').argv[1] == 'crash' else None\n"
    )
    client = docker_mod._client()
    try:
        clean = subprocess.run(
            [sys.executable, "-c", code, "exit"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()
        crashed = subprocess.run(
            [sys.executable, "-c", code, "crash"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()
        ids = {c["Id"] for c in client.api.containers(all=True)}
        assert clean not in ids  # removed at exit
        assert crashed in ids  # no exit handlers ran: left for the sweep
        assert docker_mod.sweep_orphans(client) >= 1
        assert crashed not in {c["Id"] for c in client.api.containers(all=True)}
    finally:
        client.close()


# ----------------------------------------------------------------------------- isolation
def test_network_none_and_read_only_root(box) -> None:  # noqa: ANN001
    r = box.run("ls /sys/class/net; touch /usr/x /etc/x /x 2>&1; echo w > /work/w && echo wrote")
    lines = r.stdout.splitlines()
    assert lines[0] == "lo" and lines[-1] == "wrote"
    assert r.stdout.count("Read-only file system") == 3
    status = box.run("grep -E '^(Uid|CapEff|NoNewPrivs)' /proc/self/status").stdout
    assert "CapEff:\t0000000000000000" in status and "NoNewPrivs:\t1" in status
    assert "Uid:\t0" not in status


def test_container_settings(docker_mod, box) -> None:  # noqa: ANN001
    client = docker_mod._client()
    try:
        host = client.api.inspect_container(box.container_id)["HostConfig"]
    finally:
        client.close()
    limits = box.limits
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"][0]
    assert host["PidsLimit"] >= limits.max_processes and host["Memory"] > 0
    assert host["NanoCpus"] > 0 and "/work" in host["Tmpfs"]


def test_make_sandbox_and_availability(docker_mod) -> None:  # noqa: ANN001
    with make_sandbox("docker") as sandbox:
        assert sandbox.backend == "docker"
        assert sandbox.run(["python3", "-c", "print(6 * 7)"]).stdout == "42\n"
    ok, why = docker_mod.docker_available("agentenvs/no-such-image:0")
    assert not ok and "missing" in why


def test_forked_child_leaves_parent_containers_alone(docker_mod, pool, box) -> None:  # noqa: ANN001
    pid = os.fork()
    if pid == 0:  # the child: its exit-time clean-up and the pool must not touch ours
        code = 1
        try:
            from agentenvs.sandbox.docker_pool import _close_pools

            _close_pools()
            try:
                pool.acquire(Limits())
            except SandboxError:
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert box.run("echo alive").stdout == "alive\n"
