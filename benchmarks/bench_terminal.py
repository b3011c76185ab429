"""TerminalBench-v0 costs on the local and docker runtimes.

Prints, from one run, for each runtime that can run here:
- episode reset (median), back to back and after half a second of work (time for the
  docker runtime to prestart the next container), and reset + the first command;
- snapshot and restore (median);
- command round-trip latency in the persistent shell (``true``, and a step of ``echo``);
and, for docker, the obvious alternative to its prestarted containers: a fresh container
per episode (``docker run --rm --network none <task image>`` running the first command),
with the ratios between them. Exits 0 with a note when a runtime is unavailable.

Usage: python benchmarks/bench_terminal.py [--task ID] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable

from agentenvs.envs.terminal.env import TerminalBenchEnv


def median_s(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``fn()`` over ``repeat`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def available(runtime: str) -> tuple[bool, str]:
    if runtime == "local":
        from agentenvs.sandbox.local import local_available

        return local_available()
    try:
        from agentenvs.sandbox.docker import docker_available
    except ImportError as exc:
        return False, str(exc)
    return docker_available("agentenvs/terminal:latest")


def measure(runtime: str, task_id: str, repeat: int) -> dict[str, float]:
    env = TerminalBenchEnv(runtime=runtime, command_timeout=30)
    options = {"task_id": task_id}
    try:
        env.reset(options=options)  # builds the image (docker) once

        def reset_and_first() -> None:
            env.reset(options=options)
            env.step("ls")

        def reset_after_idle() -> float:
            # an agent's episode lasts seconds: time enough to prestart the next container
            time.sleep(0.5)
            start = time.perf_counter()
            env.reset(options=options)
            return time.perf_counter() - start

        out = {
            "reset": median_s(lambda: env.reset(options=options), repeat),
            "reset after 0.5 s of work": statistics.median(
                reset_after_idle() for _ in range(repeat)
            ),
            "reset + first command": median_s(reset_and_first, repeat),
        }
        env.reset(options=options)
        env.step("cd /app && export MARK=1 && echo x > made.txt")
        snap = env.snapshot()
        out["snapshot"] = median_s(env.snapshot, repeat)
        out["restore"] = median_s(lambda: env.restore(snap), repeat)
        out["round-trip (shell `true`)"] = median_s(lambda: env.shell.run("true", 10), 5 * repeat)
        out["round-trip (step `echo`)"] = median_s(
            lambda: env.step("echo hi") if env.turn < env.max_turns - 1 else env.restore(snap),
            5 * repeat,
        )
        if runtime == "docker":
            image = env.runtime().image(env.task)
            argv = [
                "docker",
                "run",
                "--rm",
                "--network",
                "none",
                image,
                "sh",
                "-c",
                "cd /app && ls",
            ]
            out["fresh container (docker run + first command)"] = median_s(
                lambda: subprocess.run(argv, check=True, capture_output=True), repeat
            )
        return out
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="git-merge-conflict")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()

    results: dict[str, dict[str, float]] = {}
    for runtime in ("local", "docker"):
        ok, why = available(runtime)
        if not ok:
            print(f"note: the {runtime} runtime is unavailable here ({why}); skipped")
            continue
        results[runtime] = measure(runtime, args.task, args.repeat)
        print(f"{runtime} runtime, task {args.task} (medians of {args.repeat}+):")
        for name, seconds in results[runtime].items():
            print(f"  {name:48s} {seconds * 1000:9.1f} ms")

    if "docker" in results:
        d = results["docker"]
        fresh = d["fresh container (docker run + first command)"]
        print(
            f"docker: a fresh `docker run` per episode costs {fresh / d['reset + first command']:.1f}x "
            "a reset + first command back to back, "
            f"{fresh / (d['reset after 0.5 s of work'] + d['round-trip (step `echo`)']):.1f}x "
            "one after half a second of work"
        )
    if len(results) == 2:
        loc, d = results["local"], results["docker"]
        names = ("reset", "reset after 0.5 s of work", "snapshot", "restore")
        for name in (*names, "round-trip (shell `true`)"):
            print(f"docker / local, {name}: {d[name] / loc[name]:.2f}x")


if __name__ == "__main__":
    main()
