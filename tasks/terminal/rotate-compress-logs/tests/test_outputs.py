import gzip
import os
import stat
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
LOGS = APP / "logs"


def gen(label):
    return "".join(f"{label} line {i}\n" for i in (1, 2, 3))


def gz(name):
    with gzip.open(LOGS / name, "rt") as fh:
        return fh.read()


def test_file_set():
    assert sorted(p.name for p in LOGS.iterdir()) == [
        "app.log", "app.log.1", "app.log.2.gz", "app.log.3.gz", "app.log.4.gz", "worker.log", "worker.log.1",
    ]


def test_new_empty_current_log():
    assert (LOGS / "app.log").read_text() == ""
    assert stat.S_IMODE((LOGS / "app.log").stat().st_mode) == 0o640


def test_previous_current_is_generation_1():
    assert (LOGS / "app.log.1").read_text() == gen("current")


def test_compressed_generations_shifted():
    assert gz("app.log.2.gz") == gen("generation 1")
    assert gz("app.log.3.gz") == gen("generation 2")
    assert gz("app.log.4.gz") == gen("generation 3")


def test_worker_logs_untouched():
    assert (LOGS / "worker.log").read_text() == gen("worker current")
    assert (LOGS / "worker.log.1").read_text() == gen("worker generation 1")
