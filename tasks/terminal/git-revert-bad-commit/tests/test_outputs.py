import os
import subprocess
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
REPO = APP / "repo"
ORIGINAL = [
    "Document money.py",
    "Add currency formatting",
    "Set discount to 50 percent",
    "Add README",
    "Add pricing module",
]


def git(*args):
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_history_preserved():
    assert git("log", "--format=%s", "main~1").splitlines() == ORIGINAL


def test_revert_commit_on_top():
    assert git("log", "-1", "--format=%s", "main") == 'Revert "Set discount to 50 percent"'
    bad = git("rev-parse", "main~3")
    assert f"This reverts commit {bad}" in git("log", "-1", "--format=%B", "main")


def test_discount_restored():
    ns = {}
    exec(git("show", "main:pricing.py"), ns)
    assert ns["DISCOUNT"] == 0.1
    assert ns["final_price"](100) == 108.0


def test_later_commits_kept():
    assert "def fmt" in git("show", "main:money.py")
    assert "See money.py" in git("show", "main:README.md")


def test_on_main_and_clean():
    assert git("symbolic-ref", "--short", "HEAD") == "main"
    assert git("status", "--porcelain") == ""
