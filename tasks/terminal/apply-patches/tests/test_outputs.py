import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
SRC = APP / "src"


def load(name):
    ns = {}
    exec((SRC / name).read_text(), ns)
    return ns


def test_greet_patched():
    ns = load("greet.py")
    assert ns["greet"]("Ada") == "Hello, Ada!"


def test_farewell_patched():
    ns = load("greet.py")
    assert ns["farewell"]("Ada") == "Goodbye, Ada."


def test_util_patched():
    ns = load("util.py")
    assert ns["lerp"](0, 10, 0.5) == 5.0
    assert ns["lerp"](0, 10, 3) == 10
    assert ns["clamp"](5, 0, 3) == 3


def test_failed_list():
    lines = [ln.strip() for ln in (APP / "failed_patches.txt").read_text().splitlines() if ln.strip()]
    assert lines == ["0003-hi.patch"]


def test_no_leftovers():
    assert sorted(p.name for p in SRC.iterdir() if p.name != "__pycache__") == ["greet.py", "util.py"]
    assert sorted(p.name for p in (APP / "patches").iterdir()) == [
        "0001-exclaim.patch", "0002-lerp.patch", "0003-hi.patch", "0004-goodbye.patch",
    ]
