"""Docker sandbox speed: a run in a warm pooled container vs a cold container per run.

Prints, from one run (medians over ``--runs``):
- warm: one ``python3 -c`` run in a container of a warmed pool of two, including taking
  the sandbox from the pool and giving it back (its reset, which kills its processes and
  wipes /work and /tmp, runs in the background while the other container serves);
- warm run only: the same run in an already-held sandbox;
- cold: create + start a container, the same run, remove it (``pool=False``);
- the cold/warm ratio; and, for scale, 100 test cases through the forking worker.

Exits 0 with a note when no Docker engine or image is available.

Usage: python benchmarks/bench_docker_pool.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

COMMAND = ["python3", "-c", "print(6 * 7)"]


def median_s(fn: Callable[[], None], n: int) -> float:
    """Median seconds per call over ``n`` calls (after one warm-up)."""
    fn()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    try:
        from agentenvs.sandbox.docker import DockerPool, DockerSandbox, docker_available
    except ImportError as exc:
        print(f"skipped: the docker backend cannot be imported ({exc})")
        return 0
    ok, why = docker_available()
    if not ok:
        print(f"skipped: {why}")
        return 0
    print(f"{why}; medians over {args.runs} runs")

    # two containers: one serves the next episode while the other is reset in the background
    with DockerPool(size=2) as pool:
        pool.prewarm(2)

        def warm() -> None:
            with DockerSandbox(pool=pool) as box:
                assert box.run(COMMAND).stdout == "42\n"

        def cold() -> None:
            with DockerSandbox(pool=False) as box:
                assert box.run(COMMAND).stdout == "42\n"

        t_warm = median_s(warm, args.runs)
        t_cold = median_s(cold, args.runs)
        with DockerSandbox(pool=pool) as box:
            t_run = median_s(lambda: box.run(COMMAND) and None, args.runs)
            from agentenvs.sandbox import PyCase

            cases = [PyCase("stdin", stdin=str(i)) for i in range(100)]
            t_cases = median_s(
                lambda: list(box.run_python_cases("print(int(input()) + 1)", cases)) and None,
                max(3, args.runs // 3),
            )
    print(f"  warm pooled (take + run + reset)  {t_warm * 1e3:8.1f} ms")
    print(f"  warm run only                     {t_run * 1e3:8.1f} ms")
    print(f"  cold (create + start + run + rm)  {t_cold * 1e3:8.1f} ms")
    print(f"  cold / warm pooled                {t_cold / t_warm:8.1f}x")
    print(
        f"  100 cases through the worker      {t_cases * 1e3:8.1f} ms "
        f"({t_cases * 1e3 / 100:.2f} ms a case)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
