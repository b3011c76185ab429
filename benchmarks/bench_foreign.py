"""What the foreign-env adapter costs: a step through ``agentenvs/GymnasiumText-v0``
against the Gymnasium env it wraps, and a restore by replay against a fresh reset.

For each source (Gymnasium's FrozenLake-v1, Taxi-v4 and CliffWalking-v1, each made by
``gym.make`` with ``render_mode="ansi"`` on both sides, so both pay the text rendering):

- steps: the same seeded random moves, the source given the move's number and asked for
  its ``render()``, the adapter given ``<answer>Name</answer>`` text and returning text
  plus the suite's info dict (state key, turn, budget); episodes reset when they end;
- restore: ``restore`` of a snapshot taken after ``k`` moves (a replay of k steps on the
  spare source) against the source's own ``reset(seed)`` followed by the same k steps,
  the obvious alternative for an env without a snapshot.

Rounds alternate between the two arms; medians of the rounds are printed with their
ratio (adapter / source: above 1 is the adapter's cost).

Usage: python benchmarks/bench_foreign.py [--steps 20000] [--rounds 5] [--k 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401 - registers agentenvs/GymnasiumText-v0

SOURCES = ("FrozenLake-v1", "Taxi-v4", "CliffWalking-v1")


def source_steps(env_id: str, moves: list[int]) -> float:
    env = gym.make(env_id, render_mode="ansi")
    env.reset(seed=0)
    start = time.perf_counter()
    for move in moves:
        _, _, terminated, truncated, _ = env.step(move)
        env.render()
        if terminated or truncated:
            env.reset()
            env.render()
    took = time.perf_counter() - start
    env.close()
    return took


def adapter_steps(env_id: str, texts: list[str]) -> float:
    env = gym.make("agentenvs/GymnasiumText-v0", env_id=env_id, max_turns=100)
    env.reset(seed=0)
    start = time.perf_counter()
    for text in texts:
        _, _, terminated, truncated, _ = env.step(text)
        if terminated or truncated:
            env.reset()
    took = time.perf_counter() - start
    env.close()
    return took


def replay_restore(env_id: str, k: int, repeats: int) -> float:
    env = gym.make("agentenvs/GymnasiumText-v0", env_id=env_id, max_turns=1000).unwrapped
    env.reset(seed=1, options={"task_id": "0"})
    rng = np.random.default_rng(0)
    for _ in range(k):
        if env.done:
            break
        env.step(env.random_action(rng))
    snap = env.snapshot()
    start = time.perf_counter()
    for _ in range(repeats):
        env.restore(snap)
    took = time.perf_counter() - start
    env.close()
    return took / repeats


def reset_and_replay(env_id: str, k: int, repeats: int) -> float:
    env = gym.make(env_id, render_mode="ansi")
    moves = np.random.default_rng(0).integers(0, int(env.action_space.n), k).tolist()
    start = time.perf_counter()
    for _ in range(repeats):
        env.reset(seed=0)
        for move in moves:
            _, _, terminated, truncated, _ = env.step(move)
            if terminated or truncated:
                break
        env.render()
    took = time.perf_counter() - start
    env.close()
    return took / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--k", type=int, default=10, help="moves before the snapshot")
    args = parser.parse_args()
    for env_id in SOURCES:
        adapted = gym.make("agentenvs/GymnasiumText-v0", env_id=env_id).unwrapped
        n = adapted.action_space_size if hasattr(adapted, "action_space_size") else None
        names = adapted.action_names
        adapted.close()
        n = len(names) if names else n
        moves = np.random.default_rng(0).integers(0, n, args.steps).tolist()
        texts = [f"<answer>{names[m]}</answer>" for m in moves]
        src, ada, rep, rst = [], [], [], []
        for _ in range(args.rounds):
            src.append(source_steps(env_id, moves) / args.steps)
            ada.append(adapter_steps(env_id, texts) / args.steps)
            rst.append(reset_and_replay(env_id, args.k, 200))
            rep.append(replay_restore(env_id, args.k, 200))
        s, a = statistics.median(src), statistics.median(ada)
        r1, r2 = statistics.median(rep), statistics.median(rst)
        print(
            f"{env_id:16s} step: source {s * 1e6:7.1f} us, adapter {a * 1e6:7.1f} us "
            f"(x{a / s:.2f}); restore after {args.k} moves: replay {r1 * 1e6:7.1f} us, "
            f"reset+steps {r2 * 1e6:7.1f} us (x{r1 / r2:.2f})"
        )


if __name__ == "__main__":
    main()
