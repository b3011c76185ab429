"""TerminalBench-v0 costs on the local and docker runtimes.

Prints, from one run, for each runtime that can run here:
- episode reset (median), back to back and after half a second of work (time for the
  docker runtime to prestart the next container), and reset + the first command;
- snapshot and restore (median);
- command round-trip latency in the persistent shell (``true``, and a step of ``echo``);
and, for docker, the obvious alternative to its prestarted containers: a fresh container
per episode (``docker run --rm --network none <task image>`` running the first command),
with the ratios between them. Then the per-episode costs of a real task folder run
offline (``tests/envs/terminal_real_fixtures/tb1-venv-sum``: ``FROM python:3.13-slim``
through the image map, the official ``curl … uv`` bootstrap in ``run-tests.sh``): the
image build (once per machine), a reset, the oracle, and the test run, beside the same
tests run with the image's pytest directly (what the bootstrap's stand-ins add). And
submit-to-verdict (the task's solution done, then ``submit``) and reset under
``grading="safe"`` (the freeze, the verifier's tree and tests laid out, the tests in a new
session on the verifier's toolchain, the verdict on its socket) beside
``grading="official"`` (the tests in the agent's own session), with their ratio
(``--grading-only``: that part alone).
Exits 0 with a note when a runtime is unavailable.

Usage: python benchmarks/bench_terminal.py [--task ID] [--repeat N] [--grading-only]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

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


def measure_grading(runtime: str, task_id: str, repeat: int) -> dict[str, dict[str, float]]:
    """Submit-to-verdict and reset, per grading mode, on the same task in one run."""
    out: dict[str, dict[str, float]] = {}
    for grading in ("official", "safe"):
        env = TerminalBenchEnv(runtime=runtime, command_timeout=30, grading=grading)
        options = {"task_id": task_id}
        try:
            env.reset(options=options)
            oracle = env.oracle_action()
            times, resets = [], []
            for _ in range(repeat + 1):
                start = time.perf_counter()
                env.reset(options=options)
                resets.append(time.perf_counter() - start)
                env.step(oracle)
                start = time.perf_counter()
                _, reward, *_ = env.step("submit")
                times.append(time.perf_counter() - start)
                assert reward == 1.0, f"the solution failed under grading={grading}"
            out[grading] = {
                "submit to verdict": statistics.median(times[1:]),
                "reset": statistics.median(resets[1:]),
            }
        finally:
            env.close()
    return out


REAL = Path(__file__).resolve().parent.parent / "tests" / "envs" / "terminal_real_fixtures"


def measure_real_task(repeat: int) -> dict[str, float]:
    """Per-episode costs of a real TB1 task folder on the docker runtime, offline."""
    import docker

    task_id = "tb1-venv-sum"
    env = TerminalBenchEnv(
        tasks_path=REAL, runtime="docker", offline=True, command_timeout=120, max_turns=5
    )
    options = {"task_id": task_id}
    try:
        runtime = env.runtime()
        task = env.tasks[task_id]
        tag = runtime.image(task)
        client = docker.from_env()
        try:
            client.images.remove(tag)  # ours: built again below, from a warm layer cache
        finally:
            client.close()
        runtime._images.clear()
        start = time.perf_counter()
        runtime.image(task)
        out = {"image build (once per machine)": time.perf_counter() - start}
        out["reset"] = median_s(lambda: env.reset(options=options), repeat)
        env.reset(options=options)
        start = time.perf_counter()
        env.step(env.oracle_action())
        out["oracle step"] = time.perf_counter() - start

        def test_run() -> None:
            env.reset(options=options)
            env.step(env.oracle_action())
            start = time.perf_counter()
            _, _, _, _, info = env.step("submit")
            assert info["success"], env._test_output[-2000:]
            times.append(time.perf_counter() - start)

        times: list[float] = []
        for _ in range(max(3, repeat // 3)):
            test_run()
        out["test run (official uv bootstrap, offline)"] = statistics.median(times)

        def direct() -> None:
            env.reset(options=options)
            env.step(env.oracle_action())
            env._upload_tests(env.shell)
            start = time.perf_counter()
            rc, _ = env.shell.control(
                "cd /app && /usr/bin/python3 -m pytest -p no:cacheprovider /tests/test_outputs.py -rA",
                timeout=120,
            )
            assert rc == 0
            direct_times.append(time.perf_counter() - start)

        direct_times: list[float] = []
        for _ in range(max(3, repeat // 3)):
            direct()
        out["test run (the image's pytest directly)"] = statistics.median(direct_times)
        return out
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="git-merge-conflict")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--grading-only", action="store_true")
    args = parser.parse_args()

    results: dict[str, dict[str, float]] = {}
    for runtime in ("local", "docker"):
        ok, why = available(runtime)
        if not ok:
            print(f"note: the {runtime} runtime is unavailable here ({why}); skipped")
            continue
        if args.grading_only:
            results[runtime] = {}
            continue
        results[runtime] = measure(runtime, args.task, args.repeat)
        print(f"{runtime} runtime, task {args.task} (medians of {args.repeat}+):")
        for name, seconds in results[runtime].items():
            print(f"  {name:48s} {seconds * 1000:9.1f} ms")

    if "docker" in results and not args.grading_only:
        d = results["docker"]
        fresh = d["fresh container (docker run + first command)"]
        print(
            f"docker: a fresh `docker run` per episode costs {fresh / d['reset + first command']:.1f}x "
            "a reset + first command back to back, "
            f"{fresh / (d['reset after 0.5 s of work'] + d['round-trip (step `echo`)']):.1f}x "
            "one after half a second of work"
        )
    if "docker" in results and not args.grading_only:
        real = measure_real_task(args.repeat)
        print("docker runtime, real TB1 task folder tb1-venv-sum, offline:")
        for name, seconds in real.items():
            print(f"  {name:48s} {seconds * 1000:9.1f} ms")
        boot = real["test run (official uv bootstrap, offline)"]
        bare = real["test run (the image's pytest directly)"]
        print(f"the official bootstrap, served offline, costs {boot / bare:.1f}x a bare pytest run")
    for runtime in results:
        graded = measure_grading(runtime, args.task, args.repeat)
        print(f"{runtime} runtime, task {args.task}, grading (medians of {args.repeat}):")
        for grading, figures in graded.items():
            for name, seconds in figures.items():
                print(f"  {grading:8s} {name:39s} {seconds * 1000:9.1f} ms")
        for name in ("submit to verdict", "reset"):
            ratio = graded["safe"][name] / graded["official"][name]
            print(f"{runtime}: safe / official grading, {name}: {ratio:.2f}x")
    if len(results) == 2 and not args.grading_only:
        loc, d = results["local"], results["docker"]
        names = ("reset", "reset after 0.5 s of work", "snapshot", "restore")
        for name in (*names, "round-trip (shell `true`)"):
            print(f"docker / local, {name}: {d[name] / loc[name]:.2f}x")


if __name__ == "__main__":
    main()
