"""``check-tasks`` reads Dockerfiles, solutions and tests as the shell and the builder do:
redirections are no packages, every ``RUN`` is scanned for downloads, ``ADD`` URLs,
``COPY --from`` images and sources outside the build context are found, and the commands
of solutions and tests that need the network are named; where Docker answers, what is
predicted to build offline builds with ``docker build --network none`` and what is
predicted to need the network fails to."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from agentenvs.envs.terminal.data import load_tasks_report
from agentenvs.envs.terminal.env import TerminalBenchEnv
from agentenvs.envs.terminal.needs import (
    PIP_INSTALL_VALUE_OPTIONS,
    apt_installs,
    downloads,
    network_uses,
    network_warnings,
    pip_install_value_options,
    pip_installs,
    pip_requirements,
    scan_dockerfile,
)
from agentenvs.envs.terminal.shellwords import commands

#: the offline base the docker tests build on (present where Docker is)
BASE = "agentenvs/tb-python:3.13"


def words(script: str, env: dict[str, str] | None = None) -> list[list[str]]:
    return [list(c.words) for c in commands(script, env)]


def test_redirections_are_not_packages() -> None:
    script = (
        "pip install foo 2>/dev/null\n"
        "pip install bar > /dev/null 2>&1 && pip3 install baz>=1 &>/dev/null\n"
        "apt-get install -y tmux >/dev/null 2>&1; apt-get install -y jq 2> err.log\n"
        "uv pip install qux >>log 2>&1 || true\n"
        "pip install 'eggs<2' <<< yes\n"
    )
    assert pip_installs(script) == ["foo", "bar", "baz", "qux", "eggs"]
    assert apt_installs(script) == ["tmux", "jq"]
    # a digit with a space before ``>`` is an argument, not the stream it redirects
    assert words("echo 2 >x; echo a2>x") == [["echo", "2"], ["echo", "a2"]]


def test_continuations_chains_comments_and_quotes() -> None:
    script = (
        "apt-get update && \\\n"
        "    apt-get install -y --no-install-recommends \\\n"
        "    git curl  # what the tests use\n"
        "# pip install commented-out\n"
        "cd /app || exit 1; pip install \"requests==2.32.3\" 'rich' | tee log & wait\n"
    )
    assert words(script) == [
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", "git", "curl"],
        ["cd", "/app"],
        ["exit", "1"],
        ["pip", "install", "requests==2.32.3", "rich"],
        ["tee", "log"],
        ["wait"],
    ]
    assert [c.line for c in commands(script)] == [1, 2, 5, 5, 5, 5, 5]
    assert pip_requirements(script) == [("requests", "2.32.3"), ("rich", None)]
    # syntax in front of a command is not the command
    assert words("if true; then pip install a; fi") == [["true"], ["pip", "install", "a"]]


def test_variables_resolve_where_known_and_are_named_where_not() -> None:
    script = 'V=2.1.0; pip install "numpy==${V}" pandas==$PANDAS ${EXTRA:-rich}\n'
    (assign, install) = commands(script)
    assert install.words == ("pip", "install", "numpy==2.1.0", "pandas==${PANDAS}", "rich")
    assert install.unknown == ("PANDAS",)
    assert pip_requirements(script) == [("numpy", "2.1.0"), ("pandas", None), ("rich", None)]
    assert downloads('curl -fsSL "$HOST/x.tgz"', {"HOST": "https://example.org"}) == [
        "https://example.org/x.tgz"
    ]
    unknown = network_uses('curl -fsSL "$MIRROR/x.tgz" -o x.tgz')
    assert [(u.urls, u.unknown) for u in unknown] == [((), ("MIRROR",))]
    assert apt_installs("apt-get install -y $PKGS") == []


def test_here_documents_substitutions_and_nested_shells() -> None:
    script = (
        "cat > notes.md <<'EOF'\n"
        "pip install not-a-command\n"
        "EOF\n"
        "bash <<EOF\n"
        "wget -q https://example.org/data.csv\n"
        "EOF\n"
        "sh -c 'git clone https://example.org/repo.git && pip install inner'\n"
        "VERSION=$(curl -s https://example.org/latest)\n"
    )
    assert pip_installs(script) == ["inner"]
    assert downloads(script) == [
        "https://example.org/data.csv",
        "https://example.org/repo.git",
        "https://example.org/latest",
    ]


def test_network_uses_name_each_command_that_reaches_past_this_machine() -> None:
    script = (
        "#!/bin/bash\n"
        "set -e\n"
        "curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\n"  # the stand-ins serve it
        "curl -s http://localhost:8000/health > /dev/null\n"
        "git clone --depth 1 https://github.com/example/tool.git /opt/tool\n"
        "npm install -g typescript 2>/dev/null\n"
        "cargo install ripgrep\n"
        "echo done 2>&1\n"
    )
    found = [(u.line, u.command, u.urls) for u in network_uses(script)]
    assert found == [
        (
            5,
            "git clone --depth 1 https://github.com/example/tool.git /opt/tool",
            ("https://github.com/example/tool.git",),
        ),
        (6, "npm install -g typescript 2>/dev/null", ()),
        (7, "cargo install ripgrep", ()),
    ]


DOCKERFILE = """\
ARG PY=3.13
FROM python:${PY}-slim AS build
ARG TOOL_URL=https://example.org/tool.tar.gz
ENV PREFIX=/opt/tool
COPY greeting.txt /app/
COPY ../outside.txt /app/
COPY /abs-missing.txt /app/
COPY data/*.csv /app/data/
RUN curl -fsSL "$TOOL_URL" -o /tmp/tool.tgz 2>/dev/null \\
    # unpacked below
    && tar -xzf /tmp/tool.tgz -C "$PREFIX"
RUN ["pip", "install", "--no-cache-dir", "numpy==2.1.0"]
RUN --mount=type=cache,target=/root/.cache pip install rich > /dev/null 2>&1
FROM python:3.13-slim
ADD https://example.org/model.bin /models/
ADD --chown=1000 local.tar /srv/
COPY --from=build /opt/tool /opt/tool
COPY --from=0 /app /app
COPY --from=ghcr.io/example/assets:1 /assets /assets
RUN git clone https://github.com/example/repo.git /src && apt-get install -y jq 2>/dev/null
"""


def test_the_dockerfile_scan_finds_what_the_build_reaches(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "greeting.txt").write_text("hello\n")
    (tmp_path / "local.tar").write_bytes(b"")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("x\n")
    (tmp_path.parent / "outside.txt").write_text("not in the context\n")
    scan = scan_dockerfile(tmp_path / "Dockerfile", tmp_path, {})
    assert [(s.base, s.name) for s in scan.stages] == [
        ("python:3.13-slim", "build"),
        ("python:3.13-slim", None),
    ]
    build, final = scan.stages
    assert build.lines == [9, 12, 13]
    assert build.envs[0]["TOOL_URL"] == "https://example.org/tool.tar.gz"
    assert build.envs[0]["PREFIX"] == "/opt/tool"
    assert downloads(build.runs[0], build.envs[0]) == ["https://example.org/tool.tar.gz"]
    assert pip_requirements(build.runs[1]) == [("numpy", "2.1.0")]
    assert pip_installs(build.runs[2]) == ["rich"]  # the --mount flag is no command
    assert downloads(final.runs[0]) == ["https://github.com/example/repo.git"]
    assert apt_installs(final.runs[0]) == ["jq"]
    assert scan.downloads == [(15, "https://example.org/model.bin")]
    # the stage named ``build`` and the stage index 0 are no images
    assert scan.images == [(19, "ghcr.io/example/assets:1")]
    assert scan.outside == [(6, "../outside.txt"), (7, "/abs-missing.txt")]
    assert scan.unknown == []


def write_tb1(root: Path, name: str, dockerfile: str, solution: str, run_tests: str) -> Path:
    """A task in the TB1 layout, its context holding ``greeting.txt``."""
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "Dockerfile").write_text(dockerfile)
    (task / "greeting.txt").write_text("hello, world\n")
    (task / "task.yaml").write_text("instruction: Copy greeting.txt into /app/out.txt.\n")
    (task / "run-tests.sh").write_text(run_tests)
    (task / "tests" / "test_outputs.py").write_text(
        "from pathlib import Path\n\n\ndef test_out():\n"
        '    assert Path("/app/out.txt").read_text() == "hello, world\\n"\n'
    )
    (task / "solution.sh").write_text(solution)
    return task


RUN_TESTS = (
    "#!/bin/bash\n"
    "pip install pytest 2>/dev/null >/dev/null\n"
    'python3 -m pytest -p no:cacheprovider "$TEST_DIR/test_outputs.py" -rA\n'
)
SOLUTION = "#!/bin/bash\ncp /app/greeting.txt /app/out.txt 2>/dev/null\n"


def test_network_warnings_name_file_line_and_command(tmp_path: Path) -> None:
    write_tb1(
        tmp_path,
        "fetches",
        f"FROM {BASE}\nARG TOOL\nWORKDIR /app\nCOPY greeting.txt $SRC /app/\n"
        'RUN pip install "$TOOL" 2>/dev/null && curl -fsSL "${MIRROR}/x.tgz" | tar -xz\n',
        "#!/bin/bash\nset -e\nwget -q https://example.org/answer.txt -O /app/out.txt\n",
        'curl -s "$JUDGE/submit" >/dev/null\n' + RUN_TESTS,
    )
    tasks, invalid = load_tasks_report(tmp_path)
    assert not invalid
    assert network_warnings(tasks["fetches"]) == [
        "solution.sh:3: `wget -q https://example.org/answer.txt -O /app/out.txt`",
        'run-tests.sh:1: `curl -s "$JUDGE/submit" >/dev/null` (fetches from $JUDGE: not known)',
        'Dockerfile:5: `curl -fsSL "${MIRROR}/x.tgz"` (fetches from $MIRROR: not known)',
        'Dockerfile:5: `pip install "$TOOL" 2>/dev/null` (installs $TOOL: not known)',
        "Dockerfile:4: COPY $SRC ($SRC is not known)",
    ]


ACCEPTED = f"""\
FROM {BASE} AS build
ARG GREETING_FILE=greeting.txt
ENV TARGET=/app
WORKDIR $TARGET
COPY ${{GREETING_FILE}} ./
RUN pip install pip 2>/dev/null && \\
    # the image's own pip: nothing to fetch
    apt-get install -y --no-install-recommends curl >/dev/null 2>&1
FROM {BASE}
COPY --from=build /app /app
RUN ["python3", "-c", "print('exec form')"]
"""
NEEDS_NETWORK = {
    "run-curl": f"FROM {BASE}\nRUN curl -fsSL https://example.org/tool.tgz -o /tmp/t 2>/dev/null\n",
    "add-url": f"FROM {BASE}\nADD https://example.org/model.bin /models/\n",
    "copy-outside": f"FROM {BASE}\nCOPY ../outside.txt /app/\n",
}


@pytest.mark.docker(BASE)
def test_check_tasks_offline_refuses_the_network_and_not_redirections(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    write_tb1(tasks, "redirects", ACCEPTED, SOLUTION, RUN_TESTS)
    for name, dockerfile in NEEDS_NETWORK.items():
        write_tb1(tasks, name, dockerfile, SOLUTION, RUN_TESTS)
    write_tb1(
        tasks,
        "copy-image",
        f"FROM {BASE}\nCOPY --from=agentenvs/no-such-assets:1 /x /x\n",
        SOLUTION,
        RUN_TESTS,
    )
    write_tb1(
        tasks,
        "solution-clones",
        f"FROM {BASE}\nWORKDIR /app\n",
        "git clone https://github.com/example/answers.git /tmp/a 2>&1\n" + SOLUTION,
        RUN_TESTS,
    )
    env = TerminalBenchEnv(tasks_path=tasks, runtime="docker", offline=True)
    try:
        why = env.check_tasks()
        # a build that reads past its context is invalid (no machine builds it), as
        # check-tasks says: not refused
        assert set(why) == {*NEEDS_NETWORK, "copy-image", "solution-clones"} - {"copy-outside"}
        assert env.invalid_tasks == {
            "copy-outside": "Dockerfile:2: the source '../outside.txt' is outside the build context"
        }
        assert "https://example.org/tool.tgz (Dockerfile line 2)" in why["run-curl"]
        assert "https://example.org/model.bin (ADD, Dockerfile line 2)" in why["add-url"]
        assert why["copy-image"] == (
            "the image 'agentenvs/no-such-assets:1' that the build copies from "
            "(Dockerfile line 2) is not on this machine (offline)"
        )
        assert (
            "the download https://github.com/example/answers.git "
            "(the solution's solution.sh line 1 needs the network)"
        ) in why["solution-clones"]
        assert env.task_ids == ["redirects"]
    finally:
        env.close()


def docker_build_offline(context: Path) -> subprocess.CompletedProcess[str]:
    """``docker build --network none`` of ``context`` (the image removed after)."""
    tag = f"agentenvs/test-needs-{uuid.uuid4().hex[:12]}:offline"
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    try:
        return subprocess.run(
            ["docker", "build", "--network", "none", "--pull=false", "-q", "-t", tag, "."],
            cwd=context,
            capture_output=True,
            text=True,
            env=env,
            timeout=240,
            check=False,
        )
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)


@pytest.mark.docker(BASE)
def test_the_prediction_matches_an_offline_docker_build(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    accepted = write_tb1(tasks, "redirects", ACCEPTED, SOLUTION, RUN_TESTS)
    refused = write_tb1(tasks, "run-curl", NEEDS_NETWORK["run-curl"], SOLUTION, RUN_TESTS)
    env = TerminalBenchEnv(tasks_path=tasks, runtime="docker", offline=True)
    try:
        assert set(env.check_tasks()) == {"run-curl"}
    finally:
        env.close()
    built = docker_build_offline(accepted)
    assert built.returncode == 0, built.stdout + built.stderr
    failed = docker_build_offline(refused)
    assert failed.returncode != 0
    assert "example.org" in failed.stdout + failed.stderr or "curl" in failed.stderr


def write_fetching_tasks(root: Path) -> str:
    """Two tasks, one whose solution downloads; the warning it gets."""
    write_tb1(
        root,
        "fetches",
        "FROM python:3.13-slim\nWORKDIR /app\n",
        "wget -q https://example.org/answer.txt -O /app/out.txt 2>/dev/null\n",
        RUN_TESTS,
    )
    write_tb1(root, "quiet", "FROM python:3.13-slim\nWORKDIR /app\n", SOLUTION, RUN_TESTS)
    return "solution.sh:1: `wget -q https://example.org/answer.txt -O /app/out.txt 2>/dev/null`"


@pytest.mark.bwrap
def test_check_tasks_warns_of_what_an_accepted_task_fetches(tmp_path: Path) -> None:
    from agentenvs.envs.terminal.survey import survey, survey_markdown

    warning = write_fetching_tasks(tmp_path / "tasks")
    (found,) = survey([tmp_path / "tasks"], runtime="local")
    assert sorted(found.accepted) == ["fetches", "quiet"]
    assert found.warnings == {"fetches": [warning]}
    assert found.to_dict()["warnings"] == {"fetches": [warning]}
    assert f"- tasks/fetches: {warning}" in survey_markdown([found], build=False)


@pytest.mark.docker(BASE)
def test_check_tasks_offline_refuses_a_solution_that_fetches(tmp_path: Path) -> None:
    from agentenvs.envs.terminal.survey import survey

    write_fetching_tasks(tmp_path / "tasks")
    (found,) = survey([tmp_path / "tasks"], runtime="docker", offline=True)
    assert found.accepted == ["quiet"] and found.warnings == {}
    assert found.refused["fetches"] == (
        "needs offline: the download https://example.org/answer.txt "
        "(the solution's solution.sh line 1 needs the network)"
    )


def test_a_run_here_document_is_its_script(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.13-slim\n"
        "RUN --mount=type=cache,target=/root/.cache <<EOF\n"
        "set -e\n"
        "pip install rich 2>/dev/null\n"
        "EOF\n"
        "RUN python3 - <<'PY'\n"
        'print("pip install is only text here")\n'
        "PY\n"
        "RUN bash <<SH\n"
        "wget -q https://example.org/b.tgz\n"
        "SH\n"
    )
    (stage,) = scan_dockerfile(tmp_path / "Dockerfile").stages
    assert stage.lines == [2, 6, 9]
    assert [pip_installs(run) for run in stage.runs] == [["rich"], [], []]
    assert [downloads(run) for run in stage.runs] == [[], [], ["https://example.org/b.tgz"]]


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("pip install --retries 3 requests", ["requests"]),
        ("pip install --timeout=5 requests", ["requests"]),
        ("pip install --index-url https://example.org/simple flask", ["flask"]),
        ("pip install -i https://example.org/simple flask", ["flask"]),
        ("pip install --no-cache-dir numpy", ["numpy"]),
        ("pip install --target /x numpy", ["numpy"]),
        ("pip install --config-settings k=v numpy", ["numpy"]),
        ("pip install --progress-bar off numpy", ["numpy"]),
        ("pip install -qU -rreq.txt numpy -t /x pandas -- rich", ["numpy", "pandas", "rich"]),
        ("pip3.11 install --pre --user --retries 5 --default-timeout 60 a b", ["a", "b"]),
        ("uv pip install --python 3.11 --index-strategy unsafe-best-match a", ["a"]),
        ("uv pip install --system --link-mode copy -p /usr/bin/python3 a b", ["a", "b"]),
        ("uv add --optional dev --rev main a", ["a"]),
    ],
)
def test_install_options_and_their_values_are_no_packages(line: str, names: list[str]) -> None:
    assert pip_installs(line) == names


def test_apt_options_and_their_values_are_no_packages() -> None:
    script = (
        "apt-get -o Dpkg::Options::=--force-confnew install -y -t bookworm-backports vim\n"
        "apt-get install -y -c /etc/apt.conf --option=Acquire::Retries=3 -qq jq\n"
    )
    assert apt_installs(script) == ["vim", "jq"]


def test_the_pip_table_is_the_installed_pips_parser() -> None:
    # pip's own parser (where it imports) and the table must say the same, so a newer pip
    # that adds an option taking a value fails here until the table has it
    pytest.importorskip("pip._internal.commands")
    from pip._internal.commands import create_command

    parser = create_command("install").parser
    read = {
        name
        for option in parser._get_all_options()
        if option.takes_value()
        for name in (*option._short_opts, *option._long_opts)
    }
    assert read == set(PIP_INSTALL_VALUE_OPTIONS)
    assert pip_install_value_options() == frozenset(read)
