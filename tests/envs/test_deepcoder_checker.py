"""DeepCoder checker: code extraction, LiveCodeBench comparison, verdicts and rLLM feedback."""

from __future__ import annotations

import pytest

from agentenvs.envs.deepcoder.checker import (
    FAILED_FOOTER,
    FAILED_HEADER,
    NO_CODE_MESSAGE,
    NOT_RUN,
    SUCCESS_MESSAGE,
    TestOutcome,
    code_fingerprint,
    compare_stdout,
    compare_value,
    extract_code,
    format_feedback,
    judge,
    truncate,
)
from agentenvs.envs.deepcoder.data import CodeTest
from agentenvs.envs.deepcoder.mutate import apply_mutation, mutants, mutation_sites
from agentenvs.sandbox.base import CaseRun

STDIN = CodeTest("stdin", "3\n1 2 3\n", "6\n")
CALL = CodeTest("call", "[1, 2]\n3", "[1, 2, 3]", args=([1, 2], 3), accepted=([1, 2, 3],))


# ------------------------------------------------------------------------ extraction
@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("```python\nprint(1)\n```", "print(1)\n"),
        ("```\nprint(2)\n```", "print(2)\n"),
        ("```Python \nprint(3)\n```", "print(3)\n"),
        ("```py\nprint(4)\n```", "print(4)\n"),
        # the last block counts, as in rLLM
        ("first\n```python\nprint(1)\n```\nthen\n```python\nprint(2)\n```\n", "print(2)\n"),
        # blocks in other languages are skipped
        ("```python\nprint(1)\n```\n```text\noutput 1\n```", "print(1)\n"),
        ("<think>```python\nx=1\n```</think>\n```python\nprint(5)\n```", "print(5)\n"),
        ("```python\r\nprint(6)\r\n```", "print(6)\r\n"),
    ],
)
def test_extract_code_takes_the_last_python_block(text: str, code: str) -> None:
    assert extract_code(text) == (code, "")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("print(1)", "no ```python code block"),
        ("", "no ```python code block"),
        ("```cpp\nint main(){}\n```", "found a ```cpp block"),
        ("```python\n   \n```", "is empty"),
        ("```python\nprint(1)\n", "not closed"),
        ("```python\nprint('\ud800')\n```", "not valid Unicode"),
    ],
)
def test_extract_code_says_why_there_is_no_program(text: str, why: str) -> None:
    code, message = extract_code(text)
    assert code is None
    assert message.startswith(NO_CODE_MESSAGE)
    assert why in message


def test_extract_code_is_fast_on_a_megabyte_of_garbage() -> None:
    import time

    rng_bytes = bytes(range(256)) * 4096
    garbage = rng_bytes.decode("utf-8", errors="replace")
    for text in ("A" * (1 << 20), "```" * 300_000, "```\n" + "x" * (1 << 20), garbage):
        start = time.perf_counter()
        extract_code(text)
        # linear work takes milliseconds, however loaded the machine; a quadratic scan of
        # a megabyte would take hours
        assert time.perf_counter() - start < 10
    code, _ = extract_code("```python\n" + "x = 1\n" * 150_000 + "```")
    assert code is not None and code.count("\n") == 150_000


def test_code_fingerprint_ignores_comments_and_layout() -> None:
    a = "x = 1  # one\n\n\nprint(x)\n"
    b = "x=1\nprint( x )"
    assert code_fingerprint(a) == code_fingerprint(b)
    assert code_fingerprint(a) != code_fingerprint("x = 2\nprint(x)")
    assert code_fingerprint("def (:") == code_fingerprint("def (:   \n\n")  # no AST: text


# ------------------------------------------------------------------------ comparison
@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        ("6\n", "6"),
        ("  6  \n\n", "6\n"),
        ("1 2 3\n4\n", "1 2 3\r\n4"),
        ("1.0 2.50\n", "1 2.5\n"),  # numbers compare as Decimal values
        ("1e2\n", "100\n"),
        ("-0\n", "0\n"),
        ("YES\n", "YES"),
    ],
)
def test_compare_stdout_accepts(actual: str, expected: str) -> None:
    assert compare_stdout(actual, expected) == (True, "")


@pytest.mark.parametrize(
    ("actual", "expected", "why"),
    [
        ("6\n7\n", "6\n", "mismatched output length"),
        ("yes\n", "YES\n", "at line 1"),
        ("1 2\n", "1  3\n", "at line 1"),
        ("1 2 3\n", "1 2\n", "at line 1"),
        ("0.3333333\n", "0.33333333\n", "at line 1"),  # LiveCodeBench has no tolerance
        ("a\nb c\n", "a\nb  d\n", "at line 2"),
        ("", "6\n", "at line 1"),
    ],
)
def test_compare_stdout_rejects(actual: str, expected: str, why: str) -> None:
    ok, message = compare_stdout(actual, expected)
    assert not ok
    assert message.startswith("Wrong Answer")
    assert why in message


def test_compare_stdout_with_a_float_tolerance() -> None:
    assert compare_stdout("0.3333333\n", "0.33333333\n", float_tolerance=1e-6)[0]
    assert not compare_stdout("0.33\n", "0.34\n", float_tolerance=1e-6)[0]
    assert not compare_stdout("nan\n", "1\n", float_tolerance=1.0)[0]


def test_compare_value_turns_tuples_into_lists() -> None:
    assert compare_value((1, (2, 3)), [[1, [2, 3]]])[0]
    assert compare_value(3, [3.0])[0]
    assert not compare_value([3, 2, 1], [[1, 2, 3]])[0]
    assert compare_value(5, [[5], 5])[0]  # TACO: the value or [value]
    assert not compare_value({"__repr__": "<object>"}, [None])[0]


# ------------------------------------------------------------------------ verdicts
def test_judge_verdicts() -> None:
    assert judge(STDIN, CaseRun(stdout="6\n")) == TestOutcome(True, "Passed", "6\n", None)
    wrong = judge(STDIN, CaseRun(stdout="7\n"))
    assert (wrong.passed, wrong.verdict, wrong.output) == (False, "Wrong Answer", "7\n")
    assert "'7' != '6'" in wrong.error_message
    tle = judge(STDIN, CaseRun(stdout="", error="timeout"))
    assert (tle.verdict, tle.error_message, tle.output) == (
        "Time Limit Exceeded",
        "Time Limit Exceeded",
        None,
    )
    boom = judge(
        STDIN,
        CaseRun(
            stdout="partial\n",
            stderr="Traceback (most recent call last):\n  File ...\nZeroDivisionError: division by zero\n",
            error="exception: ZeroDivisionError: division by zero",
        ),
    )
    assert boom.verdict == "Runtime Error"
    assert boom.error_message.startswith("Runtime Error: ZeroDivisionError: division by zero\n")
    assert boom.output == "partial\n"
    assert judge(STDIN, CaseRun(stdout="", error="memory")).error_message == (
        "Runtime Error: memory limit exceeded"
    )
    syntax = judge(STDIN, CaseRun(stdout="", error="compile error: SyntaxError: bad (line 3)"))
    assert syntax.verdict == "Compilation Error"
    assert syntax.error_message == "Compilation Error: SyntaxError: bad (line 3)"
    assert judge(STDIN, CaseRun(stdout="", error="worker died")).error_message == (
        "Runtime Error: worker died"
    )


def test_judge_call_tests() -> None:
    assert judge(CALL, CaseRun(stdout="", value=[1, 2, 3])).passed
    wrong = judge(CALL, CaseRun(stdout="debug\n", value=[3, 2, 1]))
    assert (wrong.passed, wrong.output, wrong.error_message) == (False, "[3, 2, 1]", "Wrong Answer")


# ------------------------------------------------------------------------ feedback
def test_truncate_keeps_head_and_tail() -> None:
    assert truncate("x" * 300) == "x" * 300
    text = "a" * 200 + "b" * 200
    cut = truncate(text)
    assert cut == "a" * 150 + "...(truncated) ..." + "b" * 150


def test_feedback_lists_failures_in_rllm_format() -> None:
    tests = [STDIN, CodeTest("stdin", "x" * 1000, "y"), CodeTest("stdin", "2\n", "4\n")]
    outcomes = [
        TestOutcome(True, "Passed", "6\n"),
        TestOutcome(False, "Wrong Answer", "z", "Wrong Answer at line 1: 'z' != 'y'"),
        TestOutcome(False, "Runtime Error", None, "Runtime Error: ValueError: bad"),
    ]
    text = format_feedback(tests, outcomes, max_failures=None)
    expected = (
        f"{FAILED_HEADER}\n"
        "### Test 2 failed\n"
        f"  Input: {'x' * 150}...(truncated) ...{'x' * 150}\n"
        "  Expected: y\n"
        "  Actual: z\n\n"
        "  Error message: Wrong Answer at line 1: 'z' != 'y'\n"
        "### Test 3 failed\n"
        "  Input: 2\n\n"
        "  Expected: 4\n\n"
        "  Error message: Runtime Error: ValueError: bad\n"
        f"\n{FAILED_FOOTER}"
    )
    assert text == expected
    # rLLM shows at most max_tests failures
    assert "### Test 3" not in format_feedback(tests, outcomes, max_failures=1)


def test_feedback_success_and_skipped_tests() -> None:
    assert format_feedback([STDIN], [TestOutcome(True, "Passed", "6\n")]) == SUCCESS_MESSAGE
    # tests not run after an early stop are not reported as failures
    text = format_feedback(
        [STDIN, STDIN], [TestOutcome(False, "Wrong Answer", "1", "Wrong Answer"), NOT_RUN]
    )
    assert text.count("### Test") == 1


# ------------------------------------------------------------------------ mutations
REFERENCE = """import sys
data = sys.stdin.read().split()
n = int(data[0])
best = 0
for i in range(1, n):
    if int(data[i]) > best and i >= 1:
        best = best + int(data[i])
print(best)
"""


def test_mutations_cover_every_kind_and_change_one_thing() -> None:
    sites = mutation_sites(REFERENCE)
    assert {s.kind for s in sites} == {
        "compare",
        "off_by_one",
        "arith",
        "constant",
        "bool_op",
        "drop_line",
    }
    texts = [text for _, text in mutants(REFERENCE)]
    assert len(texts) == len(set(texts)) > 10
    assert "for i in range(1 + 1, n):" in "\n".join(texts)
    assert "best = best - int(data[i])" in "\n".join(texts)
    assert "if int(data[i]) >= best and i >= 1:" in "\n".join(texts)
    for site in sites:
        # deterministic: the same site gives the same text
        assert apply_mutation(REFERENCE, site) == apply_mutation(REFERENCE, site)


def test_mutations_of_unparsable_code() -> None:
    assert mutation_sites("def (:") == []
    assert list(mutants("def (:")) == []


@pytest.mark.parametrize("token", ["sNaN", "-sNaN", "sNaN12", "NaN", "-nan", "Infinity", "-inf"])
@pytest.mark.parametrize("tolerance", [None, 1e-6])
def test_compare_stdout_special_numbers_equal_nothing_but_their_text(
    token: str, tolerance: float | None
) -> None:
    """A NaN (``sNaN``'s ``==`` raises) or an infinity against a number: unequal, no error;
    the same text is equal as text."""
    assert not compare_stdout(token, "7", float_tolerance=tolerance)[0]
    assert not compare_stdout(f"1 {token}", "1 7", float_tolerance=tolerance)[0]
    assert compare_stdout(token, token, float_tolerance=tolerance)[0]
    assert compare_stdout("-0", "0", float_tolerance=tolerance)[0]
