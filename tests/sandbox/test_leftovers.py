"""What a killed process leaves on the host, and the sweep that removes it on the next start.

The sweep's own rules run on dirs under ``tmp_path`` only; the end-to-end cases kill a real
child process that made a local sandbox or Terminal-Bench's pytest copy, then start anew.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agentenvs.core.procs import pid_namespace
from agentenvs.sandbox import _leftovers, sweep_leftovers


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_sweep_removes_only_dead_owners_dirs(tmp_path: Path) -> None:
    me, ns = os.getpid(), pid_namespace()
    mine = tmp_path / f"agentenvs-sbx-{me}-{_leftovers.start_time(me)}-{ns}-abc"
    dead = tmp_path / f"agentenvs-sbx-{dead_pid()}-12345-{ns}-def"
    reused = tmp_path / f"agentenvs-sbx-{me}-1-{ns}-ghi"  # our pid, another start: dead
    foreign = tmp_path / "agentenvs-sbx-not-ours"  # no owner in the name: never touched
    other_prefix = tmp_path / f"something-{dead_pid()}-1-{ns}-x"
    # a pid of another pid namespace means nothing here: never judged, never removed
    other_ns = tmp_path / f"agentenvs-sbx-{dead_pid()}-12345-{ns + 1}-jkl"
    # a name without a namespace (another version's): left alone
    no_ns = tmp_path / f"agentenvs-sbx-{dead_pid()}-12345-mno"
    for d in (mine, dead, reused, foreign, other_prefix, other_ns, no_ns):
        (d / "sub").mkdir(parents=True)
        (d / "sub" / "f").write_text("x")
    (dead / "sub").chmod(0o500)  # what a program may do to its own dirs
    link = tmp_path / f"agentenvs-sbx-{dead_pid()}-1-{ns}-link"
    link.symlink_to(foreign)  # a symlink is never followed nor removed
    removed = _leftovers.sweep("agentenvs-sbx-", str(tmp_path))
    assert sorted(removed) == sorted([str(dead), str(reused)])
    assert mine.is_dir() and foreign.is_dir() and other_prefix.is_dir()
    assert other_ns.is_dir() and no_ns.is_dir()
    assert (foreign / "sub" / "f").exists() and link.is_symlink()


def test_owned_mkdtemp_names_its_owner(tmp_path: Path) -> None:
    path = Path(_leftovers.owned_mkdtemp("agentenvs-test-", str(tmp_path)))
    pid, start, ns, _ = path.name.removeprefix("agentenvs-test-").split("-", 3)
    assert int(pid) == os.getpid() and int(ns) == pid_namespace()
    assert _leftovers.owner_alive(int(pid), int(start), int(ns))
    assert _leftovers.sweep("agentenvs-test-", str(tmp_path)) == []  # alive: kept


SWEEP_FROM_ANOTHER_NAMESPACE = """
import sys
from agentenvs.sandbox import _leftovers
print(_leftovers.pid_namespace(), _leftovers.sweep("agentenvs-sbx-", sys.argv[1]))
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a second pid namespace needs root and unshare(1)",
)
def test_a_process_in_another_pid_namespace_never_sweeps_a_live_owners_dirs(
    tmp_path: Path,
) -> None:
    # a live sandbox dir of this process, swept from a process in a new pid namespace
    # sharing this temp dir (as a container or a CI root entered with unshare would):
    # there this process's pid is absent or another process's, yet the dir stays
    live = Path(_leftovers.owned_mkdtemp("agentenvs-sbx-", str(tmp_path)))
    done = subprocess.run(
        [
            "unshare",
            "--pid",
            "--fork",
            sys.executable,
            "-c",
            SWEEP_FROM_ANOTHER_NAMESPACE,
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    ns, removed = done.stdout.split(" ", 1)
    assert int(ns) != pid_namespace() and removed.strip() == "[]"
    assert live.is_dir()


KILLED = """
import json, os, signal, sys
from agentenvs.sandbox.local import LocalSandbox
from agentenvs.envs.terminal.runtime_local import pytest_dir
box = LocalSandbox()
box.write_file("big", b"x" * (4 << 20))
print(json.dumps([box.workdir, pytest_dir()]), flush=True)
# the reaper (which removes them once this process is gone) killed too, as a whole
# cgroup's kill would: the next start's sweep is the backstop
from agentenvs.sandbox import _leftovers
os.kill(_leftovers.reaper_pid, signal.SIGKILL)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.bwrap
def test_killed_process_leftovers_swept_by_the_next_start() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", KILLED], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == -signal.SIGKILL, out.stderr
    import json

    workdir, pylib = json.loads(out.stdout.strip().splitlines()[-1])
    assert os.path.isdir(workdir) and pylib and os.path.isdir(pylib)
    assert workdir.startswith(tempfile.gettempdir())
    # a new process's first sandbox (or an env made there) sweeps both
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from agentenvs.sandbox import sweep_leftovers\nprint(sweep_leftovers('local'))",
        ],
        check=True,
        timeout=120,
        env=env,
    )
    assert not os.path.exists(workdir) and not os.path.exists(pylib)


def test_sweep_leftovers_never_raises() -> None:
    assert isinstance(sweep_leftovers("docker"), list)
