"""DeepCoder-MT ``rules="official"``: every rule of rLLM's checkers, one test each.

Each rule is checked against the behaviour of rLLM's code at the DeepCoder release
(``official.OFFICIAL_REVISION``; the table is docs/deepcoder.md), on problems written in
the official row formats (LiveCodeBench/Codeforces, TACO, PrimeIntellect). Where the
project's strict default decides otherwise, the same program is run under both rules.
Comparisons and selection are pure functions; the rest runs real programs in the local
bubblewrap sandbox (marker ``bwrap``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from _services import require_bwrap, require_docker

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.envs.deepcoder import official
from agentenvs.envs.deepcoder.checker import SUCCESS_MESSAGE, TestOutcome
from agentenvs.envs.deepcoder.data import CodeTask, parse_row
from agentenvs.envs.deepcoder.env import DeepCoderMTEnv
from agentenvs.envs.deepcoder.official_runner import Opaque, decode, encode
from agentenvs.sandbox import Sandbox

FIXTURES = Path(__file__).parent / "deepcoder_fixtures"


def lcb_stdin(pairs: list[tuple[str, str]], problem: str = "Sum the numbers.") -> CodeTask:
    tests = [{"input": i, "output": o, "testtype": "stdin"} for i, o in pairs]
    return parse_row({"id": "lcb", "problem": problem, "tests": json.dumps(tests)}, "t", "lcb")


def lcb_call(pairs: list[tuple[str, str]], name: str = "pair") -> CodeTask:
    tests = [{"input": i, "output": o, "testtype": "functional"} for i, o in pairs]
    row = {"problem": "p", "tests": json.dumps(tests), "metadata": json.dumps({"func_name": name})}
    return parse_row(row, "t", "lcb-call")


def taco(inputs: list[Any], outputs: list[Any], fn_name: str | None = None) -> CodeTask:
    tests: dict[str, Any] = {"inputs": inputs, "outputs": outputs}
    if fn_name:
        tests["fn_name"] = fn_name
    return parse_row({"problem": "p", "tests": json.dumps(tests)}, "t", "taco")


def verdicts(outcomes: tuple[TestOutcome, ...]) -> list[str]:
    return [o.verdict for o in outcomes]


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    require_bwrap()
    from agentenvs.sandbox import make_sandbox
    from agentenvs.sandbox.base import Limits

    sandbox = make_sandbox("local", limits=Limits(memory_mb=4096, cpu_seconds=600))
    yield sandbox
    sandbox.close()


def passes(box: Sandbox, task: CodeTask, code: str) -> bool:
    return official.passed_all(task, official.execute(box, task, code))


SUM = lcb_stdin([("3\n1 2 3\n", "6\n"), ("1\n5\n", "5\n")])
SUM_OK = "n = int(input())\nprint(sum(map(int, input().split())))\n"


# ------------------------------------------------------------- LiveCodeBench stdin
@pytest.mark.bwrap
def test_lcb_reference_passes_and_a_wrong_answer_fails(box: Sandbox) -> None:
    assert passes(box, SUM, SUM_OK)
    outcomes = official.execute(box, SUM, "input()\nprint(7)")
    assert verdicts(outcomes) == ["Wrong Answer", "Not Run"]  # stops at the first failure
    assert outcomes[0].error_message == "Wrong answer at output_line_idx=0: 7 != 6"


@pytest.mark.bwrap
def test_lcb_exit_after_a_correct_answer_passes(box: Sandbox) -> None:
    assert passes(box, SUM, SUM_OK + "import sys\nsys.exit(1)\n")


@pytest.mark.bwrap
def test_lcb_global_in_a_helper_fails_because_code_runs_in_a_function(box: Sandbox) -> None:
    code = (
        "total = 0\n"
        "def add(x):\n    global total\n    total += x\n"
        "input()\nfor v in input().split():\n    add(int(v))\nprint(total)\n"
    )
    assert not passes(box, SUM, code)


@pytest.mark.bwrap
def test_lcb_raw_stdin_and_fd_writes_fail(box: Sandbox) -> None:
    buffer = "import sys\nd = sys.stdin.buffer.read().split()\nprint(sum(map(int, d[1:])))\n"
    outcomes = official.execute(box, SUM, buffer)
    assert outcomes[0].verdict == "Runtime Error"
    fd = "import os\ninput()\nos.write(1, (str(sum(map(int, input().split()))) + '\\n').encode())\n"
    assert official.execute(box, SUM, fd)[0].verdict == "Wrong Answer"


@pytest.mark.bwrap
def test_lcb_numpy_and_pandas_are_preloaded(box: Sandbox) -> None:
    code = (
        "input()\na = np.array(list(map(int, input().split())))\nprint(int(pd.Series(a).sum()))\n"
    )
    assert passes(box, SUM, code)


@pytest.mark.bwrap
def test_lcb_recursion_limit_is_pythons_default(box: Sandbox) -> None:
    deep = lcb_stdin([("3000\n", "3000\n")], problem="Count down.")
    code = "def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\nprint(f(int(input())))\n"
    assert official.execute(box, deep, code)[0].verdict == "Runtime Error"


@pytest.mark.bwrap
def test_lcb_main_guard_is_unwrapped(box: Sandbox) -> None:
    code = (
        "def main():\n    "
        + SUM_OK.replace("\n", "\n    ")
        + "\nif __name__ == '__main__':\n    main()\n"
    )
    assert passes(box, SUM, code)


# ------------------------------------------------------------- LiveCodeBench functional
PAIR = lcb_call([("1\n2", "[1, 2]"), ("3\n4", "[3, 4]")])


@pytest.mark.bwrap
def test_lcb_call_only_the_outer_tuple_becomes_a_list(box: Sandbox) -> None:
    assert passes(box, PAIR, "def pair(a, b):\n    return (a, b)\n")
    nested = lcb_call([("1\n2", "[[1, 2]]")])
    assert not passes(box, nested, "def pair(a, b):\n    return [(a, b)]\n")
    assert passes(box, nested, "def pair(a, b):\n    return [[a, b]]\n")


@pytest.mark.bwrap
def test_lcb_call_one_solution_instance_serves_every_test(box: Sandbox) -> None:
    code = (
        "class Solution:\n    def pair(self, a, b):\n"
        "        self.calls = getattr(self, 'calls', 0) + 1\n"
        "        return [a, b] if self.calls == 1 else []\n"
    )
    outcomes = official.execute(box, PAIR, code)
    assert verdicts(outcomes) == ["Passed", "Wrong Answer"]


@pytest.mark.bwrap
def test_lcb_call_solution_named_only_in_a_comment_fails(box: Sandbox) -> None:
    code = "# class Solution would be the LeetCode way\ndef pair(a, b):\n    return [a, b]\n"
    outcomes = official.execute(box, PAIR, code)
    assert outcomes[0].verdict == "Runtime Error"
    assert "Solution" in (outcomes[0].error_message or "")


@pytest.mark.bwrap
def test_lcb_call_input_with_a_trailing_newline_fails(box: Sandbox) -> None:
    task = lcb_call([("1\n2\n", "[1, 2]")])
    outcomes = official.execute(box, task, "def pair(a, b):\n    return [a, b]\n")
    assert outcomes[0].verdict == "Runtime Error"
    assert outcomes[0].error_message.startswith("Error during testing:")


@pytest.mark.bwrap
def test_lcb_call_numpy_integers_pass(box: Sandbox, tmp_path: Path) -> None:
    assert passes(box, PAIR, "def pair(a, b):\n    return [np.int64(a), np.int32(b)]\n")
    # strict rules too: a numpy scalar crosses the sandbox boundary as the value it holds
    code = "import numpy as np\ndef pair(a, b):\n    return [np.int64(a), np.int32(b)]\n"
    tests = [{"input": "1\n2", "output": "[1, 2]", "testtype": "functional"}]
    row = {"id": "p", "problem": "p", "tests": json.dumps(tests), "metadata": {"func_name": "pair"}}
    file = tmp_path / "rows.jsonl"
    file.write_text(json.dumps(row))
    env = DeepCoderMTEnv(tasks_path=file, sandbox=box)
    env.reset(seed=0)
    assert env.step(f"```python\n{code}```")[4]["success"] is True
    env.close()


@pytest.mark.bwrap
def test_lcb_call_objects_never_cross_the_boundary(box: Sandbox) -> None:
    """Deliberately stricter: an object whose __eq__ says yes to anything fails here
    (the official checker compares in the program's own process and passes it)."""
    code = "class Yes:\n    def __eq__(self, o):\n        return True\ndef pair(a, b):\n    return Yes()\n"
    assert not passes(box, PAIR, code)


# ------------------------------------------------------------- TACO / PrimeIntellect
PARITY = taco(["2\n", "3\n"], ["YES\n", "NO\n"])


@pytest.mark.bwrap
def test_apps_differing_words_pass(box: Sandbox) -> None:
    assert passes(box, PARITY, "print('NO')\n")
    assert not passes(box, PARITY, "print('NO NO')\n")  # the number of words must match


@pytest.mark.bwrap
def test_apps_exit_code_is_ignored(box: Sandbox) -> None:
    code = "print('YES' if int(input()) % 2 == 0 else 'NO')\nraise SystemExit(3)\n"
    assert passes(box, PARITY, code)
    assert passes(box, PARITY, code.replace("raise SystemExit(3)", "1 / 0"))


@pytest.mark.bwrap
def test_apps_floats_close_and_blank_lines_ignored(box: Sandbox) -> None:
    task = taco(["x\n"], ["0.5\n\n2\n"])
    assert passes(box, task, "print('0.5000001')\nprint()\nprint()\nprint(2)\n")
    assert not passes(box, task, "print('0.51')\nprint(2)\n")


@pytest.mark.bwrap
def test_apps_call_compares_with_the_first_output_too(box: Sandbox) -> None:
    add = taco([[1, 2], [5, 5]], [[3], [10]], fn_name="add")
    assert passes(box, add, "def add(a, b):\n    return a + b\n")
    assert passes(box, add, "def add(a, b):\n    return [a + b]\n")
    assert not passes(box, add, "def add(a, b):\n    return a - b\n")


@pytest.mark.bwrap
def test_primeintellect_rows_use_the_apps_rules(box: Sandbox) -> None:
    tests = [
        {"type": "stdin_stdout", "input": "4\n", "output": "YES\n"},
        {"type": "stdin_stdout", "input": "3\n", "output": "NO\n"},
    ]
    task = parse_row({"problem": "p", "tests": json.dumps(tests)}, "t", "pi")
    assert task.source_format == "primeintellect"
    assert passes(box, task, "print('MAYBE')\n")  # words differ: the APPS rule passes it


def test_apps_runs_only_the_15_longest_tests_for_12_s() -> None:
    inputs = [str(10**i) + "\n" for i in range(20)]  # input i is i + 2 characters long
    task = taco(inputs, ["1\n"] * 20)
    assert official.selected(task) == list(range(19, 4, -1))
    assert official.default_timeout(task) == 12.0
    assert official.default_timeout(SUM) == 6.0
    ties = taco(["a\n", "bb\n", "c\n"], ["1"] * 3)
    assert official.selected(ties) == [0, 1, 2]  # <= 15 tests: all, in file order


@pytest.mark.bwrap
def test_apps_short_tests_beyond_the_15_longest_never_run(box: Sandbox) -> None:
    inputs = [str(10**i) + "\n" for i in range(20)]
    task = taco(inputs, ["big\n"] * 20)
    code = "print('big' if len(input()) > 5 else 'small value')\n"  # wrong on the 5 shortest
    outcomes = official.execute(box, task, code)
    assert official.passed_all(task, outcomes)
    assert verdicts(outcomes)[:5] == ["Not Selected"] * 5


# rLLM's check_correctness keeps the 15 longest tests of a longer APPS row in a dict it
# rebuilds with only "inputs" and "outputs": a call-based row's fn_name is gone, so
# taco.run_test grades the program as a stdin script: each input's items str-ed, one a
# line, on stdin, and stdout compared with the output's items str-ed, one a line
SUMS_IN = [[[i, i + 1, i + 2]] for i in range(16)]
SUMS_OUT = [[3 * i + 3] for i in range(16)]
SUM_FUNCTION = "def total(xs):\n    return sum(xs)\n"
SUM_METHOD = "class Solution:\n    def total(self, xs):\n        return sum(xs)\n"
SUM_SCRIPT = "import ast, sys\nxs = ast.literal_eval(sys.stdin.readline())\nprint(sum(xs))\n"


def sums_row(fmt: str, n: int) -> dict[str, str]:
    """A call-based row of ``n`` tests as TACO or PrimeIntellect publish it."""
    if fmt == "taco":
        tests: Any = {"inputs": SUMS_IN[:n], "outputs": SUMS_OUT[:n], "fn_name": "total"}
    else:
        tests = [
            {"type": "function_call", "fn_name": "total", "input": x, "output": y}
            for x, y in zip(SUMS_IN[:n], SUMS_OUT[:n], strict=True)
        ]
    return {"id": f"sums-{fmt}-{n}", "problem": "Sum the list.", "tests": json.dumps(tests)}


def test_apps_call_rows_over_15_tests_read_their_arguments_on_stdin() -> None:
    long, short = (parse_row(sums_row("taco", n), "t", "x") for n in (16, 15))
    assert official.loses_function_name(long) and not official.loses_function_name(short)
    assert not official.loses_function_name(lcb_call([("1\n2", "[1, 2]")] * 16))
    assert official.apps_io(long.tests[2]) == ("[2, 3, 4]", "9")
    args = taco([[[1, 2], 3, "a b"]], [[[1, 2]]], fn_name="f").tests[0]
    assert official.apps_io(args) == ("[1, 2]\n3\na b", "[1, 2]")
    keyed = taco([[{"1": 2}]], [[{"3": 4}]], fn_name="f").tests[0]
    assert official.apps_io(keyed) == ("{1: 2}", "{3: 4}")  # JSON's keys made integers
    # an output that is neither text nor a list: the official run raises on it
    bare = parse_row(
        {"problem": "p", "tests": json.dumps({"inputs": ["3\n"], "outputs": [6]})}, "t", "x"
    )
    assert official.apps_io(bare.tests[0]) == ("3\n", None)


@pytest.mark.bwrap
@pytest.mark.parametrize("fmt", ["taco", "primeintellect"])
def test_apps_call_rows_over_15_tests_lose_the_function_name(tmp_path: Path, fmt: str) -> None:
    file = tmp_path / "rows.jsonl"
    file.write_text("".join(json.dumps(sums_row(fmt, n)) + "\n" for n in (16, 15)))
    scores: dict[tuple[str, int], list[float]] = {}
    for rules in ("strict", "official"):
        env = gym.make("agentenvs/DeepCoderMT-v0", tasks_path=file, rules=rules)
        for n in (16, 15):
            env.reset(options={"task_id": f"sums-{fmt}-{n}"})
            programs = (SUM_FUNCTION, SUM_METHOD, SUM_SCRIPT)
            scores[rules, n] = [env.unwrapped.score_action(f"```python\n{p}```") for p in programs]
            _, reward, *_ = env.step(f"```python\n{SUM_FUNCTION}```")
            assert reward == (0.0 if (rules, n) == ("official", 16) else 1.0)
        env.close()
    # officially, 16 tests: the function is never called (0 of 15 pass), and a script
    # that reads the arguments from stdin passes; 15 tests: the function is called
    assert scores["official", 16] == [0.0, 0.0, 1.0]
    assert scores["official", 15] == [1.0, 1.0, 0.0]
    # strict rules call the function however many tests the row has
    assert scores["strict", 16] == scores["strict", 15] == [1.0, 1.0, 0.0]


@pytest.mark.bwrap
def test_apps_output_neither_text_nor_a_list_fails(box: Sandbox) -> None:
    bare = parse_row(
        {"problem": "p", "tests": json.dumps({"inputs": ["3\n"], "outputs": [6]})}, "t", "x"
    )
    code = "print(int(input()) * 2)\n"
    assert not passes(box, bare, code)
    assert passes(box, taco(["3\n"], ["6"]), code)


# ------------------------------------------------------------- pure comparisons
def test_apps_stdout_rules() -> None:
    eq = official.apps_stdout_equal
    assert eq("YES", "NO")
    assert eq("1.0000001", "1")
    assert not eq("1.01", "1")
    assert eq("1 2\n\n3", "1 2\n3\n\n")
    assert not eq("1 2 3", "1 2")
    assert eq("12", "1\n2")  # the output taken character by character as numbers
    assert eq("1 2", "1\n2")  # single-character tokens as sets
    assert not eq("3", "1\n2")


def test_lcb_stdout_rule() -> None:
    verdict = official.lcb_stdout_verdict
    assert verdict("1.0 2\n", "1.00 2")[0]
    assert not verdict("YES", "NO")[0]
    assert verdict("1\n2", "1")[1] == "Wrong answer: mismatched output length"
    assert not verdict("1.0000001", "1")[0]  # Decimal, no tolerance


def test_lcb_signaling_nan_ends_the_run_as_an_error_during_testing() -> None:
    """``Decimal("sNaN") == x`` raises: ``grade_stdio`` lets it out and ``run_test`` reports
    "Error during testing" for the whole program (a failure, never a crash)."""
    verdict = official.lcb_stdout_verdict
    assert verdict("sNaN", "1") == (
        False,
        "Error during testing: [<class 'decimal.InvalidOperation'>]",
    )
    assert verdict("2 sNaN", "1 2")[1].startswith("Wrong answer")  # 2 != 1 is decided first
    assert verdict("NaN", "NaN ")[0]  # the same text: equal before any number is read
    assert not verdict("nan", "1")[0] and not verdict("-0", "1")[0]
    assert verdict("-0", "0")[0] and verdict("1e999999999", "1E+999999999")[0]


def test_apps_call_rule() -> None:
    eq = official.apps_call_equal
    assert eq(3, [3]) and eq([3], [3]) and eq((1, 2), [1, 2])
    assert eq([(1, 2)], [[[1, 2]]])  # inner tuples become lists against outputs[0]
    assert eq({1: "a"}, {"1": "a"})  # string keys are made integers
    assert not eq(4, [3])


def test_values_cross_the_boundary_with_their_types() -> None:
    value = [(1, 2), {1: "a", (2, 3): [None]}, {4}, 1.5, float("inf"), b"x", True]
    assert decode(json.loads(json.dumps(encode(value)))) == value
    assert isinstance(decode(encode(object())), Opaque)


# ------------------------------------------------------------- extraction, feedback
def test_extraction_takes_the_last_block_whatever_its_language() -> None:
    text = "```python\nprint(1)\n```\nand in C++:\n```cpp\nint main() {}\n```"
    assert official.extract_code(text) == "int main() {}"
    assert official.extract_code("no block") is None
    env = DeepCoderMTEnv(tasks_path=FIXTURES / "lcb.jsonl", rules="official")
    assert env._extract(text)[0] == "int main() {}"
    assert DeepCoderMTEnv(tasks_path=FIXTURES / "lcb.jsonl")._extract(text)[0] == "print(1)\n"


def test_public_tests_are_those_in_the_statement_else_the_first_two() -> None:
    task = lcb_stdin([("9\n9 9\n", "1"), ("3\n1 2 3\n", "6"), ("7\n", "1"), ("8\n", "1")])
    assert official.public_indices(task, "Example: 3 \n 1 2 3", [0, 1, 2, 3]) == [1]
    assert official.public_indices(task, "no examples", [0, 1, 2, 3]) == [0, 1]


def test_feedback_congratulates_when_the_public_tests_pass() -> None:
    task = lcb_stdin([("3\n1 2 3\n", "6"), ("1\n5\n", "5"), ("2\n1 1\n", "2")])
    ok = TestOutcome(True, "Passed")
    wrong = TestOutcome(False, "Wrong Answer", "7", "Wrong answer at output_line_idx=0: 7 != 2")
    question = "Sum. Example input: 3\n1 2 3"
    assert official.feedback(task, (ok, ok, wrong), question) == SUCCESS_MESSAGE
    shown = official.feedback(task, (wrong,) + (official.NOT_SELECTED,) * 0 + (ok, ok), question)
    assert shown.startswith("Here are the results on the public test cases:\n### Test 1 failed\n")
    assert (
        "  Input: 3\n1 2 3\n\n  Expected: 6\n  Actual: 7\n\n  Error message: Wrong answer" in shown
    )


# ------------------------------------------------------------- the env, all three formats
@pytest.mark.bwrap
@pytest.mark.parametrize("name", ["lcb.jsonl", "taco.json", "primeintellect.jsonl"])
def test_env_official_rules_on_every_format(box: Sandbox, name: str) -> None:
    env = gym.make(
        "agentenvs/DeepCoderMT-v0", tasks_path=FIXTURES / name, rules="official", sandbox=box
    )
    core = env.unwrapped
    for task_id, task in core.task_set.tasks.items():
        env.reset(options={"task_id": task_id})
        solution = task.reference or _solutions[(name, task_id)]
        _, reward, terminated, _, info = env.step(f"```python\n{solution}\n```")
        assert (reward, terminated, info["success"]) == (1.0, True, True), task_id
        assert info["tests_total"] == len(official.selected(task))
    env.close()


_solutions = {
    ("taco.json", "row-00000"): "print(input()[::-1])",
    ("taco.json", "row-00001"): "def add(a, b):\n    return a + b",
    ("primeintellect.jsonl", "pi-stdin"): "print('YES' if int(input()) % 2 == 0 else 'NO')",
    ("primeintellect.jsonl", "pi-call"): "def double(x):\n    return 2 * x",
}


STRICT_VS_OFFICIAL = {
    "exit(1) after the answer": (SUM_OK + "import sys\nsys.exit(1)\n", False, True),
    "global in a helper": (
        "total = 0\ndef add(x):\n    global total\n    total += x\n"
        "input()\nfor v in input().split():\n    add(int(v))\nprint(total)\n",
        True,
        False,
    ),
    "sys.stdin.buffer": (
        "import sys\nd = sys.stdin.buffer.read().split()\nprint(sum(map(int, d[1:])))\n",
        True,
        False,
    ),
    "recursion depth 3000": (
        "def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\n"
        "input()\nprint(f(3000) - 3000 + sum(map(int, input().split())))\n",
        True,
        False,
    ),
}


@pytest.mark.bwrap
@pytest.mark.parametrize("case", sorted(STRICT_VS_OFFICIAL))
def test_env_strict_and_official_differ_where_the_table_says(
    box: Sandbox, tmp_path: Path, case: str
) -> None:
    code, strict_ok, official_ok = STRICT_VS_OFFICIAL[case]
    tests = [{"input": "3\n1 2 3\n", "output": "6\n", "testtype": "stdin"}]
    file = tmp_path / "rows.jsonl"
    file.write_text(json.dumps({"id": "sum", "problem": "Sum.", "tests": json.dumps(tests)}))
    for rules, want in (("strict", strict_ok), ("official", official_ok)):
        env = DeepCoderMTEnv(tasks_path=file, sandbox=box, rules=rules)
        env.reset(seed=0)
        info = env.step(f"```python\n{code}```")[4]
        assert info["success"] is want, rules
        env.close()


def test_rules_are_validated() -> None:
    with pytest.raises(ValueError, match="rules"):
        DeepCoderMTEnv(rules="lenient")


def test_no_code_block_costs_a_turn_with_the_official_message() -> None:
    env = DeepCoderMTEnv(tasks_path=FIXTURES / "lcb.jsonl", rules="official")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("I would loop over the input.")
    assert obs == official.NO_CODE_MESSAGE == "No code found in model response"
    assert (reward, terminated, info["action_valid"]) == (0.0, False, False)
    env.close()


# ------------------------------------------------------------- what a program can reach
SNOOP = (
    "import gc, os\n"
    "seen = set()\n"
    "for o in gc.get_objects():\n"
    "    try:\n"
    "        seen.add(repr(o)[:100000])\n"
    "    except Exception:\n"
    "        pass\n"
    "blob = ' '.join(seen)\n"
    "for fd in os.listdir('/proc/self/fd'):\n"
    "    try:\n"
    "        blob += os.readlink('/proc/self/fd/' + fd)\n"
    "    except OSError:\n"
    "        pass\n"
    "text = input()\n"
    "print('{answer}' if '{secret}' in blob else 'not found')\n"
)


@pytest.mark.bwrap
def test_expected_outputs_never_enter_the_sandbox(box: Sandbox) -> None:
    """Official rules compare on the host: a program that searches its whole process for
    the expected output cannot find it (and so cannot print it)."""
    secret = "EXPECTED-7f3a9c"
    task = lcb_stdin([("1\n", secret + "\n")])
    code = SNOOP.format(answer=secret, secret=secret)
    assert official.execute(box, task, code)[0].verdict == "Wrong Answer"


@pytest.mark.bwrap
def test_later_inputs_are_not_sent_before_their_turn(box: Sandbox) -> None:
    """The runner gets a test's input only after the previous test finished: the first
    test cannot see the second's input (officially one process reads all tests)."""
    later = "LATER-INPUT-51c2"
    task = lcb_stdin([("1\n", "not found\n"), (later + "\n", "x\n")])
    code = SNOOP.format(answer="seen it", secret=later)
    assert verdicts(official.execute(box, task, code))[0] == "Passed"


# ------------------------------------------------------------- the contract, both backends
@pytest.mark.bwrap
def test_contract_under_official_rules(box: Sandbox) -> None:
    from agentenvs.testing import check_env_contract

    check_env_contract(
        "agentenvs/DeepCoderMT-v0",
        options={"task_id": "dc-035"},
        env_kwargs={"rules": "official"},
        steps=8,
        check_processes=False,
    )


@pytest.mark.docker
def test_official_rules_on_docker() -> None:
    """The same verdicts in the Docker sandbox (its image carries numpy and pandas)."""
    require_docker()
    from agentenvs.sandbox import make_sandbox

    with make_sandbox("docker") as docker_box:
        probe = docker_box.run(["python3", "-c", "import numpy, pandas"], timeout=60)
        assert probe.returncode == 0, (
            "the sandbox image lacks numpy/pandas: rebuild it (bash .ci/services/docker.sh)\n"
            + probe.stderr[-500:]
        )
        cases = [
            (SUM, SUM_OK + "import sys\nsys.exit(1)\n", True),
            (SUM, STRICT_VS_OFFICIAL["global in a helper"][0], False),
            (PAIR, "def pair(a, b):\n    return (a, b)\n", True),
            (PAIR, "# class Solution\ndef pair(a, b):\n    return [a, b]\n", False),
            (PARITY, "print('NO')\n", True),
            (taco([[1, 2]], [[3]], fn_name="add"), "def add(a, b):\n    return a + b\n", True),
        ]
        for task, code, want in cases:
            assert passes(docker_box, task, code) is want, code


@pytest.mark.bwrap
def test_an_endless_answer_is_cut_off(box: Sandbox) -> None:
    task = lcb_stdin([("1\n", "1\n")])
    outcomes = official.execute(box, task, "print('x' * (17 << 20))\n")
    assert outcomes[0].verdict == "Runtime Error"


@pytest.mark.bwrap
def test_an_apps_script_cannot_write_the_runners_answers(box: Sandbox) -> None:
    """Each APPS stdin test runs in a fork that holds none of the runner's pipes: an answer
    forged on every descriptor reaches nobody (and printing nothing fails, as officially)."""
    forge = (
        "import os, json\n"
        "frame = '\\x1eAGENTENVS-OFFICIAL ' + json.dumps({'stdout': 'YES', 'error': None})\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, (frame + '\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
    )
    task = taco(["2\n"], ["YES\n"])
    assert verdicts(official.execute(box, task, forge)) == ["Wrong Answer"]


# ------------------------------------------------------------- problems as published
REAL = FIXTURES / "official_problems.jsonl"
CONTESTANTS = [
    # (task, program, passes officially, passes strictly)
    ("abc-pairs", None, True, True),
    (
        "abc-pairs",
        "import sys\ninput = sys.stdin.readline\nn, k = map(int, input().split())\n"
        "a = list(map(int, input().split()))\n"
        "print(sum((a[i] + a[j]) % k == 0 for i in range(n) for j in range(i + 1, n)))\n",
        True,
        True,
    ),
    (
        "abc-pairs",
        "import sys\nd = sys.stdin.buffer.read().split()\nn, k = int(d[0]), int(d[1])\n"
        "a = list(map(int, d[2:]))\n"
        "print(sum((a[i] + a[j]) % k == 0 for i in range(n) for j in range(i + 1, n)))\n",
        False,
        True,
    ),
    (
        "abc-pairs",
        "n, k = map(int, input().split())\na = list(map(int, input().split()))\n"
        "import sys\nsys.stdout.write(str(sum((a[i] + a[j]) % k == 0 for i in range(n) "
        "for j in range(i + 1, n))) + '\\n')\nsys.exit(1)\n",
        True,
        False,
    ),
    ("lc-two-sum", None, True, True),
    (
        "lc-two-sum",
        "class Solution:\n    def twoSum(self, nums, target):\n"
        "        for i in range(len(nums)):\n            for j in range(i + 1, len(nums)):\n"
        "                if nums[i] + nums[j] == target:\n                    return i, j\n",
        True,
        True,
    ),
    (
        "lc-two-sum",
        "def twoSum(nums, target):\n    seen = {}\n    for i, x in enumerate(nums):\n"
        "        if target - x in seen:\n            return [seen[target - x], i]\n        seen[x] = i\n",
        True,
        True,
    ),
    ("taco-digitize", None, True, True),
    (
        "taco-digitize",
        "def digitize(n):\n    return (int(c) for c in reversed(str(n)))\n",
        False,
        False,
    ),
    ("pi-divisible", None, True, True),
    (
        "pi-divisible",
        "for _ in range(int(input())):\n    a, b = map(int, input().split())\n"
        "    print('yes' if a % b == 0 else 'no')\n    print()\n",
        True,
        False,
    ),
]


@pytest.mark.bwrap
@pytest.mark.parametrize("case", range(len(CONTESTANTS)))
def test_published_problems_with_contestants_solutions(box: Sandbox, case: int) -> None:
    task_id, program, official_ok, strict_ok = CONTESTANTS[case]
    for rules, want in (("official", official_ok), ("strict", strict_ok)):
        env = DeepCoderMTEnv(tasks_path=REAL, sandbox=box, rules=rules)
        env.reset(options={"task_id": task_id})
        code = program or env.task.reference
        info = env.step(f"Here is my solution.\n```python\n{code}```")[4]
        assert info["success"] is want, (rules, task_id)
        env.close()


@pytest.mark.bwrap
def test_published_problem_feedback_when_only_a_hidden_test_fails(box: Sandbox) -> None:
    """abc-pairs shows its first test in the statement: that one is public. A program right
    on it but wrong elsewhere gets "Congratulations!" officially, a warning strictly."""
    program = "input()\nprint(2)\n"
    seen = {}
    for rules in ("official", "strict"):
        env = DeepCoderMTEnv(tasks_path=REAL, sandbox=box, rules=rules, public_tests=1)
        env.reset(options={"task_id": "abc-pairs"})
        obs, reward, *_ = env.step(f"```python\n{program}```")
        seen[rules] = (obs, reward)
        env.close()
    assert seen["official"] == (SUCCESS_MESSAGE, 0.0)
    assert seen["strict"][0].startswith("Your code passed all the public test cases, but")


class _HostProcess:
    """A plain host subprocess behind the SandboxProcess calls the official runner uses."""

    def __init__(self, argv: list[str]) -> None:
        import selectors
        import subprocess

        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.eof = False

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read(self, timeout: float) -> bytes:
        import os

        if self.eof or not self.sel.select(timeout):
            return b""
        chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
        self.eof = not chunk
        return chunk

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.sel.close()


class _NoNumpySandbox:
    """Spawns the runner with an interpreter that has no site packages (so no numpy)."""

    backend = "host"

    def spawn(self, argv: list[str], **_: Any) -> _HostProcess:
        import sys

        return _HostProcess([sys.executable, "-S", "-I", *argv[1:]])


def test_a_sandbox_without_numpy_is_a_clear_error() -> None:
    from agentenvs.core.errors import SandboxError

    with pytest.raises(SandboxError, match="cannot import numpy and pandas.*python3 lacks them"):
        official.execute(_NoNumpySandbox(), SUM, SUM_OK)  # type: ignore[arg-type]
    with pytest.raises(SandboxError, match="cannot import numpy"):
        official.execute(_NoNumpySandbox(), PARITY, "print('YES')")  # type: ignore[arg-type]
