import os
import subprocess
import sys
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))


def run_stats(tmp_path, text):
    path = tmp_path / "in.csv"
    path.write_text(text)
    res = subprocess.run(
        [sys.executable, str(APP / "stats.py"), str(path)], capture_output=True, text=True, timeout=20
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_readings_file():
    res = subprocess.run(
        [sys.executable, str(APP / "stats.py"), str(APP / "readings.csv")],
        capture_output=True, text=True, timeout=20,
    )
    assert res.stdout.splitlines() == ["temperature: 20.44", "humidity: 48.50", "wind: 4.31"]


def test_integers(tmp_path):
    assert run_stats(tmp_path, "a,b\n1,10\n2,20\n3,30\n4,40\n") == ["a: 2.50", "b: 25.00"]


def test_decimals_and_negatives(tmp_path):
    assert run_stats(tmp_path, "x\n-1.5\n2.25\n0.5\n") == ["x: 0.42"]


def test_single_row(tmp_path):
    assert run_stats(tmp_path, "p,q,r\n7,8,9\n") == ["p: 7.00", "q: 8.00", "r: 9.00"]


def test_blank_lines_ignored(tmp_path):
    assert run_stats(tmp_path, "k\n\n4\n\n6\n\n") == ["k: 5.00"]
