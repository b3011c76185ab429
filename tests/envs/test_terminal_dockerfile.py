"""The Dockerfile parser: steps as Docker's parser reads them (directives, continuation
lines, comments, here-documents, flags, the exec form), and the scan's steps that only
BuildKit builds."""

from __future__ import annotations

from pathlib import Path

from agentenvs.envs.terminal.dockerfile import Heredoc, analyse_dockerfile, arguments, parse
from agentenvs.envs.terminal.needs import pip_installs, scan_dockerfile

DOCKERFILE = """\
# syntax=docker/dockerfile:1

FROM --platform=linux/amd64 python:3.13-slim AS base
RUN apt-get update \\ \t
    # a comment inside the continuation

    && apt-get install -y jq
RUN --mount=type=cache,target=/root/.cache <<EOF
set -e
pip install rich 2>/dev/null
EOF
RUN python3 - <<'PY' && echo "<<NOT A HEREDOC"
print("pip install nothing")
PY
COPY <<-EOF /etc/motd
\thello
\tEOF
RUN ["pip", "install", "numpy==2.1.0"]
"""


def test_steps_are_read_as_dockers_parser_reads_them() -> None:
    steps = parse(DOCKERFILE)
    assert [(s.line, s.instruction) for s in steps] == [
        (3, "FROM"),
        (4, "RUN"),
        (8, "RUN"),
        (12, "RUN"),
        (15, "COPY"),
        (18, "RUN"),
    ]
    from_, apt, cached, python, motd, exec_form = steps
    assert from_.flags == (("platform", "linux/amd64"),)
    assert from_.arguments_text == "--platform=linux/amd64 python:3.13-slim AS base"
    # blanks after the backslash still continue the line; the comment and the empty line go
    assert apt.rest == "apt-get update && apt-get install -y jq"
    assert cached.flags == (("mount", "type=cache,target=/root/.cache"),)
    assert cached.heredocs == (Heredoc("EOF", "set -e\npip install rich 2>/dev/null"),)
    assert cached.script() == "set -e\npip install rich 2>/dev/null"
    # a command reading a here-document: the body follows it, as the shell reads it
    assert python.heredocs == (Heredoc("PY", 'print("pip install nothing")'),)
    assert python.script().splitlines()[-1] == "PY"
    assert pip_installs(python.script()) == []
    assert motd.heredocs == (Heredoc("EOF", "hello", strip_tabs=True),)
    assert arguments(exec_form.rest) == ["pip", "install", "numpy==2.1.0"]


def test_the_escape_directive_changes_the_continuation_character() -> None:
    steps = parse("# escape=`\nFROM debian:12\nRUN echo a `\n  && echo b\\\nRUN echo c\n")
    assert [(s.line, s.rest) for s in steps] == [
        (2, "debian:12"),
        (3, "echo a && echo b\\"),
        (5, "echo c"),
    ]
    # a directive after the first instruction is a comment
    steps = parse("FROM debian:12\n# escape=`\nRUN echo a \\\n  && echo b\n")
    assert steps[1].rest == "echo a && echo b"


def test_the_scan_names_the_steps_only_buildkit_builds(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE + "COPY --chown=1000 --chmod=755 a /a\n")
    (tmp_path / "a").write_text("")
    scan = scan_dockerfile(tmp_path / "Dockerfile", tmp_path)
    assert scan.buildkit == [
        (8, "RUN --mount, a here-document (<<EOF)"),
        (12, "RUN a here-document (<<PY)"),
        (15, "COPY a here-document (<<EOF)"),
        (19, "COPY --chmod"),
    ]
    (stage,) = scan.stages
    assert [pip_installs(run) for run in stage.runs] == [[], ["rich"], [], ["numpy"]]
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "Dockerfile").write_text(
        "FROM python:3.13-slim AS a\nCOPY --chown=1:1 x /x\nFROM a\nCOPY --from=a /x /y\n"
    )
    (plain / "x").write_text("")
    assert scan_dockerfile(plain / "Dockerfile", plain).buildkit == []


def test_the_local_analysis_reads_the_same_steps(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        "ARG BASE=python:3.13-slim\nFROM ${BASE:-debian:12}\nWORKDIR /app\n"
        "# a comment\nCOPY \\\n  data.txt /app/\nENV A=1 \\\n    B=${A}-2\n"
    )
    found = analyse_dockerfile(tmp_path / "Dockerfile")
    assert found["base_image"] == "python:3.13-slim"
    assert found["copies"] == (("data.txt", "/app/"),)
    # one ENV step sees the values from before it, as in Docker
    assert dict(found["env"]) == {"A": "1", "B": "-2"}
    assert found["local_problem"] is None


def test_a_copy_source_with_a_default_is_known(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.txt").write_text("")
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.13-slim\nCOPY ${SRC:-data}/x.txt /app/\nCOPY ${SRC:-gone}/x.txt /app/\n"
        "COPY $SRC/x.txt /app/\nCOPY . /tmp/build/\nCOPY ./ /tmp/build/\n"
    )
    scan = scan_dockerfile(tmp_path / "Dockerfile", tmp_path)
    assert scan.outside == [(3, "gone/x.txt")]  # as the build reads it
    assert scan.unknown == [(4, "COPY $SRC/x.txt ($SRC is not known)")]


def test_a_body_read_as_steps_is_an_unknown_instruction(tmp_path: Path) -> None:
    # a space after ``<<`` opens no here-document for Docker: the body becomes steps
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.13-slim\nRUN python3 << 'PY'\nprint(1)\nPY\nRUN true\n"
    )
    scan = scan_dockerfile(tmp_path / "Dockerfile", tmp_path)
    assert scan.unknown_instructions == [(3, "PRINT(1)"), (4, "PY")]
    assert scan.buildkit == []
