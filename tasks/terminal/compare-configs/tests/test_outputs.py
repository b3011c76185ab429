import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))


def lines(name):
    return [ln.rstrip() for ln in (APP / name).read_text().splitlines() if ln.strip()]


def test_added_keys():
    assert lines("added_keys.txt") == ["feature_beta", "tls_cert"]


def test_removed_keys():
    assert lines("removed_keys.txt") == ["legacy_api"]


def test_changed_keys_present():
    keys = [ln.split(":", 1)[0] for ln in lines("changed.txt")]
    assert sorted(keys) == ["feature_export", "port", "workers"]


def test_changed_values():
    assert lines("changed.txt") == [
        "feature_export: off -> on",
        "port: 8080 -> 8443",
        "workers: 4 -> 8",
    ]
