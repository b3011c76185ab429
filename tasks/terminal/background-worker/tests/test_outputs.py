import os
import time
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))


def cmdline(pid):
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")


def worker_pids():
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = [a.decode() for a in cmdline(entry.name) if a]
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        script = [a for a in args if a.endswith("worker.py")]
        if script and (script[0].startswith(str(APP)) or cwd == str(APP)):
            if Path(f"/proc/{entry.name}/stat").read_text().split(") ")[-1][0] != "Z":
                pids.append(int(entry.name))
    return pids


def test_pid_file_points_to_live_worker():
    pid = int((APP / "worker.pid").read_text().strip())
    os.kill(pid, 0)
    assert any(a.endswith(b"worker.py") for a in cmdline(pid))


def test_worker_arguments():
    pid = int((APP / "worker.pid").read_text().strip())
    args = [a.decode() for a in cmdline(pid)]
    joined = " ".join(args)
    assert "--interval 0.2" in joined or "--interval=0.2" in joined
    log_arg = joined.split("--log", 1)[1].strip(" =").split(" ")[0]
    assert Path(log_arg).name == "worker.log"


def test_exactly_one_instance():
    assert len(worker_pids()) == 1


def test_log_keeps_growing():
    log = APP / "worker.log"
    before = log.read_text().count("tick")
    time.sleep(0.7)
    assert log.read_text().count("tick") >= before + 2
