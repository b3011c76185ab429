"""``check_tasks`` predicts, without building, what a task needs that this machine cannot
give, and names it: a base image that cannot be had, a Debian package an offline build
cannot serve, tests that need the network; a registry that fails is a fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenvs.core.errors import Fault
from agentenvs.envs.terminal.env import TerminalBenchEnv
from agentenvs.envs.terminal.needs import apt_installs, downloads, host_calls, pip_installs

TEST = """\
from pathlib import Path


def test_greeting():
    assert Path("/app/greeting.txt").read_text().strip() == "hello, world"
"""
JUDGE_TEST = """\
import os, json, requests

BASE = os.environ.get("BASE_URL", "http://203.0.113.7:8081")


def test_judged():
    assert requests.get(f"{BASE}/health", timeout=5).ok
"""
RUN_TESTS = (
    '#!/bin/bash\ncd /app\npython3 -m pytest -p no:cacheprovider "$TEST_DIR/test_outputs.py" -rA\n'
)


def write_task(
    root: Path, name: str, dockerfile: str, run_tests: str = RUN_TESTS, test: str = TEST
) -> Path:
    """A task in the TB1 layout."""
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "Dockerfile").write_text(dockerfile)
    (task / "task.yaml").write_text("instruction: Write hello, world into /app/greeting.txt.\n")
    (task / "run-tests.sh").write_text(run_tests)
    (task / "tests" / "test_outputs.py").write_text(test)
    (task / "solution.sh").write_text('#!/bin/bash\necho "hello, world" > /app/greeting.txt\n')
    return task


def test_the_analysers_read_installs_downloads_and_host_calls() -> None:
    run = (
        "apt-get update && apt-get install -y --no-install-recommends \\\n  tmux asciinema=2.* curl"
    )
    assert apt_installs(run) == ["tmux", "asciinema", "curl"]
    assert pip_installs("python3 -m pip install -U pip requests==2.0 -r req.txt .") == [
        "pip",
        "requests",
    ]
    assert pip_installs("uv add pytest==8.4.1; uvx -w pytest-json-ctrf==0.3.5 pytest") == [
        "pytest",
        "pytest-json-ctrf",
    ]
    script = (
        "curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\n"
        "curl -s http://127.0.0.1:8000/x\n"
        "git clone https://github.com/google/googletest.git -b v1.14.0\n"
    )
    assert downloads(script) == ["https://github.com/google/googletest.git"]
    assert host_calls(JUDGE_TEST) == ["http://203.0.113.7:8081"]
    assert host_calls('"""See https://example.org."""\nimport os\n') == []


@pytest.mark.docker("agentenvs/tb-python:3.13")
def test_check_tasks_names_each_unmet_need_offline(tmp_path: Path) -> None:
    slim = "FROM python:3.13-slim\nWORKDIR /app\n"
    write_task(tmp_path, "runnable", slim + "RUN apt-get update && apt-get install -y curl\n")
    write_task(tmp_path, "missing-image", "FROM agentenvs/no-such-base:1\nWORKDIR /app\n")
    write_task(
        tmp_path, "missing-apt", slim + "RUN apt-get update && apt-get install -y r-base-dev\n"
    )
    write_task(tmp_path, "judge", slim, test=JUDGE_TEST)
    write_task(
        tmp_path,
        "clones",
        slim,
        run_tests="git clone https://github.com/google/googletest.git\n" + RUN_TESTS,
    )
    write_task(tmp_path, "test-pip", slim, run_tests="pip install no-such-dist-xyz\n" + RUN_TESTS)
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=True)
    try:
        why = env.check_tasks()
        assert set(why) == {"missing-image", "missing-apt", "judge", "clones", "test-pip"}
        assert "'agentenvs/no-such-base:1'" in why["missing-image"]
        assert "the Debian package 'r-base-dev'" in why["missing-apt"]
        assert "curl" not in why["missing-apt"]  # a stand-in serves it
        assert "http://203.0.113.7:8081" in why["judge"]
        assert "github.com/google/googletest" in why["clones"]
        assert "'no-such-dist-xyz'" in why["test-pip"]
        assert env.task_ids == ["runnable"]
    finally:
        env.close()


@pytest.mark.docker("agentenvs/tb-python:3.13")
def test_the_prediction_matches_the_build_and_the_run(tmp_path: Path) -> None:
    """What is predicted runnable builds and grades (solution passes, nothing fails);
    what is predicted refused for a package fails to build, naming it."""
    slim = "FROM python:3.13-slim\nWORKDIR /app\n"
    write_task(tmp_path, "runnable", slim + "RUN apt-get update && apt-get install -y curl\n")
    write_task(
        tmp_path, "missing-apt", slim + "RUN apt-get update && apt-get install -y r-base-dev\n"
    )
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=True)
    built = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=True)
    try:
        assert set(env.check_tasks()) == {"missing-apt"}
        assert set(built.check_tasks(build=True)) == {"missing-apt"}
        assert "r-base-dev" in built.unsupported_tasks["missing-apt"]
        env.reset(options={"task_id": "runnable"})
        *_, info = env.step(env.oracle_action() + "\nsubmit")
        assert info["success"]
        env.reset(options={"task_id": "runnable"})
        *_, info = env.step("submit")
        assert not info["success"]
    finally:
        env.close()
        built.close()


@pytest.mark.docker("agentenvs/terminal:latest")
def test_a_registry_that_fails_is_a_fault_at_check_time(tmp_path: Path) -> None:
    # .invalid never resolves: the registry cannot be reached, which is not the task's
    write_task(tmp_path, "unreachable", "FROM registry.invalid/agentenvs/none:1\nWORKDIR /app\n")
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=False)
    try:
        with pytest.raises(Fault) as caught:
            env.check_tasks()
        assert caught.value.kind == "registry" and "registry.invalid" in str(caught.value)
        assert "unreachable" not in env.unsupported_tasks
    finally:
        env.close()
