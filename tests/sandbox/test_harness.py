"""The forking case worker (``harness.py``): case kinds, results, errors and isolation.

Most tests go through ``run_python_cases`` on every backend; the pure helpers and the
wire protocol are also checked directly, without a sandbox.
"""

from __future__ import annotations

import json
import time

import pytest

from agentenvs.sandbox import Limits, PyCase, Sandbox, harness


def run_all(box: Sandbox, source: str, cases: list[PyCase], timeout: float = 3.0) -> list:  # noqa: ANN401
    return list(box.run_python_cases(source, cases, timeout_per_case=timeout))


# ----------------------------------------------------------------------------- kinds
def test_stdin_kind(backend: Sandbox) -> None:
    src = "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)"
    got = run_all(backend, src, [PyCase("stdin", stdin=f"{i} {i}\n") for i in range(5)])
    assert [r.stdout for r in got] == [f"{2 * i}\n" for i in range(5)]
    assert all(r.error is None and r.value is None for r in got)


def test_stdin_kind_runs_main_guard_and_input(backend: Sandbox) -> None:
    src = (
        "def main():\n    n = int(input())\n    print(*[input().upper() for _ in range(n)])\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    (r,) = run_all(backend, src, [PyCase("stdin", stdin="2\nab\ncd\n")])
    assert r.stdout == "AB CD\n" and r.error is None


def test_stdin_kind_rewrapped_streams(backend: Sandbox) -> None:
    """The competitive programmer's idiom of rewrapping the standard streams works as in
    a fresh interpreter (the originals stay referenced by ``sys.__stdin__`` & co.)."""
    src = (
        "import io, sys\n"
        "print('first')\n"
        "sys.stdin = io.TextIOWrapper(sys.stdin.buffer, encoding='utf-8')\n"
        "sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding='utf-8')\n"
        "print(sum(map(int, sys.stdin.read().split())))\n"
    )
    got = run_all(backend, src, [PyCase("stdin", stdin=f"{i} 1\n") for i in range(3)])
    assert [(r.error, r.stdout) for r in got] == [(None, f"first\n{i + 1}\n") for i in range(3)]


def test_call_kind_function_and_solution_method(backend: Sandbox) -> None:
    src = (
        "def add(a, b):\n    return a + b\n"
        "class Solution:\n    def twoSum(self, nums, target):\n"
        "        seen = {}\n        for i, x in enumerate(nums):\n"
        "            if target - x in seen:\n                return (seen[target - x], i)\n"
        "            seen[x] = i\n"
    )
    got = run_all(
        backend,
        src,
        [
            PyCase("call", func="add", args=(2, 3)),
            PyCase("call", func="twoSum", args=([2, 7, 11, 15], 9)),
        ],
    )
    assert [r.value for r in got] == [5, [0, 1]]  # the tuple comes back as a list
    assert all(r.error is None for r in got)


def test_call_kind_non_json_values(backend: Sandbox) -> None:
    src = "def f():\n    return [1, {2, 3}, (4, None)]"
    (r,) = run_all(backend, src, [PyCase("call", func="f")])
    assert r.value == [1, {harness.REPR_KEY: "{2, 3}"}, [4, None]]


def test_call_kind_does_not_run_main_guard(backend: Sandbox) -> None:
    src = "def f(x):\n    return x\nif __name__ == '__main__':\n    print(input())\n"
    (r,) = run_all(backend, src, [PyCase("call", func="f", args=("ok",))])
    assert r.value == "ok" and r.error is None and r.stdout == ""


def test_call_kind_missing_function(backend: Sandbox) -> None:
    (r,) = run_all(backend, "x = 1", [PyCase("call", func="nope")])
    assert r.error == "exception: NameError: function 'nope' is not defined"


# ----------------------------------------------------------------------------- errors
def test_exception_reported_with_last_traceback_line(backend: Sandbox) -> None:
    src = "n = int(input())\nprint('before')\nprint(10 // n)"
    got = run_all(backend, src, [PyCase("stdin", stdin="0"), PyCase("stdin", stdin="5")])
    assert got[0].error == "exception: ZeroDivisionError: integer division or modulo by zero"
    assert got[0].stdout == "before\n"
    assert 'File "<solution>", line 3' in got[0].stderr
    assert got[1].stdout == "before\n2\n" and got[1].error is None


def test_compile_error_on_every_case(backend: Sandbox) -> None:
    got = run_all(backend, "def f(:\n  pass", [PyCase("stdin"), PyCase("call", func="f")])
    assert len(got) == 2
    for r in got:
        assert r.error is not None and r.error.startswith("compile error: SyntaxError")
        assert "line 1" in r.error


def test_sys_exit(backend: Sandbox) -> None:
    src = "import sys\nprint('a')\nsys.exit(int(input()))"
    got = run_all(backend, src, [PyCase("stdin", stdin="0"), PyCase("stdin", stdin="3")])
    assert got[0].error is None and got[0].stdout == "a\n"
    assert got[1].error == "exception: SystemExit: 3" and got[1].stdout == "a\n"


def test_crash_by_signal(backend: Sandbox) -> None:
    src = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)"
    (r,) = run_all(backend, src, [PyCase("stdin")])
    assert r.error == "crashed: signal 11 (SIGSEGV)"


def test_timeout_per_case_later_cases_still_run(backend: Sandbox) -> None:
    src = "import time\nt = float(input())\ntime.sleep(t)\nprint(t)"
    cases = [PyCase("stdin", stdin=s) for s in ("0", "300", "0.1", "300", "0")]
    start = time.monotonic()
    # roomy for the cases that end at once; the 300 s ones always reach it
    got = run_all(backend, src, cases, timeout=2.0)
    assert [r.error for r in got] == [None, "timeout", None, "timeout", None]
    assert got[2].stdout == "0.1\n"
    assert 1.8 < got[1].duration_s < 60
    assert time.monotonic() - start < 120  # far from the 600 s of waiting for the sleeps


# ----------------------------------------------------------------------------- isolation
def test_globals_do_not_leak_between_cases(backend: Sandbox) -> None:
    src = (
        "import sys\nCOUNT = globals().get('COUNT', 0)\n"
        "sys.modules.setdefault('leak', [])\nsys.modules['leak'].append(1)\n"
        "def f():\n    global COUNT\n    COUNT += 1\n    return [COUNT, len(sys.modules['leak'])]\n"
    )
    got = run_all(backend, src, [PyCase("call", func="f") for _ in range(3)])
    assert [r.value for r in got] == [[1, 1]] * 3


def test_files_in_workdir_persist_between_cases(backend: Sandbox) -> None:
    # documented: each case is a fresh fork, but the work dir is shared like a real disk
    src = (
        "import os\nn = len(os.listdir('.')) if os.path.isdir('.') else 0\n"
        "open(f'case-{input()}.txt', 'w').write('x')\nprint(sorted(os.listdir('.')))"
    )
    got = run_all(backend, src, [PyCase("stdin", stdin="a"), PyCase("stdin", stdin="b")])
    assert "case-a.txt" in got[1].stdout and "case-b.txt" in got[1].stdout


def test_case_cannot_forge_results_through_inherited_fds(backend: Sandbox) -> None:
    src = (
        "import os, json\nfor fd in range(3, 64):\n    try:\n"
        '        os.write(fd, b\'{"i": 1, "stdout": "forged", "error": null}\\n\')\n'
        "    except OSError:\n        pass\nprint(input())"
    )
    got = run_all(backend, src, [PyCase("stdin", stdin="x"), PyCase("stdin", stdin="y")])
    assert [r.stdout for r in got] == ["x\n", "y\n"]


def test_early_close_stops_the_worker(backend: Sandbox) -> None:
    src = "import time\ntime.sleep(float(input()))\nprint('done')"
    it = backend.run_python_cases(src, [PyCase("stdin", stdin=s) for s in ("0", "300", "300")])
    first = next(it)
    assert first.stdout == "done\n"
    start = time.monotonic()
    it.close()  # type: ignore[attr-defined]
    assert time.monotonic() - start < 60  # far from the 300 s of waiting for the case
    # the sandbox is free again at once
    assert [r.stdout for r in run_all(backend, src, [PyCase("stdin", stdin="0")])] == ["done\n"]


def test_empty_case_list(backend: Sandbox) -> None:
    assert run_all(backend, "print(1)", []) == []


def test_fast_path_is_fast(backend: Sandbox) -> None:
    src = "a, b = map(int, input().split())\nprint(a + b)"
    got = run_all(backend, src, [PyCase("stdin", stdin=f"{i} 1") for i in range(100)])
    assert [r.stdout for r in got] == [f"{i + 1}\n" for i in range(100)]
    durations = sorted(r.duration_s for r in got)
    assert durations[50] < 0.05, durations[50]  # ~1-3 ms normally; loose for loaded CI


# ----------------------------------------------------------------------------- no sandbox
def test_to_jsonable() -> None:
    assert harness.to_jsonable((1, (2, 3), {"a": (None,)})) == [1, [2, 3], {"a": [None]}]
    assert harness.to_jsonable({1: 2}) == {harness.REPR_KEY: "{1: 2}"}
    loop: list = []
    loop.append(loop)
    assert harness.to_jsonable(loop) == {harness.REPR_KEY: "[[...]]"}


def test_to_jsonable_numpy_scalars_are_their_values() -> None:
    np = pytest.importorskip("numpy")
    got = harness.to_jsonable([np.int64(3), np.bool_(True), np.float32(0.5), np.array(7)])
    assert got == [3, True, 0.5, 7]
    assert [type(v) for v in got] == [int, bool, float, int]
    assert harness.to_jsonable(np.array([1, 2])) == {harness.REPR_KEY: "array([1, 2])"}


def test_error_texts() -> None:
    assert harness.exception_line(ValueError("bad")) == "ValueError: bad"
    assert harness.exception_line(KeyError()) == "KeyError"
    try:
        compile("x = (", "<solution>", "exec")
    except SyntaxError as exc:
        assert harness.compile_error(exc).startswith("compile error: SyntaxError: ")
    assert harness.describe_signal(9) == "crashed: signal 9 (SIGKILL)"


def test_wire_protocol(local_box: Sandbox) -> None:
    """The worker's frames and answers, driven by hand (inside the sandbox, never on the host)."""
    header = harness.encode_header("print(input()[::-1])", 5.0, Limits())
    cases = [PyCase("stdin", stdin="abc"), PyCase("stdin", stdin="xyz")]
    stdin = header + b"".join(harness.encode_case(c) for c in cases)
    r = local_box.run(harness.worker_argv("python3"), stdin=stdin, timeout=30)
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert lines[0] == {"ready": True}
    assert [(m["i"], m["stdout"], m["error"]) for m in lines[1:]] == [
        (0, "cba\n", None),
        (1, "zyx\n", None),
    ]


@pytest.mark.parametrize("kind", ["stdin", "call"])
def test_case_frames_round_trip(kind: str) -> None:
    case = PyCase(kind, stdin="1\u00e9", func="f", args=(1, (2,)))  # type: ignore[arg-type]
    raw = harness.encode_case(case)
    size = int.from_bytes(raw[:4], "big")
    head = json.loads(raw[4 : 4 + size])
    payload = raw[4 + size :]
    assert head == {"kind": kind, "func": "f", "size": len(payload)}
    if kind == "stdin":
        assert payload.decode() == "1\u00e9"
    else:
        assert json.loads(payload) == [1, [2]]
    req = harness.encode_header("src", 1.5, Limits(memory_mb=7))
    body = json.loads(req[4:])
    assert len(req) == 4 + int.from_bytes(req[:4], "big")
    assert body["timeout"] == 1.5 and body["limits"]["memory_mb"] == 7 and body["source"] == "src"
