import json
import os
import time
import urllib.request
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
BASE = "http://127.0.0.1:18741"


def get(path):
    with urllib.request.urlopen(BASE + path, timeout=3) as resp:
        return resp.status, resp.read().decode()


def test_config_file():
    cfg = json.loads((APP / "config.json").read_text())
    assert cfg["host"] == "127.0.0.1"
    assert cfg["port"] == 18741
    assert cfg["greeting"] == "Hello from the lighthouse"
    assert cfg["log_file"] == "logs/server.log"


def test_pid_file_points_to_running_server():
    pid = int((APP / "server.pid").read_text().strip())
    os.kill(pid, 0)
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert "server.py" in cmdline


def test_health():
    assert get("/health") == (200, "ok")


def test_greeting():
    assert get("/greet") == (200, "Hello from the lighthouse")


def test_requests_are_logged():
    get("/greet")
    time.sleep(0.2)
    assert "GET /greet" in (APP / "logs" / "server.log").read_text()
