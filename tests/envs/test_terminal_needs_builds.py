"""check-tasks' predictions against what happens: the fixture tasks are written in the
shapes published task sets have (a ``RUN`` that downloads, ``COPY --from`` an image, a
``COPY`` from outside the build context, ``2>/dev/null`` redirections, continuation lines,
a ``# escape=\\`` directive (a comment line ending in the escape character) above an
``ARG`` that ``FROM`` reads, a here-document, one with a space after ``<<``, which Docker
reads as no here-document and its body as steps, a solution and tests that download, a
build installing wheels of its own context with ``--no-index``); each is predicted
offline, then built and its solution run offline by the env: a task predicted accepted
must build and pass, a task predicted refused or invalid must not."""

from __future__ import annotations

import shlex
import shutil
import zipfile
from pathlib import Path

import pytest

from agentenvs.core.errors import SandboxError, TaskError
from agentenvs.envs.terminal.data import load_tasks_report
from agentenvs.envs.terminal.dockerfile import parse
from agentenvs.envs.terminal.env import TerminalBenchEnv
from agentenvs.envs.terminal.images import (
    DEFAULT_IMAGE_MAP,
    PYTHON_313,
    offline_dockerfile,
    plan_bases,
)
from agentenvs.envs.terminal.needs import scan_dockerfile, unbuildable
from agentenvs.envs.terminal.survey import survey

FIXTURES = Path(__file__).parent / "terminal_prediction_fixtures"
#: each fixture's verdict offline, and a phrase its reason must hold
EXPECTED = {
    "redirects": ("accepted", ""),
    # its build installs from wheels in its own context with --no-index: nothing to fetch
    "local-wheels": ("accepted", ""),
    "continuations": ("accepted", ""),
    "escape-directive": ("accepted", ""),
    "heredoc": ("refused", "needs BuildKit (Dockerfile line 4: RUN a here-document (<<EOF))"),
    "heredoc-space": (
        "invalid",
        "Dockerfile:5: unknown instruction \"OPEN('/APP/BUILT.TXT',\" (Docker's parser refuses it)",
    ),
    "run-pip-download": (
        "refused",
        "the Python package 'cowsay' at build time (Dockerfile line 4)",
    ),
    "run-curl": ("refused", "the download https://example.org/tool.tgz (Dockerfile line 4)"),
    "add-url": ("refused", "https://example.org/model.bin (ADD, Dockerfile line 4)"),
    "copy-from-image": ("refused", "'ghcr.io/example/assets:1' that the build copies from"),
    "copy-outside": (
        "invalid",
        "Dockerfile:3: the source '../greeting.txt' is outside the build context",
    ),
    "tests-fetch": (
        "refused",
        "needs offline: the download https://example.org/extra_test.py "
        "(the tests' run-tests.sh line 3 needs the network)",
    ),
    "solution-fetches": (
        "refused",
        "needs offline: the download https://example.org/greeting.txt "
        "(the solution's solution.sh line 2 needs the network)",
    ),
}


def test_the_fixtures_are_read_as_docker_reads_them() -> None:
    steps = parse((FIXTURES / "continuations" / "Dockerfile").read_text())
    assert [(s.line, s.instruction) for s in steps] == [
        (1, "ARG"),
        (2, "FROM"),
        (3, "ARG"),
        (4, "ENV"),
        (5, "WORKDIR"),
        (6, "COPY"),
        (7, "RUN"),
        (12, "FROM"),
        (13, "WORKDIR"),
        (14, "COPY"),
        (15, "RUN"),
    ]
    # the comment line inside the continuation is dropped, the redirections kept as text
    assert steps[6].rest == (
        "set -e; pip install pip 2>/dev/null | tail -n 1 ; echo built > /app/built.txt"
    )
    assert steps[9].flags == (("from", "build"),)
    (heredoc,) = parse((FIXTURES / "heredoc" / "Dockerfile").read_text())[3].heredocs
    assert heredoc.delimiter == "EOF"
    assert heredoc.body == "set -e\necho built > /app/built.txt 2>/dev/null"
    scan = scan_dockerfile(FIXTURES / "continuations" / "Dockerfile", FIXTURES / "continuations")
    build, final = scan.stages
    assert (build.base, build.name, final.base) == ("python:3.13-slim", "build", "python:3.13-slim")
    assert build.envs[0]["TARGET"] == "/app"
    assert [shlex.split(run)[:2] for run in final.runs] == [["python3", "-c"]]  # exec form
    assert scan.images == [] and scan.outside == [] and scan.buildkit == []


def test_the_offline_dockerfile_keeps_the_line_after_an_escape_directive() -> None:
    task = load_tasks_report(FIXTURES)[0]["escape-directive"]
    plans = plan_bases(
        task, online=False, present={PYTHON_313}.__contains__, image_map=DEFAULT_IMAGE_MAP
    )
    assert [(p.written, p.use) for p in plans] == [("python:3.13-slim", PYTHON_313)]
    lines = offline_dockerfile(task, plans).splitlines()
    # the directive, then ARG on its own line (not swallowed as a continuation of it)
    assert lines[:3] == ["# escape=\\", "ARG PY=3.13", f"FROM {PYTHON_313}"]
    assert lines[-2:] == ["WORKDIR /app", "COPY greeting.txt /app/"]


def test_a_build_no_machine_makes_is_invalid_with_file_and_line() -> None:
    tasks, invalid = load_tasks_report(FIXTURES)
    assert not invalid and set(tasks) == set(EXPECTED)
    broken = {t: why for t, task in tasks.items() if (why := unbuildable(task))}
    assert broken == {t: EXPECTED[t][1] for t in ("copy-outside", "heredoc-space")}


def _wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> None:
    """A wheel of ``files`` whose metadata names ``name`` ``version``, its file named in
    the normalized spelling, as wheels are."""
    dist = f"{name.lower().replace('-', '_')}-{version}"
    files = {
        **files,
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: agentenvs-tests\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        ),
    }
    record = "".join(f"{path},,\n" for path in files) + f"{dist}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)
        whl.writestr(f"{dist}.dist-info/RECORD", record)


def write_wheels(folder: Path) -> None:
    """The wheels local-wheels installs: ``Tiny-Greeter`` 1.0, a package made up for the
    test (the requirement spells it otherwise than its file), and ``tomli`` 99.0, which
    python:3.13-slim does not have and the stand-in has from Debian (no RECORD: pip cannot
    replace it), a module that only re-exports the standard library's ``tomllib``."""
    _wheel(
        folder,
        "Tiny-Greeter",
        "1.0",
        {"tiny_greeter/__init__.py": 'GREETING = "hello from a local wheel\\n"\n'},
    )
    _wheel(folder, "tomli", "99.0", {"tomli/__init__.py": "from tomllib import *  # noqa\n"})


def verdicts(found: object) -> dict[str, tuple[str, str]]:
    out = {t: ("accepted", "") for t in found.accepted}  # type: ignore[attr-defined]
    out |= {t: ("refused", why) for t, why in found.refused.items()}  # type: ignore[attr-defined]
    out |= {t: ("invalid", why) for t, why in found.invalid.items()}  # type: ignore[attr-defined]
    return out


def runs_offline(env: TerminalBenchEnv, task_id: str) -> tuple[bool, str]:
    """(whether the task builds and its solution passes, what happened), offline."""
    try:
        env.reset(options={"task_id": task_id})
    except (TaskError, SandboxError) as exc:
        return False, f"not built: {str(exc)[:300]}"
    *_, info = env.step(env.oracle_action() + "\nsubmit")
    return bool(info["success"]), f"built, solution {'passed' if info['success'] else 'failed'}"


@pytest.mark.docker("agentenvs/tb-python:3.13")
@pytest.mark.timeout(900)  # eleven builds and runs on a loaded machine
def test_check_tasks_predicts_what_the_offline_build_and_run_do(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    shutil.copytree(FIXTURES, tasks)
    write_wheels(tasks / "local-wheels" / "wheels")
    (found,) = survey([tasks], runtime="docker", offline=True)
    predicted = verdicts(found)
    assert {t: v for t, (v, _) in predicted.items()} == {t: v for t, (v, _) in EXPECTED.items()}
    for task_id, (_, phrase) in EXPECTED.items():
        assert phrase in predicted[task_id][1], (task_id, predicted[task_id][1])
    # the accepted tasks' solutions download nothing: no warning
    assert found.warnings == {}
    env = TerminalBenchEnv(tasks_path=tasks, runtime="docker", offline=True)
    try:
        happened = {t: runs_offline(env, t) for t in sorted(EXPECTED)}
    finally:
        env.close()
    wrong = {
        t: (predicted[t], said)
        for t, (ran, said) in happened.items()
        if ran != (predicted[t][0] == "accepted")
    }
    assert wrong == {}
    # a refusal for the network is the build's failure, and the run's
    assert happened["solution-fetches"][1] == "built, solution failed"
    assert happened["tests-fetch"][1] == "built, solution failed"
    assert happened["heredoc"][1].startswith("not built")
    assert happened["heredoc-space"][1].startswith("not built")
