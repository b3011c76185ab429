"""Envs with a Docker option, where no engine answers: they fail before the first action,
with an error that says what to install and where to read how (no engine is needed: the
engine address points at a socket that does not exist)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# what each env does with an engine address that answers nothing, as JSON on stdout
_PROBE = r"""
import json, sys
import gymnasium as gym
import agentenvs  # noqa: F401
from agentenvs.core.errors import ServiceUnavailable

name, action, kwargs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
stage = "make"
try:
    env = gym.make(name, **kwargs)
    stage = "reset"
    env.reset(seed=0)
    stage = "step"
    env.step(action)
    stage = "none"
except ServiceUnavailable as exc:
    print(json.dumps({"stage": stage, "error": str(exc)}))
else:
    print(json.dumps({"stage": stage, "error": None}))
"""


def _probe(name: str, action: str, **kwargs: object) -> dict:
    pytest.importorskip("docker")
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent.sock"}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, name, action, json.dumps(kwargs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _assert_says_what_to_do(error: str) -> None:
    assert "cannot reach a Docker engine" in error, error
    assert ".ci/" not in error, error
    assert "docs/sandboxes.md" in error, error
    page = (ROOT / "docs" / "sandboxes.md").read_text()  # says how to install and build
    assert "install docker.io" in page and "bash sandboxes/build_images.sh" in page
    # every script the message names is in the source distribution
    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]
    shipped = shipped["targets"]["sdist"]["include"]
    scripts = re.findall(r"`bash ([^`\s]+)`", error)
    assert scripts, error
    for script in scripts:
        assert (ROOT / script).is_file(), script
        assert script.split("/")[0] in shipped, script


def test_deepcoder_on_docker_fails_at_make_without_an_engine() -> None:
    got = _probe("agentenvs/DeepCoderMT-v0", "```python\nprint(1)\n```", sandbox="docker")
    assert got["stage"] == "make", got
    _assert_says_what_to_do(got["error"])


def test_terminal_bench_on_docker_fails_at_reset_without_an_engine() -> None:
    # the runtime starts with the first episode; the env is made without one
    got = _probe("agentenvs/TerminalBench-v0", "```bash\nls\n```", runtime="docker")
    assert got["stage"] == "reset", got
    assert "no Docker engine answers" in got["error"], got
