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

pytestmark = pytest.mark.docker("agentenvs/tb-python:3.13")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TerminalBenchEnv]:
    # an empty wheelhouse: what the images alone give (the project's own wheelhouse
    # serves pytest-json-ctrf: tests/envs/test_terminal_registry_wheelhouse.py)
    env = TerminalBenchEnv(
        tasks_path=REAL,
        runtime="docker",
        offline=True,
        command_timeout=120,
        max_turns=3,
        wheelhouse=tmp_path_factory.mktemp("no-wheels"),
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


def write_wheel(folder: Path, name: str, version: str, source: str) -> Path:
    """A pure-Python wheel of one module, written by hand (no index, no build backend)."""
    import base64
    import hashlib
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": source,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return wheel


def test_a_wheelhouse_provides_what_the_image_lacks(tmp_path: Path) -> None:
    task = tmp_path / "tasks" / "harbor-needs-probe"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    (task / "task.toml").write_text('version = "1.0"\n\n[verifier]\ntimeout_sec = 120.0\n')
    (task / "instruction.md").write_text("Write done to /app/status.txt.\n")
    (task / "environment" / "Dockerfile").write_text("FROM python:3.13-slim\nWORKDIR /app\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho done > /app/status.txt\n")
    test_sh = (REAL / "harbor-ctrf" / "tests" / "test.sh").read_text()
    (task / "tests" / "test.sh").write_text(
        test_sh.replace("-w pytest-json-ctrf==0.3.5", "-w tbprobe==1.0").replace(
            "--ctrf /logs/verifier/ctrf.json ", ""
        )
    )
    (task / "tests" / "test_outputs.py").write_text(
        "from pathlib import Path\n\nimport tbprobe\n\n\ndef test_status():\n"
        '    assert tbprobe.VALUE == 42\n    assert Path("/app/status.txt").read_text() == "done\\n"\n'
    )
    wheels = tmp_path / "wheels"
    write_wheel(wheels, "tbprobe", "1.0", "VALUE = 42\n")
    for wheelhouse, passes in ((None, False), (wheels, True)):
        env = TerminalBenchEnv(
            tasks_path=tmp_path / "tasks",
            runtime="docker",
            offline=True,
            command_timeout=120,
            wheelhouse=wheelhouse,
        )
        try:
            env.reset(options={"task_id": "harbor-needs-probe"})
            env.step(env.oracle_action())
            _, reward, term, _, info = env.step("submit")
            assert term and info["success"] == passes, env._test_output[-2000:]
            if passes:
                assert "offline_unmet" not in info
            else:
                assert info["offline_unmet"] == ["the Python package 'tbprobe==1.0'"]
        finally:
            env.close()
