import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

APP = Path(os.environ.get("APP_DIR", "/app"))
SVC = APP / "svc.sh"
PIDFILE = APP / "run" / "ticker.pid"


def svc(*args):
    return subprocess.run([str(SVC), *args], capture_output=True, text=True, timeout=15)


def alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0]
    except OSError:
        return False
    return state != "Z"


def read_pid():
    return int(PIDFILE.read_text().strip())


@pytest.fixture(autouse=True)
def cleanup():
    yield
    if PIDFILE.exists():
        try:
            pid = read_pid()
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        except (ValueError, OSError):
            pass
        PIDFILE.unlink(missing_ok=True)


def test_script_is_executable():
    assert os.access(SVC, os.X_OK)


def test_status_when_stopped():
    res = svc("status")
    assert res.returncode == 3 and res.stdout.strip() == "stopped"


def test_start_and_status():
    res = svc("start")
    assert res.returncode == 0, res.stderr
    pid = read_pid()
    assert res.stdout.strip() == f"started (pid {pid})"
    assert alive(pid)
    # the started child may not have exec'd python yet when `start` returns
    for _ in range(40):
        if b"ticker.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
            break
        time.sleep(0.05)
    assert b"ticker.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    res = svc("status")
    assert res.returncode == 0 and res.stdout.strip() == f"running (pid {pid})"
    time.sleep(0.5)
    assert "tick" in (APP / "run" / "ticker.log").read_text()


def test_start_twice_keeps_one_process():
    assert svc("start").returncode == 0
    pid = read_pid()
    res = svc("start")
    assert res.returncode == 0 and res.stdout.strip() == f"already running (pid {pid})"
    assert read_pid() == pid


def log_text():
    log = APP / "run" / "ticker.log"
    return log.read_text() if log.exists() else ""


def test_stop():
    offset = len(log_text())
    assert svc("start").returncode == 0
    pid = read_pid()
    for _ in range(50):  # wait until this process is up (and handles SIGTERM)
        if "tick" in log_text()[offset:]:
            break
        time.sleep(0.1)
    res = svc("stop")
    assert res.returncode == 0 and res.stdout.strip() == "stopped"
    assert not alive(pid)
    assert not PIDFILE.exists()
    time.sleep(0.2)
    assert "bye" in log_text()[offset:]
    res = svc("stop")
    assert res.returncode == 0 and res.stdout.strip() == "not running"


def test_stale_pid_file():
    PIDFILE.parent.mkdir(exist_ok=True)
    PIDFILE.write_text("999999\n")
    res = svc("status")
    assert res.returncode == 3 and res.stdout.strip() == "stopped"
    res = svc("start")
    assert res.returncode == 0 and read_pid() != 999999 and alive(read_pid())


def test_restart_gives_new_process():
    assert svc("start").returncode == 0
    old = read_pid()
    assert svc("restart").returncode == 0
    new = read_pid()
    assert new != old and alive(new) and not alive(old)


def test_usage():
    for args in ([], ["bogus"]):
        res = svc(*args)
        assert res.returncode == 2 and res.stderr.strip()
