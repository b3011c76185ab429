"""benchmarks/bench_scaling.py runs in its quick mode and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_scaling.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=240
    )


def table_rows(stdout: str) -> list[list[str]]:
    lines = [line for line in stdout.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_quick_prints_a_row_per_level_for_frozenlake() -> None:
    proc = run("--quick")
    assert proc.returncode == 0, proc.stderr
    header, *rows = table_rows(proc.stdout)
    assert header[:3] == ["env", "envs", "steps/s"]
    assert [(r[0], r[1]) for r in rows] == [("frozenlake", "1"), ("frozenlake", "4")]
    for row in rows:
        assert float(row[2].replace(",", "")) > 0  # steps were taken and counted
        p50, p99 = (float(x) for x in row[3].split(" / "))
        assert 0 < p50 <= p99
        assert float(row[5]) >= -1.0  # RSS growth a live env, in MiB (may shrink a little)
    assert "commit" in proc.stdout


def test_unknown_env_is_refused() -> None:
    proc = run("--quick", "--only", "no-such-env")
    assert proc.returncode != 0
    assert "unknown env" in proc.stderr
