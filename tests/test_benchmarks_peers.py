"""The peer scripts of benchmarks/peers/ run in a short mode and compare like for like:
the same games or episodes on both sides, every one of them checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PEERS = Path(__file__).resolve().parents[1] / "benchmarks" / "peers"


def run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PEERS / script)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **env},
    )


def test_frozenlake_plays_textarenas_games_one_env_a_game() -> None:
    pytest.importorskip("textarena")
    proc = run("bench_frozenlake.py", BENCH_GAMES="12", BENCH_ROUNDS="2")
    assert proc.returncode == 0, proc.stderr
    assert "12 games (TextArena's 4x4 maps for seeds 0..11" in proc.stdout
    assert "2 rounds taking turns; medians over rounds" in proc.stdout
    ratio = re.search(r"steps/s ([\d.]+)x, resets/s ([\d.]+)x", proc.stdout)
    assert ratio is not None, proc.stdout
    assert float(ratio.group(1)) > 0 and float(ratio.group(2)) > 0


def test_sql_rewards_the_gold_on_both_sides() -> None:
    pytest.importorskip("skyrl_gym")
    proc = run("bench_sql.py", BENCH_REPEATS="1")
    assert proc.returncode == 0, proc.stderr
    agree = re.search(r"both rewarded the gold 1.0 in (\d+)/(\d+) episodes", proc.stdout)
    assert agree is not None, proc.stdout
    assert agree.group(1) == agree.group(2) and int(agree.group(2)) > 0
    assert "CPU an episode" in proc.stdout
