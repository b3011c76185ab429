"""``benchmarks/bench_task_sets.py``: a set of task folders checked, its accepted tasks'
solutions and empty episodes played under both gradings, one record per task, a rerun
skipping what is done, and a table whose counts are those of the records."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_task_sets.py"
REAL = Path(__file__).parent / "terminal_real_fixtures"

pytestmark = pytest.mark.docker("agentenvs/tb-python:3.13")


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=800
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _row(printed: str, name: str) -> list[str]:
    (line,) = [x for x in printed.splitlines() if x.startswith(f"| {name} |")]
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.timeout(900)
def test_a_set_is_checked_played_and_counted(tmp_path: Path) -> None:
    tasks = tmp_path / "fixture-set"
    tasks.mkdir()
    # two tasks that run offline (TB1 and Harbor), one the check refuses (a pin the
    # wheelhouse lacks), one that does not load
    for name in ("tb1-venv-sum", "harbor-multi-reward", "harbor-needs-numpy"):
        shutil.copytree(REAL / name, tasks / name)
    shutil.copytree(REAL / "tb1-venv-sum", tasks / "tb1-no-tests")
    shutil.rmtree(tasks / "tb1-no-tests" / "tests")
    out = tmp_path / "runs.jsonl"

    printed = _run(str(tasks), "--out", str(out), "--offline", "yes", "--task-wall", "600")
    row = _row(printed, "fixture-set")
    assert row[1] == "4"  # folders
    assert row[2] == "2 / 1 / 1"  # accepted / refused / invalid
    assert row[3] == "2"  # played: the accepted ones
    assert row[4] == "2/2 / 2/2"  # each solution passes under safe and official grading
    assert row[5] == "2/2 / 2/2"  # each empty episode fails under both
    assert row[6] == "2/2 / 2/2"
    assert row[7] == "2/2"  # the gradings agree
    assert row[8] == "0"  # no accepted task failed to build
    assert row[9] == "0 / 0"  # no refused task played

    records = [json.loads(x) for x in out.read_text().splitlines()]
    plays = {r["task"]: r for r in records if r["kind"] == "play"}
    assert set(plays) == {"tb1-venv-sum", "harbor-multi-reward"}
    for play in plays.values():
        assert play["stopped"] is None
        got = {(e["grading"], e["episode"]): e["success"] for e in play["episodes"]}
        assert got == {
            ("safe", "solution"): True, ("safe", "empty"): False,
            ("official", "solution"): True, ("official", "empty"): False,
        }
    (check,) = [r for r in records if r["kind"] == "check"]
    assert check["verdicts"]["harbor-needs-numpy"][0] == "refused"
    assert "numpy==2.1.0" in check["verdicts"]["harbor-needs-numpy"][1]
    assert check["verdicts"]["tb1-no-tests"][0] == "invalid"

    # a rerun plays nothing again, and now plays the refused task it is asked for: its
    # image does not build, as predicted
    printed = _run(str(tasks), "--out", str(out), "--offline", "yes", "--refused", "1")
    plays = [json.loads(x) for x in out.read_text().splitlines()]
    plays = [r for r in plays if r["kind"] == "play"]
    assert sorted(r["task"] for r in plays) == [
        "harbor-multi-reward", "harbor-needs-numpy", "tb1-venv-sum"
    ]
    refused = next(r for r in plays if r["task"] == "harbor-needs-numpy")
    assert all(e["error"].startswith("refused") for e in refused["episodes"])
    assert _row(printed, "fixture-set")[9] == "0 / 1"
