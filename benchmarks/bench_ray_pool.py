"""Envs on Ray actors vs in process: FrozenLake steps/s through RayEnvPool and AsyncEnvPool.

The same episodes on both (FrozenLake 8x8, fixed action cycles, ``EPISODES`` episodes from
``CONCURRENT`` coroutines), in one run, taking turns for ``ROUNDS`` rounds; each side's
best round counts. A local Ray instance (2 CPUs, on loopback) is started once beforehand
and its actors are started before timing, so the figures are what a step costs, not
what starting costs. Both sides must give identical episodes. Prints steps/s, the time a
step, and the ratio; the difference of the times a step is what a Ray actor adds.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentenvs.core.aio import AsyncEnvPool
from agentenvs.core.ray_pool import RayEnvPool

ENV_ID = "agentenvs/FrozenLake-v0"
ENV_KWARGS = {"map_name": "8x8", "max_turns": 32}
MOVES = ["down", "right", "right", "down", "left", "up"]
EPISODES = 200
CONCURRENT = 8
ROUNDS = 3


async def episode(pool: Any, seed: int) -> tuple[int, list[Any]]:
    async with pool.env() as env:
        out: list[Any] = [await env.areset(seed=seed)]
        for i in range(32):
            step = await env.astep(f"<answer>{MOVES[(seed + i) % len(MOVES)]}</answer>")
            out.append(step)
            if step[2] or step[3]:
                break
        return len(out) - 1, out


async def timed(pool: Any) -> tuple[float, int, list[Any]]:
    results: list[Any] = [None] * EPISODES
    steps = 0

    async def worker(start: int) -> None:
        nonlocal steps
        for seed in range(start, EPISODES, CONCURRENT):
            n, out = await episode(pool, seed)
            steps += n + 1  # the reset counts as a call
            results[seed] = out

    began = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(CONCURRENT)))
    return time.perf_counter() - began, steps, results


async def main() -> None:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        local = AsyncEnvPool(ENV_ID, max_envs=CONCURRENT, **ENV_KWARGS)
        remote = RayEnvPool(ENV_ID, max_envs=CONCURRENT, num_cpus=0.25, **ENV_KWARGS)
        async with local, remote:
            await timed(local)  # warm: imports, and every actor started
            await timed(remote)
            best = {"local": float("inf"), "ray": float("inf")}
            for _ in range(ROUNDS):
                for name, pool in (("local", local), ("ray", remote)):
                    seconds, steps, results = await timed(pool)
                    best[name] = min(best[name], seconds)
                    if name == "local":
                        reference = results
                    else:
                        assert results == reference, "the Ray pool's episodes differ"
        for name in ("local", "ray"):
            print(
                f"{name:>5}: {steps / best[name]:10,.0f} calls/s  "
                f"{best[name] / steps * 1e6:8.1f} us a call  ({steps} calls, best of {ROUNDS})"
            )
        overhead = (best["ray"] - best["local"]) / steps * 1e6
        print(
            f"Ray adds {overhead:.0f} us a call; local/ray throughput ratio "
            f"{best['ray'] / best['local']:.1f}x"
        )
    finally:
        ray.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
