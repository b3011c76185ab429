"""Env server side by side: a step through ``agentenvs serve`` (OpenEnv's WebSocket
protocol, loopback) vs the same env in process.

The server runs ``agentenvs/FrozenLake-v0`` in a subprocess (``--port 0``); the client is
our ``RemoteEnv`` (an OpenEnv client sends the same messages). Both sides play the same
seeded random moves, resetting when an episode ends. Prints the time per step and per
reset on each side and the ratio, i.e. what the round trip adds to a cheap env.

Needs the ``server`` extra; skips with the reason without it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401
from agentenvs.envs.frozenlake.env import format_action

STEPS = int(os.environ.get("BENCH_STEPS", 2_000))
KWARGS = {"size": 4, "is_slippery": False, "max_turns": 100}


def in_process(texts: list[str]) -> tuple[float, float, int]:
    env = gym.make("agentenvs/FrozenLake-v0", **KWARGS)
    env.reset(seed=0)
    resets, t_reset = 0, 0.0
    start = time.perf_counter()
    for i, text in enumerate(texts):
        _, _, terminated, truncated, _ = env.step(text)
        if terminated or truncated:
            t0 = time.perf_counter()
            env.reset(seed=i)
            t_reset += time.perf_counter() - t0
            resets += 1
    total = time.perf_counter() - start
    return total - t_reset, t_reset, resets


async def remote(url: str, texts: list[str]) -> tuple[float, float, int]:
    from agentenvs.server.client import RemoteEnv

    async with RemoteEnv(url) as env:
        await env.areset(seed=0)
        resets, t_reset = 0, 0.0
        start = time.perf_counter()
        for i, text in enumerate(texts):
            _, _, terminated, truncated, _ = await env.astep(text)
            if terminated or truncated:
                t0 = time.perf_counter()
                await env.areset(seed=i)
                t_reset += time.perf_counter() - t0
                resets += 1
        total = time.perf_counter() - start
    return total - t_reset, t_reset, resets


def main() -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
        import websockets  # noqa: F401
    except ImportError as exc:
        print(f"env server: skipped ({exc}; pip install 'agentenvs[server]')")
        return
    moves = np.random.default_rng(0).integers(0, 4, STEPS).tolist()
    texts = [format_action(a) for a in moves]
    cmd = [sys.executable, "-m", "agentenvs.cli", "serve", "--env", "agentenvs/FrozenLake-v0"]
    cmd += ["--port", "0", "--env-kwargs", json.dumps(KWARGS)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if match is None:
            print(f"env server: did not start ({line.strip()!r})")
            return
        url = f"http://127.0.0.1:{match.group(1)}"
        r_step, r_reset, r_n = asyncio.run(remote(url, texts))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    l_step, l_reset, l_n = in_process(texts)
    print(f"FrozenLake-v0, {STEPS} random moves (4x4, not slippery)")
    print(
        f"  server round trip: {r_step / STEPS * 1e6:9.1f} us/step  {r_reset / max(r_n, 1) * 1e6:9.1f} us/reset"
    )
    print(
        f"  in process:        {l_step / STEPS * 1e6:9.1f} us/step  {l_reset / max(l_n, 1) * 1e6:9.1f} us/reset"
    )
    print(f"ratio (server / in process): step {r_step / l_step:.1f}x")


if __name__ == "__main__":
    main()
