"""Env server side by side: a step through ``agentenvs serve`` (OpenEnv's WebSocket
protocol, loopback) vs the same env in process.

The server runs ``agentenvs/FrozenLake-v0`` in a subprocess (``--port 0``); the client is
our ``RemoteEnv`` (an OpenEnv client sends the same messages). Both sides play the same
seeded random moves, resetting when an episode ends, in rounds taking turns (the side
going first turning each round). Prints, medians over rounds, the wall time per step and
per reset on each side, the CPU time a step (in process: this process; through the
server: the client process plus the server's, from ``/proc``), the ratio, i.e. what the
round trip adds to a cheap env, and the totals.

Needs the ``server`` extra; skips with the reason without it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401
from agentenvs.envs.frozenlake.env import format_action

STEPS = int(os.environ.get("BENCH_STEPS", 2_000))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 5))


def cpu(pid: int | None = None) -> float:
    """CPU seconds of this process (and its finished children), or of process ``pid``."""
    if pid is None:
        me = resource.getrusage(resource.RUSAGE_SELF)
        return me.ru_utime + me.ru_stime
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
        rounds: dict[str, list[tuple[float, float, int, float]]] = {"remote": [], "local": []}

        def run(side: str) -> None:
            c0 = cpu() + (cpu(proc.pid) if side == "remote" else 0.0)
            step, reset, n = (
                asyncio.run(remote(url, texts)) if side == "remote" else in_process(texts)
            )
            used = cpu() + (cpu(proc.pid) if side == "remote" else 0.0) - c0
            rounds[side].append((step, reset, n, used))

        run("remote"), run("local")  # warm-up
        rounds = {"remote": [], "local": []}
        for k in range(ROUNDS):
            for side in ("remote", "local") if k % 2 == 0 else ("local", "remote"):
                run(side)
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    def med(side: str, i: int, per: str = "step") -> float:
        return statistics.median(
            r[i] / (STEPS if per == "step" else max(r[2], 1)) for r in rounds[side]
        )

    print(
        f"FrozenLake-v0, {STEPS} random moves (4x4, not slippery), {ROUNDS} rounds taking turns, "
        f"medians over rounds; load average {os.getloadavg()[0]:.1f}"
    )
    for label, side, whose in (
        ("server round trip", "remote", "client + server"),
        ("in process", "local", "this process"),
    ):
        total = sum(r[0] + r[1] for r in rounds[side])
        print(
            f"  {label + ':':18} {med(side, 0) * 1e6:9.1f} us/step  "
            f"{med(side, 1, 'reset') * 1e6:9.1f} us/reset  CPU {med(side, 3) * 1e6:9.1f} us/step "
            f"({whose}, resets included)  total {total:.2f} s"
        )
    ratio = statistics.median(
        r[0] / lo[0] for r, lo in zip(rounds["remote"], rounds["local"], strict=True)
    )
    print(
        f"ratio (server / in process), median of paired rounds: step {ratio:.1f}x; the round "
        f"trip adds {(med('remote', 0) - med('local', 0)) * 1e3:.3f} ms a step"
    )


if __name__ == "__main__":
    main()
