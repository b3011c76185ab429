"""DeepCoder-MT grading time per program: strict rules vs ``rules="official"``, in one run.

For each of the bundled problems' first N tasks of each kind (stdin, call-based), grades the
reference solution under both rules (nothing cached) and prints the median time per
program and per test, and the ratio. Official rules fork each program from the local
sandbox's warm server (the interpreter started and the preamble's numpy/pandas imported
once per sandbox); strict rules start a worker per program and fork it per test. Also
times an APPS-style (TACO) stdin program, which officially runs as a fresh script per test.

Usage: python benchmarks/bench_deepcoder_official.py [--tasks N] [--sandbox local]
"""

from __future__ import annotations

import argparse
import statistics
import time

from agentenvs.envs.deepcoder import official
from agentenvs.envs.deepcoder.data import CodeTask, load_tasks, parse_row
from agentenvs.envs.deepcoder.lcb import prepare_program
from agentenvs.sandbox import make_sandbox
from agentenvs.sandbox.base import Limits, PyCase


def strict_seconds(box, task: CodeTask) -> float:  # type: ignore[no-untyped-def]
    program, _ = prepare_program(task.reference or "")
    cases = [
        PyCase("stdin", stdin=t.input)
        if t.kind == "stdin"
        else PyCase("call", func=task.func_name or "", args=t.args)
        for t in task.tests
    ]
    start = time.perf_counter()
    runs = list(box.run_python_cases(program, cases, timeout_per_case=6.0))
    elapsed = time.perf_counter() - start
    assert all(r.error is None for r in runs), [r.error for r in runs]
    return elapsed


def official_seconds(box, task: CodeTask) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    outcomes = official.execute(box, task, task.reference or "")
    elapsed = time.perf_counter() - start
    assert official.passed_all(task, outcomes), [o.verdict for o in outcomes]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=4, help="tasks of each kind")
    parser.add_argument("--sandbox", default="local")
    args = parser.parse_args()
    tasks = list(load_tasks().tasks.values())
    chosen = [t for t in tasks if t.tests[0].kind == "stdin"][: args.tasks]
    chosen += [t for t in tasks if t.tests[0].kind == "call"][: args.tasks]
    with make_sandbox(args.sandbox, limits=Limits(memory_mb=4096, cpu_seconds=3600)) as box:
        print(
            f"Grading one reference program ({args.sandbox} sandbox, median of {len(chosen)} tasks):"
        )
        print(
            f"{'kind':<6} {'tests':>5} {'strict s':>9} {'official s':>11} {'official/strict':>16}"
        )
        for kind in ("stdin", "call"):
            group = [t for t in chosen if t.tests[0].kind == kind]
            strict = [strict_seconds(box, t) for t in group]
            loose = [official_seconds(box, t) for t in group]
            n_tests = statistics.median(len(t.tests) for t in group)
            s, o = statistics.median(strict), statistics.median(loose)
            print(f"{kind:<6} {n_tests:>5.0f} {s:>9.3f} {o:>11.3f} {o / s:>15.1f}x")
        tests = {
            "inputs": [f"{i}\n" for i in range(10)],
            "outputs": [f"{2 * i}\n" for i in range(10)],
        }
        apps = parse_row({"problem": "Double n.", "tests": tests}, "bench", "apps")
        apps = CodeTask(**{**apps.__dict__, "reference": "print(2 * int(input()))"})
        per_program = statistics.median(official_seconds(box, apps) for _ in range(3))
        print(
            f"APPS stdin (fresh script per test, official only): {per_program:.3f} s for 10 tests, "
            f"{per_program / 10 * 1000:.0f} ms a test"
        )


if __name__ == "__main__":
    main()
