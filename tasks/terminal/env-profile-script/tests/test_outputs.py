import os
import shutil
import subprocess
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
ENV_SH = APP / "env.sh"


def bash(script):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=20)
    return res


def test_exports():
    res = bash(f'source "{ENV_SH}"; env')
    assert res.returncode == 0, res.stderr
    env = dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)
    assert env.get("APP_ENV") == "production"
    assert env.get("APP_PORT") == "9000"
    assert env.get("DATA_DIR") == f"{APP}/data"


def test_data_dir_created():
    shutil.rmtree(APP / "data", ignore_errors=True)
    assert bash(f'source "{ENV_SH}"').returncode == 0
    assert (APP / "data").is_dir()


def test_path_prepended_once():
    res = bash(f'source "{ENV_SH}"; source "{ENV_SH}"; echo "$PATH"')
    parts = res.stdout.strip().split(":")
    assert parts[0] == f"{APP}/bin"
    assert parts.count(f"{APP}/bin") == 1
    assert "/usr/bin" in parts


def test_silent_and_does_not_exit():
    res = bash(f'source "{ENV_SH}"; echo still-here')
    assert res.stdout == "still-here\n"


def test_hello_command():
    assert os.access(APP / "bin" / "hello", os.X_OK)
    res = bash(f'source "{ENV_SH}"; hello')
    assert res.stdout.strip() == "hello from production on port 9000"
