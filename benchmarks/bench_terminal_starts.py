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
median over rounds), the warm resets that found no ready spare (the runtime's
``session_starts``, else whether a ready spare of the task was there before the round),
the ratios of ``demand`` to the other modes, and the warm path's p99 over its p50; and
per mode, the warm p50 of the reset that began first in its round against the others',
and the resets a cyclic garbage collection ran in (where a tail below a millisecond
comes from). With 1 among the concurrencies, each mode's warm p99 at every larger N is
printed against the warm p50 of a lone reset: the first reset of a burst runs on caches
the idle gap let go cold, as a lone one always does, and the others of the burst run
after it on warm ones, so within-burst p99/p50 measures that effect rather than any
waiting; p99 at N over a lone reset's p50 is what queueing would raise.
Exits 0 with a note when the docker runtime cannot run here.

With ``--baseline REV``, the package as it was at git revision REV runs the same modes
beside the working tree's, each in a process of its own (``git archive`` of REV's
``agentenvs`` on PYTHONPATH, the same tasks), rounds alternating between the two; its
modes are printed as ``MODE@REV``.

With ``--profile``, each mode's warm resets run under cProfile (all threads) and the
top functions by cumulative time are printed per N and mode (timings then include the
profiler's cost: compare them only with each other).

Usage: python benchmarks/bench_terminal_starts.py [--task ID] [--rounds R] [--at 1,4,16]
    [--modes demand,before,one,off] [--profile] [--baseline REV]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
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
        if not any(_starting(env.runtime()) for env in envs):
            return
        time.sleep(0.05)


def _starting(runtime: Any) -> bool:
    """Whether a spare of ``runtime`` is still being started (a runtime of before
    ``spares_starting`` kept a thread in its place)."""
    if hasattr(runtime, "spares_starting"):
        return runtime.spares_starting() > 0
    return any(isinstance(s[1], threading.Thread) for s in list(runtime._spares))


def _missed(envs: list[TerminalBenchEnv], before: list[dict[str, int] | bool]) -> int:
    """How many of ``envs``' resets just made found no ready spare, from ``before`` (each
    runtime's ``session_starts`` before the round, or whether a ready spare was there)."""
    missed = 0
    for env, was in zip(envs, before, strict=True):
        if isinstance(was, dict):
            missed += env.runtime().session_starts["spare"] == was["spare"]
        else:
            missed += not was
    return missed


def _ready(env: TerminalBenchEnv) -> dict[str, int] | bool:
    runtime = env.runtime()
    if hasattr(runtime, "session_starts"):
        return dict(runtime.session_starts)
    return any(isinstance(s[1], tuple) for s in list(runtime._spares))


class _Collections:
    """How many cyclic garbage collections each thread has run (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.count: dict[int, int] = {}

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            me = threading.get_ident()
            self.count[me] = self.count.get(me, 0) + 1


COLLECTIONS = _Collections()
gc.callbacks.append(COLLECTIONS)


def one_round(
    envs: list[TerminalBenchEnv],
    task_id: str,
    profiles: list[Any] | None = None,
    marks: dict[str, list[float]] | None = None,
) -> tuple[list[float], float]:
    """Reset every env at once: (each reset's seconds, the round's wall seconds); with
    ``profiles``, each reset under a ``cProfile.Profile`` of its own, added to it; with
    ``marks``, the seconds of the reset that began first go to ``marks["first"]``, the
    others' to ``marks["rest"]``, and those of resets a garbage collection ran in to
    ``marks["collected"]``."""
    times = [0.0] * len(envs)
    began = [0.0] * len(envs)
    collected = [False] * len(envs)
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(envs) + 1)

    def reset(i: int) -> None:
        barrier.wait()
        start = began[i] = time.perf_counter()
        runs = COLLECTIONS.count.get(threading.get_ident(), 0)
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
        collected[i] = COLLECTIONS.count.get(threading.get_ident(), 0) > runs

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
    if marks is not None:
        first = began.index(min(began))
        marks["first"].append(times[first])
        marks["rest"] += [t for i, t in enumerate(times) if i != first]
        marks["collected"] += [t for i, t in enumerate(times) if collected[i]]
    return times, wall


def measure(
    n: int, task_id: str, rounds: int, modes: Sequence[str], profiles: dict[str, list[Any]] | None
) -> dict[str, dict[str, list[float]]]:
    """{mode: {"cold": reset seconds, "warm": reset seconds, "rate": starts/s a round}};
    with ``profiles``, each mode's warm resets run under ``profiles[mode]``."""
    groups: dict[str, list[TerminalBenchEnv]] = {}
    out: dict[str, dict[str, list[float]]] = {
        m: {"cold": [], "warm": [], "rate": [], "missed": []} for m in modes
    }
    try:
        groups.update(new_groups(n, modes, task_id))
        for mode in modes:  # the cold path: first starts, no spare yet
            times, wall = one_round(groups[mode], task_id)
            out[mode]["cold"] += times
            settle(groups[mode])
        for _ in range(rounds):
            for mode in modes:
                warm_round(groups[mode], task_id, out[mode], profiles, mode)
    finally:
        for envs in groups.values():
            for env in envs:
                env.close()
    return out


def warm_round(
    envs: list[TerminalBenchEnv],
    task_id: str,
    into: dict[str, list[float]],
    profiles: dict[str, list[Any]] | None = None,
    mode: str = "",
) -> None:
    """One warm round of ``envs``, its figures added to ``into``; then its starts settle."""
    profile = profiles.get(mode) if profiles is not None else None
    before = [_ready(env) for env in envs]
    marks: dict[str, list[float]] = {"first": [], "rest": [], "collected": []}
    times, wall = one_round(envs, task_id, profile, marks)
    for name, values in marks.items():
        into.setdefault(name, []).extend(values)
    into["warm"] += times
    into["rate"].append(len(envs) / wall)
    into["missed"].append(_missed(envs, before))
    settle(envs)


def new_groups(n: int, modes: Sequence[str], task_id: str) -> dict[str, list[TerminalBenchEnv]]:
    """``n`` envs a mode, the task's image built."""
    groups: dict[str, list[TerminalBenchEnv]] = {}
    for mode in modes:
        groups[mode] = []
        for _ in range(n):
            env = TerminalBenchEnv(runtime="docker", command_timeout=60)
            env.docker_options["prestart"] = "demand" if mode == "before" else mode
            if mode == "before":
                env.docker_options["start_keys"] = False
            groups[mode].append(env)
        groups[mode][0].runtime().image(groups[mode][0].tasks[task_id])  # built once
    return groups


def worker(n: int, task_id: str, modes: Sequence[str]) -> None:
    """Serve rounds over stdin/stdout: each line ``cold`` or ``warm`` runs one round of
    every mode and answers one JSON line of its figures; end of input closes the envs."""
    groups = new_groups(n, modes, task_id)
    try:
        print("ready", flush=True)
        for line in sys.stdin:
            found: dict[str, dict[str, list[float]]] = {}
            for mode in modes:
                into: dict[str, list[float]] = {"cold": [], "warm": [], "rate": [], "missed": []}
                if line.strip() == "cold":
                    into["cold"], _ = one_round(groups[mode], task_id)
                    settle(groups[mode])
                else:
                    warm_round(groups[mode], task_id, into)
                found[mode] = into
            print(json.dumps(found), flush=True)
    finally:
        for envs in groups.values():
            for env in envs:
                env.close()


def baseline_tree(rev: str, into: str) -> str:
    """``rev``'s ``agentenvs`` unpacked under ``into`` (its path, for PYTHONPATH)."""
    top = Path(__file__).resolve().parent.parent
    data = subprocess.run(
        ["git", "-C", str(top), "archive", "--format=tar", rev, "agentenvs"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def measure_against(
    n: int, task_id: str, rounds: int, modes: Sequence[str], trees: dict[str, str]
) -> dict[str, dict[str, list[float]]]:
    """As ``measure``, each of ``trees`` ({suffix: PYTHONPATH}) in a worker process of its
    own, rounds alternating between them; modes named ``MODE`` + suffix."""
    from agentenvs.core.tasks import tasks_root

    workers: dict[str, subprocess.Popen[str]] = {}
    out: dict[str, dict[str, list[float]]] = {}
    try:
        for suffix, path in trees.items():
            env = {**os.environ, "PYTHONPATH": path, "AGENTENVS_TASKS": str(tasks_root())}
            argv = [sys.executable, __file__, "--worker", "--task", task_id, "--at", str(n)]
            argv += ["--modes", ",".join(modes)]
            proc = subprocess.Popen(
                argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            workers[suffix] = proc
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the {suffix or 'working tree'} worker did not start")
        for step in ["cold"] + ["warm"] * rounds:
            for suffix, proc in workers.items():
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(step + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"the {suffix or 'working tree'} worker ended")
                for mode, found in json.loads(line).items():
                    mine = out.setdefault(mode + suffix, {})
                    for k, values in found.items():
                        mine.setdefault(k, []).extend(values)
    finally:
        for proc in workers.values():
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in workers.values():
            proc.wait(timeout=300)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="git-merge-conflict")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--at", default="1,4,16", help="concurrencies, comma-separated")
    parser.add_argument("--modes", default=",".join(MODES), help="modes, comma-separated")
    parser.add_argument("--profile", action="store_true", help="cProfile the warm resets")
    parser.add_argument("--baseline", default=None, help="a git revision to compare with")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes takes some of {','.join(MODES)}")
    if args.worker:
        worker(int(args.at), args.task, modes)
        return
    if args.baseline and args.profile:
        parser.error("--profile profiles this process: not with --baseline")
    from agentenvs.sandbox.docker import docker_available

    ok, why = docker_available("agentenvs/terminal:latest")
    if not ok:
        print(f"docker runtime unavailable here: {why}")
        return
    print(f"task {args.task}, {args.rounds} warm rounds a mode, modes alternating")
    with tempfile.TemporaryDirectory() as scratch:
        trees: dict[str, str] = {}
        if args.baseline:
            top = str(Path(__file__).resolve().parent.parent)
            trees = {"": top, f"@{args.baseline}": baseline_tree(args.baseline, scratch)}
        found: dict[int, dict[str, tuple[float, float, float]]] = {}
        for n in (int(x) for x in args.at.split(",")):
            found[n] = report(n, args, modes, trees)
    lone = found.get(1, {})
    for n in sorted(k for k in found if k > 1):
        for mode, (_, p99, _) in found[n].items():
            if mode in lone:
                print(
                    f"\n{mode} warm: p99 at {n} at once {1000 * p99:.2f} ms is "
                    f"{p99 / lone[mode][0]:.2f}x the p50 of a lone reset ({1000 * lone[mode][0]:.2f} ms)"
                )


def report(
    n: int, args: argparse.Namespace, modes: list[str], trees: dict[str, str]
) -> dict[str, tuple[float, float, float]]:
    """Measure and print the figures at ``n`` at once; each mode's warm (p50, p99, starts/s)."""
    profiles: dict[str, list[Any]] | None = {m: [] for m in modes} if args.profile else None
    if trees:
        found = measure_against(n, args.task, args.rounds, modes, trees)
    else:
        found = measure(n, args.task, args.rounds, modes, profiles)
    names = list(found)
    width = max(7, *map(len, names))
    print(f"\n{n} at once")
    print(
        f"  {'mode':<{width}} {'path':<5} {'p50 ms':>8} {'p99 ms':>8} {'p99/p50':>8} "
        f"{'starts/s':>9} {'no spare':>9}"
    )
    warm: dict[str, tuple[float, float, float]] = {}
    for mode in names:
        for path in ("cold", "warm"):
            values = found[mode][path]
            p50, p99 = statistics.median(values), percentile(values, 0.99)
            rate = statistics.median(found[mode]["rate"]) if path == "warm" else n / max(values)
            missed = f"{int(sum(found[mode]['missed']))}/{len(values)}" if path == "warm" else ""
            if path == "warm":
                warm[mode] = (p50, p99, rate)
            print(
                f"  {mode:<{width}} {path:<5} {1000 * p50:8.2f} {1000 * p99:8.2f} "
                f"{p99 / p50:8.2f} {rate:9.1f} {missed:>9}"
            )
    for mode in names:
        first, rest = found[mode].get("first"), found[mode].get("rest")
        if first and rest:
            gcs = found[mode].get("collected") or []
            print(
                f"  {mode} warm: the first reset of a round p50 {1000 * statistics.median(first):.2f}"
                f" ms, the others {1000 * statistics.median(rest):.2f} ms; a garbage collection"
                f" ran in {len(gcs)} of {len(first) + len(rest)}"
                + (f" (p50 {1000 * statistics.median(gcs):.2f} ms)" if gcs else "")
            )
    if "demand" in warm:
        d50, d99, drate = warm["demand"]
        for other in [m for m in names if m != "demand"]:
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
    return warm


if __name__ == "__main__":
    main()
