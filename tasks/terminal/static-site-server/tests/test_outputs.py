import json
import os
import urllib.error
import urllib.request
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
BASE = "http://127.0.0.1:18742"


def fetch(path):
    try:
        with urllib.request.urlopen(BASE + path, timeout=3) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""


def test_site_files():
    assert "Welcome to the harbour" in (APP / "site" / "index.html").read_text()
    assert json.loads((APP / "site" / "status.json").read_text()) == {"status": "up", "version": 3}


def test_pid_file_points_to_running_server():
    pid = int((APP / "http.pid").read_text().strip())
    os.kill(pid, 0)
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"http.server" in cmdline


def test_index_served():
    status, body = fetch("/")
    assert status == 200 and "Welcome to the harbour" in body


def test_status_served():
    status, body = fetch("/status.json")
    assert status == 200 and json.loads(body) == {"status": "up", "version": 3}


def test_only_site_folder_served():
    assert fetch("/secret.txt")[0] == 404
