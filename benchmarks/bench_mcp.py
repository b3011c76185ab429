"""One MCP session over streamable HTTP against one OpenEnv WebSocket session: steps/s.

Starts ``agentenvs serve`` twice for FrozenLake (8x8) on 127.0.0.1, once with
``--protocol mcp`` and once with OpenEnv's protocol, and plays the same seeded episodes
through one session of each (the official MCP SDK's ``ClientSession`` and the project's
``RemoteEnv``), taking turns over ``--rounds`` so that the ratio holds on a loaded machine.
Each reply's reward is checked against the env in process. Prints steps/s of each and
their ratio (MCP / OpenEnv).

Usage: python benchmarks/bench_mcp.py [--steps 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym

import agentenvs  # noqa: F401 - registers the ids

ROOT = Path(__file__).resolve().parents[1]
ENV_ID = "agentenvs/FrozenLake-v0"
MOVES = ["Left", "Down", "Right", "Up"]


#: the servers' token, which every client sends
TOKEN = secrets.token_urlsafe(32)


def start(*extra: str) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "agentenvs.cli", "serve", "--env", ENV_ID, "--port", "0",
           "--token", TOKEN, *extra]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if match is None:
        proc.kill()
        raise SystemExit(f"the server did not start: {line}")
    time.sleep(1.0)
    return proc, f"http://127.0.0.1:{match.group(1)}"


def script(steps: int) -> list[tuple[int, list[str], list[float]]]:
    """Seeded episodes, ``steps`` moves in all, with their in-process rewards."""
    env = gym.make(ENV_ID)
    episodes, total, seed = [], 0, 0
    while total < steps:
        env.reset(seed=seed, options={"task_id": "8x8", "max_turns": 20})
        moves, rewards, done = [], [], False
        while not done and total < steps:
            move = MOVES[(seed + len(moves)) % 4]
            _, reward, term, trunc, _ = env.step(f"<answer>{move}</answer>")
            moves.append(move)
            rewards.append(float(reward))
            done, total = term or trunc, total + 1
        episodes.append((seed, moves, rewards))
        seed += 1
    env.close()
    return episodes


async def run_mcp(url: str, episodes) -> float:  # noqa: ANN001
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(url + "/mcp", http_client=http) as (read, write),
    ):
        async with ClientSession(read, write) as session:
            await session.initialize()
            start_t, n = time.perf_counter(), 0
            for seed, moves, rewards in episodes:
                args = {"task_id": "8x8", "seed": seed, "max_turns": 20}
                await session.call_tool("reset", args)
                for move, reward in zip(moves, rewards, strict=True):
                    result = await session.call_tool("move", {"direction": move})
                    assert result.structured_content["reward"] == reward
                    n += 1
            return n / (time.perf_counter() - start_t)


async def run_openenv(url: str, episodes) -> float:  # noqa: ANN001
    from agentenvs.server.client import RemoteEnv

    async with RemoteEnv(url, token=TOKEN) as env:
        start_t, n = time.perf_counter(), 0
        for seed, moves, rewards in episodes:
            await env.areset(seed=seed, options={"task_id": "8x8", "max_turns": 20})
            for move, reward in zip(moves, rewards, strict=True):
                _, got, _, _, _ = await env.astep(f"<answer>{move}</answer>")
                assert got == reward
                n += 1
        return n / (time.perf_counter() - start_t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    episodes = script(args.steps)
    mcp_proc, mcp_url = start("--protocol", "mcp")
    ws_proc, ws_url = start()
    try:
        mcp_rates, ws_rates = [], []
        for _ in range(args.rounds):
            mcp_rates.append(asyncio.run(run_mcp(mcp_url, episodes)))
            ws_rates.append(asyncio.run(run_openenv(ws_url, episodes)))
        mcp_best, ws_best = max(mcp_rates), max(ws_rates)
        print(f"FrozenLake 8x8, one session, {args.steps} steps, best of {args.rounds} rounds")
        print(f"  MCP streamable HTTP: {mcp_best:8.1f} steps/s")
        print(f"  OpenEnv WebSocket:   {ws_best:8.1f} steps/s")
        print(f"  ratio MCP / OpenEnv: {mcp_best / ws_best:.3f}")
    finally:
        for proc in (mcp_proc, ws_proc):
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
