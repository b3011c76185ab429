"""Episodes per second: the async face (AsyncEnvPool) vs the synchronous loop, one run.

For each env the same episodes (seeds 0..N-1, a scripted reference policy) run once in
a plain loop on one env, then from one event loop through ``AsyncEnvPool`` with 1, 8
and 64 envs at once, and with 64 envs of which at most 8 step at once
(``max_concurrent_steps=8``). Prints episodes/s of each, the ratio to the sync loop, and
whether every episode's return matched the sync loop's.

- DeepCoder-MT, local sandbox (bubblewrap), ``deepcoder/buggy-then-fix``: sandboxed runs.
- InterCode-SQL on SQLite, in process: on a thread per env (the default: a statement may
  run up to its time limit) and inline on the event loop's thread (``inline=True``:
  nothing to overlap, so the aim is to cost nothing); and on MySQL/MariaDB
  (``$AGENTENVS_MYSQL_URL`` or the default socket): gold query, then submit.
- Terminal-Bench on Docker (``--terminal``), concurrency 1 and 8: the solution, then submit.

Beside each figure, CPU utilisation over the timed run, as a share of the machine's cores:
``cpu P%/M%``: P this process with its finished child processes (sandboxed runs) and,
for MySQL, the server process (``/run/mysqld/mysqld.pid`` when readable); M the whole
machine, busy time from ``/proc/stat`` (other work on a shared machine counts there).
Concurrency hides waiting when P rises toward 100% with it; M near 100% means the cores,
not waiting, bound the throughput.

Usage: python benchmarks/bench_async.py [--episodes N] [--only NAME] [--terminal]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import traceback
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.aio import AsyncEnvPool
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import make_policy

MYSQL_URL = os.environ.get("AGENTENVS_MYSQL_URL", "mysql://root@localhost/?unix_socket=/run/mysqld/mysqld.sock")


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot (0, 0 where /proc/stat is missing)."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except OSError:
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def _server_seconds() -> float:
    """CPU seconds of the local MySQL/MariaDB server so far (0 where it cannot be read)."""
    try:
        with open("/run/mysqld/mysqld.pid") as fh:
            pid = int(fh.read().strip())
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


class CpuMeter:
    """CPU utilisation over a timed block: ours (with children, and the server if asked)
    and the machine's, each as a share of all cores."""

    def __init__(self, server: bool = False) -> None:
        self.server = server

    def __enter__(self) -> CpuMeter:
        t = os.times()
        self._ours = t.user + t.system + t.children_user + t.children_system
        self._server = _server_seconds() if self.server else 0.0
        self._busy, self._total = _machine_ticks()
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._wall
        t = os.times()
        ours = t.user + t.system + t.children_user + t.children_system - self._ours
        if self.server:
            ours += _server_seconds() - self._server
        busy, total = _machine_ticks()
        cores = os.cpu_count() or 1
        self.ours = 100 * ours / (wall * cores) if wall > 0 else 0.0
        self.machine = 100 * (busy - self._busy) / (total - self._total) if total > self._total else 0.0

    def __str__(self) -> str:
        return f"cpu {self.ours:3.0f}%/{self.machine:3.0f}%"


def actor(policy_name: str) -> Callable[[gym.Env, np.random.Generator], str]:
    policy = make_policy(policy_name)

    def act(env: gym.Env, rng: np.random.Generator) -> str:
        return policy.act(Conversation(env=env.unwrapped), rng)  # type: ignore[attr-defined]

    return act


def forget_results() -> None:
    """DeepCoder-MT caches test outcomes per process by program text; every timed run
    must pay for its own sandboxed runs."""
    from agentenvs.envs.deepcoder import env as deepcoder_env

    deepcoder_env._OUTCOMES.data.clear()
    deepcoder_env._ERROR_POOLS.data.clear()


def sync_run(env_id: str, kwargs: dict[str, Any], act: Callable, seeds: list[int]) -> tuple[float, list[float], CpuMeter]:
    env = gym.make(env_id, **{k: v for k, v in kwargs.items() if k != "inline"})
    returns = []
    forget_results()
    meter = CpuMeter(server=kwargs.get("backend") == "mysql").__enter__()
    t0 = time.perf_counter()
    for seed in seeds:
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(act(env, rng))
            total += reward
            done = terminated or truncated
        returns.append(total)
    elapsed = time.perf_counter() - t0
    meter.__exit__()
    env.close()
    return elapsed, returns, meter


async def async_run(
    env_id: str,
    kwargs: dict[str, Any],
    act: Callable,
    seeds: list[int],
    concurrency: int,
    step_limit: int | None = None,
) -> tuple[float, list[float], CpuMeter]:
    async def episode(pool: AsyncEnvPool, seed: int) -> float:
        async with pool.env() as env:
            await env.areset(seed=seed)
            rng = np.random.default_rng(seed)
            total, done = 0.0, False
            while not done:
                action = await env.call(act, rng)
                _, reward, terminated, truncated, _ = await env.astep(action)
                total += reward
                done = terminated or truncated
            return total

    pool_kwargs = dict(kwargs)
    inline = pool_kwargs.pop("inline", None)
    pool = AsyncEnvPool(
        env_id, max_envs=concurrency, max_concurrent_steps=step_limit, inline=inline, **pool_kwargs
    )
    async with pool:
        # envs are built once per pool; time the episodes, not the pool's first builds
        # (two resets each: MySQL's episode pool then holds a database per env and more)
        async def build(seed: int) -> None:
            async with pool.env() as env:
                await env.areset(seed=seed)
                await env.areset(seed=seed + concurrency)

        await asyncio.gather(*(build(s) for s in seeds[:concurrency]))
        forget_results()
        with CpuMeter(server=kwargs.get("backend") == "mysql") as meter:
            t0 = time.perf_counter()
            returns = await asyncio.gather(*(episode(pool, s) for s in seeds))
            elapsed = time.perf_counter() - t0
        return elapsed, list(returns), meter


#: (envs, steps at once) of each async run
RUNS: tuple[tuple[int, int | None], ...] = ((1, None), (8, None), (64, None), (64, 8))
DEFAULT_EPISODES = {"deepcoder": 64, "sqlite": 1024, "sqlite-inline": 1024, "mysql": 512, "terminal": 16}


def label(envs: int, limit: int | None) -> str:
    return f"c={envs}" if limit is None else f"c={envs}, {limit} step"


def mysql_up() -> tuple[bool, str]:
    try:
        import pymysql

        from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url

        pymysql.connect(**parse_mysql_url(MYSQL_URL), connect_timeout=3).close()
        return True, ""
    except Exception as exc:  # noqa: BLE001 - reported, the row is skipped
        return False, str(exc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--episodes", type=int, default=None,
        help="episodes per run (default: DeepCoder-MT 64, SQLite 1024, MySQL 512, Terminal 16)",
    )
    parser.add_argument(
        "--only", default=None, help="deepcoder, sqlite, sqlite-inline, mysql or terminal"
    )
    parser.add_argument("--terminal", action="store_true", help="also Terminal-Bench on Docker")
    args = parser.parse_args()
    configs: list[tuple[str, str, dict[str, Any], str, tuple[int, ...]]] = [
        ("deepcoder", "agentenvs/DeepCoderMT-v0", {"sandbox": "local"}, "deepcoder/buggy-then-fix", RUNS),
        ("sqlite", "agentenvs/InterCodeSQL-v0", {}, "intercode_sql/gold", RUNS),
        ("sqlite-inline", "agentenvs/InterCodeSQL-v0", {"inline": True}, "intercode_sql/gold", RUNS),
        ("mysql", "agentenvs/InterCodeSQL-v0", {"backend": "mysql", "mysql_url": MYSQL_URL}, "intercode_sql/gold", RUNS),
    ]
    if args.terminal or args.only == "terminal":
        configs.append(("terminal", "agentenvs/TerminalBench-v0", {"runtime": "docker"}, "terminal/solution", ((1, None), (8, None))))
    print(f"cores: {os.cpu_count()}; cpu P%/M%: this process (+children, +server) / the machine")
    print(
        f"{'env':<10} {'sync eps/s, cpu':>20} "
        + " ".join(f"{label(c, limit):>30}" for c, limit in RUNS)
        + "  returns equal"
    )
    for name, env_id, kwargs, policy, concurrencies in configs:
        if args.only and name != args.only:
            continue
        if name == "mysql":
            ok, why = mysql_up()
            if not ok:
                print(f"{name:<10} skipped: no MySQL server ({why})")
                continue
        n = args.episodes or DEFAULT_EPISODES[name]
        if name == "terminal":
            n = min(n, 16)
        seeds = list(range(n))
        act = actor(policy)
        try:
            sync_s, sync_returns, sync_cpu = sync_run(env_id, kwargs, act, seeds)
        except Exception as exc:  # noqa: BLE001 - a missing service skips the row
            print(f"{name:<10} skipped: {exc}")
            continue
        cells, same = [], True
        for c, limit in concurrencies:
            try:
                secs, returns, cpu = asyncio.run(async_run(env_id, kwargs, act, seeds, c, limit))
            except Exception as exc:  # noqa: BLE001 - e.g. the server's connection limit
                cells.append(f"refused: {type(exc).__name__}")
                print(f"  {name} {label(c, limit)}: {type(exc).__name__}: {exc}")
                traceback.print_exc()
                continue
            same = same and returns == sync_returns
            cells.append(f"{n / secs:7.1f} ({sync_s / secs:4.2f}x) {cpu}")
        print(
            f"{name:<10} {n / sync_s:7.1f} {sync_cpu} "
            + " ".join(f"{cell:>30}" for cell in cells)
            + f"  {same}"
        )


if __name__ == "__main__":
    main()
