import hashlib
import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
OUT = APP / "error_counts.txt"
EXPECTED = [("api", 18), ("db", 14), ("auth", 9), ("billing", 7), ("cache", 6)]


def read_rows():
    lines = [ln for ln in OUT.read_text().splitlines() if ln.strip()]
    return [(ln.split()[0], int(ln.split()[1])) for ln in lines]


def test_output_exists():
    assert OUT.is_file(), "error_counts.txt is missing"


def test_format_is_component_space_count():
    for ln in OUT.read_text().splitlines():
        if ln.strip():
            parts = ln.split(" ")
            assert len(parts) == 2 and parts[1].isdigit(), f"bad line: {ln!r}"


def test_components_with_errors():
    assert {name for name, _ in read_rows()} == {name for name, _ in EXPECTED}


def test_counts_ignore_error_inside_messages():
    assert dict(read_rows()) == dict(EXPECTED)


def test_sorted_order():
    assert read_rows() == EXPECTED


def test_log_unchanged():
    digest = hashlib.sha256((APP / "logs" / "app.log").read_bytes()).hexdigest()
    assert digest == "3bbb915ade5d590823cc7a09eea77c352595b57af02bd551c21b9d7a54f64bcd"
