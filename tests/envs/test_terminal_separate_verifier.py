"""Harbor's separate verifier (``[verifier] environment_mode = "separate"``): the tests run
in a fresh container of the verifier's own image (``tests/Dockerfile``), with only what
Harbor carries over from the agent's container (``/logs/artifacts`` and the task's
``artifacts``); every process of the agent is stopped first, so nothing it left running
can change the verdict. The local runtime refuses such a task up front, saying why."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenvs.core.errors import TaskError
from agentenvs.envs.terminal.data import load_task
from agentenvs.envs.terminal.env import TerminalBenchEnv

FIXTURES = Path(__file__).parent / "terminal_steps_fixtures"
SEPARATE = FIXTURES / "harbor-separate-verifier"
TASK = "harbor-separate-verifier"

#: the agent's last act: the right answer, and a process that waits for the tests to show
#: up beside it (as they would in a shared verifier) to overwrite the answer and the
#: reward while they run
SABOTEUR = (
    "python3 -c \"print(sum(int(x) for x in open('/app/numbers.txt')))\" > /app/answer.txt\n"
    "nohup bash -c 'while [ ! -e /tests/test.sh ]; do sleep 0.02; done; while true; do "
    "echo 99 > /app/answer.txt; mkdir -p /logs/verifier; "
    "echo 0 > /logs/verifier/reward.txt; echo 0 > /logs/verifier/reward.json; "
    "sleep 0.01; done' >/dev/null 2>&1 &\n"
)


def test_a_separate_verifier_loads_with_what_harbor_carries() -> None:
    task = load_task(SEPARATE)
    assert task.separate_verifier and task.verifier_context == SEPARATE / "tests"
    assert task.verifier_image is None
    assert task.artifacts == ("/logs/artifacts", "/app/answer.txt")
    assert task.problems == ()


def test_a_separate_verifier_without_its_image_is_named(tmp_path: Path) -> None:
    task = tmp_path / "t"
    shutil.copytree(SEPARATE, task)
    (task / "tests" / "Dockerfile").unlink()
    with pytest.raises(TaskError, match="tests/Dockerfile"):
        load_task(task)
    # a prebuilt image for the verifier needs no Dockerfile
    toml = (task / "task.toml").read_text()
    toml += '\n[verifier.environment]\ndocker_image = "python:3.13-slim"\n'
    (task / "task.toml").write_text(toml.replace('environment_mode = "separate"\n', ""))
    loaded = load_task(task)
    assert loaded.separate_verifier and loaded.verifier_image == "python:3.13-slim"


@pytest.mark.bwrap
def test_the_local_runtime_refuses_it_up_front() -> None:
    env = TerminalBenchEnv(tasks_path=FIXTURES, runtime="local")
    try:
        assert "separate verifier" in env.unsupported_tasks[TASK]
        assert "docker runtime only" in env.unsupported_tasks[TASK]
        with pytest.raises(TaskError, match="separate verifier"):
            env.reset(options={"task_id": TASK})
    finally:
        env.close()


@pytest.fixture(scope="module")
def env() -> Iterator[TerminalBenchEnv]:
    made = TerminalBenchEnv(
        tasks_path=FIXTURES, runtime="docker", offline=True, command_timeout=60, max_turns=4
    )
    yield made
    made.close()


@pytest.mark.docker("agentenvs/tb-python:3.13")
@pytest.mark.parametrize("grading", ["safe", "official"])
def test_the_solution_passes_and_an_empty_episode_fails(
    env: TerminalBenchEnv, grading: str
) -> None:
    env.grading = grading
    env.close()  # the docker runtime fills verifier mounts for safe grading only
    env.reset(options={"task_id": TASK})
    env.step(env.oracle_action())
    obs, reward, term, _, info = env.step("submit")
    assert term and reward == 1.0 and info["success"], env._test_output[-2000:]
    # the verifier saw the artifact, and nothing else of the agent's files
    assert info["rewards"] == {"answer": 1.0, "isolated": 1.0}
    env.reset(options={"task_id": TASK})
    obs, reward, term, _, info = env.step("submit")
    assert term and reward == 0.0 and not info["success"]
    assert info["rewards"] == {"answer": 0.0, "isolated": 1.0}


@pytest.mark.docker("agentenvs/tb-python:3.13")
@pytest.mark.parametrize("grading", ["safe", "official"])
def test_a_process_left_running_cannot_change_the_verdict(
    env: TerminalBenchEnv, grading: str
) -> None:
    env.grading = grading
    env.close()
    env.reset(options={"task_id": TASK})
    obs, *_ = env.step(SABOTEUR)
    assert "[exit status: 0]" in obs, obs
    obs, reward, term, _, info = env.step("submit")
    assert term and reward == 1.0 and info["success"], env._test_output[-2000:]
    assert info["rewards"] == {"answer": 1.0, "isolated": 1.0}
    assert info["processes_stopped"] >= 1
    # the verdict is the verifier's container's: read again, it has not moved
    rc, out = env.shell.control("cat /logs/verifier/reward.json; cat /app/answer.txt")
    assert rc == 0 and out.decode().split() == ['{"answer":', "1,", '"isolated":', "1}", "10"]


#: the same trick made certain, for the shared verifier: the answer is a pipe that a
#: process the agent left running writes, choosing what to write only once a reader has
#: opened it, so it says 10 to anything before the tests and 99 to the tests (which run
#: from /tests/test.sh) whatever the timing
PIPED_SABOTEUR = (
    "rm -f /app/answer.txt && mkfifo /app/answer.txt\n"
    "nohup bash -c 'while true; do { if [ -e /tests/test.sh ]; then echo 99; else echo 10; "
    "fi; } > /app/answer.txt; done' >/dev/null 2>&1 &\n"
)


@pytest.mark.docker("agentenvs/tb-python:3.13")
def test_the_same_process_changes_a_shared_verdict(tmp_path: Path) -> None:
    # the check above can fail: the tests in the agent's own container (Harbor's shared
    # mode, graded as Harbor grades) read what the process the agent left running says
    shutil.copytree(SEPARATE, tmp_path / "shared")
    toml = tmp_path / "shared" / "task.toml"
    toml.write_text(toml.read_text().replace('environment_mode = "separate"\n', ""))
    env = TerminalBenchEnv(
        tasks_path=tmp_path, runtime="docker", offline=True, grading="official", max_turns=4
    )
    try:
        env.reset(options={"task_id": "shared"})
        env.step(PIPED_SABOTEUR)
        obs, *_ = env.step("cat /app/answer.txt")
        assert obs.split()[0] == "10", obs  # the right answer, to anyone but the tests
        _, reward, term, _, info = env.step("submit")
        # the tests read 99; the agent's files are all there (shared: not isolated)
        assert term and reward == 0.0 and info["rewards"] == {"answer": 0.0, "isolated": 0.0}
    finally:
        env.close()
