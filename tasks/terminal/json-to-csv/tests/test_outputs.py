import csv
import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
EXPECTED = [
    ["1", "Olga Petrova", "olga@example.com", "Tallinn", "ops"],
    ["3", "Kofi Mensah", "kofi@example.com", "Accra", ""],
    ["5", "Mateo, Jr. Ruiz", "mateo@example.com", "", "beta;early-access"],
    ["7", "Ines Duarte", "ines@example.com", "Porto", "admin;ops"],
    ["9", 'Noor "Nini" Haddad', "", "Amman", ""],
    ["15", "Pieter Jansen", "pieter@example.com", "Utrecht", "support"],
]


def rows():
    with open(APP / "users.csv", newline="") as fh:
        return list(csv.reader(fh))


def test_header():
    assert rows()[0] == ["id", "name", "email", "city", "tags"]


def test_only_active_users():
    assert sorted(int(r[0]) for r in rows()[1:]) == [1, 3, 5, 7, 9, 15]


def test_sorted_numerically_by_id():
    assert [r[0] for r in rows()[1:]] == ["1", "3", "5", "7", "9", "15"]


def test_nested_and_missing_fields():
    by_id = {r[0]: r for r in rows()[1:]}
    assert by_id["9"][2] == "" and by_id["9"][3] == "Amman"
    assert by_id["5"][3] == ""
    assert by_id["7"][2:4] == ["ines@example.com", "Porto"]


def test_full_content_with_quoting():
    assert rows()[1:] == EXPECTED
