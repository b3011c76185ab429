"""``agentenvs check-tasks``: dataset folders surveyed, every task accepted, stood in,
refused with its need, or invalid with its file and field; a folder with no task is a row
that says so, and the others are still surveyed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentenvs.cli import main
from agentenvs.envs.terminal.survey import reason_kind

REAL = Path(__file__).parent / "terminal_real_fixtures"


def test_reasons_of_a_kind_are_counted_together() -> None:
    a = "base image 'golang:1.22-bookworm' is not on this machine (offline)"
    b = "base image 'rust:1.80' is not on this machine (offline)"
    assert reason_kind(a) == reason_kind(b) == "base image … is not on this machine (offline)"
    assert reason_kind("/data/x/task.yaml: field 'tests': missing") == "…: field …: missing"


@pytest.mark.bwrap
def test_check_tasks_surveys_each_folder_and_writes_every_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "real"
    shutil.copytree(REAL, good)
    broken = good / "tb1-no-instruction"
    shutil.copytree(REAL / "tb1-venv-sum", broken)
    (broken / "task.yaml").write_text("difficulty: easy\n")
    archives = tmp_path / "archives"
    archives.mkdir()
    (archives / "one.zip").write_bytes(b"PK")
    out = tmp_path / "verdicts.json"
    rc = main(["check-tasks", str(good), str(archives), "--runtime", "local", "--json", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "| real | 8 |" in printed and "| archives | 1 | 0 |" in printed
    rows = {Path(d["path"]).name: d for d in json.loads(out.read_text())}
    real = rows["real"]
    assert real["folders"] == 8
    assert set(real["invalid"]) == {"tb1-no-instruction"}
    assert "instruction" in real["invalid"]["tb1-no-instruction"]
    verdicts = set(real["accepted"]) | set(real["refused"]) | set(real["invalid"])
    assert len(verdicts) == 8 and not set(real["accepted"]) & set(real["refused"])
    # the local runtime refuses what needs Docker, by name
    assert "needs the docker runtime" in real["refused"]["tb1-needs-go"]
    assert set(real["stood_in"]) <= set(real["accepted"])
    assert rows["archives"]["error"] and "no task folders" in rows["archives"]["error"]
    assert "of 9 task folders accepted." in printed


@pytest.mark.bwrap
def test_a_build_that_reads_past_its_context_is_invalid_on_every_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks"
    shutil.copytree(REAL / "tb1-venv-sum", tasks / "reads-outside")
    dockerfile = tasks / "reads-outside" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "COPY ../secrets.txt /app/\n")
    line = len(dockerfile.read_text().splitlines())
    shutil.copytree(REAL / "tb1-venv-sum", tasks / "sound")
    out = tmp_path / "verdicts.json"
    assert main(["check-tasks", str(tasks), "--runtime", "local", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert row["invalid"] == {
        "reads-outside": (
            f"Dockerfile:{line}: the source '../secrets.txt' is outside the build context"
        )
    }
    assert "reads-outside" not in row["accepted"] and "reads-outside" not in row["refused"]
    assert "sound" in row["accepted"] or "sound" in row["refused"]
    assert "| tasks | 2 |" in capsys.readouterr().out
