import os
import subprocess
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))


def test_current_link():
    link = APP / "current"
    assert link.is_symlink()
    assert os.readlink(link) in ("releases/v1.10.0", "releases/v1.10.0/")


def test_previous_link():
    link = APP / "previous"
    assert link.is_symlink()
    assert os.readlink(link) in ("releases/v1.9.3", "releases/v1.9.3/")


def test_links_are_relative_and_resolve():
    for name, version in (("current", "1.10.0"), ("previous", "1.9.3")):
        assert not os.readlink(APP / name).startswith("/")
        assert (APP / name / "VERSION").read_text().strip() == version


def test_tool_link():
    link = APP / "bin" / "tool"
    assert link.is_symlink()
    assert os.readlink(link) == "../current/tool.sh"


def test_tool_runs_current_release():
    res = subprocess.run([str(APP / "bin" / "tool")], capture_output=True, text=True, timeout=10)
    assert res.stdout.strip() == "tool 1.10.0"
