"""Throughput, step latency and memory per env at 1, 4, 16 and 64 concurrent envs.

For each env, ``n`` envs are made, reset and stepped once (untimed), each on its own
thread; each then plays its own episodes (seed = thread index + episodes played x ``n``)
with a scripted policy of the project, one step at a time, for ``--seconds`` of wall
time. Prints, per env and ``n``:

- steps/s over all threads (steps finished in the timed window / its wall time);
- p50 and p99 latency of one ``step`` call (the policy's act is not timed);
- CPU time a step: this process, its reaped children (``resource.getrusage``) and the
  live processes below it with the children they reaped (sandbox workers, from
  ``/proc``), over the steps of the window; the policy's act included;
- memory a live env: this process's RSS growth from before the ``n`` envs were made to
  after each was reset and stepped once (so a sandboxed env's sandbox is running), over
  ``n``; for sandboxed envs, plus the most RSS the sandbox processes they started (this
  process's descendants) held at once during the window, over ``n``. Docker containers'
  CPU and memory are not counted (they are the engine's, not below this process).

The envs (``--only`` picks some, comma-separated):

- ``frozenlake``: ``agentenvs/FrozenLake-v0`` 8x8, ``frozenlake/oracle``;
- ``sql``: ``agentenvs/InterCodeSQL-v0`` on SQLite, ``intercode_sql/gold``;
- ``bfcl``: ``agentenvs/BFCL-v0``, ``bfcl/gold``;
- ``deepcoder``: ``agentenvs/DeepCoderMT-v0`` with the local sandbox,
  ``deepcoder/buggy-then-fix``;
- ``terminal``: ``agentenvs/TerminalBench-v0`` local runtime, ``terminal/solution``;
- ``terminal-docker`` (with ``--docker``): the same on Docker.

Threads share one interpreter: an env whose step is Python work (FrozenLake, BFCL) does
not gain from more of them; one whose step waits on a sandbox or a database does. An env
that cannot run here (no bubblewrap, no Docker) is printed with the reason.

Usage: python benchmarks/bench_scaling.py [--quick] [--only NAMES] [--levels 1,4,16,64]
  [--seconds S] [--docker]     (``--quick``: 1 and 4 envs, 0.5 s each, FrozenLake unless
  ``--only`` says otherwise)
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import resource
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import make_policy

PAGE = os.sysconf("SC_PAGE_SIZE")

#: name -> (env id, kwargs, policy)
ENVS: dict[str, tuple[str, dict, str]] = {
    "frozenlake": ("agentenvs/FrozenLake-v0", {"size": 8}, "frozenlake/oracle"),
    "sql": ("agentenvs/InterCodeSQL-v0", {}, "intercode_sql/gold"),
    "bfcl": ("agentenvs/BFCL-v0", {}, "bfcl/gold"),
    "deepcoder": ("agentenvs/DeepCoderMT-v0", {"sandbox": "local"}, "deepcoder/buggy-then-fix"),
    "terminal": ("agentenvs/TerminalBench-v0", {"runtime": "local"}, "terminal/solution"),
    "terminal-docker": ("agentenvs/TerminalBench-v0", {"runtime": "docker"}, "terminal/solution"),
}
#: timed seconds a row where a step takes long (sandboxed runs, containers)
SECONDS = {"deepcoder": 15.0, "terminal": 15.0, "terminal-docker": 20.0}
SANDBOXED = {"deepcoder", "terminal", "terminal-docker"}


def rss_bytes(pid: int | str = "self") -> int:
    """Resident set size of a process (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def process_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds of it and the children it has reaped), from /proc."""
    table: dict[int, tuple[int, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                table[int(entry.name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tick)
            except (OSError, ValueError, IndexError):
                continue
    return table


def descendants(root: int, table: dict[int, tuple[int, float]] | None = None) -> list[int]:
    """The pids below ``root``, from the parent links in ``/proc``."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def cpu_seconds() -> float:
    """CPU time of this process, its reaped children, and every live process below it with
    the children each has reaped (sandbox workers and what they fork)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    table = process_table()
    below = sum(table[p][1] for p in descendants(os.getpid(), table))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime + below


def pct(values: list[float], q: float) -> float:
    """The q-th quantile by nearest rank (nan when empty)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass
class Row:
    env: str
    n: int
    steps_s: float
    p50_ms: float
    p99_ms: float
    cpu_us: float
    mib_env: float
    sandbox_mib_env: float | None


def warm_up(name: str) -> None:
    """One env made, reset and stepped once, so that imports, bundled data and caches
    loaded once per process are not counted as the first row's memory."""
    env_id, kwargs, policy_name = ENVS[name]
    env = gym.make(env_id, **kwargs)
    try:
        env.reset(seed=0)
        env.step(
            make_policy(policy_name).act(Conversation(env=env.unwrapped), np.random.default_rng(0))
        )
    finally:
        env.close()


def run_level(name: str, n: int, seconds: float) -> Row:
    env_id, kwargs, policy_name = ENVS[name]
    policy = make_policy(policy_name)
    gc.collect()
    before = rss_bytes()
    envs = [gym.make(env_id, **kwargs) for _ in range(n)]
    observations = [None] * n

    def first_reset(i: int) -> None:
        # reset and one step, untimed: a sandboxed env starts its sandbox at its first run
        env, rng = envs[i], np.random.default_rng(10_000 + i)
        env.reset(seed=i)
        _, _, terminated, truncated, _ = env.step(policy.act(Conversation(env=env.unwrapped), rng))
        observations[i] = env.reset(seed=i) if terminated or truncated else True

    starters = [threading.Thread(target=first_reset, args=(i,)) for i in range(n)]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    if any(o is None for o in observations):
        for env in envs:
            env.close()
        raise RuntimeError("a first reset failed (see above)")
    mib_env = (rss_bytes() - before) / n / 2**20  # the envs made, reset and stepped once

    latencies: list[list[float]] = [[] for _ in range(n)]
    counts = [0] * n
    errors: list[BaseException] = []
    go = threading.Barrier(n + 1)
    stop = threading.Event()

    def play(i: int) -> None:
        env, rng = envs[i], np.random.default_rng(i)
        episode, mine = 0, latencies[i]
        try:
            go.wait()
            while not stop.is_set():
                action = policy.act(Conversation(env=env.unwrapped), rng)
                t0 = time.perf_counter()
                _, _, terminated, truncated, _ = env.step(action)
                took = time.perf_counter() - t0
                if not stop.is_set():
                    mine.append(took)
                    counts[i] += 1
                if terminated or truncated:
                    episode += 1
                    env.reset(seed=i + episode * n)
        except BaseException as exc:  # noqa: BLE001 - reported after the run
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=play, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    # the clocks start before the threads are let go: no step is counted outside the window
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    go.wait()
    sandbox_rss = 0  # the most the sandbox processes held at once, sampled over the window
    while not stop.wait(min(0.25, seconds)):
        if name in SANDBOXED:
            sandbox_rss = max(sandbox_rss, sum(rss_bytes(p) for p in descendants(os.getpid())))
        if time.perf_counter() - t0 >= seconds:
            break
    stop.set()
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    sandbox_mib = sandbox_rss / n / 2**20 if name in SANDBOXED else None
    for t in threads:
        t.join()
    for env in envs:
        env.close()
    if errors:
        raise errors[0]
    steps = sum(counts)
    every = [x for lat in latencies for x in lat]
    return Row(
        name, n, steps / wall, pct(every, 0.5) * 1e3, pct(every, 0.99) * 1e3,
        cpu / steps * 1e6 if steps else math.nan, mib_env, sandbox_mib,
    )  # fmt: skip


def ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 1 else f"{value:.3g}"


def table(rows: list[Row]) -> str:
    lines = [
        "| env | envs | steps/s | step p50 / p99 (ms) | CPU a step (µs) | MiB a live env (+ its sandbox processes) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        mem = f"{r.mib_env:.2f}"
        if r.sandbox_mib_env is not None:
            mem += f" (+{r.sandbox_mib_env:.1f})"
        lines.append(
            f"| {r.env} | {r.n} | {r.steps_s:,.{0 if r.steps_s >= 100 else 1}f} | "
            f"{ms(r.p50_ms)} / {ms(r.p99_ms)} | "
            f"{r.cpu_us:,.0f} | {mem} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 and 4 envs, 0.5 s each")
    parser.add_argument("--only", help="comma-separated env names (default: all but docker)")
    parser.add_argument("--levels", help="comma-separated env counts (default 1,4,16,64)")
    parser.add_argument(
        "--seconds", type=float, help="timed wall time a row (default 3; 15 to 20 sandboxed)"
    )
    parser.add_argument("--docker", action="store_true", help="add Terminal-Bench on Docker")
    args = parser.parse_args(argv)
    if args.only:
        names = args.only.split(",")
    elif args.quick:
        names = ["frozenlake"]
    else:
        names = [n for n in ENVS if n != "terminal-docker"] + (
            ["terminal-docker"] if args.docker else []
        )
    unknown = [n for n in names if n not in ENVS]
    if unknown:
        parser.error(f"unknown env(s) {unknown}; known: {', '.join(ENVS)}")
    levels = [int(x) for x in (args.levels or ("1,4" if args.quick else "1,4,16,64")).split(",")]
    rows: list[Row] = []
    timed: dict[str, float] = {}
    for name in names:
        seconds = timed[name] = args.seconds or (0.5 if args.quick else SECONDS.get(name, 3.0))
        try:
            warm_up(name)
        except Exception as exc:  # noqa: BLE001 - an env that cannot run here says why
            print(f"{name}: not measured ({type(exc).__name__}: {exc})")
            continue
        for n in levels:
            try:
                rows.append(run_level(name, n, seconds))
            except Exception as exc:  # noqa: BLE001 - an env that cannot run here says why
                print(f"{name} at {n} envs: not measured ({type(exc).__name__}: {exc})")
                if os.environ.get("BENCH_TRACEBACK"):
                    traceback.print_exc()
                break
            print(f"  {name} x{n}: {rows[-1].steps_s:,.0f} steps/s", file=sys.stderr, flush=True)
    load = os.getloadavg()[0]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
        cwd=Path(__file__).resolve().parent,
    ).stdout.strip()  # fmt: skip
    print(
        "timed a row: "
        + ", ".join(f"{n} {s:g} s" for n, s in timed.items())
        + f"; threads; {os.cpu_count()} cores, load average {load:.1f} at the end; "
        f"commit {commit or '?'}"
    )
    print(table(rows))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
