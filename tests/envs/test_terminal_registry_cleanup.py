"""Terminal-Bench's local runtime leaves nothing in the temp dir of a process that used it,
however that process ended: exit, SIGTERM with its default action (no ``atexit`` runs),
SIGKILL."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

EPISODE = """
import sys, time
import gymnasium as gym
import agentenvs
env = gym.make("agentenvs/TerminalBench-v0", runtime="local")
env.reset(options={"task_id": "word-frequency"})
print("ready", flush=True)
if sys.argv[1] == "exit":
    sys.exit(0)
time.sleep(600)
"""


def _wait_empty(path: Path, deadline_s: float = 120.0) -> list[str]:
    """What is left in ``path`` once it is empty or the (generous) deadline has passed."""
    deadline = time.monotonic() + deadline_s
    while True:
        left = sorted(p.name for p in path.iterdir())
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


@pytest.mark.bwrap
@pytest.mark.parametrize("how", ["exit", "sigterm", "sigkill"])
def test_nothing_left_in_tmpdir_after_the_process_ends(how: str) -> None:
    # the sandbox's user must traverse the parent (pytest's tmp_path is private to root)
    tmpdir = Path(tempfile.mkdtemp(prefix="tb-cleanup-"))
    tmpdir.chmod(0o755)
    try:
        _run(tmpdir, how)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _run(tmpdir: Path, how: str) -> None:
    env = {
        **os.environ,
        "TMPDIR": str(tmpdir),
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", EPISODE, how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            proc.kill()
            raise AssertionError(f"the episode did not start: {line}{proc.communicate()[1]}")
        made = sorted(p.name for p in tmpdir.iterdir())
        # the copies of pytest's packages and the stand-ins, and the sandbox's dir
        assert any(n.startswith("agentenvs-pylib-") for n in made), made
        assert any(n.startswith("agentenvs-sbx-") for n in made), made
        if how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        elif how == "sigkill":
            proc.kill()
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    expected = {"exit": 0, "sigterm": -signal.SIGTERM, "sigkill": -signal.SIGKILL}[how]
    assert rc == expected  # the signal's default action: no handler of ours changed it
    assert _wait_empty(tmpdir) == []
