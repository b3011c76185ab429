import configparser
import os
import subprocess
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
REPO = APP / "repo"


def git(*args):
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def merged_config():
    text = git("show", "main:config.ini")
    cp = configparser.ConfigParser()
    cp.read_string(text)
    return text, cp


def test_merge_commit_on_main():
    parents = git("log", "-1", "--format=%P", "main").split()
    assert len(parents) == 2, "main's tip is not a merge commit"
    subjects = [git("log", "-1", "--format=%s", p) for p in parents]
    assert subjects == ["Tune server workers", "Log as JSON"]


def test_feature_branch_kept():
    assert git("log", "-1", "--format=%s", "feature/timeouts") == "Log as JSON"


def test_no_conflict_markers():
    text, _ = merged_config()
    for marker in ("<<<<<<<", "=======", ">>>>>>>"):
        assert marker not in text


def test_server_section_resolved():
    _, cp = merged_config()
    assert cp["server"]["timeout"] == "60"
    assert cp["server"]["workers"] == "8"
    assert cp["server"]["retries"] == "3"


def test_other_settings_kept():
    _, cp = merged_config()
    assert cp["server"]["host"] == "0.0.0.0"
    assert cp["server"]["port"] == "8080"
    assert cp["logging"]["level"] == "info"
    assert cp["logging"]["format"] == "json"


def test_on_main_and_clean():
    assert git("symbolic-ref", "--short", "HEAD") == "main"
    assert git("status", "--porcelain") == ""
