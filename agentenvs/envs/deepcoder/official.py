"""``rules="official"``: the verdict and feedback of rLLM's checkers, quirks included.

What is reproduced (each rule is pinned by a test in ``tests/envs/test_deepcoder_official.py``
and listed in ``docs/deepcoder.md``): rLLM at the DeepCoder release
(``OFFICIAL_REVISION``) for verdicts, its ``CompetitionCodingAgent`` for the multi-turn
feedback.

- Extraction: the last fenced block of *any* language (```` ```cpp ```` too), stripped.
- LiveCodeBench and Codeforces rows: every test, in file order, 6 s each, the program run
  in one process (``official_runner``), stop at the first failure; stdout compared line
  by line after stripping, a differing line equal when both parse as the same
  ``Decimal`` numbers; a call's result compared with ``==`` after only an outer tuple
  becomes a list.
- TACO and PrimeIntellect rows (the APPS-style checker): only the 15 tests with the
  longest inputs (longest first), 12 s each; a stdin program runs as a script, one
  fresh process per test (a fork of the runner, which has the preamble's modules loaded),
  exit code ignored, stdout compared even after an exception, by the APPS rules
  (``apps_stdout_equal``); a call's result equals the expected value or its first
  element. A call-based row with more than 15 tests loses its function name when the
  checker keeps the 15 longest (``loses_function_name``): the program is graded as a
  stdin script, reading each test's arguments one a line, and a program that only
  defines the function fails.
- Feedback: the public tests are those, among the tests that ran, whose input lines all
  appear in the problem statement (whitespace removed), else the first two; when none of
  them fails the agent reads "Congratulations!", even when a hidden test failed.

The comparison always happens here, on the host: the expected outputs never enter the
sandbox, and nothing the program writes is taken as a verdict.
"""

from __future__ import annotations

import ast
import json
import math
import re
import secrets
import time
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from agentenvs.core.errors import SandboxError
from agentenvs.envs.deepcoder.checker import (
    FAILED_FOOTER,
    FAILED_HEADER,
    NOT_RUN,
    SUCCESS_MESSAGE,
    VERDICT_COMPILE,
    VERDICT_PASSED,
    VERDICT_RUNTIME,
    VERDICT_TIMEOUT,
    VERDICT_WRONG,
    TestOutcome,
    failure_block,
    truncate,
)
from agentenvs.envs.deepcoder.data import CodeTask, CodeTest
from agentenvs.envs.deepcoder.lean import fits_lean_server
from agentenvs.envs.deepcoder.official_runner import (
    APPS_IMPORTS,
    FRAME_PREFIX,
    LCB_IMPORTS,
    decode,
    encode,
    preamble,
)
from agentenvs.sandbox.base import Sandbox

#: rLLM's commit at the DeepCoder release, whose checkers ``rules="official"`` reproduces
OFFICIAL_REVISION = "aba20b14"
RULES = ("strict", "official")
LCB_TIMEOUT = 6.0
APPS_TIMEOUT = 12.0
APPS_MAX_TESTS = 15
NO_CODE_MESSAGE = "No code found in model response"
NO_TESTS_MESSAGE = (
    "No test cases found. Please review your solution once more for correctness and "
    "efficiency, then output your final code if you're confident it's optimal."
)
#: a test the official checker does not run at all (APPS keeps the 15 longest)
NOT_SELECTED = TestOutcome(False, "Not Selected", None, "Not run: not among the tests selected")
#: waiting for the runner beyond its own alarm (interpreter start, a program that
#: swallows the alarm's exception)
_GRACE_S = 5.0
_START_S = 60.0
_MAX_FRAME_BYTES = 128 << 20

#: what a warm runner imports before any program: the preamble's heavy modules
WARM_IMPORTS = ("numpy", "pandas")


def _preamble_modules() -> tuple[str, ...]:
    """The standard-library modules the preambles import (every program imports them)."""
    names = set()
    for node in ast.walk(ast.parse(LCB_IMPORTS + "\n" + APPS_IMPORTS)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return tuple(sorted(names - set(WARM_IMPORTS)))


#: what a lean runner imports before any program: the preambles' standard library, which
#: every program's preamble imports anyway (a full server has them through numpy and
#: pandas, or imports them in each fork)
LEAN_IMPORTS = _preamble_modules()
_FENCE = re.compile(r"```(?:\w+)?\n(.*?)```", re.S)
_RUNNER_SOURCE: str | None = None


# ---------------------------------------------------------------------- extraction
def extract_code(text: str) -> str | None:
    """rLLM's ``extract_code_from_model``: the last fenced block, whatever its language."""
    blocks = _FENCE.findall(text)
    return blocks[-1].strip() if blocks else None


# ---------------------------------------------------------------------- selection
def is_apps(task: CodeTask) -> bool:
    return task.source_format in ("taco", "primeintellect")


def default_timeout(task: CodeTask) -> float:
    return APPS_TIMEOUT if is_apps(task) else LCB_TIMEOUT


def _raw_input(test: CodeTest) -> Any:
    return test.input if test.raw_input is None else test.raw_input


def _raw_output(test: CodeTest) -> Any:
    return test.output if test.raw_output is None else test.raw_output


def loses_function_name(task: CodeTask) -> bool:
    """An APPS call-based row with more than 15 tests: the official checker rebuilds its
    tests from the 15 longest without ``fn_name``, so the program is graded as a stdin
    script (``apps_io`` says what it reads and what its output must be)."""
    return is_apps(task) and task.tests[0].kind == "call" and len(task.tests) > APPS_MAX_TESTS


def selected(task: CodeTask) -> list[int]:
    """The tests the official checker runs, in the order it runs them."""
    n = len(task.tests)
    if not is_apps(task) or n <= APPS_MAX_TESTS:
        return list(range(n))

    def length(i: int) -> int:
        raw = _raw_input(task.tests[i])
        try:
            return len(raw)
        except TypeError:
            return len(str(raw))

    # a stable sort: equal lengths keep file order, as Python's sorted(reverse=True) does
    return sorted(range(n), key=length, reverse=True)[:APPS_MAX_TESTS]


# ---------------------------------------------------------------------- comparisons
def _lcb_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _decimal_line(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(word) for word in line.split()]
    except (InvalidOperation, ValueError):
        return None


#: how the official run ends when comparing numbers raises (``sNaN``'s ``==`` does):
#: ``grade_stdio`` lets the error out, ``run_test`` turns it into this message for the
#: whole program (``[-4]``: the first test failed, no other result)
TESTING_ERROR = "Error during testing: "


def lcb_stdout_verdict(prediction: str, expected: str) -> tuple[bool, str]:
    """LiveCodeBench's ``grade_stdio`` comparison: (passed, its error message). A line of
    numbers whose comparison raises (a signaling NaN) gives ``TESTING_ERROR`` and the
    exception, as the official run reports it."""
    got, want = _lcb_lines(prediction), _lcb_lines(expected)
    if len(got) != len(want):
        return False, "Wrong answer: mismatched output length"
    for index, (line, target) in enumerate(zip(got, want, strict=True)):
        message = f"Wrong answer at output_line_idx={index}: {truncate(line)} != {truncate(target)}"
        if line == target:
            continue
        a, b = _decimal_line(line), _decimal_line(target)
        if a is None or b is None:
            return False, message
        try:
            if a != b:
                return False, message
        except InvalidOperation as exc:
            return False, f"{TESTING_ERROR}{exc}"
    return True, ""


def _isclose(a: float, b: float) -> bool:
    """numpy's ``isclose`` with its defaults (rtol 1e-5, atol 1e-8, NaN never close)."""
    if math.isnan(a) or math.isnan(b):
        return False
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-8 + 1e-5 * abs(b)


def _stripped_equal(s1: str, s2: str) -> bool:
    """The APPS checker's first test: equal after stripping, or as one float each, or
    line by line (blank lines dropped) with the same number of tokens per line, where a
    pair of differing tokens fails only when both are numbers that are not close."""
    s1, s2 = s1.strip(), s2.strip()
    if s1 == s2:
        return True
    try:
        return _isclose(float(s1), float(s2))
    except ValueError:
        pass
    lines1 = [s.strip() for s in s1.split("\n") if s.strip()]
    lines2 = [s.strip() for s in s2.split("\n") if s.strip()]
    if len(lines1) != len(lines2):
        return False
    for a, b in zip(lines1, lines2, strict=True):
        tokens1, tokens2 = a.split(), b.split()
        if len(tokens1) != len(tokens2):
            return False
        for x, y in zip(tokens1, tokens2, strict=True):
            if x == y:
                continue
            try:
                fx, fy = float(x), float(y)
            except ValueError:
                continue  # two different words: the official checker lets them pass
            if not _isclose(fx, fy):
                return False
    return True


def _all_close(a: Sequence[float], b: Sequence[float]) -> bool:
    return len(a) == len(b) and all(_isclose(x, y) for x, y in zip(a, b, strict=True))


def apps_stdout_equal(stdout: str, expected: str) -> bool:
    """The APPS checker's stdout comparison (``stdout`` already right-stripped of newlines),
    every fallback included: the stripped comparison above; the expected lines (blank ones
    dropped) against the output taken character by character as floats; and set
    comparisons of tokens."""
    if _stripped_equal(stdout, expected):
        return True
    lines = [x.strip() for x in expected.split("\n") if x]
    # the official code iterates the output string itself here: character by character
    try:
        if _all_close([float(c) for c in stdout], [float(x) for x in lines]):
            return True
    except ValueError:
        pass
    want = {frozenset(x.split()) for x in lines}
    got_tokens = {t for t in stdout.split() if t}
    if {frozenset(t) for t in got_tokens} == want:
        return True
    try:
        got_rounded = {frozenset(round(float(c), 3) for c in t) for t in got_tokens}
        want_rounded = {frozenset(round(float(x), 3) for x in s.split()) for s in lines}
        return got_rounded == want_rounded
    except ValueError:
        return False


def _int_keys(value: Any) -> Any:
    """The APPS checker's undoing of JSON's string keys, where every key is an integer."""
    try:
        return {int(k): v for k, v in value.items()}
    except (ValueError, TypeError):
        return value


def _apps_outputs(raw: Any) -> Any:
    """The expected value as the APPS checker keeps it: a dict (or a list led by one) with
    integer keys becomes a one-element list of that dict."""
    if isinstance(raw, dict):
        converted = _int_keys(raw)
        return [converted] if converted is not raw else raw
    if isinstance(raw, list) and raw and isinstance(raw[0], dict):
        converted = _int_keys(raw[0])
        if converted is not raw[0]:
            return [converted]
    return raw


def _apps_lines(value: Any) -> str | None:
    """A test's input or output as the APPS stdin checker writes it: a list's items
    ``str``-ed, one a line; text as it is; None for anything else (officially the run
    raises on it and fails)."""
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return value if isinstance(value, str) else None


def apps_io(test: CodeTest) -> tuple[str | None, str | None]:
    """(stdin, expected stdout) of an APPS test graded as a stdin script: its raw values
    as the checker converts them (a leading dict with integer keys replaces the input,
    as ``apps_call_inputs`` says; see ``_apps_outputs``), then ``_apps_lines``. A
    call-based test that lost its function name reads its arguments one a line
    (``[[1, 2], 3]``: ``[1, 2]\n3``) and must print the items of the expected list one a
    line (``[6]``: ``6``)."""
    raw_in = _raw_input(test)
    if isinstance(raw_in, list) and raw_in and isinstance(raw_in[0], dict):
        converted = _int_keys(raw_in[0])
        if converted is not raw_in[0]:
            raw_in = [converted]
    return _apps_lines(raw_in), _apps_lines(_apps_outputs(_raw_output(test)))


def apps_call_inputs(raw: Any) -> list[Any]:
    args = list(raw) if isinstance(raw, list | str) else [raw]
    if args and isinstance(args[0], dict):
        converted = _int_keys(args[0])
        if converted is not args[0]:
            args = [converted]
    return args


def apps_call_equal(value: Any, raw_output: Any) -> bool:
    """A call's result against the APPS expected value: tuples become lists, then equal to
    the expected value, or to its first element (also with inner tuples made lists)."""
    outputs = _apps_outputs(raw_output)
    try:
        if isinstance(value, tuple):
            value = list(value)
        ok = value == outputs
        if isinstance(outputs, list) and outputs:
            ok = ok or value == outputs[0]
        try:
            if isinstance(value[0], tuple):
                ok = ok or [list(x) for x in value] == outputs[0]
        except Exception:  # noqa: BLE001 - as officially: no first element, no such test
            pass
        return bool(ok)
    except Exception:  # noqa: BLE001
        return False


# ---------------------------------------------------------------------- running
def runner_source() -> str:
    global _RUNNER_SOURCE
    if _RUNNER_SOURCE is None:
        _RUNNER_SOURCE = (Path(__file__).parent / "official_runner.py").read_text("utf-8")
    return _RUNNER_SOURCE


def _check_ready(ready: dict[str, Any] | None, sandbox: Sandbox) -> None:
    if ready is not None and "fatal" in ready:
        rt = getattr(sandbox, "runtime", None)  # the local sandbox's provisioned Python
        why = (
            f"the sandbox's Python runtime ({rt.prefix}) lacks them: {rt.missing_reason or 'unknown'}"
            if rt is not None
            else f"the {sandbox.backend} sandbox's python3 lacks them (rebuild its image)"
        )
        raise SandboxError(
            f"rules='official': {ready['fatal']}, which the official checker preloads for every "
            f"program; {why}"
        )


class _Runner:
    """An ``official_runner`` and its framed answers: a fork of the sandbox's warm server
    where it has one (``spawn_warm``: the interpreter started and numpy and pandas imported
    once per sandbox, nothing of one program left for the next), else a spawned one."""

    def __init__(self, sandbox: Sandbox, code: str, lean: bool = True) -> None:
        warm = getattr(sandbox, "spawn_warm", None)
        #: a lean server's fork: the preamble without numpy and pandas (``lean.py``)
        self.lean = lean and warm is not None and fits_lean_server(code)
        if self.lean:  # the room in memory a full server's fork has, reserved
            assert warm is not None
            self.proc = warm(runner_source(), "serve", LEAN_IMPORTS, WARM_IMPORTS)
        elif warm is not None:  # a fork of a server that has the preamble's imports done
            self.proc = warm(runner_source(), "serve", WARM_IMPORTS)
        else:
            self.proc = sandbox.spawn(["python3", "-c", runner_source()], scratch=True)
        self.buffer = b""

    def ask(self, request: dict[str, Any], wait_s: float) -> dict[str, Any] | None:
        """Send ``request``; its answer, ``{"error": "timeout"}`` or None if the runner died."""
        request = {**request, "id": secrets.token_hex(8)}  # answers must echo it
        try:
            self.proc.write((json.dumps(request) + "\n").encode("utf-8", "surrogatepass"))
        except Exception:  # noqa: BLE001 - the runner is gone
            return self._gone()
        deadline = time.monotonic() + wait_s
        marker = FRAME_PREFIX.encode()
        while True:
            while b"\n" in self.buffer:
                line, _, self.buffer = self.buffer.partition(b"\n")
                start = line.find(marker)
                if start >= 0:
                    try:
                        answer = json.loads(line[start + len(marker) :])
                    except ValueError:
                        return None
                    if isinstance(answer, dict) and answer.get("id") == request["id"]:
                        if self.lean and answer.get("lean_miss"):
                            self.close()
                            raise _LeanMiss
                        return answer
                    if not isinstance(answer, dict):
                        return None
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                return {"error": "timeout"}
            chunk = self.proc.read(min(left, 1.0))
            if chunk:
                self.buffer += chunk
                if len(self.buffer) > _MAX_FRAME_BYTES:  # no answer is this large
                    self.close()
                    return None
            elif self.proc.eof:
                return self._gone()

    def _gone(self) -> None:
        """The runner ended: the program's doing (None, a verdict), unless its sandbox was
        killed from outside or never started, which raises the Fault instead."""
        fault = self.proc.fault()
        if fault is not None:
            self.close()
            raise fault
        return None

    def close(self) -> None:
        self.proc.kill()


class _LeanMiss(Exception):
    """A program on a lean server reached numpy or pandas: it is graded on the full one."""


def _failure(verdict: str, message: str | None, output: str | None = None) -> TestOutcome:
    return TestOutcome(False, verdict, output, message)


def _lcb_error(error: str) -> TestOutcome:
    if error == "timeout":
        return _failure(VERDICT_TIMEOUT, "Time Limit Exceeded")
    return _failure(VERDICT_RUNTIME, "Runtime Error")


def _in_process(
    sandbox: Sandbox,
    task: CodeTask,
    code: str,
    order: list[int],
    timeout: float,
    lean: bool = True,
) -> dict[int, TestOutcome]:
    """LiveCodeBench (both kinds) and APPS call-based tests, in one runner process."""
    apps = is_apps(task)
    call = task.tests[0].kind == "call"
    mode = "taco_call" if apps else ("lcb_call" if call else "lcb_stdin")
    results: dict[int, TestOutcome] = {}
    requests: list[dict[str, Any]] = []
    expected: list[Any] = []
    if mode == "lcb_call":
        # the official grader decodes every input and output before running anything
        try:
            for i in order:
                test = task.tests[i]
                raw_in, raw_out = _raw_input(test), _raw_output(test)
                args = [json.loads(line) for line in str(raw_in).split("\n")]
                requests.append({"args": [encode(a) for a in args]})
                expected.append(json.loads(raw_out) if isinstance(raw_out, str) else raw_out)
        except (ValueError, TypeError) as exc:
            results[order[0]] = _failure(VERDICT_RUNTIME, f"Error during testing: {exc}")
            return results
    elif mode == "taco_call":
        for i in order:
            test = task.tests[i]
            args = apps_call_inputs(_raw_input(test))
            try:
                requests.append({"args": [encode(a) for a in args]})
            except RecursionError:
                requests.append({"args": []})
            expected.append(_raw_output(test))
    else:
        for i in order:
            requests.append({"stdin": str(_raw_input(task.tests[i]))})
            expected.append(str(_raw_output(task.tests[i])))
    runner = _Runner(sandbox, code, lean)
    try:
        setup = {
            "mode": mode,
            "code": code,
            "fn": task.func_name or "",
            "timeout": timeout,
            "lean": runner.lean,
        }
        ready = runner.ask(setup, timeout + _START_S)
        _check_ready(ready, sandbox)
        if ready is None or "ready" not in ready:
            detail = (ready or {}).get("setup_error") or (ready or {}).get("error") or "crashed"
            if apps:
                results[order[0]] = _failure(VERDICT_COMPILE, None)
            elif detail == "timeout":
                results[order[0]] = _lcb_error("timeout")
            else:
                detail = detail.removeprefix("exception: ").split(": ", 1)[-1]
                results[order[0]] = _failure(VERDICT_RUNTIME, f"Error during testing: {detail}")
            return results
        for i, request, want in zip(order, requests, expected, strict=True):
            answer = runner.ask(request, timeout + _GRACE_S)
            outcome = _judge(mode, answer, want)
            if (outcome.error_message or "").startswith(TESTING_ERROR):
                # the whole run's result is this error, reported as the first test's
                results = {order[0]: outcome}
                break
            results[i] = outcome
            if not outcome.passed:
                break
    finally:
        runner.close()
    return results


def _judge(mode: str, answer: dict[str, Any] | None, want: Any) -> TestOutcome:
    if answer is None:
        return _failure(VERDICT_RUNTIME, None if mode == "taco_call" else "Runtime Error")
    error = answer.get("error")
    if mode == "taco_call":
        if error is not None:
            verdict = VERDICT_TIMEOUT if error == "timeout" else VERDICT_RUNTIME
            return _failure(verdict, None)
        ok = apps_call_equal(decode(answer.get("value")), want)
        return TestOutcome(ok, VERDICT_PASSED if ok else VERDICT_WRONG, None, None)
    if error is not None:
        return _lcb_error(error)
    if mode == "lcb_stdin":
        prediction = answer.get("stdout")
        prediction = prediction if isinstance(prediction, str) else ""
        ok, message = lcb_stdout_verdict(prediction, want)
        if ok:
            return TestOutcome(True, VERDICT_PASSED, truncate(prediction), None)
        if message.startswith(TESTING_ERROR):
            return _failure(VERDICT_RUNTIME, message)
        return _failure(VERDICT_WRONG, message, truncate(prediction))
    value = decode(answer.get("value"))
    if isinstance(value, tuple):  # only the outer tuple: [(1, 2)] stays unequal to [[1, 2]]
        value = list(value)
    try:
        ok = bool(value == want)
    except Exception:  # noqa: BLE001
        ok = False
    if ok:
        return TestOutcome(True, VERDICT_PASSED, truncate(value), None)
    return _failure(VERDICT_WRONG, "Wrong Answer", truncate(value))


def apps_scripts(code: str, *, lean: bool = False) -> tuple[str, str]:
    """The APPS checker's two versions of a stdin program: (the one it compiles, with the
    program inside ``def code():``; the one it runs as a script); ``lean``: the preambles
    without numpy and pandas (a lean server's)."""
    apps_imports = preamble(APPS_IMPORTS, lean)
    lines = (preamble(LCB_IMPORTS, lean) + "\n" + code).split("\n")
    kinds = [
        2 if "import *" in x else 1 if x.startswith(("from ", "import ")) else 0 for x in lines
    ]
    star_imports = "\n".join(x.lstrip("\t") for x, k in zip(lines, kinds, strict=True) if k == 2)
    compiled, script = "", ""
    started = False
    for line, kind in zip(lines, kinds, strict=True):
        if kind == 0 and not started:
            script += apps_imports + "\nstdin = sys.stdin\nstdout = sys.stdout\n" + line + "\n"
            compiled += apps_imports + star_imports + "\nstdin = sys.stdin\nstdout = sys.stdout\n"
            compiled += "def code():\n\t" + line + "\n"
            started = True
            continue
        script += line + "\n"
        if kind < 2:
            compiled += ("\t" if started else "") + line + "\n"
    return compiled, script


def _apps_stdin(
    sandbox: Sandbox,
    task: CodeTask,
    code: str,
    order: list[int],
    timeout: float,
    lean: bool = True,
) -> dict[int, TestOutcome]:
    results: dict[int, TestOutcome] = {}
    compiled, script = apps_scripts(code)
    try:  # compile only: nothing of the program runs on the host
        compile(compiled, "<solution>", "exec", dont_inherit=True)
    except Exception:  # noqa: BLE001 - SyntaxError, TabError, MemoryError, RecursionError
        results[order[0]] = _failure(VERDICT_COMPILE, None)
        return results
    runner = _Runner(sandbox, code, lean)
    if runner.lean:
        script = apps_scripts(code, lean=True)[1]
    try:
        setup = {
            "mode": "apps_stdin",
            "code": script,
            "fn": "",
            "timeout": timeout,
            "lean": runner.lean,
        }
        ready = runner.ask(setup, timeout + _START_S)
        _check_ready(ready, sandbox)
        if ready is None or "ready" not in ready:
            results[order[0]] = _failure(VERDICT_RUNTIME, None)
            return results
        for i in order:
            stdin, want = apps_io(task.tests[i])
            if stdin is None or want is None:  # officially the run raises: no verdict
                results[i] = _failure(VERDICT_RUNTIME, None)
                break
            answer = runner.ask({"stdin": stdin}, timeout + _GRACE_S)
            error = None if answer is None else answer.get("error")
            if answer is None or error in ("timeout", "output limit"):
                verdict = VERDICT_TIMEOUT if error == "timeout" else VERDICT_RUNTIME
                outcome = _failure(verdict, None)
            else:  # the exit code is ignored: an exception after the answer still passes
                stdout = answer.get("stdout")
                stdout = stdout if isinstance(stdout, str) else ""
                ok = apps_stdout_equal(stdout.rstrip("\n"), want)
                outcome = TestOutcome(ok, VERDICT_PASSED if ok else VERDICT_WRONG, None, None)
            results[i] = outcome
            if not outcome.passed:
                break
    finally:
        runner.close()
    return results


def execute(
    sandbox: Sandbox,
    task: CodeTask,
    code: str,
    *,
    timeout: float | None = None,
    lean: bool = True,
) -> tuple[TestOutcome, ...]:
    """Every test's official outcome, in file order: ``NOT_SELECTED`` for tests the
    checker skips, ``NOT_RUN`` for those after the first failure. ``lean``: a program
    that cannot tell numpy and pandas apart from their absence (``lean.py``) runs on a
    lean warm server where the sandbox has one (False: always the full server)."""
    order = selected(task)
    limit = default_timeout(task) if timeout is None else timeout
    if is_apps(task) and (task.tests[0].kind == "stdin" or loses_function_name(task)):
        run = _apps_stdin
    else:
        run = _in_process
    try:
        results = run(sandbox, task, code, order, limit, lean)
    except _LeanMiss:  # the full server's verdict, from the start
        results = run(sandbox, task, code, order, limit, lean=False)
    chosen = set(order)
    return tuple(
        results.get(i, NOT_RUN if i in chosen else NOT_SELECTED) for i in range(len(task.tests))
    )


def passed_all(task: CodeTask, outcomes: Sequence[TestOutcome]) -> bool:
    """The official reward: every selected test ran and passed."""
    return all(outcomes[i].passed for i in selected(task))


# ---------------------------------------------------------------------- feedback
def _squash(text: str) -> str:
    return "".join(text.split())


def public_indices(task: CodeTask, question: str, indices: Sequence[int]) -> list[int]:
    """Of ``indices``, the tests whose every input line appears in ``question`` (whitespace
    ignored); the first two when none does."""
    where = _squash(question)
    public = []
    for i in indices:
        raw = _raw_input(task.tests[i])
        parts = [str(s) for s in raw] if isinstance(raw, list) else str(raw).split("\n")
        if all(_squash(p) in where for p in parts):
            public.append(i)
    return public or list(indices[:2])


def feedback(
    task: CodeTask,
    outcomes: Sequence[TestOutcome],
    question: str,
    *,
    max_failures: int | None = 2,
) -> str:
    """``CompetitionCodingAgent``'s message for the tests that ran (run order)."""
    ran = [i for i in selected(task) if outcomes[i].verdict != NOT_RUN.verdict]
    if not ran:
        return NO_TESTS_MESSAGE
    parts: list[str] = []
    failed = 0
    for number, i in enumerate(public_indices(task, question, ran), start=1):
        outcome = outcomes[i]
        if outcome.passed:
            continue
        test = task.tests[i]
        parts.append(failure_block(number, _raw_input(test), _raw_output(test), outcome))
        failed += 1
        if max_failures is not None and failed >= max_failures:
            break
    if not failed:
        return SUCCESS_MESSAGE
    return f"{FAILED_HEADER}\n{''.join(parts)}\n{FAILED_FOOTER}"
