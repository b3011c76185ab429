"""The local runtime stands in for Debian/Python base images (``python:3.X-slim``,
``debian:*``, the t-bench python family, ``ubuntu:*``) when the rest of the Dockerfile is
one it replays, and says where the host differs."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401  (registers the ids)
from agentenvs.envs.terminal.data import load_task
from agentenvs.envs.terminal.runtime_local import standin_difference, unsupported_reason

TEST = """\
from pathlib import Path


def test_greeting():
    assert Path("/app/greeting.txt").read_text().strip() == "hello, world"


def test_helper_kept():
    assert Path("/app/src/helper.txt").read_text() == "keep me\\n"
"""


def write_task(root: Path, dockerfile: str, name: str = "slim-greeting") -> Path:
    """A task in the TB1 layout whose Dockerfile is ``dockerfile``."""
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "src").mkdir()
    (task / "src" / "helper.txt").write_text("keep me\n")
    (task / "greeting.txt").write_text("TODO\n")
    (task / "Dockerfile").write_text(dockerfile)
    (task / "task.yaml").write_text(
        "instruction: Write hello, world into /app/greeting.txt.\n"
        "difficulty: easy\nmax_test_timeout_sec: 60\n"
    )
    (task / "run-tests.sh").write_text(
        '#!/bin/bash\ncd /app\npython3 -m pytest -p no:cacheprovider "$TEST_DIR/test_outputs.py" -rA\n'
    )
    (task / "tests" / "test_outputs.py").write_text(TEST)
    (task / "solution.sh").write_text('#!/bin/bash\necho "hello, world" > /app/greeting.txt\n')
    return task


SLIM = (
    "FROM python:3.13-slim\nWORKDIR /app\nCOPY greeting.txt /app/greeting.txt\nCOPY src/ ./src/\n"
)


@pytest.mark.parametrize(
    "base",
    [
        "python:3.13-slim",
        "docker.io/library/python:3.12-slim-bookworm",
        "debian:bookworm",
        "ghcr.io/laude-institute/t-bench/python-3-13:20250620",
        "ubuntu:24.04",
    ],
)
def test_standin_bases_are_accepted(tmp_path: Path, base: str) -> None:
    task = load_task(write_task(tmp_path, SLIM.replace("python:3.13-slim", base)))
    assert task.local_problem is None
    assert task.copies == (("greeting.txt", "/app/greeting.txt"), ("src/", "/app/src"))
    assert standin_difference(task) is not None
    assert standin_difference(task).startswith("base ")


@pytest.mark.parametrize(
    ("dockerfile", "said"),
    [
        ("FROM alpine:3.20\nWORKDIR /app\n", "base image 'alpine:3.20'"),
        ("FROM buildpack-deps:jammy\nWORKDIR /app\n", "buildpack-deps:jammy"),
        (SLIM + "RUN apt-get update && apt-get install -y asciinema\n", "RUN 'apt-get"),
        ("FROM python:3.13-slim\nWORKDIR /src\n", "WORKDIR /src"),
    ],
)
def test_what_it_cannot_replay_is_refused(tmp_path: Path, dockerfile: str, said: str) -> None:
    task = load_task(write_task(tmp_path, dockerfile))
    why = unsupported_reason(task)
    assert why is not None and said in why


def test_ubuntu_difference_names_the_distribution(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path, SLIM.replace("python:3.13-slim", "ubuntu:24.04")))
    note = standin_difference(task)
    assert note is not None and "for Ubuntu 24.04" in note


@pytest.mark.bwrap
def test_slim_task_runs_locally(tmp_path: Path) -> None:
    write_task(tmp_path, SLIM)
    env = gym.make("agentenvs/TerminalBench-v0", tasks_path=tmp_path, runtime="local")
    try:
        assert env.unwrapped.check_tasks() == {}
        _, info = env.reset(seed=0, options={"task_id": "slim-greeting"})
        assert info["base_standin"].startswith("base python:3.13-slim")
        *_, info = env.step(env.unwrapped.oracle_action() + "\nsubmit")
        assert info["success"] and info["tests_passed"] == 2
        env.reset(seed=0, options={"task_id": "slim-greeting"})
        *_, info = env.step("submit")
        assert not info["success"] and info["tests_passed"] == 1
    finally:
        env.close()


REAL = Path(__file__).parent / "terminal_real_fixtures"


@pytest.mark.bwrap
def test_harbor_tasks_on_a_slim_base_run_or_are_refused_by_name(tmp_path: Path) -> None:
    """``uvx ... pytest`` finds pytest; a plugin the sandbox lacks refuses the task."""
    import shutil

    for name in ("harbor-multi-reward", "harbor-ctrf"):
        shutil.copytree(REAL / name, tmp_path / name)
    env = gym.make("agentenvs/TerminalBench-v0", tasks_path=tmp_path, runtime="local")
    try:
        why = env.unwrapped.check_tasks()
        assert list(why) == ["harbor-ctrf"] and "'pytest-json-ctrf'" in why["harbor-ctrf"]
        env.reset(seed=0, options={"task_id": "harbor-multi-reward"})
        *_, info = env.step(env.unwrapped.oracle_action() + "\nsubmit")
        assert info["success"] and info["rewards"] == {"sorted": 1.0, "count": 1.0}
        env.reset(seed=0, options={"task_id": "harbor-multi-reward"})
        *_, info = env.step("submit")
        assert not info["success"]
    finally:
        env.close()


def test_a_standin_base_without_workdir_app_is_refused(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path, "FROM ubuntu:24.04\n"))
    assert "WORKDIR /" in (task.local_problem or "")
