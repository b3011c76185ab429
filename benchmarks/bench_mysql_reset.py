"""InterCode-SQL on MySQL/MariaDB: episode reset latency and gold-policy steps/s, before
and after the episode pool, in one run.

"before" is the backend without its pool: every reset builds its episode database
(template clone, user, grant, connection with PyMySQL's default per-connect TLS context)
and drops the last one before it returns (``spares=0``, ``server.tls = {}``). "after" is
the default: resets take a pristine database made ahead by the pool's thread (which makes
the template's next one while the episode runs), or one that earlier episodes only read.
Isolation is the same (each episode its own database and user, pristine data; a written
database is never reused).

Two workloads per task set: the gold policy (its queries only read), and the gold policy
after one write per episode (``DELETE`` from a table), so no database can be reused and
the pool must keep up by making new ones. Task sets: the bundled tasks, and InterCode's
Spider dev databases (``intercode-bench``, extra ``intercode``) when installed.

Usage: python benchmarks/bench_mysql_reset.py [--episodes N]
Skips with the reason when no server answers at $AGENTENVS_MYSQL_URL (or the default socket).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import make_policy

DEFAULT_URL = "mysql://root@localhost/?unix_socket=/run/mysqld/mysqld.sock"


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def run(tasks: str | None, url: str, mode: str, episodes: int, write: bool) -> dict:
    env = InterCodeSQLEnv(tasks_path=tasks, backend="mysql", mysql_url=url)
    backend = env.unwrapped.backend
    if mode == "before":
        backend.spares = 0
        backend.server.tls = {}  # PyMySQL's default: a new TLS context per connection
    policy = make_policy("intercode_sql/gold")
    rng = np.random.default_rng(0)
    # tasks drawn at random, as in training; every template built before timing starts
    order = np.random.default_rng(1).permutation(len(env.unwrapped.task_set.tasks))
    ids = [list(env.unwrapped.task_set.tasks)[j] for j in order]
    by_db = {env.unwrapped.task_set.tasks[t].db: t for t in ids}
    for t in by_db.values():
        env.reset(seed=0, options={"task_id": t})
    resets: list[float] = []
    steps = 0
    start = time.perf_counter()
    try:
        for i in range(episodes):
            t0 = time.perf_counter()
            obs, info = env.reset(seed=i, options={"task_id": ids[i % len(ids)]})
            resets.append(time.perf_counter() - t0)
            if write:
                table = next(
                    iter(
                        env.unwrapped.backend.schema(
                            env.unwrapped.task_set.databases[env.unwrapped.task.db]
                        )
                    )
                )
                env.step(f"DELETE FROM {table}")
                steps += 1
            conv = Conversation.start(obs, info, env=env)
            done = False
            while not done:
                action = policy.act(conv, rng)
                obs, _, terminated, truncated, _ = env.step(action)
                conv.add_turn(action, obs)
                steps += 1
                done = terminated or truncated
        elapsed = time.perf_counter() - start
    finally:
        env.close()
    return {
        "p50": percentile(resets, 50) * 1e3,
        "p99": percentile(resets, 99) * 1e3,
        "mean": statistics.fmean(resets) * 1e3,
        "sps": steps / elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300)
    args = parser.parse_args()
    url = os.environ.get("AGENTENVS_MYSQL_URL", DEFAULT_URL)
    try:
        import pymysql

        from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url

        pymysql.connect(**parse_mysql_url(url), connect_timeout=3).close()
    except Exception as exc:
        print(f"skipped: no MySQL/MariaDB server at {url} ({exc})")
        return
    sets: list[tuple[str, str | None]] = [("bundled", None)]
    try:
        from agentenvs.envs.intercode_sql.data import intercode_package_files

        intercode_package_files()
        sets.append(("spider dev (intercode-bench)", "intercode-bench"))
    except Exception as exc:
        print(f"InterCode's Spider dev databases: skipped ({exc})")
    print(f"MySQL episode reset, {args.episodes} episodes per row (cpu count {os.cpu_count()})")
    print(f"{'tasks':30} {'workload':14} {'mode':7} {'p50 ms':>8} {'p99 ms':>8} {'steps/s':>8}")
    for label, tasks in sets:
        for write in (False, True):
            workload = "gold+write" if write else "gold (reads)"
            rows = {}
            for mode in ("before", "after"):
                r = rows[mode] = run(tasks, url, mode, args.episodes, write)
                print(
                    f"{label:30} {workload:14} {mode:7} {r['p50']:8.1f} {r['p99']:8.1f} {r['sps']:8.1f}"
                )
            b = rows["before"]
            a = rows["after"]
            print(
                f"{'':30} {'':14} {'ratio':7} {b['p50'] / a['p50']:7.1f}x "
                f"{b['p99'] / a['p99']:7.1f}x {a['sps'] / b['sps']:7.1f}x"
            )


if __name__ == "__main__":
    main()
