"""fork(8) against 8 sequential restore+step from one state, per env, as ratios in one run.

For each env: one episode a few steps in, then (a) eight times restore the snapshot and
step one action (the path before forks), (b) ``fork(8)`` and step each child once (the
children closed after). Terminal-Bench on Docker and InterCode-SQL on MySQL run when
their services answer; the script says what it skipped and why. Also: an SQLite
episode's database copied by its in-memory image against SQLite's backup API.

    .venv/bin/python benchmarks/bench_fork.py [--k 8] [--repeat 5] [--skip Terminal]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.core.snapshot import restore_snapshot, take_snapshot

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("FrozenLake", "agentenvs/FrozenLake-v0", {}, "Right"),
    ("BFCL", "agentenvs/BFCL-v0", {}, "[]"),
    ("BFCL multi-turn", "agentenvs/BFCLMultiTurn-v0", {}, "[]"),
    ("InterCode SQLite", "agentenvs/InterCodeSQL-v0", {}, "SELECT count(*) FROM singer"),
    ("DeepCoder local", "agentenvs/DeepCoderMT-v0", {}, "```python\nprint(1)\n```"),
    ("Terminal local", "agentenvs/TerminalBench-v0", {}, "```bash\nls\n```"),
]


def _services() -> tuple[list[tuple[str, str, dict[str, Any], str]], list[str]]:
    extra, skipped = [], []
    try:
        from _services import find_mysql

        url, why = find_mysql()
    except Exception as exc:  # noqa: BLE001 - any failure is the reason to skip
        url, why = None, str(exc)
    if url:
        extra.append(
            (
                "InterCode MySQL",
                "agentenvs/InterCodeSQL-v0",
                {"backend": "mysql", "mysql_url": url},
                "SELECT count(*) FROM singer",
            )
        )
    else:
        skipped.append(f"InterCode MySQL: {why}")
    try:
        from agentenvs.sandbox.docker import docker_available

        ok, why = docker_available("agentenvs/terminal:latest")
    except Exception as exc:  # noqa: BLE001
        ok, why = False, str(exc)
    if ok:
        extra.append(
            (
                "Terminal Docker",
                "agentenvs/TerminalBench-v0",
                {"runtime": "docker"},
                "```bash\nls\n```",
            )
        )
    else:
        skipped.append(f"Terminal Docker: {why}")
    return extra, skipped


def measure(
    env_id: str, kwargs: dict[str, Any], action: str, k: int, repeat: int
) -> tuple[float, float]:
    env = gym.make(env_id, **kwargs)
    env.reset(seed=0)
    if "InterCode" in env_id:  # a written database, so the copy has something to copy
        env.step("CREATE TABLE bench_rows (a INTEGER)")
    snap = take_snapshot(env)
    seq = fork = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(k):
            restore_snapshot(env, snap)
            env.step(action)
        seq = min(seq, time.perf_counter() - start)
        restore_snapshot(env, snap)
        start = time.perf_counter()
        kids = env.unwrapped.fork(k)
        for kid in kids:
            kid.step(action)
        fork = min(fork, time.perf_counter() - start)
        for kid in kids:
            kid.close()
    env.close()
    return seq, fork


def sqlite_copies(repeat: int = 50) -> tuple[float, float]:
    env = gym.make("agentenvs/InterCodeSQL-v0")
    env.reset(seed=0)
    conn = env.unwrapped.episode.conn
    best_image = best_backup = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        copy = sqlite3.connect(":memory:")
        copy.deserialize(conn.serialize())
        best_image = min(best_image, time.perf_counter() - start)
        copy.close()
        start = time.perf_counter()
        copy = sqlite3.connect(":memory:")
        conn.backup(copy)
        best_backup = min(best_backup, time.perf_counter() - start)
        copy.close()
    env.close()
    return best_image, best_backup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--skip", action="append", default=[], help="leave out the cases whose name has this"
    )
    args = parser.parse_args()
    extra, skipped = _services()
    print(f"{'env':<18} {args.k} x (restore+step) ms  fork({args.k})+steps ms  speedup")
    for name, env_id, kwargs, action in [*CASES, *extra]:
        if any(part in name for part in args.skip):
            continue
        try:
            seq, fork = measure(env_id, kwargs, action, args.k, args.repeat)
        except Exception as exc:  # noqa: BLE001 - one env that cannot run here is reported
            print(f"{name:<18} skipped: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        print(f"{name:<18} {seq * 1e3:>22.3f} {fork * 1e3:>20.3f} {seq / fork:>9.2f}x")
    image, backup = sqlite_copies()
    print(
        f"SQLite episode copy: in-memory image {image * 1e3:.3f} ms, backup API "
        f"{backup * 1e3:.3f} ms ({backup / image:.2f}x)"
    )
    for line in skipped:
        if not any(part in line for part in args.skip):
            print(f"skipped {line}")


if __name__ == "__main__":
    main()
