"""Step rate of ``agentenvs/FrozenLake-v0`` against Gymnasium's ``FrozenLake-v1``.

Both are built with ``gym.make`` (so both pay their wrappers), on the 4x4 slippery map
with a 100-step limit, and driven by the same seeded random moves, resetting when an
episode ends; ours receives them as ``<answer>Left</answer>`` text and returns text plus
the full info dict (state key, position, regret from the exact oracle). Each is timed
in rounds, the side going first turning each round, and the median round counts (wall
and CPU time). Prints both rates and their ratios.
"""

from __future__ import annotations

import statistics
import time

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401  (registers agentenvs/FrozenLake-v0)
from agentenvs.envs.frozenlake.env import format_action

STEPS, REPEATS = 200_000, 5


def run(env: gym.Env, actions: list) -> tuple[float, float]:  # type: ignore[type-arg]
    """Wall and CPU seconds for ``len(actions)`` steps, resets included."""
    env.reset(seed=0)
    step, reset = env.step, env.reset
    start, cpu = time.perf_counter(), time.process_time()
    for action in actions:
        _, _, terminated, truncated, _ = step(action)
        if terminated or truncated:
            reset()
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    moves = np.random.default_rng(0).integers(0, 4, STEPS).tolist()
    texts = [format_action(a) for a in moves]
    theirs = gym.make("FrozenLake-v1", map_name="4x4", is_slippery=True)
    ours = gym.make("agentenvs/FrozenLake-v0", map_name="4x4", is_slippery=True, max_turns=100)
    sides = {"theirs": (theirs, moves), "ours": (ours, texts)}
    times: dict[str, list[tuple[float, float]]] = {"theirs": [], "ours": []}
    for i in range(REPEATS):
        for name in ("theirs", "ours") if i % 2 == 0 else ("ours", "theirs"):
            times[name].append(run(*sides[name]))
    wall = {n: statistics.median(w for w, _ in t) for n, t in times.items()}
    cpu = {n: statistics.median(c for _, c in t) for n, t in times.items()}
    rate_theirs, rate_ours = STEPS / wall["theirs"], STEPS / wall["ours"]
    print(f"{STEPS} random moves on 4x4 slippery, median of {REPEATS} rounds taking turns")
    print(
        f"gymnasium FrozenLake-v1:   {rate_theirs:10,.0f} steps/s  ({1e6 / rate_theirs:5.2f} us/step)"
    )
    print(
        f"agentenvs/FrozenLake-v0:   {rate_ours:10,.0f} steps/s  ({1e6 / rate_ours:5.2f} us/step)"
    )
    print(
        f"ratio (ours / gymnasium):  {rate_ours / rate_theirs:.2f}x wall, "
        f"{cpu['theirs'] / cpu['ours']:.2f}x CPU"
    )


if __name__ == "__main__":
    main()
