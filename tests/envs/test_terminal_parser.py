"""The Terminal-Bench pytest parser, line by line as the official one reads it."""

from __future__ import annotations

import pytest

from agentenvs.envs.terminal.actions import parse_action
from agentenvs.envs.terminal.parser import ParseError, is_resolved, parse_pytest

BANNER = "=========================== short test summary info ============================\n"


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ("PASSED tests/test_outputs.py::test_a\n", {"test_a": True}),
        ("FAILED tests/test_outputs.py::test_b - AssertionError\n", {"test_b": False}),
        # official quirks: only a FAILED line loses its tail, and only the last " - " part
        ("FAILED tests/t.py::test_b - x - y\n", {"test_b - x": False}),
        ("ERROR tests/t.py::test_c - ImportError\n", {"test_c - ImportError": False}),
        ("XFAIL tests/t.py::test_d - reason\n", {"test_d - reason": True}),
        ("XPASS tests/t.py::test_e\n", {"test_e": False}),
        ("SKIPPED [1] tests/t.py:3: no\n", {"[1] tests/t.py:3: no": True}),
        ("PASSED tests/t.py::C::test_m[1-2]\n", {"C::test_m[1-2]": True}),
        ("PASSED\n", {}),  # no name: ignored
        ("RERUN tests/t.py::x\n", {}),  # unknown status: ignored
        ("", {}),
        (
            "PASSED tests/t.py::a\nFAILED tests/t.py::a\n",
            {"a": False},  # a later line for the same name wins, as officially
        ),
    ],
)
def test_summary_lines(summary: str, expected: dict[str, bool]) -> None:
    out = "collected 2 items\n\nnoise PASSED tests/t.py::before\n" + BANNER + summary
    assert parse_pytest(out) == expected


def test_missing_summary_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_pytest("PASSED tests/t.py::test_a\n1 passed")


def test_banner_case_insensitive_and_only_after_it() -> None:
    out = "FAILED tests/t.py::early\n== SHORT TEST SUMMARY INFO ==\nPASSED tests/t.py::late\n"
    assert parse_pytest(out) == {"late": True}


def test_resolution() -> None:
    assert is_resolved({"a": True, "b": True})
    assert not is_resolved({"a": True, "b": False})
    assert is_resolved({})  # empty counts as resolved, as officially


@pytest.mark.parametrize(
    ("text", "script", "complete", "problem"),
    [
        ("```bash\nls\n```", "ls", False, False),
        ("Try:\n```sh\ncd x\n```\nthen\n```bash\npwd\n```", "cd x\npwd", False, False),
        ("ls -la", "ls -la", False, False),
        ("submit", "", True, False),
        ("```bash\necho hi\nsubmit\n```", "echo hi", True, False),
        ("```bash\necho hi\n```\nsubmit", "echo hi", True, False),
        (
            '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 1},'
            ' {"keystrokes": "C-c"}], "task_complete": true}',
            "ls",
            True,
            False,
        ),
        ('{"commands": "ls"}', "", False, True),
        ("   ", "", False, True),
        ("```python\nprint(1)\n```", "", False, True),
    ],
)
def test_actions(text: str, script: str, complete: bool, problem: bool) -> None:
    parsed = parse_action(text)
    assert (parsed.problem is not None) == problem
    if not problem:
        assert parsed.script == script
        assert parsed.complete == complete


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"commands": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ('{"commands": [], "n": ' + "1" * 5000 + "}", "cannot be read"),
        ('{"commands": [{"keystrokes": "ls\\ud800\\n"}]}', "lone surrogate"),
        ('{"commands": [{"keystrokes": "ls\\u0000\\n"}]}', "control characters"),
        ('```json\n{"commands": ' + "[" * 50_000 + "]" * 50_000 + "}\n```", "nested too deeply"),
    ],
)
def test_unreadable_json_is_a_problem_not_an_exception(text: str, says: str) -> None:
    parsed = parse_action(text)
    assert parsed.problem is not None and says in parsed.problem and parsed.script == ""
