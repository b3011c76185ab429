import os
import subprocess
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
REPO = APP / "repo"
KEY = "sk-live-4f9a1c2e7b"
ORIGINAL = ["Ignore caches", "Add timeout", "Configure service access", "Add client", "Add settings"]


def git(*args, check=True):
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=check
    ).stdout.strip()


def test_leak_commit_identified():
    expected = git("log", "--format=%H", "--grep=^Configure service access$")
    assert len(expected) == 40
    assert (APP / "leak_commit.txt").read_text().strip() == expected


def test_history_not_rewritten():
    subjects = git("log", "--format=%s", "main").splitlines()
    assert len(subjects) > len(ORIGINAL)
    assert subjects[-len(ORIGINAL):] == ORIGINAL


def test_key_not_in_committed_settings():
    settings = git("show", "main:settings.py")
    assert KEY not in settings
    assert 'API_KEY = os.environ.get("API_KEY", "")' in settings
    ns = {}
    exec(settings, ns)
    assert ns["DEBUG"] is False and ns["TIMEOUT"] == 10
    assert ns["SERVICE_URL"] == "https://api.example.invalid/v2"


def test_secrets_file_ignored_and_untracked():
    env_file = REPO / "secrets.env"
    assert f"API_KEY={KEY}" in env_file.read_text().splitlines()
    assert subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "secrets.env"]).returncode == 0
    assert "secrets.env" not in git("ls-files").splitlines()
    assert "__pycache__/" in git("show", "main:.gitignore").splitlines()


def test_clean_on_main():
    assert git("symbolic-ref", "--short", "HEAD") == "main"
    assert git("status", "--porcelain") == ""
