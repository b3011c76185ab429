import os
import re
import subprocess
from pathlib import Path

APP = Path(os.environ.get("APP_DIR", "/app"))
DOW = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
MON = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1)}
RANGES = [(0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, MON), (0, 7, DOW)]


def expand(field, lo, hi, names):
    values = set()
    for part in field.lower().split(","):
        step = 1
        if "/" in part:
            part, step = part.split("/")
            step = int(step)
        if part == "*":
            a, b = lo, hi
        elif "-" in part:
            a, b = (int(names.get(x, x)) for x in part.split("-"))
        else:
            a = int(names.get(part, part))
            b = a if step == 1 else hi
        values.update(range(a, b + 1, step))
    if names is DOW and 7 in values:
        values = (values - {7}) | {0}
    return values


def jobs():
    found = {}
    for line in (APP / "crontab.txt").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or re.match(r"^[A-Za-z_]+=", line):
            continue
        fields = line.split(None, 5)
        assert len(fields) == 6, f"not a crontab job line: {line!r}"
        sched = [expand(f, lo, hi, n) for f, (lo, hi, n) in zip(fields[:5], RANGES, strict=True)]
        cmd = fields[5]
        m = re.search(r"/bin/(\w+)\.sh", cmd)
        found[m.group(1) if m else cmd] = (sched, cmd)
    return found


def all_values(i):
    lo, hi, names = RANGES[i]
    return expand("*", lo, hi, names)


def test_shell_line_first():
    first = (APP / "crontab.txt").read_text().splitlines()[0].strip()
    assert first == "SHELL=/bin/bash"


def test_exactly_three_jobs():
    assert set(jobs()) == {"backup", "cleanup", "report"}


def test_backup_schedule():
    sched, _ = jobs()["backup"]
    assert sched == [{30}, {2}, all_values(2), all_values(3), all_values(4)]


def test_cleanup_schedule():
    sched, _ = jobs()["cleanup"]
    assert sched == [{0, 15, 30, 45}, all_values(1), all_values(2), all_values(3), {1, 2, 3, 4, 5}]


def test_report_schedule():
    sched, _ = jobs()["report"]
    assert sched == [{0}, {8}, {1}, all_values(3), all_values(4)]


def test_commands_log_stdout_and_stderr():
    for name, (_, cmd) in jobs().items():
        assert cmd.split()[0] in (f"/app/bin/{name}.sh", f"{APP}/bin/{name}.sh"), cmd
        assert re.search(rf">>\s*\S*/logs/{name}\.log", cmd), cmd
        assert "2>&1" in cmd or "&>>" in cmd, cmd


def test_scripts_executable_and_logs_dir():
    for name in ("backup", "cleanup", "report"):
        assert os.access(APP / "bin" / f"{name}.sh", os.X_OK)
    assert (APP / "logs").is_dir()
    res = subprocess.run([str(APP / "bin" / "backup.sh")], capture_output=True, text=True, timeout=10)
    assert "backup ran" in res.stdout
