"""Latency tails under concurrency: p50 and p99 when many envs start at once.

- Terminal-Bench on Docker: ``reset`` + the first command (``ls /app``) of ``N`` envs at
  once (``--terminal-concurrency``, default 1, 8 and 16), each env on a thread of its own
  doing episodes back to back (at least ``--terminal-samples`` timed in all); the warm
  pool refills between them.
- The local sandbox as DeepCoder starts it: a fresh ``LocalSandbox`` (its work dir, the
  probe of bubblewrap already cached) and its first test case through
  ``run_python_cases`` (a sandboxed worker started, the program loaded, one case run),
  then ``close``, at ``N`` at once (``--sandbox-concurrency``, default 1, 8 and 64).

Every start is timed on its own; each level prints its count, p50, p99 and max, and the
p99/p50 ratio, with the machine's CPU count and load average beside them (the tails
depend on the machine more than on the code: on a 2-core machine 64 sandboxes at once
queue for the CPUs). A part whose backend is not here (no Docker engine or image, no
usable bubblewrap) says why and is skipped; the script exits 0.

Usage: python benchmarks/bench_tails.py [--terminal-concurrency 1 8 16]
       [--sandbox-concurrency 1 8 64] [--terminal-samples 32] [--sandbox-samples 64]
       [--task ID]
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

SOURCE = "a, b = map(int, input().split())\nprint(a + b)\n"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]


def report(name: str, level: int, times: Sequence[float]) -> None:
    p50, p99 = percentile(times, 0.50), percentile(times, 0.99)
    print(
        f"  {name} x{level:<3} n={len(times):<4} p50 {p50 * 1e3:8.1f} ms  p99 {p99 * 1e3:8.1f} ms"
        f"  max {max(times) * 1e3:8.1f} ms  p99/p50 {p99 / p50:5.1f}"
    )


def concurrently(level: int, work: Callable[[int], list[float]]) -> list[float]:
    """``work(i)`` for ``i`` in ``range(level)``, each on a thread, released together."""
    gate = threading.Barrier(level)

    def run(i: int) -> list[float]:
        gate.wait()
        return work(i)

    with ThreadPoolExecutor(max_workers=level) as pool:
        return [t for times in pool.map(run, range(level)) for t in times]


# ------------------------------------------------------------------ Terminal-Bench on Docker
def terminal_available() -> tuple[bool, str]:
    try:
        from agentenvs.sandbox.docker import docker_available
    except ImportError as exc:
        return False, f"the docker extra is missing ({exc})"
    return docker_available("agentenvs/terminal:latest")


def terminal_tails(levels: Sequence[int], samples: int, task_id: str | None) -> None:
    def rounds_for(level: int) -> int:
        return max(2, -(-samples // level))

    from agentenvs.envs.terminal.env import TerminalBenchEnv

    ok, why = terminal_available()
    if not ok:
        print(f"Terminal-Bench on Docker: skipped ({why})")
        return
    probe = TerminalBenchEnv(runtime="docker", command_timeout=30)
    task = task_id or probe.task_ids[0]
    probe.close()
    print(f"Terminal-Bench on Docker, task {task}: reset + first command (`ls /app`)")
    for level in levels:
        report("reset + first command", level, _terminal_level(level, rounds_for(level), task))


def _terminal_level(level: int, rounds: int, task: str) -> list[float]:
    from agentenvs.envs.terminal.env import TerminalBenchEnv

    envs = [TerminalBenchEnv(runtime="docker", command_timeout=30) for _ in range(level)]
    try:

        def first(i: int) -> list[float]:
            # the first reset builds or finds the image and fills the pool: not timed
            envs[i].reset(options={"task_id": task})
            return []

        def episodes(i: int) -> list[float]:
            times = []
            for _ in range(rounds):
                start = time.perf_counter()
                envs[i].reset(options={"task_id": task})
                envs[i].step("ls /app")
                times.append(time.perf_counter() - start)
            return times

        concurrently(level, first)
        return concurrently(level, episodes)
    finally:
        for env in envs:
            env.close()


# ------------------------------------------------------------------ the local sandbox
def sandbox_tails(levels: Sequence[int], samples: int) -> None:
    from agentenvs.sandbox.base import PyCase
    from agentenvs.sandbox.local import LocalSandbox, local_available

    ok, why = local_available()
    if not ok:
        print(f"local sandbox: skipped ({why})")
        return
    case = [PyCase("stdin", stdin="2 3\n")]

    def start_once() -> float:
        start = time.perf_counter()
        box = LocalSandbox()
        try:
            runs = list(box.run_python_cases(SOURCE, case))
        finally:
            box.close()
        elapsed = time.perf_counter() - start
        if runs[0].stdout.strip() != "5" or runs[0].error:
            raise RuntimeError(f"the sandboxed case failed: {runs[0]}")
        return elapsed

    start_once()  # the probe and the page cache, once
    print("local sandbox (DeepCoder's): new sandbox + first test case + close")
    for level in levels:
        rounds = max(1, -(-samples // level))
        times = concurrently(level, lambda i, n=rounds: [start_once() for _ in range(n)])
        report("sandbox start", level, times)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--terminal-concurrency", type=int, nargs="*", default=[1, 8, 16])
    parser.add_argument("--sandbox-concurrency", type=int, nargs="*", default=[1, 8, 64])
    parser.add_argument(
        "--terminal-samples", type=int, default=32, help="starts timed per level (at least)"
    )
    parser.add_argument(
        "--sandbox-samples", type=int, default=64, help="starts timed per level (at least)"
    )
    parser.add_argument("--task", default=None, help="a Terminal-Bench task id")
    args = parser.parse_args(argv)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    if args.terminal_concurrency:
        terminal_tails(args.terminal_concurrency, args.terminal_samples, args.task)
    if args.sandbox_concurrency:
        sandbox_tails(args.sandbox_concurrency, args.sandbox_samples)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
