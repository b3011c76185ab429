"""What the disk watch of Docker task containers costs a TerminalBench-v0 step.

Prints, from one run, on the docker runtime (a fixture task, ``grading="official"``): the
median step of a short command (``true``) with the watch (its thread walking the layer
every 0.25 s or less often, a measure after each command) and without it, in the same
episode's container, and their ratio;
for a writable layer of a few files and of ``--files`` more (a pip install's worth, under
``/usr/local/lib``), and
the time of one measure of each layer (the walk from the host). The steps alternate in
blocks of 10 (with, without) so that a change of the machine's load meets both alike.
Exits 0 with a note when Docker is unavailable.

Usage: python benchmarks/bench_docker_disk.py [--repeat N] [--files N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "envs" / "terminal_fixtures"


def _step_s(env: Any, command: str) -> float:
    start = time.perf_counter()
    env.step(command)
    return time.perf_counter() - start


def measure(env: Any, repeat: int, block: int = 10) -> dict[str, float]:
    """Median step with the watch (its thread walking, a measure after each command) and
    without (none), in blocks of ``block`` steps that alternate, in the current container."""
    from agentenvs.sandbox._docker_disk import DiskWatch

    box = env.runtime()._current
    if box.disk is not None:
        box.disk.close()
    api = env.runtime().client.api
    with_s: list[float] = []
    without_s: list[float] = []
    _step_s(env, "true")  # warm
    for _ in range(max(1, repeat // block)):
        watch = DiskWatch(api, box.id, box.limits.disk_mb, box._stop_for_disk)
        watch.start()
        box.disk = watch
        with_s += [_step_s(env, "true") for _ in range(block)]
        watch.close()
        box.disk = None
        without_s += [_step_s(env, "true") for _ in range(block)]
    walks = []
    for _ in range(5):
        start = time.perf_counter()
        use = watch.measure()
        walks.append(time.perf_counter() - start)
    box.disk = DiskWatch(api, box.id, box.limits.disk_mb, box._stop_for_disk)
    box.disk.start()
    return {
        "with": statistics.median(with_s),
        "without": statistics.median(without_s),
        "walk": statistics.median(walks),
        "entries": float(use.entries),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--files", type=int, default=5000)
    args = parser.parse_args()
    from agentenvs.sandbox.docker import docker_available

    ok, why = docker_available("agentenvs/terminal:latest")
    if not ok:
        print(f"docker unavailable: {why}")
        return
    from agentenvs.envs.terminal.env import TerminalBenchEnv

    env = TerminalBenchEnv(
        tasks_path=FIXTURES,
        runtime="docker",
        grading="official",
        max_turns=4 * args.repeat + 40,
    )
    try:
        env.reset(options={"task_id": "tb1-greeting"})
        rows = [("a few files", measure(env, args.repeat))]
        env.step(
            # outside the work dir (as a pip install's files are), so the step's own
            # state key does not read them
            f"mkdir -p /usr/local/lib/many && cd /usr/local/lib/many && seq {args.files} | "
            "split -l 1 -a 6 - f && cd /app"
        )
        rows.append((f"{args.files} files", measure(env, args.repeat)))
    finally:
        env.close()
    print(f"TerminalBench-v0 docker step (`true`), median of {args.repeat}:")
    print(f"{'layer':>14} {'entries':>8} {'with':>9} {'without':>9} {'ratio':>6} {'walk':>9}")
    for name, m in rows:
        print(
            f"{name:>14} {m['entries']:>8.0f} {m['with'] * 1e3:>7.1f}ms "
            f"{m['without'] * 1e3:>7.1f}ms {m['with'] / m['without']:>6.2f} "
            f"{m['walk'] * 1e3:>7.2f}ms"
        )


if __name__ == "__main__":
    main()
