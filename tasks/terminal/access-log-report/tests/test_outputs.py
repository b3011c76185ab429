import json
import os
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))


def report():
    return json.loads((APP / "report.json").read_text())


def test_report_is_json_object_with_keys():
    assert set(report()) == {
        "total_requests", "unique_ips", "status_counts", "top_paths", "total_bytes", "server_errors",
    }


def test_totals():
    r = report()
    assert r["total_requests"] == 300
    assert r["unique_ips"] == 25


def test_status_counts():
    assert report()["status_counts"] == {
        "200": 201, "302": 7, "304": 36, "404": 26, "500": 23, "503": 7,
    }


def test_top_paths_strip_query_strings():
    assert report()["top_paths"] == ["/api/items", "/static/app.js", "/static/style.css"]


def test_total_bytes():
    assert report()["total_bytes"] == 1060144


def test_server_errors():
    assert report()["server_errors"] == 30
