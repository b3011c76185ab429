"""Test-time packages offline: the project's wheelhouse (``sandboxes/build_wheelhouse.sh``,
pip's download of what the official bootstraps install) is served to the container, so a
Harbor cookbook task whose ``test.sh`` runs ``uvx -w pytest==8.4.1 -w
pytest-json-ctrf==0.3.5 pytest --ctrf ...`` runs unmodified: its oracle passes, an empty
episode fails, and nothing is reported unmet."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenvs.envs.terminal import offline
from agentenvs.envs.terminal.env import TerminalBenchEnv

CTRF_TASK = Path(__file__).parent / "terminal_real_fixtures" / "harbor-ctrf"


@pytest.mark.docker("agentenvs/tb-python:3.13")
def test_harbor_ctrf_task_runs_unmodified_with_the_project_wheelhouse() -> None:
    wheels = offline.default_wheelhouse()
    assert any(wheels.glob("pytest_json_ctrf-0.3.5-*.whl")), (
        f"no pytest-json-ctrf wheel in {wheels}: run sandboxes/build_wheelhouse.sh"
    )
    assert "pytest-json-ctrf==0.3.5" in (CTRF_TASK / "tests" / "test.sh").read_text()
    env = TerminalBenchEnv(
        tasks_path=CTRF_TASK, runtime="docker", offline=True, command_timeout=120, max_turns=3
    )
    try:
        assert env.check_tasks() == {}
        env.reset(options={"task_id": "harbor-ctrf"})
        obs, reward, term, _, info = env.step("submit")
        assert term and reward == 0.0 and not info["success"], obs
        assert not info.get("offline_unmet"), obs
        env.reset(options={"task_id": "harbor-ctrf"})
        env.step(env.oracle_action())
        obs, reward, term, _, info = env.step("submit")
        # --ctrf is the plugin's option: pytest refuses it unless the plugin was installed
        assert term and reward == 1.0 and info["success"], obs
        assert not info.get("offline_unmet"), obs
    finally:
        env.close()
