"""Step rate of ``agentenvs/FrozenLake-v0`` against Gymnasium's ``FrozenLake-v1``.

Both are built with ``gym.make`` (so both pay their wrappers), on the 4x4 slippery map
with a 100-step limit, and driven by the same seeded random moves, resetting when an
episode ends; ours receives them as ``<answer>Left</answer>`` text and returns text plus
the full info dict (state key, position, regret from the exact oracle). Each is timed
three times, interleaved, and the best run counts. Prints both rates and their ratio.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401  (registers agentenvs/FrozenLake-v0)
from agentenvs.envs.frozenlake.env import format_action

STEPS, REPEATS = 200_000, 3


def run(env: gym.Env, actions: list) -> float:  # type: ignore[type-arg]
    """Seconds for ``len(actions)`` steps, resets included."""
    env.reset(seed=0)
    step, reset = env.step, env.reset
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = step(action)
        if terminated or truncated:
            reset()
    return time.perf_counter() - start


def main() -> None:
    moves = np.random.default_rng(0).integers(0, 4, STEPS).tolist()
    texts = [format_action(a) for a in moves]
    theirs = gym.make("FrozenLake-v1", map_name="4x4", is_slippery=True)
    ours = gym.make("agentenvs/FrozenLake-v0", map_name="4x4", is_slippery=True, max_turns=100)
    best_theirs = best_ours = float("inf")
    for _ in range(REPEATS):
        best_theirs = min(best_theirs, run(theirs, moves))
        best_ours = min(best_ours, run(ours, texts))
    rate_theirs, rate_ours = STEPS / best_theirs, STEPS / best_ours
    print(f"{STEPS} random moves on 4x4 slippery, best of {REPEATS}")
    print(f"gymnasium FrozenLake-v1:   {rate_theirs:10,.0f} steps/s  ({1e6 / rate_theirs:5.2f} us/step)")
    print(f"agentenvs/FrozenLake-v0:   {rate_ours:10,.0f} steps/s  ({1e6 / rate_ours:5.2f} us/step)")
    print(f"ratio (ours / gymnasium):  {rate_ours / rate_theirs:.2f}x")


if __name__ == "__main__":
    main()
