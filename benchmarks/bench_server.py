"""The env server's cost per step: a round trip over a loopback WebSocket vs an in-process step.

Starts ``agentenvs serve`` for FrozenLake (8x8) in a subprocess on 127.0.0.1, then plays
the same episodes (fixed seeds and moves) in process and through one session
(``RemoteEnv``), and through 16 concurrent sessions; prints µs per step for each, the
overhead per step, and whether every observation matched.

Usage: python benchmarks/bench_server.py [--steps N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.integrations.common import json_safe
from agentenvs.server.client import RemoteEnv

MOVES = ["Left", "Down", "Right", "Up"]
KWARGS = {"map_name": "8x8", "max_turns": 20}


def script(steps: int) -> list[tuple[int, str]]:
    return [(i // 20, MOVES[(i * 7) % 4]) for i in range(steps)]


def in_process(plan: list[tuple[int, str]]) -> tuple[float, list]:
    env = gym.make("agentenvs/FrozenLake-v0", **KWARGS)
    out, current, done = [], None, True
    t0 = time.perf_counter()
    for episode, move in plan:
        if episode != current or done:
            env.reset(seed=episode)
            current, done = episode, False
        obs, reward, terminated, truncated, info = env.step(move)
        done = terminated or truncated
        out.append((obs, float(reward), terminated, truncated, info))
    elapsed = time.perf_counter() - t0
    return elapsed, [(*step[:4], json_safe(step[4])) for step in out]


async def remote(url: str, plan: list[tuple[int, str]]) -> tuple[float, list]:
    async with RemoteEnv(url) as env:
        out, current, done = [], None, True
        t0 = time.perf_counter()
        for episode, move in plan:
            if episode != current or done:
                await env.areset(seed=episode)
                current, done = episode, False
            obs, reward, terminated, truncated, info = await env.astep(move)
            done = terminated or truncated
            out.append((obs, reward, terminated, truncated, info))
        return time.perf_counter() - t0, out


async def many(url: str, plans: list[list[tuple[int, str]]]) -> tuple[float, list]:
    t0 = time.perf_counter()
    results = await asyncio.gather(*(remote(url, p) for p in plans))
    return time.perf_counter() - t0, [r[1] for r in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentenvs.cli", "serve", "--env", "agentenvs/FrozenLake-v0",
         "--port", "0", "--env-kwargs", json.dumps(KWARGS)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+", line)
        if match is None:
            raise SystemExit(f"the server did not start: {line}")
        url = match.group(0)
        plan = script(args.steps)
        local_s, local = in_process(plan)
        asyncio.run(remote(url, plan[:100]))  # warm the connection path
        remote_s, got = asyncio.run(remote(url, plan))
        per = args.steps // 16
        plans = [script(per) for _ in range(16)]
        many_s, gots = asyncio.run(many(url, plans))
        _, want16 = in_process(plans[0])
        same = got == local and all(g == want16 for g in gots)
        us_local = local_s / args.steps * 1e6
        us_remote = remote_s / args.steps * 1e6
        print(f"in-process step:            {us_local:9.1f} µs/step")
        print(f"server round trip, 1 session:{us_remote:9.1f} µs/step  (+{us_remote - us_local:.0f} µs, {us_remote / us_local:.0f}x)")
        print(f"16 concurrent sessions:     {many_s / (per * 16) * 1e6:9.1f} µs/step of wall time "
              f"({per * 16 / many_s:.0f} steps/s)")
        print(f"every observation equal to in-process: {same}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
