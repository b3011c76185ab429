"""ORS sessions against one OpenEnv WebSocket session: steps/s.

Starts ``agentenvs serve`` twice for FrozenLake (8x8) on 127.0.0.1, once with
``--protocol ors`` and once with OpenEnv's protocol, and plays the same seeded episodes
(``bench_mcp.script``) through ``ors-sdk``'s client and the project's ``RemoteEnv``, taking
turns over ``--rounds`` so that the ratio holds on a loaded machine. ORS has no reset in a
session, so each episode is a session of its own (made, prompted, deleted): the first
figure counts that, the second only the time spent in tool calls. Each reply's reward is
checked against the env in process. Prints steps/s of each and the ratios (ORS / OpenEnv).

Usage: python benchmarks/bench_ors.py [--steps 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from bench_mcp import TOKEN, run_openenv, script, start

os.environ.setdefault("ORS_LOG_LEVEL", "WARNING")


async def run_ors(url: str, episodes) -> tuple[float, float]:  # noqa: ANN001
    from ors.client import AsyncORS
    from ors.client._types import Task

    client = AsyncORS(url, api_key=TOKEN)
    env = client.environment("FrozenLake-v0")
    try:
        start_t, n, in_calls = time.perf_counter(), 0, 0.0
        for seed, moves, rewards in episodes:
            spec = {"task_id": "8x8", "seed": seed, "max_turns": 20}
            task = Task(environment_name="FrozenLake-v0", task_spec=spec)
            async with env.session(task=task) as session:
                await session.get_prompt()
                for move, reward in zip(moves, rewards, strict=True):
                    t = time.perf_counter()
                    out = await session.call_tool("move", {"direction": move})
                    in_calls += time.perf_counter() - t
                    assert out.reward == reward
                    n += 1
        return n / (time.perf_counter() - start_t), n / in_calls
    finally:
        await env.client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    episodes = script(args.steps)
    ors_proc, ors_url = start("--protocol", "ors")
    ws_proc, ws_url = start()
    try:
        ors_rates, call_rates, ws_rates = [], [], []
        for _ in range(args.rounds):
            whole, calls = asyncio.run(run_ors(ors_url, episodes))
            ors_rates.append(whole)
            call_rates.append(calls)
            ws_rates.append(asyncio.run(run_openenv(ws_url, episodes)))
        ors_best, call_best, ws_best = max(ors_rates), max(call_rates), max(ws_rates)
        print(
            f"FrozenLake 8x8, {args.steps} steps in {len(episodes)} episodes, "
            f"best of {args.rounds} rounds"
        )
        print(f"  ORS, a session per episode:   {ors_best:8.1f} steps/s")
        print(f"  ORS, tool calls only:         {call_best:8.1f} steps/s")
        print(f"  OpenEnv WebSocket, 1 session: {ws_best:8.1f} steps/s")
        print(
            f"  ratio ORS / OpenEnv: {ors_best / ws_best:.3f} ({call_best / ws_best:.3f} calls only)"
        )
    finally:
        for proc in (ors_proc, ws_proc):
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
