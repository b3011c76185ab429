"""What a killed process leaves on the host, and the sweep that removes it on the next start.

The sweep's own rules run on dirs under ``tmp_path`` only; the end-to-end cases kill a real
child process that made a local sandbox or Terminal-Bench's pytest copy, then start anew.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agentenvs.sandbox import _leftovers, sweep_leftovers


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_sweep_removes_only_dead_owners_dirs(tmp_path: Path) -> None:
    me = os.getpid()
    mine = tmp_path / f"agentenvs-sbx-{me}-{_leftovers.start_time(me)}-abc"
    dead = tmp_path / f"agentenvs-sbx-{dead_pid()}-12345-def"
    reused = tmp_path / f"agentenvs-sbx-{me}-1-ghi"  # our pid, another start: a dead owner
    foreign = tmp_path / "agentenvs-sbx-not-ours"  # no owner in the name: never touched
    other_prefix = tmp_path / f"something-{dead_pid()}-1-x"
    for d in (mine, dead, reused, foreign, other_prefix):
        (d / "sub").mkdir(parents=True)
        (d / "sub" / "f").write_text("x")
    (dead / "sub").chmod(0o500)  # what a program may do to its own dirs
    link = tmp_path / f"agentenvs-sbx-{dead_pid()}-1-link"
    link.symlink_to(foreign)  # a symlink is never followed nor removed
    removed = _leftovers.sweep("agentenvs-sbx-", str(tmp_path))
    assert sorted(removed) == sorted([str(dead), str(reused)])
    assert mine.is_dir() and foreign.is_dir() and other_prefix.is_dir()
    assert (foreign / "sub" / "f").exists() and link.is_symlink()


def test_owned_mkdtemp_names_its_owner(tmp_path: Path) -> None:
    path = Path(_leftovers.owned_mkdtemp("agentenvs-test-", str(tmp_path)))
    pid, start, _ = path.name.removeprefix("agentenvs-test-").split("-", 2)
    assert int(pid) == os.getpid() and _leftovers.owner_alive(int(pid), int(start))
    assert _leftovers.sweep("agentenvs-test-", str(tmp_path)) == []  # alive: kept


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
