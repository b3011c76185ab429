import os
import subprocess
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
REPO = APP / "repo"
MAIN_LOG = ["Add README", "Add subtract", "Add calculator with add"]


def git(*args):
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def load_calc(rev):
    ns = {}
    exec(git("show", f"{rev}:calc.py"), ns)
    return ns


def test_branch_exists():
    assert git("branch", "--list", "feature/multiply") != ""


def test_main_unchanged():
    assert git("log", "--format=%s", "main").splitlines() == MAIN_LOG


def test_branch_is_one_commit_on_top_of_main():
    assert git("rev-parse", "feature/multiply~1") == git("rev-parse", "main")
    assert git("log", "-1", "--format=%s", "feature/multiply") == "Add multiply"


def test_multiply_works_on_branch():
    ns = load_calc("feature/multiply")
    assert ns["multiply"](3, 4) == 12
    assert ns["multiply"](-2, 2.5) == -5.0
    assert ns["add"](2, 3) == 5 and ns["subtract"](5, 3) == 2


def test_back_on_main_and_clean():
    assert git("symbolic-ref", "--short", "HEAD") == "main"
    assert git("status", "--porcelain") == ""
    assert "multiply" not in (REPO / "calc.py").read_text()
