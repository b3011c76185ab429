"""DeepCoder-MT grading at concurrency: programs/s and latency at 1, 4 and 16 callers.

Grades the bundled problems' reference solutions from C threads at once on one local
sandbox. Official rules (each program a fork of a warm server), three ways: "new" (the
default: servers capped at the usable CPUs, callers beyond them queued, programs that
cannot tell numpy and pandas are missing on a lean server); "capped" (the same, the full
server only: ``execute(lean=False)``); "old" (no cap, ``warm_servers=None``: a cold server
whenever none is idle; the full server only); "cap 2x"/"cap 4x" (the default's grading
with the cap at twice and four times the usable CPUs) and "uncapped" (the same, no cap).
Strict rules (a sandboxed case worker per program) three ways: "spare" (the default: a
worker started ahead, taken by the call; once the call's answers are in, the used worker
is ended and reaped on a thread of its own, which starts the next spare), "prev" (the
spare as it was before: the next one started beside the call, which waited for its
worker's exit) and "fresh" (``strict_spares=0``: each call starts its own), with all of
a problem's cases and with its first case alone ("1case").

Each round takes a fresh sandbox per variant and concurrency and grades the programs
twice: the first batch pays the servers' starts, the second finds them started. Rounds
alternate the variants' order; the figures are medians over rounds (programs/s, and
p50/p99 of one program's time from its call to its verdict, queueing included), then
the ratios against the old behaviour.

Usage: python benchmarks/bench_deepcoder_concurrency.py [--rounds 3] [--programs 64]
       [--levels 1,4,16] [--only official,strict]  (variants whose name starts so)
       [--gap 0.5]  (a pause after each program: one call after another with the spare
       started, ``--levels 1 --only "strict 1case"``)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

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


def grade_strict_one(box: LocalSandbox, task: CodeTask) -> None:
    grade_strict(box, replace(task, tests=task.tests[:1]))


def batch(
    box: LocalSandbox,
    grade: Callable[[LocalSandbox, CodeTask], None],
    tasks: list[CodeTask],
    callers: int,
    gap: float = 0.0,
) -> tuple[float, list[float]]:
    """Programs/s and each program's seconds, ``callers`` at once; each caller pauses
    ``gap`` seconds after a program (the pause counts in programs/s, not in its time)."""

    def one(task: CodeTask) -> float:
        start = time.perf_counter()
        grade(box, task)
        took = time.perf_counter() - start
        time.sleep(gap)
        return took

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
    parser.add_argument(
        "--gap", type=float, default=0.0, help="seconds each caller pauses between programs"
    )
    parser.add_argument("--only", default="", help="variant name prefixes, comma-separated")
    args = parser.parse_args()
    levels = tuple(int(x) for x in args.levels.split(","))
    pool = [t for t in load_tasks().tasks.values() if t.reference]
    tasks = [pool[i % len(pool)] for i in range(args.programs)]
    cpus = len(os.sched_getaffinity(0))
    prev = {"_spare_at_call_start": True, "_reap_on_call": True}
    variants: dict[str, tuple[dict[str, object], Callable[[LocalSandbox, CodeTask], None]]] = {
        "official new": ({}, grade_official),
        "official capped": ({}, grade_official_full),
        "official old": ({"warm_servers": None}, grade_official_full),
        "official cap 2x": ({"warm_servers": 2 * cpus}, grade_official),
        "official cap 4x": ({"warm_servers": 4 * cpus}, grade_official),
        "official uncapped": ({"warm_servers": None}, grade_official),
        "strict spare": ({}, grade_strict),
        "strict prev": (prev, grade_strict),
        "strict fresh": ({"strict_spares": 0}, grade_strict),
        "strict 1case spare": ({}, grade_strict_one),
        "strict 1case prev": (prev, grade_strict_one),
        "strict 1case fresh": ({"strict_spares": 0}, grade_strict_one),
    }
    if args.only:
        prefixes = tuple(x.strip() for x in args.only.split(","))
        variants = {k: v for k, v in variants.items() if k.startswith(prefixes)}
    # (variant, callers, batch) -> per-round programs/s, p50, p99
    got: dict[tuple[str, int, int], list[tuple[float, float, float]]] = {}
    for r in range(args.rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for callers in levels:
            for name in order:
                kw, grade = variants[name]
                public = {k: v for k, v in kw.items() if not k.startswith("_")}
                with LocalSandbox(LIMITS, **public) as box:  # type: ignore[arg-type]
                    for k, v in kw.items():
                        if k.startswith("_"):  # the sandbox's earlier behaviour
                            setattr(box, k, v)
                    for b in (0, 1):
                        rate, each = batch(box, grade, tasks, callers, args.gap)
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

    def against(title: str, base: str, names: tuple[str, ...]) -> None:
        if not all((n, levels[0], 0) in med for n in (base, *names)):
            return
        print(title)
        for b in (0, 1):
            for callers in levels:
                old = med[(base, callers, b)]
                for name in names:
                    new = med[(name, callers, b)]
                    print(
                        f"  {('first', 'second')[b]} batch, {callers:>2} callers, {name:<18}: "
                        f"{new[0] / old[0]:.2f}x programs/s, p50 {new[1] / old[1]:.2f}x, "
                        f"p99 {new[2] / old[2]:.2f}x; p99/p50 {new[2] / new[1]:.1f} "
                        f"(base {old[2] / old[1]:.1f})"
                    )

    against(
        "official rules, against no cap (the default's grading, warm_servers=None):",
        "official uncapped",
        ("official new", "official cap 2x", "official cap 4x"),
    )
    against(
        "strict rules, spare and prev against fresh:",
        "strict fresh",
        ("strict spare", "strict prev"),
    )
    against("strict rules, spare against prev:", "strict prev", ("strict spare",))
    against(
        "strict rules, one case, spare and prev against fresh:",
        "strict 1case fresh",
        ("strict 1case spare", "strict 1case prev"),
    )
    against(
        "strict rules, one case, spare against prev:",
        "strict 1case prev",
        ("strict 1case spare",),
    )
    if not all(
        (n, levels[0], 0) in med for n in ("official old", "official new", "official capped")
    ):
        return
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
