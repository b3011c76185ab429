import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))


def test_greeting():
    assert (APP / "greeting.txt").read_text() == "hello, world\n"


def test_setup_ran():
    assert (APP / "extra" / "made.txt").read_text() == "made\n"
    assert not (APP / "setup.sh").exists()
