"""Terminal-Bench resets on the docker runtime at 1, 4 and 16 at once.

For each concurrency N, groups of N envs run side by side, one per ``prestart`` mode
of the docker runtime: ``demand`` (spares sized to the runtime's demand, their starting
state placed and their work dir hashed for the reset's state key), ``before`` (``demand``
with the key read at reset, ``start_keys=False``: the runtime's earlier behaviour), ``one`` (one spare of the last task, its starting state placed at reset:
the runtime's earlier behaviour) and ``off`` (every reset a fresh start). A round resets
the N envs of one group at once (a barrier) and times each reset; rounds alternate between
the groups, and after each round the group's background starts are let finish, as an
agent's episode would. The first round of each group is the cold path (the first starts,
no spare yet) and is printed apart; the rounds after it are the warm path (demand seen).

Prints, per N and mode, p50/p99 of a reset and starts/s (N over the round's wall time,
median over rounds), and the ratios of ``demand`` to ``one`` and to ``off``, and the warm
path's p99 over its p50. Exits 0 with a note when the docker runtime cannot run here.

With ``--profile``, each mode's warm resets run under cProfile (all threads) and the
top functions by cumulative time are printed per N and mode (timings then include the
profiler's cost: compare them only with each other).

Usage: python benchmarks/bench_terminal_starts.py [--task ID] [--rounds R] [--at 1,4,16]
    [--modes demand,before,one,off] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import threading
import time
from collections.abc import Sequence
from typing import Any

from agentenvs.envs.terminal.env import TerminalBenchEnv

MODES = ("demand", "before", "one", "off")
#: the longest a group's background starts are waited for after a round
SETTLE_S = 60.0


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))
    return ordered[rank]


def settle(envs: list[TerminalBenchEnv]) -> None:
    """Wait until no spare of ``envs`` is still starting (an episode's work, long enough)."""
    end = time.monotonic() + SETTLE_S
    while time.monotonic() < end:
        busy = any(
            isinstance(s[1], threading.Thread) for env in envs for s in list(env.runtime()._spares)
        )
        if not busy:
            return
        time.sleep(0.05)


def one_round(
    envs: list[TerminalBenchEnv], task_id: str, profiles: list[Any] | None = None
) -> tuple[list[float], float]:
    """Reset every env at once: (each reset's seconds, the round's wall seconds); with
    ``profiles``, each reset under a ``cProfile.Profile`` of its own, added to it."""
    times = [0.0] * len(envs)
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(envs) + 1)

    def reset(i: int) -> None:
        barrier.wait()
        start = time.perf_counter()
        try:
            if profiles is not None:
                profile = cProfile.Profile()
                profiles.append(profile)  # list.append holds the GIL: safe from threads
                profile.runcall(envs[i].reset, options={"task_id": task_id})
            else:
                envs[i].reset(options={"task_id": task_id})
        except BaseException as exc:  # noqa: BLE001 - raised below
            errors.append(exc)
        times[i] = time.perf_counter() - start

    threads = [threading.Thread(target=reset, args=(i,)) for i in range(len(envs))]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    return times, wall


def measure(
    n: int, task_id: str, rounds: int, modes: Sequence[str], profiles: dict[str, list[Any]] | None
) -> dict[str, dict[str, list[float]]]:
    """{mode: {"cold": reset seconds, "warm": reset seconds, "rate": starts/s a round}};
    with ``profiles``, each mode's warm resets run under ``profiles[mode]``."""
    groups: dict[str, list[TerminalBenchEnv]] = {}
    out: dict[str, dict[str, list[float]]] = {
        m: {"cold": [], "warm": [], "rate": []} for m in modes
    }
    try:
        for mode in modes:
            groups[mode] = []
            for _ in range(n):
                env = TerminalBenchEnv(runtime="docker", command_timeout=60)
                env.docker_options["prestart"] = "demand" if mode == "before" else mode
                if mode == "before":
                    env.docker_options["start_keys"] = False
                groups[mode].append(env)
            groups[mode][0].runtime().image(groups[mode][0].tasks[task_id])  # built once
        for mode in modes:  # the cold path: first starts, no spare yet
            times, wall = one_round(groups[mode], task_id)
            out[mode]["cold"] += times
            settle(groups[mode])
        for _ in range(rounds):
            for mode in modes:
                profile = profiles.get(mode) if profiles is not None else None
                times, wall = one_round(groups[mode], task_id, profile)
                out[mode]["warm"] += times
                out[mode]["rate"].append(n / wall)
                settle(groups[mode])
    finally:
        for envs in groups.values():
            for env in envs:
                env.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="git-merge-conflict")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--at", default="1,4,16", help="concurrencies, comma-separated")
    parser.add_argument("--modes", default=",".join(MODES), help="modes, comma-separated")
    parser.add_argument("--profile", action="store_true", help="cProfile the warm resets")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes takes some of {','.join(MODES)}")
    from agentenvs.sandbox.docker import docker_available

    ok, why = docker_available("agentenvs/terminal:latest")
    if not ok:
        print(f"docker runtime unavailable here: {why}")
        return
    print(f"task {args.task}, {args.rounds} warm rounds a mode, modes alternating")
    for n in (int(x) for x in args.at.split(",")):
        profiles: dict[str, list[Any]] | None = {m: [] for m in modes} if args.profile else None
        found = measure(n, args.task, args.rounds, modes, profiles)
        print(f"\n{n} at once")
        print(
            f"  {'mode':<7} {'path':<5} {'p50 ms':>8} {'p99 ms':>8} {'p99/p50':>8} {'starts/s':>9}"
        )
        warm: dict[str, tuple[float, float, float]] = {}
        for mode in modes:
            for path in ("cold", "warm"):
                values = found[mode][path]
                p50, p99 = statistics.median(values), percentile(values, 0.99)
                rate = statistics.median(found[mode]["rate"]) if path == "warm" else n / max(values)
                if path == "warm":
                    warm[mode] = (p50, p99, rate)
                print(
                    f"  {mode:<7} {path:<5} {1000 * p50:8.0f} {1000 * p99:8.0f} "
                    f"{p99 / p50:8.2f} {rate:9.1f}"
                )
        if "demand" not in warm:
            continue
        d50, d99, drate = warm["demand"]
        for other in [m for m in modes if m != "demand"]:
            o50, o99, orate = warm[other]
            print(
                f"  warm demand vs {other}: p50 x{o50 / d50:.2f} faster, p99 x{o99 / d99:.2f} "
                f"faster, starts/s x{drate / orate:.2f}"
            )
        for mode, made in (profiles or {}).items():
            print(f"\n  profile of {mode}'s warm resets at {n} at once (cumulative, summed):")
            text = io.StringIO()
            stats = pstats.Stats(made[0], stream=text)
            stats.add(*made[1:])
            stats.sort_stats("cumulative").print_stats(25)
            print("\n".join("    " + line for line in text.getvalue().splitlines()[6:]))


if __name__ == "__main__":
    main()
