"""Real Terminal-Bench task folders, as their authors write them, run unmodified on the
Docker runtime offline: TB1 and Harbor layouts with the official test bootstraps
(``curl … uv/install.sh | sh``, ``uv add``/``uvx``, ``apt-get install``), official base
images resolved through the image map, ``FROM --platform``, ``ENV PATH=...:$PATH``,
named rewards in ``reward.json``, and tests that read the image's ``ENV``. The oracle
passes and an empty episode fails on every task whose needs can be met here; the others
are reported with the reason."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenvs.envs.terminal.env import TerminalBenchEnv

REAL = Path(__file__).parent / "terminal_real_fixtures"
RUNNABLE = ["harbor-multi-reward", "tb1-ubuntu-logs", "tb1-venv-sum"]
NOT_HERE = {
    "tb1-two-containers": "second container (redis)",
    "tb1-needs-go": "'golang:1.22-bookworm' is not on this machine",
    "harbor-needs-numpy": "could not provide the Python package 'numpy==2.1.0'",
}

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def env() -> Iterator[TerminalBenchEnv]:
    from agentenvs.sandbox.docker import docker_available

    ok, why = docker_available("agentenvs/tb-python:3.13")
    if not ok:
        pytest.skip(f"docker runtime unavailable: {why}")
    env = TerminalBenchEnv(
        tasks_path=REAL, runtime="docker", offline=True, command_timeout=120, max_turns=3
    )
    yield env
    env.close()


def test_what_cannot_run_offline_is_reported_with_the_reason(env: TerminalBenchEnv) -> None:
    why = env.check_tasks(build=True)
    assert set(why) == set(NOT_HERE)
    for task_id, reason in NOT_HERE.items():
        assert reason in why[task_id], why[task_id]
    assert sorted(env.task_ids) == sorted([*RUNNABLE, "harbor-ctrf"])


@pytest.mark.parametrize("task_id", RUNNABLE)
def test_oracle_passes_and_an_empty_episode_fails(env: TerminalBenchEnv, task_id: str) -> None:
    env.reset(options={"task_id": task_id})
    obs, reward, term, _, info = env.step("submit")
    assert term and reward == 0.0 and not info["success"], obs
    env.reset(options={"task_id": task_id})
    env.step(env.oracle_action())
    obs, reward, term, _, info = env.step("submit")
    assert term and reward == 1.0 and info["success"], env._test_output[-3000:]
    assert "offline_unmet" not in info
    if task_id == "harbor-multi-reward":
        # the cookbook's multi-reward shape: every named reward counts
        assert info["rewards"] == {"sorted": 1.0, "count": 1.0} and info["score"] == 1.0
        assert "Rewards: sorted=1, count=1" in obs
    else:
        assert info["tests_total"] == 2 and info["tests_passed"] == 2


def test_half_done_harbor_task_scores_its_named_rewards(env: TerminalBenchEnv) -> None:
    env.reset(options={"task_id": "harbor-multi-reward"})
    env.step("mkdir -p $REPORT_DIR && echo 3 > $REPORT_DIR/count.txt")
    _, reward, term, _, info = env.step("submit")
    assert term and reward == 0.0 and not info["success"]
    assert info["rewards"] == {"sorted": 0.0, "count": 1.0} and info["score"] == 0.5


def test_a_bootstrap_that_cannot_be_served_is_reported_not_silent(env: TerminalBenchEnv) -> None:
    env.reset(options={"task_id": "harbor-ctrf"})
    env.step(env.oracle_action())
    obs, reward, term, _, info = env.step("submit")
    assert term and not info["success"]
    assert info["offline_unmet"] == ["the Python package 'pytest-json-ctrf==0.3.5'"]
    assert "Offline, these could not be provided" in obs and "pytest-json-ctrf" in obs


def test_python_313_from_the_map_and_the_image_environment(env: TerminalBenchEnv) -> None:
    env.reset(options={"task_id": "tb1-venv-sum"})
    obs, *_ = env.step('python --version; echo "$PRICE_FILE"; command -v python; pwd')
    assert "Python 3.13" in obs and "/app/prices.txt" in obs
    assert "/opt/venv/bin/python" in obs and "\n/app\n" in obs
