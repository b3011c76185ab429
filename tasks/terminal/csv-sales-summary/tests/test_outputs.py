import csv
import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
EXPECTED = [
    ["east", "14", "169", "1439.71"],
    ["north", "13", "174", "1159.80"],
    ["south", "13", "188", "952.16"],
    ["central", "9", "102", "656.11"],
    ["west", "11", "86", "315.86"],
]


def rows():
    with open(APP / "summary.csv", newline="") as fh:
        return [r for r in csv.reader(fh) if r]


def test_header():
    assert rows()[0] == ["region", "orders", "units", "revenue"]


def test_orders_and_units():
    got = {r[0]: r[1:3] for r in rows()[1:]}
    assert got == {r[0]: r[1:3] for r in EXPECTED}


def test_revenue_two_decimals():
    got = {r[0]: r[3] for r in rows()[1:]}
    assert got == {r[0]: r[3] for r in EXPECTED}


def test_sorted_by_revenue():
    assert rows()[1:] == EXPECTED
