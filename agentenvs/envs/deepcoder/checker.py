"""Code extraction, output comparison and test feedback, as DeepCoder's official checker.

- ``extract_code``: the **last** fenced block (```` ```python ````, ```` ```py ```` or a bare
  ```` ``` ````), as rLLM's ``extract_code_from_model``; blocks tagged with another
  language are skipped. No block means no program (rLLM gives reward 0).
- ``compare_stdout``: LiveCodeBench's ``grade_stdio``: both outputs stripped, split on
  newlines, each line stripped; the line counts must match; a line that differs is
  retried as whitespace-split ``Decimal`` lists, equal when the numbers are equal
  (``1.0`` == ``1.00`` == ``1``; LiveCodeBench allows no rounding tolerance, and neither
  does this unless ``float_tolerance`` is set).
- ``compare_value``: call-based tests: the returned value, made JSON-like (tuples become
  lists, at any depth), compared with ``==`` against each accepted expected value.
- ``judge``: one ``CaseRun`` from the sandbox against one test -> ``TestOutcome`` with
  the verdicts "Wrong Answer", "Time Limit Exceeded", "Runtime Error: ...",
  "Compilation Error: ...".
- ``format_feedback``: rLLM's legacy multi-turn feedback (``CompetitionCodingAgent``).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from agentenvs.envs.deepcoder.data import CodeTest
from agentenvs.sandbox.base import CaseRun

#: the opening fence with its language tag; the body runs to the next ``` (lazily)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.#-]*)[ \t]*\r?\n(.*?)```", re.S)
PYTHON_TAGS = frozenset({"", "python", "python3", "py", "py3"})
TRUNCATE_AT = 300

VERDICT_PASSED = "Passed"
VERDICT_WRONG = "Wrong Answer"
VERDICT_TIMEOUT = "Time Limit Exceeded"
VERDICT_RUNTIME = "Runtime Error"
VERDICT_COMPILE = "Compilation Error"
VERDICT_NOT_RUN = "Not Run"

NO_CODE_MESSAGE = "No code found. Please output your final code."
FAILED_HEADER = "Here are the results on the public test cases:"
FAILED_FOOTER = (
    "Some test cases are still failing. Please carefully analyze the error patterns, revise "
    "your code to address these issues, and ensure your solution handles all the test cases "
    "correctly. Then, output your final code."
)
SUCCESS_MESSAGE = (
    "Congratulations! You've successfully passed all test cases. Please carefully review your "
    "solution one more time to ensure it handles all edge cases properly. If you're confident "
    "your code is optimal, you can proceed with outputting your final solution."
)
HIDDEN_FAILED_MESSAGE = (
    "Your code passed all the public test cases, but it still fails some hidden test cases. "
    "Please carefully review your solution for edge cases and efficiency, then output your "
    "final code."
)


# ---------------------------------------------------------------------- extraction
def extract_code(text: str) -> tuple[str | None, str]:
    """``(code, "")`` for the last Python (or untagged) fenced block, else ``(None, why)``."""
    if "```" not in text:
        return None, f"{NO_CODE_MESSAGE} (Your answer has no ```python code block.)"
    last_python: str | None = None
    other_tags: list[str] = []
    for tag, body in _FENCE.findall(text):
        if tag.lower() in PYTHON_TAGS:
            last_python = body
        else:
            other_tags.append(tag)
    if last_python is None:
        if other_tags:
            return None, (
                f"{NO_CODE_MESSAGE} (Only Python is run: found a ```{other_tags[-1]} block but "
                "no ```python block.)"
            )
        return None, f"{NO_CODE_MESSAGE} (Your code block is not closed with ```.)"
    if not last_python.strip():
        return None, f"{NO_CODE_MESSAGE} (Your last ```python block is empty.)"
    try:
        last_python.encode("utf-8")
    except UnicodeEncodeError:
        return None, (
            f"{NO_CODE_MESSAGE} (Your code contains characters that are not valid Unicode, "
            "such as lone surrogates.)"
        )
    return last_python, ""


def code_fingerprint(code: str) -> str:
    """A short hash equal for programs that differ only in comments and layout.

    The AST (without line numbers) when the code parses, else its text with trailing
    spaces and blank lines dropped.
    """
    try:
        normal = ast.dump(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        lines = (line.rstrip() for line in code.replace("\r\n", "\n").split("\n"))
        normal = "\n".join(line for line in lines if line)
    return hashlib.blake2b(normal.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def code_digest(code: str) -> str:
    """A hash of the exact program text (results are cached by it)."""
    return hashlib.blake2b(code.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


# ---------------------------------------------------------------------- comparison
def _stripped_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(word) for word in line.split()]
    except (InvalidOperation, ValueError):
        return None


def _numbers_equal(a: list[Decimal], b: list[Decimal], tolerance: float | None) -> bool:
    """Equal numbers, pairwise. A NaN (quiet or signaling, ``sNaN`` whose ``==`` would
    raise) equals nothing, as a quiet NaN's ``==`` says; infinities equal only themselves."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.is_nan() or y.is_nan():
            return False
        if x == y:
            continue
        if tolerance is None or not (x.is_finite() and y.is_finite()):
            return False
        if not math.isclose(float(x), float(y), rel_tol=tolerance, abs_tol=tolerance):
            return False
    return True


def compare_stdout(
    actual: str, expected: str, *, float_tolerance: float | None = None
) -> tuple[bool, str]:
    """LiveCodeBench's stdout rule; ``(True, "")`` or ``(False, what differs)``."""
    got, want = _stripped_lines(actual), _stripped_lines(expected)
    if len(got) != len(want):
        return False, (
            f"{VERDICT_WRONG}: mismatched output length (got {len(got)} lines, "
            f"expected {len(want)})"
        )
    for number, (line, target) in enumerate(zip(got, want, strict=True), start=1):
        if line == target:
            continue
        got_numbers, want_numbers = _decimals(line), _decimals(target)
        if (
            got_numbers is not None
            and want_numbers is not None
            and _numbers_equal(got_numbers, want_numbers, float_tolerance)
        ):
            continue
        return False, (
            f"{VERDICT_WRONG} at line {number}: {truncate(line, 100)!r} != "
            f"{truncate(target, 100)!r}"
        )
    return True, ""


def jsonlike(value: Any) -> Any:
    """``value`` as it would come back from a JSON round trip (tuples -> lists, keys -> str)."""
    if isinstance(value, tuple | list):
        return [jsonlike(v) for v in value]
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: jsonlike(v) for k, v in value.items()}
    return value


def compare_value(value: Any, accepted: Sequence[Any]) -> tuple[bool, str]:
    """A call-based test: the returned value against each accepted expected value."""
    got = jsonlike(value)
    for want in accepted:
        try:
            if got == want:
                return True, ""
        except Exception:  # an exotic __eq__ must not crash the checker
            continue
    return False, VERDICT_WRONG


def show_value(value: Any) -> str:
    try:
        return json.dumps(jsonlike(value))
    except (TypeError, ValueError):
        return repr(value)


# ---------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class TestOutcome:
    """The verdict of one test: ``output`` is what the program printed or returned."""

    __test__ = False  # not a pytest class, despite the name

    passed: bool
    verdict: str
    output: str | None = None
    error_message: str | None = None

    @property
    def timed_out(self) -> bool:
        return self.verdict == VERDICT_TIMEOUT


NOT_RUN = TestOutcome(False, VERDICT_NOT_RUN, None, "Not run: an earlier test failed (early stop)")


def _stderr_tail(stderr: str, limit: int = 1000) -> str:
    text = stderr.strip()
    return text[-limit:] if len(text) > limit else text


_SOLUTION_LINE = re.compile(r'(File "<solution>", line |\(line )(\d+)')


def shift_lines(text: str, offset: int) -> str:
    """Line numbers in the program's tracebacks and syntax errors, moved by ``-offset``
    (the lines the runner put before the agent's code)."""
    if not offset:
        return text
    return _SOLUTION_LINE.sub(lambda m: f"{m.group(1)}{max(int(m.group(2)) - offset, 1)}", text)


def _error_message(error: str, stderr: str) -> tuple[str, str]:
    """(verdict, message) for a sandbox error string."""
    if error == "timeout":
        return VERDICT_TIMEOUT, VERDICT_TIMEOUT
    if error.startswith("compile error"):
        detail = error.partition(":")[2].strip()
        return VERDICT_COMPILE, f"{VERDICT_COMPILE}: {detail}" if detail else VERDICT_COMPILE
    if error.startswith("exception:"):
        detail = error.partition(":")[2].strip()
    elif error == "memory":
        detail = "memory limit exceeded"
    elif error == "output limit":
        detail = "output limit exceeded"
    else:
        detail = error
    message = f"{VERDICT_RUNTIME}: {detail}"
    tail = _stderr_tail(stderr)
    if tail and "Traceback" in tail:
        message += "\n" + tail
    return VERDICT_RUNTIME, message


def _kept(text: str | None, keep: int = 2000) -> str | None:
    """``text`` cut to its ends, so that ``truncate`` (which shows the first and last 150
    characters) gives the same result; long outputs are not kept whole in caches."""
    if text is None or len(text) <= 2 * keep:
        return text
    return text[:keep] + "...(truncated) ..." + text[-keep:]


def judge(
    test: CodeTest,
    run: CaseRun,
    *,
    float_tolerance: float | None = None,
    line_offset: int = 0,
) -> TestOutcome:
    """The verdict of one sandbox run on one test.

    ``line_offset``: lines run before the agent's code, taken off the line numbers in
    error messages so they point into the agent's program.
    """
    output = run.stdout if test.kind == "stdin" else None
    if run.error is not None:
        verdict, message = _error_message(run.error, run.stderr)
        message = _kept(shift_lines(message, line_offset))
        return TestOutcome(False, verdict, _kept(output or None), message)
    if test.kind == "stdin":
        ok, why = compare_stdout(run.stdout, test.output, float_tolerance=float_tolerance)
        verdict = VERDICT_PASSED if ok else VERDICT_WRONG
        return TestOutcome(ok, verdict, _kept(run.stdout), why or None)
    ok, why = compare_value(run.value, test.accepted)
    verdict = VERDICT_PASSED if ok else VERDICT_WRONG
    return TestOutcome(ok, verdict, _kept(show_value(run.value)), why or None)


# ---------------------------------------------------------------------- feedback
def truncate(text: Any, length: int = TRUNCATE_AT) -> str:
    """rLLM's ``truncatefn``: the head and tail halves around a marker."""
    text = text if isinstance(text, str) else str(text)
    if len(text) <= length:
        return text
    return text[: length // 2] + "...(truncated) ..." + text[-length // 2 :]


def failure_block(number: int, test_input: Any, expected: Any, outcome: TestOutcome) -> str:
    """One failing test in rLLM's message: ``Input``, ``Expected``, ``Actual`` (when the
    program produced output), ``Error message`` (when there is one), each truncated."""
    block = f"### Test {number} failed\n  Input: {truncate(test_input)}\n"
    block += f"  Expected: {truncate(expected)}\n"
    if outcome.output is not None:
        block += f"  Actual: {truncate(outcome.output)}\n\n"
    if outcome.error_message is not None:
        block += f"  Error message: {truncate(outcome.error_message)}\n"
    return block


def format_feedback(
    tests: Sequence[CodeTest],
    outcomes: Sequence[TestOutcome],
    *,
    max_failures: int | None = 2,
) -> str:
    """rLLM's failing-tests message for ``tests`` (the public ones), or the success message.

    Each failure shows ``Input``, ``Expected``, ``Actual`` (when the program produced
    output) and ``Error message`` (when there is one), each cut to 300 characters.
    """
    parts: list[str] = []
    failed = 0
    for i, (test, outcome) in enumerate(zip(tests, outcomes, strict=True)):
        if outcome.passed or outcome.verdict == VERDICT_NOT_RUN:
            continue
        parts.append(failure_block(i + 1, test.input, test.output, outcome))
        failed += 1
        if max_failures is not None and failed >= max_failures:
            break
    if not failed:
        return SUCCESS_MESSAGE
    return f"{FAILED_HEADER}\n{''.join(parts)}\n{FAILED_FOOTER}"
