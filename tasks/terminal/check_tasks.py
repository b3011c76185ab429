#!/usr/bin/env python3
"""Validate the bundled Terminal-Bench style tasks in this folder.

For every ``<task>/`` folder (one with a ``task.yaml``) this checks, statically:

* the required files: ``task.yaml``, ``Dockerfile``, ``docker-compose.yaml``,
  ``run-tests.sh``, ``solution.sh``, ``tests/test_outputs.py`` and a non-empty
  ``files/`` folder (a ``.keep`` placeholder when the starting state is empty);
* the ``task.yaml`` fields (instruction, difficulty, author, category, tags,
  ``parser_name: pytest``, timeouts, ``run_tests_in_same_shell: false``) and that
  the ``needs:`` tags name what the scripts use (``git``, the ``sqlite3`` CLI);
* the Dockerfile (``ARG BASE_IMAGE=agentenvs/terminal:latest``, ``FROM
  ${BASE_IMAGE}``, ``WORKDIR /app``, ``COPY files/``, no package installs or
  downloads), the compose file (the official ``client`` service template) and an
  offline ``run-tests.sh`` (``python3 -m pytest $TEST_DIR/test_outputs.py -rA``);

and then, dynamically, in a fresh temporary copy of ``files/`` used as the app
directory (``APP_DIR``), with the tests copied to their own ``TEST_DIR``:

1. runs ``setup.sh`` if present (then removes it, as the Dockerfile does);
2. runs ``run-tests.sh`` before any solution: at least one test must fail;
3. runs ``solution.sh`` twice (solutions must be idempotent);
4. runs ``run-tests.sh`` again: every test must pass.

``run-tests.sh`` runs with a ``python3`` shim on ``PATH`` that points at a Python
with pytest (``--python``, default: the repository's ``.venv`` interpreter, else
the current one), and its output is read the way the Terminal-Bench pytest parser
reads it (the ``short test summary info`` lines). Every process a step leaves
behind (background servers, workers) is killed afterwards: each step runs in its
own process group and carries a marker in its environment. ``HOME`` points at an
empty folder, so nothing may rely on a user's git identity or dotfiles.

Usage: python tasks/terminal/check_tasks.py [--task NAME ...] [--static-only]
Exit status 1 on any problem.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

REQUIRED_FILES = (
    "task.yaml",
    "Dockerfile",
    "docker-compose.yaml",
    "run-tests.sh",
    "solution.sh",
    "tests/test_outputs.py",
)
DIFFICULTIES = ("easy", "medium", "hard")
KNOWN_KEYS = {
    "instruction",
    "difficulty",
    "author_name",
    "author_email",
    "category",
    "tags",
    "parser_name",
    "max_agent_timeout_sec",
    "max_test_timeout_sec",
    "run_tests_in_same_shell",
    "expert_time_estimate_min",
    "junior_time_estimate_min",
    "estimated_duration_sec",
    "disable_asciinema",
}
CATEGORIES = {
    "file-operations",
    "text-processing",
    "version-control",
    "system-administration",
    "debugging",
    "data-processing",
    "security",
    "software-engineering",
}
KNOWN_NEEDS = {"needs:git", "needs:sqlite3-cli"}
MIN_TASKS = 26
MIN_TESTS = 3
STEP_TIMEOUT = 60
FAST_SECONDS = 5.0
FORBIDDEN_BUILD = re.compile(r"\b(apt-get|apt|apk|pip3?|uv|curl|wget|npm)\b")
FORBIDDEN_RUNNER = re.compile(r"\b(curl|wget|apt-get|uv|pip3?|npm)\b")
# a command at the start of a line or after ; | & ( ` $( (so "import sqlite3" is no use)
GIT_USE = re.compile(r"(^|[;|&(`])\s*git(\s|$)", re.M)
SQLITE_CLI_USE = re.compile(r"(^|[;|&(`])\s*sqlite3(\s|$)", re.M)
SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")
MARKER_VAR = "AGENTENVS_TB_CHECK"


# --------------------------------------------------------------------------- #
# task.yaml: PyYAML when importable, else a reader for the subset the tasks use
# (``key: scalar``, ``key: |`` / ``|-`` block scalars, ``- item`` block lists).
# --------------------------------------------------------------------------- #
def _scalar(text: str):
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def parse_simple_yaml(text: str) -> dict:
    data: dict = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*):(?:\s+(.*))?", line)
        if not m:
            raise ValueError(f"line {i + 1}: cannot read {line!r}")
        key, rest = m.group(1), (m.group(2) or "").strip()
        i += 1
        if rest in ("|", "|-"):
            block = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            indent = min(len(b) - len(b.lstrip()) for b in block if b.strip())
            value = "\n".join(b[indent:] for b in block)
            data[key] = value if rest == "|-" else value + "\n"
        elif rest == "":
            items = []
            while i < len(lines) and re.match(r"\s+- ", lines[i]):
                items.append(_scalar(lines[i].strip()[2:]))
                i += 1
            data[key] = items
        else:
            data[key] = _scalar(rest)
    return data


def load_task_yaml(path: Path) -> dict:
    text = path.read_text()
    simple = parse_simple_yaml(text)
    try:
        import yaml  # type: ignore
    except ImportError:
        return simple
    full = yaml.safe_load(text)
    if full != simple:
        raise ValueError("the minimal reader and PyYAML disagree on this file")
    return full


# --------------------------------------------------------------------------- #
@dataclass
class Result:
    name: str
    category: str = "?"
    difficulty: str = "?"
    needs: str = ""
    tests: int = 0
    before: str = "-"
    after: str = "-"
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def static_checks(task: Path, res: Result) -> dict | None:
    for rel in REQUIRED_FILES:
        if not (task / rel).is_file():
            res.problems.append(f"missing {rel}")
    files = task / "files"
    if not files.is_dir():
        res.problems.append("missing files/")
    elif not any(files.iterdir()):
        res.problems.append("files/ is empty (add a .keep)")
    else:
        for p in files.rglob("*"):
            if p.name in (".git", "__pycache__", ".pytest_cache"):
                res.problems.append(f"files/ holds {p.relative_to(task)}")
    if res.problems:
        return None

    try:
        meta = load_task_yaml(task / "task.yaml")
    except Exception as exc:  # noqa: BLE001
        res.problems.append(f"task.yaml: {exc}")
        return None
    unknown = set(meta) - KNOWN_KEYS
    if unknown:
        res.problems.append(f"task.yaml: unknown keys {sorted(unknown)}")
    instr = meta.get("instruction")
    if not isinstance(instr, str) or len(instr.strip()) < 40:
        res.problems.append("task.yaml: instruction missing or too short")
    elif "/app" not in instr:
        res.problems.append("task.yaml: instruction never names /app")
    res.difficulty = str(meta.get("difficulty"))
    if meta.get("difficulty") not in DIFFICULTIES:
        res.problems.append(f"task.yaml: difficulty {meta.get('difficulty')!r}")
    if meta.get("author_name") != "agentenvs":
        res.problems.append("task.yaml: author_name must be agentenvs")
    if meta.get("author_email") != "agentenvs@example.invalid":
        res.problems.append("task.yaml: author_email must be agentenvs@example.invalid")
    res.category = str(meta.get("category"))
    if meta.get("category") not in CATEGORIES:
        res.problems.append(f"task.yaml: category {meta.get('category')!r} not in {sorted(CATEGORIES)}")
    tags = meta.get("tags")
    if not isinstance(tags, list) or not tags or not all(isinstance(t, str) for t in tags):
        res.problems.append("task.yaml: tags must be a non-empty list of strings")
        tags = []
    needs = {t for t in tags if t.startswith("needs:")}
    res.needs = ",".join(sorted(n[6:] for n in needs))
    if needs - KNOWN_NEEDS:
        res.problems.append(f"task.yaml: unknown needs tags {sorted(needs - KNOWN_NEEDS)}")
    if meta.get("parser_name") != "pytest":
        res.problems.append("task.yaml: parser_name must be pytest")
    for key in ("max_agent_timeout_sec", "max_test_timeout_sec"):
        if not isinstance(meta.get(key), int) or isinstance(meta.get(key), bool) or meta[key] <= 0:
            res.problems.append(f"task.yaml: {key} must be a positive integer")
    if meta.get("run_tests_in_same_shell") is not False:
        res.problems.append("task.yaml: run_tests_in_same_shell must be false")

    scripts = (task / "solution.sh").read_text()
    if (files / "setup.sh").is_file():
        scripts += "\n" + (files / "setup.sh").read_text()
    scripts = "\n".join(ln for ln in scripts.splitlines() if not ln.lstrip().startswith("#"))
    tests_text = (task / "tests" / "test_outputs.py").read_text()
    if GIT_USE.search(scripts) or re.search(r"[\"']git[\"']", tests_text):
        if "needs:git" not in needs:
            res.problems.append("uses git but lacks the needs:git tag")
    elif "needs:git" in needs:
        res.warnings.append("needs:git tag but no git use seen")
    if SQLITE_CLI_USE.search(scripts) or re.search(r"[\"']sqlite3[\"']", tests_text):
        if "needs:sqlite3-cli" not in needs:
            res.problems.append("uses the sqlite3 CLI but lacks the needs:sqlite3-cli tag")
    if "${APP_DIR:-/app}" not in (task / "solution.sh").read_text():
        res.problems.append("solution.sh must use ${APP_DIR:-/app}")
    if not (task / "solution.sh").read_text().startswith("#!/bin/bash"):
        res.problems.append("solution.sh must start with #!/bin/bash")
    if 'os.environ.get("APP_DIR", "/app")' not in tests_text:
        res.problems.append('tests must read os.environ.get("APP_DIR", "/app")')

    docker = (task / "Dockerfile").read_text()
    dlines = [ln.strip() for ln in docker.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if dlines[:2] != ["ARG BASE_IMAGE=agentenvs/terminal:latest", "FROM ${BASE_IMAGE}"]:
        res.problems.append("Dockerfile must start with ARG BASE_IMAGE=agentenvs/terminal:latest / FROM ${BASE_IMAGE}")
    if "WORKDIR /app" not in dlines:
        res.problems.append("Dockerfile lacks WORKDIR /app")
    if not any(ln.startswith("COPY files/ /app/") for ln in dlines):
        res.problems.append("Dockerfile lacks COPY files/ /app/")
    if FORBIDDEN_BUILD.search("\n".join(ln for ln in dlines if ln.startswith("RUN"))):
        res.problems.append("Dockerfile installs or downloads something")

    compose = (task / "docker-compose.yaml").read_text()
    for needle in (
        "services:",
        "  client:",
        "image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}",
        "container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}",
        'command: ["sh", "-c", "sleep infinity"]',
        "TEST_DIR=${T_BENCH_TEST_DIR}",
        "${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}",
        "${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}",
    ):
        if needle not in compose:
            res.problems.append(f"docker-compose.yaml lacks {needle!r}")

    runner = (task / "run-tests.sh").read_text()
    if FORBIDDEN_RUNNER.search(runner):
        res.problems.append("run-tests.sh downloads or installs something")
    if not re.search(r"python3 -m pytest .*TEST_DIR.*/test_outputs\.py.* -rA", runner):
        res.problems.append("run-tests.sh must run python3 -m pytest $TEST_DIR/test_outputs.py -rA")
    if "APP_DIR:-/app" not in runner:
        res.problems.append("run-tests.sh must cd to ${APP_DIR:-/app}")
    return meta


# --------------------------------------------------------------------------- #
def _marked_pids(marker: str) -> list[int]:
    pids = []
    needle = f"{MARKER_VAR}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def kill_leftovers(marker: str) -> int:
    """Kill every process carrying this run's marker; returns how many there were."""
    pids = _marked_pids(marker)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.time() + 5
    while _marked_pids(marker) and time.time() < deadline:
        time.sleep(0.05)
    return len(pids)


def run_step(
    cmd: list[str], cwd: Path, env: dict, log: Path, timeout: float, keep_children: bool
) -> tuple[int, str, float]:
    start = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = 124
        if rc == 124 or not keep_children:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # background children left in the group
            except OSError:
                pass
        proc.wait()
    return rc, log.read_text(errors="replace"), time.monotonic() - start


def parse_pytest(output: str) -> dict[str, str] | None:
    """Read the output the way terminal-bench's pytest parser does."""
    if "short test summary info" not in output:
        return None
    tail = output.split("short test summary info", 1)[1]
    results = {}
    for line in tail.splitlines():
        m = SUMMARY_LINE.match(line.strip())
        if m:
            results[m.group(2)] = m.group(1)
    return results


def passed(status: str) -> bool:
    return status in ("PASSED", "SKIPPED", "XFAIL")


def dynamic_checks(task: Path, meta: dict, res: Result, python: str, keep: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f"tb-{task.name}-"))
    marker = uuid.uuid4().hex
    try:
        app, tests, home, shim = tmp / "app", tmp / "tests", tmp / "home", tmp / "bin"
        shutil.copytree(task / "files", app, symlinks=True)
        (app / ".keep").unlink(missing_ok=True)
        shutil.copytree(task / "tests", tests, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(task / "run-tests.sh", tests / "run-tests.sh")
        home.mkdir()
        shim.mkdir()
        (shim / "python3").symlink_to(python)
        env = {
            "PATH": f"{shim}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "APP_DIR": str(app),
            "TEST_DIR": str(tests),
            "TMPDIR": str(tmp),
            MARKER_VAR: marker,
        }
        test_timeout = meta.get("max_test_timeout_sec", 60)

        def step(label: str, cmd: list[str], timeout: float) -> tuple[int, str, float]:
            # What a solution starts in the background (a server, a worker) must
            # survive until the tests; anything else left behind is killed.
            keep = label.startswith("solution")
            rc, out, secs = run_step(cmd, app, env, tmp / f"{label}.log", timeout, keep)
            if not keep:
                kill_leftovers(marker)
            if rc == 124:
                res.problems.append(f"{label}: timed out after {timeout}s")
            return rc, out, secs

        if (app / "setup.sh").is_file():
            rc, out, _ = step("setup", ["bash", "setup.sh"], STEP_TIMEOUT)
            if rc != 0:
                res.problems.append(f"setup.sh failed (rc {rc}): {out.strip()[-400:]}")
                return
            (app / "setup.sh").unlink()

        runner = ["bash", str(tests / "run-tests.sh")]
        _, out, _ = step("tests-before", runner, test_timeout)
        before = parse_pytest(out)
        if before is None:
            res.problems.append("tests before the solution: no pytest summary (PARSE_ERROR)")
        else:
            n_ok = sum(passed(s) for s in before.values())
            res.before = f"{n_ok}/{len(before)}"
            if before and n_ok == len(before):
                res.problems.append("all tests pass before the solution (doing nothing must fail)")
            if not before:
                res.problems.append("tests before the solution: no tests listed")
        for label in ("solution-1", "solution-2"):
            rc, out, secs = step(label, ["bash", str(task / "solution.sh")], STEP_TIMEOUT)
            if label == "solution-2":
                res.seconds = secs
            if rc != 0:
                res.problems.append(f"{label} failed (rc {rc}): {out.strip()[-400:]}")
                return
        rc, out, secs = step("tests-after", runner, test_timeout)
        res.seconds += secs
        after = parse_pytest(out)
        if after is None:
            res.problems.append(f"tests after the solution: no pytest summary: {out.strip()[-600:]}")
            return
        n_ok = sum(passed(s) for s in after.values())
        res.tests = len(after)
        res.after = f"{n_ok}/{len(after)}"
        if n_ok != len(after) or rc != 0:
            failing = [name.split("::")[-1] for name, s in after.items() if not passed(s)]
            res.problems.append(f"tests fail after the solution: {failing}\n{out.strip()[-1500:]}")
        if len(after) < MIN_TESTS:
            res.problems.append(f"only {len(after)} tests (at least {MIN_TESTS} for partial credit)")
        if before is not None and set(before) != set(after):
            res.problems.append("the tests listed before and after the solution differ")
        if res.seconds > FAST_SECONDS:
            res.warnings.append(f"solution + tests took {res.seconds:.1f}s (> {FAST_SECONDS:.0f}s)")
    finally:
        kill_leftovers(marker)
        if keep:
            print(f"[kept {tmp}]")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def default_python() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", action="append", help="check only this task (repeatable)")
    ap.add_argument("--python", default=default_python(), help="a Python with pytest installed")
    ap.add_argument("--static-only", action="store_true", help="skip running setup/solutions/tests")
    ap.add_argument("--keep", action="store_true", help="keep the temporary app directories")
    args = ap.parse_args()

    python = str(Path(args.python).absolute())
    if not args.static_only:
        probe = subprocess.run([python, "-c", "import pytest"], capture_output=True)
        if probe.returncode != 0:
            print(f"{python} cannot import pytest; pass --python", file=sys.stderr)
            return 1

    tasks = sorted(p.parent for p in HERE.glob("*/task.yaml"))
    problems_total = 0
    if args.task:
        wanted = set(args.task)
        tasks = [t for t in tasks if t.name in wanted]
        missing = wanted - {t.name for t in tasks}
        if missing:
            print(f"unknown tasks: {sorted(missing)}", file=sys.stderr)
            return 1
    elif len(tasks) < MIN_TASKS:
        print(f"PROBLEM: only {len(tasks)} tasks (at least {MIN_TASKS})")
        problems_total += 1
    for extra in sorted(p for p in HERE.iterdir() if p.is_dir() and not (p / "task.yaml").exists()):
        if extra.name != "__pycache__":
            print(f"PROBLEM: {extra.name}/ has no task.yaml")
            problems_total += 1

    results = []
    for task in tasks:
        res = Result(task.name)
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", task.name):
            res.problems.append("task names are lowercase words joined by '-'")
        meta = static_checks(task, res)
        if meta is not None and not res.problems and not args.static_only:
            dynamic_checks(task, meta, res, python, args.keep)
        results.append(res)
        status = "ok" if not res.problems else "FAIL"
        print(f"  checked {task.name}: {status}", file=sys.stderr, flush=True)

    header = ("task", "category", "difficulty", "needs", "tests", "before", "after", "secs", "status")
    rows = [
        (r.name, r.category, r.difficulty, r.needs or "-", str(r.tests), r.before, r.after,
         f"{r.seconds:.1f}", "ok" if not r.problems else "FAIL")
        for r in results
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*header))
    print(fmt.format(*("-" * w for w in widths)))
    for row in rows:
        print(fmt.format(*row))
    for r in results:
        for w in r.warnings:
            print(f"WARNING {r.name}: {w}")
        for p in r.problems:
            print(f"PROBLEM {r.name}: {p}")
        problems_total += len(r.problems)
    n_ok = sum(not r.problems for r in results)
    print(f"\n{n_ok}/{len(results)} tasks ok, {problems_total} problem(s)")
    return 1 if problems_total else 0


if __name__ == "__main__":
    sys.exit(main())
