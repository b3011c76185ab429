import csv
import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
EXPECTED = [
    ["Engineering", "3", "74000.00", "Chiara Russo"],
    ["Research", "0", "0.00", ""],
    ["Sales", "2", "59500.00", "Elif Yilmaz"],
    ["Support", "2", "67250.00", "Dev Patel"],
    ["UNASSIGNED", "2", "52500.00", ""],
]


def rows():
    with open(APP / "dept_report.csv", newline="") as fh:
        return [r for r in csv.reader(fh) if r]


def by_name():
    return {r[0]: r for r in rows()[1:]}


def test_header():
    assert rows()[0] == ["dept_name", "headcount", "avg_salary", "manager"]


def test_known_departments():
    got = by_name()
    for row in EXPECTED[:4]:
        assert got.get(row[0]) == row


def test_empty_department_included():
    assert by_name().get("Research") == ["Research", "0", "0.00", ""]


def test_unassigned_row():
    assert by_name().get("UNASSIGNED") == ["UNASSIGNED", "2", "52500.00", ""]


def test_exact_content_and_order():
    assert rows()[1:] == EXPECTED
