import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
DATA = APP / "data"
LARGE = [
    "cache/tmp/build.log",
    "db/slow.log",
    "reports/q1 results.log",
    "web/access.log",
    "web/old/access-2023.log",
]
EMPTY = ["web/old/empty.log", "db/placeholder", "cache/tmp/.lock", "reports/draft 2.txt"]
KEPT = {
    "web/access.log": 20480, "web/error.log": 4096, "web/old/access-2023.log": 10241,
    "web/old/error-2023.log": 10240, "db/slow.log": 65536, "db/db.log.bak": 40000,
    "db/notes.txt": 30000, "cache/tmp/build.log": 12000, "cache/tmp/ACCESS.LOG": 50000,
    "reports/summary.log": 100, "reports/q1 results.log": 11000,
}


def listed():
    return [ln for ln in (APP / "large_logs.txt").read_text().splitlines() if ln.strip()]


def test_list_exists():
    assert (APP / "large_logs.txt").is_file()


def test_list_has_the_large_logs():
    assert set(listed()) == set(LARGE)


def test_list_is_sorted_and_relative():
    assert listed() == LARGE


def test_empty_files_deleted():
    left = [p for p in EMPTY if (DATA / p).exists()]
    assert not left, f"still present: {left}"


def test_other_files_untouched():
    for rel, size in KEPT.items():
        assert (DATA / rel).is_file(), rel
        assert (DATA / rel).stat().st_size == size, rel
