import os
import subprocess
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
REPO = APP / "project"
TRACKED = {".gitignore", "README.md", "docs/usage.md", "src/main.py", "src/util.py"}


def git(*args):
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_is_git_repository():
    assert (REPO / ".git").is_dir()
    assert git("rev-parse", "--is-inside-work-tree") == "true"


def test_branch_is_main():
    assert git("symbolic-ref", "--short", "HEAD") == "main"


def test_local_identity():
    assert git("config", "--local", "user.name") == "Build Bot"
    assert git("config", "--local", "user.email") == "bot@example.invalid"


def test_single_initial_commit():
    assert git("rev-list", "--count", "HEAD") == "1"
    assert git("log", "-1", "--format=%s") == "Initial commit"
    assert git("log", "-1", "--format=%an <%ae>") == "Build Bot <bot@example.invalid>"


def test_tracked_files():
    assert set(git("ls-files").splitlines()) == TRACKED


def test_logs_and_build_ignored():
    for rel in ("app.log", "src/logs/debug.log", "build/app.bin", "build/lib/main.pyc.txt"):
        r = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", rel])
        assert r.returncode == 0, f"{rel} is not ignored"


def test_working_tree_clean():
    assert git("status", "--porcelain") == ""
