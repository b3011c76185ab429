"""Build-time packages offline: the build wheelhouse (``sandboxes/build_wheelhouse.sh``:
pandas, scipy, numpy, ... as binary wheels for the stand-ins' Python) is given to offline
builds whose Dockerfile runs pip. The task here is written as the published Harbor sets
write thousands of theirs: ``FROM`` the t-bench ubuntu-24-04 image, ``python3-pip`` from
apt with a ``python`` link made by hand, then ``pip3 install pytest==8.4.1 pandas==2.3.2
scipy==1.16.1`` in the Dockerfile. It runs unmodified (its solution passes, an empty
episode fails); a pin the wheelhouse lacks is predicted refused, with the versions it has,
and the build indeed fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenvs.envs.terminal import offline
from agentenvs.envs.terminal.env import TerminalBenchEnv

BASE = "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624"

DOCKERFILE = f"""FROM {BASE}

ENV DEBIAN_FRONTEND=noninteractive

# Install python3-pip and create python symlink
RUN apt-get update && \\
    apt-get install -y python3-pip && \\
    ln -s /usr/bin/python3 /usr/bin/python && \\
    rm -rf /var/lib/apt/lists/*

# Install test dependencies
RUN pip3 install --no-cache-dir --break-system-packages {{pins}}

RUN mkdir -p /workspace/data && printf 'x,y\\n1,2\\n3,5\\n4,9\\n' > /workspace/data/points.csv

WORKDIR /workspace

ENV TEST_DIR=/tests
"""

TASK_TOML = """version = "1.0"

[metadata]
difficulty = "medium"
category = "data-science"

[verifier]
timeout_sec = 240.0

[agent]
timeout_sec = 900.0

[environment]
cpus = 1
memory_mb = 2048
allow_internet = true
mcp_servers = []
"""

TEST_SH = """#!/bin/bash

# Run tests (test dependencies already installed in Dockerfile)
pytest /tests/test_outputs.py -rA

_EXIT_CODE=$?
if [ $_EXIT_CODE -eq 0 ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
exit $_EXIT_CODE
"""

TEST_OUTPUTS = """import json
from pathlib import Path

import pandas as pd
from scipy import stats


def test_fit_written():
    assert Path("/workspace/fit.json").exists()


def test_fit_matches_the_data():
    data = pd.read_csv("/workspace/data/points.csv")
    fit = stats.linregress(data["x"], data["y"])
    got = json.loads(Path("/workspace/fit.json").read_text())
    assert abs(got["slope"] - fit.slope) < 1e-9
"""

SOLVE_SH = """#!/bin/bash
python - <<'EOF'
import json
import pandas as pd
from scipy import stats
d = pd.read_csv("/workspace/data/points.csv")
json.dump({"slope": stats.linregress(d["x"], d["y"]).slope}, open("/workspace/fit.json", "w"))
EOF
"""


def write_task(root: Path, name: str, pins: str) -> None:
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    (task / "task.toml").write_text(TASK_TOML)
    (task / "instruction.md").write_text(
        "Fit a line to /workspace/data/points.csv (y against x) and write its slope to "
        '/workspace/fit.json as {"slope": ...}.\n'
    )
    (task / "environment" / "Dockerfile").write_text(DOCKERFILE.format(pins=pins))
    (task / "tests" / "test.sh").write_text(TEST_SH)
    (task / "tests" / "test_outputs.py").write_text(TEST_OUTPUTS)
    (task / "solution" / "solve.sh").write_text(SOLVE_SH)


def _need_build_wheels() -> Path:
    wheels = offline.default_build_wheelhouse()
    assert any(wheels.glob("pandas-2.3.2-*.whl")) and any(wheels.glob("scipy-1.16.1-*.whl")), (
        f"no pandas 2.3.2 / scipy 1.16.1 wheels in {wheels}: run sandboxes/build_wheelhouse.sh"
    )
    return wheels


@pytest.mark.docker("agentenvs/tb-debian:13")
def test_a_task_that_pip_installs_pandas_and_scipy_builds_and_grades_offline(
    tmp_path: Path,
) -> None:
    _need_build_wheels()
    write_task(tmp_path, "fit-line", "pytest==8.4.1 pandas==2.3.2 scipy==1.16.1")
    env = TerminalBenchEnv(
        tasks_path=tmp_path, runtime="docker", offline=True, command_timeout=120, max_turns=3
    )
    try:
        assert env.check_tasks() == {}
        # Debian 13 for Ubuntu 24.04, said so (unless an image of that name was pulled here)
        assert "fit-line" in env.stood_in or env.runtime()._present(BASE)
        env.reset(options={"task_id": "fit-line"})
        obs, reward, term, _, info = env.step("submit")
        assert term and reward == 0.0 and not info["success"], obs
        # the tests ran (pandas and scipy imported), and failed on the missing output
        assert info["test_results"] == {
            "test_fit_written": False,
            "test_fit_matches_the_data": False,
        }
        assert not info.get("offline_unmet"), obs
        env.reset(options={"task_id": "fit-line"})
        obs, *_ = env.step("python -c 'import pandas, scipy; print(pandas.__version__)'")
        assert "2.3.2" in obs
        env.step(env.oracle_action())
        obs, reward, term, _, info = env.step("submit")
        assert term and reward == 1.0 and info["success"], obs
    finally:
        env.close()


@pytest.mark.docker("agentenvs/tb-debian:13")
def test_a_pin_the_wheelhouse_lacks_is_predicted_and_the_build_fails(tmp_path: Path) -> None:
    _need_build_wheels()
    write_task(tmp_path, "old-pandas", "pytest==8.4.1 pandas==2.2.0")
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=True)
    built = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=True)
    try:
        predicted = env.check_tasks()["old-pandas"]
        assert "the Python package 'pandas==2.2.0' at build time (the wheelhouse has 2.3.2)" in (
            predicted
        )
        actual = built.check_tasks(build=True)["old-pandas"]
        assert "pandas==2.2.0" in actual
    finally:
        env.close()
        built.close()


def test_binary_wheels_count_only_for_the_python_they_were_built_for() -> None:
    from agentenvs.envs.terminal.needs import wheel_fits

    pandas = "pandas-2.3.2-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    assert wheel_fits(pandas, "3.13") and not wheel_fits(pandas, "3.11")
    assert not wheel_fits(pandas, None)  # a base without Python takes pure wheels only
    assert wheel_fits("pytz-2026.6-py2.py3-none-any.whl", None)
    assert wheel_fits("cryptography-46.0.0-cp311-abi3-manylinux_2_28_x86_64.whl", "3.13")
    assert not wheel_fits("cryptography-46.0.0-cp311-abi3-manylinux_2_28_x86_64.whl", "3.10")


@pytest.mark.docker("agentenvs/terminal:latest")
def test_a_base_on_another_python_gets_no_binary_wheel_in_the_prediction(tmp_path: Path) -> None:
    """The wheelhouse's binary wheels are for the stand-ins' Python 3.13; a TB1 task on the
    project's own base (Debian 12, Python 3.11) that pip-installs scikit-learn cannot have
    it: predicted so, and the build fails the same way."""
    _need_build_wheels()
    task = tmp_path / "sklearn-on-311"
    (task / "tests").mkdir(parents=True)
    (task / "Dockerfile").write_text(
        "FROM ${BASE_IMAGE}\nWORKDIR /app\nRUN pip install scikit-learn\n"
    )
    (task / "task.yaml").write_text("instruction: Fit a model.\n")
    (task / "run-tests.sh").write_text("#!/bin/bash\ncd /tests && pytest -rA test_outputs.py\n")
    (task / "tests" / "test_outputs.py").write_text("def test_nothing():\n    assert False\n")
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=True)
    try:
        predicted = env.check_tasks()["sklearn-on-311"]
        assert "the Python package 'scikit-learn' at build time" in predicted
        actual = env.check_tasks(build=True)["sklearn-on-311"]
        assert "scikit-learn" in actual
    finally:
        env.close()
