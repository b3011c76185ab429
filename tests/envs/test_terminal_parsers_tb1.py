"""Every TB1 parser the official harness names (``parser_name`` in ``task.yaml``), with its
official verdict, through real episodes; and a folder whose tasks name a parser this
project does not reproduce loads the rest and lists those with the reason."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401  (registers the env ids)
from agentenvs.core.errors import TaskError
from agentenvs.envs.terminal.parser import ParseError, parse_results

DOCKERFILE = """ARG BASE_IMAGE=agentenvs/terminal:latest
FROM ${BASE_IMAGE}
WORKDIR /app
"""


def marker_task(root: Path, name: str, parser: str, dataset: str, passing: str) -> Path:
    """A TB1 task whose run-tests.sh prints its grader's verdict between the markers, as
    the SWE-bench adapter's does (the grader here: does /app/fixed say ok)."""
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "task.yaml").write_text(
        f"instruction: Write ok to /app/fixed.\ndifficulty: easy\nparser_name: {parser}\n"
        "max_test_timeout_sec: 60\n"
    )
    (task / "Dockerfile").write_text(DOCKERFILE)
    (task / "tests" / "check.sh").write_text('[ "$(cat /app/fixed 2>/dev/null)" = ok ]\n')
    (task / "run-tests.sh").write_text(
        "#!/bin/bash\n"
        "echo 'noise before: PASSED'\n"
        f"if bash $TEST_DIR/check.sh; then v='{passing}'; else v=FAILED; fi\n"
        f"echo '{dataset} results starts here'\necho \"$v\"\necho '{dataset} results ends here'\n"
    )
    (task / "solution.sh").write_text("#!/bin/bash\necho ok > /app/fixed\n")
    return task


MARKERS = [
    ("swebench", "SWEBench", "PASSED"),
    ("sweperf", "SWE-Perf", "PASSED"),
    ("mlebench", "MLEBench", "ALL TESTS PASSED"),
]


@pytest.mark.parametrize(("parser", "dataset", "passing"), MARKERS)
def test_marker_parsers_official_semantics(parser: str, dataset: str, passing: str) -> None:
    start, end = f"{dataset} results starts here", f"{dataset} results ends here"
    assert parse_results(parser, f"x\n{start}\n  {passing}  \n{end}\n") == {"tests": True}
    assert parse_results(parser, f"{start}\nFAILED\n{end}") == {"tests": False}
    # the block runs from the first start marker to the last end marker, exactly
    assert parse_results(parser, f"{start}\n{passing}\n{end}\n{end}") == {"tests": False}
    assert parse_results(parser, f"{start}\n{passing} (1 warning)\n{end}") == {"tests": False}
    for broken in (f"{start}\n{passing}\n", f"{passing}\n{end}", passing):
        with pytest.raises(ParseError):
            parse_results(parser, broken)


@pytest.mark.bwrap
@pytest.mark.parametrize(("parser", "dataset", "passing"), MARKERS)
def test_marker_parser_tasks_oracle_passes_empty_fails(
    tmp_path: Path, parser: str, dataset: str, passing: str
) -> None:
    marker_task(tmp_path, f"tb1-{parser}", parser, dataset, passing)
    env = gym.make("agentenvs/TerminalBench-v0", runtime="local", tasks_path=str(tmp_path))
    try:
        assert env.unwrapped.unsupported_tasks == {}
        env.reset(options={"task_id": f"tb1-{parser}"})
        *_, info = env.step("submit")
        assert info["success"] is False and info["score"] == 0.0
        env.reset(options={"task_id": f"tb1-{parser}"})
        env.step(env.unwrapped.oracle_action())
        _, reward, terminated, _, info = env.step("submit")
        assert terminated and info["success"] is True and reward == 1.0
    finally:
        env.close()


def test_unknown_parser_and_broken_tasks_leave_the_rest(tmp_path: Path) -> None:
    marker_task(tmp_path, "good", "swebench", "SWEBench", "PASSED")
    marker_task(tmp_path, "later-parser", "swelancer-v9", "SWELancer", "PASSED")
    broken = marker_task(tmp_path, "broken", "pytest", "x", "PASSED")
    (broken / "task.yaml").write_text("instruction: [unclosed\n")
    env = gym.make("agentenvs/TerminalBench-v0", runtime="local", tasks_path=str(tmp_path))
    try:
        u = env.unwrapped
        assert set(u.tasks) == {"good", "later-parser"}
        assert "parser_name 'swelancer-v9'" in u.unsupported_tasks["later-parser"]
        assert "task.yaml" in u.invalid_tasks["broken"]
        with pytest.raises(TaskError, match="swelancer-v9"):
            u.reset(options={"task_id": "later-parser"})
    finally:
        env.close()


def test_a_folder_where_nothing_loads_makes_an_env_that_says_why(tmp_path: Path) -> None:
    marker_task(tmp_path, "later-parser", "formulacode-v9", "X", "PASSED")
    broken = marker_task(tmp_path, "broken", "pytest", "x", "PASSED")
    (broken / "Dockerfile").unlink()
    env = gym.make("agentenvs/TerminalBench-v0", runtime="local", tasks_path=str(tmp_path))
    try:
        with pytest.raises(TaskError) as caught:
            env.reset()
        assert "formulacode-v9" in str(caught.value) and "missing Dockerfile" in str(caught.value)
    finally:
        env.close()
