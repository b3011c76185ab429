"""Episodes per second: the async face (AsyncEnvPool) vs the synchronous loop, one run.

For each env the same episodes (seeds 0..N-1, a scripted reference policy) run once in
a plain loop on one env, then from one event loop through ``AsyncEnvPool`` with 1, 8
and 64 envs at once. Prints episodes/s of each, the ratio to the sync loop, and whether
every episode's return matched the sync loop's.

- DeepCoder-MT, local sandbox (bubblewrap), ``deepcoder/buggy-then-fix``: sandboxed runs.
- InterCode-SQL on SQLite (in process: CPU-bound, little to overlap) and on MySQL/MariaDB
  (``$AGENTENVS_MYSQL_URL`` or the default socket): gold query, then submit.
- Terminal-Bench on Docker (``--terminal``), concurrency 1 and 8: the solution, then submit.

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


def sync_run(env_id: str, kwargs: dict[str, Any], act: Callable, seeds: list[int]) -> tuple[float, list[float]]:
    env = gym.make(env_id, **kwargs)
    returns = []
    forget_results()
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
    env.close()
    return elapsed, returns


async def async_run(env_id: str, kwargs: dict[str, Any], act: Callable, seeds: list[int], concurrency: int) -> tuple[float, list[float]]:
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

    pool = AsyncEnvPool(env_id, max_envs=concurrency, **kwargs)
    async with pool:
        # envs are built once per pool; time the episodes, not the pool's first builds
        async def build(seed: int) -> None:
            async with pool.env() as env:
                await env.areset(seed=seed)

        await asyncio.gather(*(build(s) for s in seeds[:concurrency]))
        forget_results()
        t0 = time.perf_counter()
        returns = await asyncio.gather(*(episode(pool, s) for s in seeds))
        return time.perf_counter() - t0, list(returns)


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
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--only", default=None, help="deepcoder, sqlite, mysql or terminal")
    parser.add_argument("--terminal", action="store_true", help="also Terminal-Bench on Docker")
    args = parser.parse_args()
    configs: list[tuple[str, str, dict[str, Any], str, tuple[int, ...]]] = [
        ("deepcoder", "agentenvs/DeepCoderMT-v0", {"sandbox": "local"}, "deepcoder/buggy-then-fix", (1, 8, 64)),
        ("sqlite", "agentenvs/InterCodeSQL-v0", {}, "intercode_sql/gold", (1, 8, 64)),
        ("mysql", "agentenvs/InterCodeSQL-v0", {"backend": "mysql", "mysql_url": MYSQL_URL}, "intercode_sql/gold", (1, 8, 64)),
    ]
    if args.terminal or args.only == "terminal":
        configs.append(("terminal", "agentenvs/TerminalBench-v0", {"runtime": "docker"}, "terminal/solution", (1, 8)))
    print(f"{'env':<10} {'sync eps/s':>10} " + " ".join(f"{'c=' + str(c):>16}" for c in (1, 8, 64)) + "  returns equal")
    for name, env_id, kwargs, policy, concurrencies in configs:
        if args.only and name != args.only:
            continue
        if name == "mysql":
            ok, why = mysql_up()
            if not ok:
                print(f"{name:<10} skipped: no MySQL server ({why})")
                continue
        n = args.episodes if name != "terminal" else min(args.episodes, 16)
        seeds = list(range(n))
        act = actor(policy)
        try:
            sync_s, sync_returns = sync_run(env_id, kwargs, act, seeds)
        except Exception as exc:  # noqa: BLE001 - a missing service skips the row
            print(f"{name:<10} skipped: {exc}")
            continue
        cells, same = [], True
        for c in concurrencies:
            try:
                secs, returns = asyncio.run(async_run(env_id, kwargs, act, seeds, c))
            except Exception as exc:  # noqa: BLE001 - e.g. the server's connection limit
                cells.append(f"refused: {type(exc).__name__}")
                print(f"  {name} c={c}: {type(exc).__name__}: {exc}")
                traceback.print_exc()
                continue
            same = same and returns == sync_returns
            cells.append(f"{n / secs:7.1f} ({sync_s / secs:4.2f}x)")
        print(f"{name:<10} {n / sync_s:10.1f} " + " ".join(f"{cell:>16}" for cell in cells) + f"  {same}")


if __name__ == "__main__":
    main()
