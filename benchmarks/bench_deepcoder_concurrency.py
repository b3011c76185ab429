"""DeepCoder-MT grading at concurrency: programs/s and latency at 1, 4 and 16 callers.

Grades the bundled problems' reference solutions from C threads at once on one local
sandbox. Official rules (each program a fork of a warm server), three ways: "new" (the
default: servers capped at the usable CPUs, callers beyond them queued, programs that
cannot tell numpy and pandas are missing on a lean server); "capped" (the same, the full
server only: ``execute(lean=False)``); "old" (no cap, ``warm_servers=None``: a cold server
whenever none is idle; the full server only). Strict rules (a fresh sandboxed worker per
program, the same either way) for reference.

Each round takes a fresh sandbox per variant and concurrency and grades the programs
twice: the first batch pays the servers' starts, the second finds them started. Rounds
alternate the variants' order; the figures are medians over rounds (programs/s, and
p50/p99 of one program's time from its call to its verdict, queueing included), then
the ratios against the old behaviour.

Usage: python benchmarks/bench_deepcoder_concurrency.py [--rounds 3] [--programs 64]
       [--levels 1,4,16]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from agentenvs.envs.deepcoder import official
from agentenvs.envs.deepcoder.data import CodeTask, load_tasks
from agentenvs.envs.deepcoder.lcb import prepare_program
from agentenvs.sandbox.base import Limits, PyCase
from agentenvs.sandbox.local import LocalSandbox

LIMITS = Limits(memory_mb=4096, cpu_seconds=3600)


def grade_official(box: LocalSandbox, task: CodeTask) -> None:
    outcomes = official.execute(box, task, task.reference or "")
    assert official.passed_all(task, outcomes), [o.verdict for o in outcomes]


def grade_official_full(box: LocalSandbox, task: CodeTask) -> None:
    outcomes = official.execute(box, task, task.reference or "", lean=False)
    assert official.passed_all(task, outcomes), [o.verdict for o in outcomes]


def grade_strict(box: LocalSandbox, task: CodeTask) -> None:
    program, _ = prepare_program(task.reference or "")
    cases = [
        PyCase("stdin", stdin=t.input)
        if t.kind == "stdin"
        else PyCase("call", func=task.func_name or "", args=t.args)
        for t in task.tests
    ]
    runs = list(box.run_python_cases(program, cases, timeout_per_case=6.0))
    assert all(r.error is None for r in runs), [r.error for r in runs]


def batch(
    box: LocalSandbox,
    grade: Callable[[LocalSandbox, CodeTask], None],
    tasks: list[CodeTask],
    callers: int,
) -> tuple[float, list[float]]:
    """Programs/s and each program's seconds, ``callers`` at once."""

    def one(task: CodeTask) -> float:
        start = time.perf_counter()
        grade(box, task)
        return time.perf_counter() - start

    start = time.perf_counter()
    with ThreadPoolExecutor(callers) as pool:
        each = list(pool.map(one, tasks))
    return len(tasks) / (time.perf_counter() - start), each


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--programs", type=int, default=64, help="programs a batch")
    parser.add_argument("--levels", default="1,4,16", help="callers at once, comma-separated")
    args = parser.parse_args()
    levels = tuple(int(x) for x in args.levels.split(","))
    pool = [t for t in load_tasks().tasks.values() if t.reference]
    tasks = [pool[i % len(pool)] for i in range(args.programs)]
    variants: dict[str, tuple[object, Callable[[LocalSandbox, CodeTask], None]]] = {
        "official new": ("cpus", grade_official),
        "official capped": ("cpus", grade_official_full),
        "official old": (None, grade_official_full),
        "strict": ("cpus", grade_strict),
    }
    # (variant, callers, batch) -> per-round programs/s, p50, p99
    got: dict[tuple[str, int, int], list[tuple[float, float, float]]] = {}
    for r in range(args.rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for callers in levels:
            for name in order:
                cap, grade = variants[name]
                with LocalSandbox(LIMITS, warm_servers=cap) as box:  # type: ignore[arg-type]
                    for b in (0, 1):
                        rate, each = batch(box, grade, tasks, callers)
                        got.setdefault((name, callers, b), []).append(
                            (rate, pct(each, 0.5), pct(each, 0.99))
                        )
    load = os.getloadavg()
    print(
        f"{args.programs} bundled reference programs a batch, {args.rounds} rounds, "
        f"{len(os.sched_getaffinity(0))} usable CPUs, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )
    print(f"{'variant':<18} {'batch':<6} {'callers':>7} {'prog/s':>7} {'p50 ms':>7} {'p99 ms':>7}")
    med: dict[tuple[str, int, int], tuple[float, float, float]] = {}
    for (name, callers, b), rows in sorted(
        got.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])
    ):
        m = tuple(statistics.median(x[i] for x in rows) for i in range(3))
        med[(name, callers, b)] = m  # type: ignore[assignment]
        print(
            f"{name:<18} {('first', 'second')[b]:<6} {callers:>7} {m[0]:>7.1f} "
            f"{m[1] * 1000:>7.0f} {m[2] * 1000:>7.0f}"
        )
    print("official rules, against the old behaviour (no cap, full server only):")
    for b in (0, 1):
        for callers in levels:
            old = med[("official old", callers, b)]
            for name in ("official new", "official capped"):
                new = med[(name, callers, b)]
                print(
                    f"  {('first', 'second')[b]} batch, {callers:>2} callers, {name:<15}: "
                    f"{new[0] / old[0]:.2f}x programs/s, p99 {new[2] / old[2]:.2f}x; "
                    f"p99/p50 {new[2] / new[1]:.1f} (old {old[2] / old[1]:.1f})"
                )


if __name__ == "__main__":
    main()
