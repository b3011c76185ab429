"""FrozenLake side by side: TextArena's ``FrozenLake-v0`` vs ``agentenvs/FrozenLake-v0``.

Both on a deterministic 4x4 lake (TextArena's: 3 random holes; ours: a seeded random 4x4
map, ``is_slippery=False``), driven by the same seeded random moves as text, resetting
when an episode ends. TextArena is driven the way its users drive it (``ta.make`` with
its default wrappers; ``get_observation()`` for each next prompt, ``step(text)``); ours
through ``gym.make`` (its wrappers included), whose ``step`` returns the next prompt.
Prints steps/s and resets/s of each and the ratios. The counts are small because a
reused TextArena env slows down as it is used (about 2,800 steps/s over 300 moves,
760 over 3,000 on the same machine), so more work would only widen the ratio. GEM (``gem-llm``) is listed with the
reason it is not measured: its release has no FrozenLake.

Peers come from the ``bench-peers`` extra; a missing one is skipped with the reason.
"""

from __future__ import annotations

import os
import time

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401  (registers agentenvs/FrozenLake-v0)
from agentenvs.envs.frozenlake.env import format_action

STEPS, RESETS, REPEATS = int(os.environ.get("BENCH_STEPS", 2_000)), 300, 3
WORDS = ("[left]", "[down]", "[right]", "[up]")  # Gymnasium's action order


def best(fn, repeats: int = REPEATS) -> float:
    return min(fn() for _ in range(repeats))


def main() -> None:
    moves = np.random.default_rng(0).integers(0, 4, STEPS).tolist()
    ours = gym.make("agentenvs/FrozenLake-v0", size=4, is_slippery=False, max_turns=100)
    texts = [format_action(a) for a in moves]

    def ours_steps() -> float:
        ours.reset(seed=0)
        start = time.perf_counter()
        for i, text in enumerate(texts):
            _, _, terminated, truncated, _ = ours.step(text)
            if terminated or truncated:
                ours.reset(seed=i)
        return time.perf_counter() - start

    def ours_resets() -> float:
        start = time.perf_counter()
        for i in range(RESETS):
            ours.reset(seed=i)
        return time.perf_counter() - start

    rows = [("agentenvs/FrozenLake-v0", STEPS / best(ours_steps), RESETS / best(ours_resets))]
    try:
        import textarena as ta
    except ImportError as exc:
        print(f"TextArena: skipped ({exc}; pip install 'agentenvs[bench-peers]')")
    else:
        theirs = ta.make("FrozenLake-v0")
        words = [WORDS[a] for a in moves]

        def theirs_steps() -> float:
            theirs.reset(num_players=1, seed=0)
            theirs.get_observation()
            start = time.perf_counter()
            for i, word in enumerate(words):
                done, _ = theirs.step(word)
                if done:
                    theirs.close()
                    theirs.reset(num_players=1, seed=i)
                theirs.get_observation()
            return time.perf_counter() - start

        def theirs_resets() -> float:
            start = time.perf_counter()
            for i in range(RESETS):
                theirs.reset(num_players=1, seed=i)
                theirs.get_observation()
            return time.perf_counter() - start

        rows.append(
            ("TextArena FrozenLake-v0", STEPS / best(theirs_steps), RESETS / best(theirs_resets))
        )
    print("GEM (gem-llm 0.1.0): not measured, its release has no FrozenLake env")
    print(f"{STEPS} random moves (4x4, not slippery) and {RESETS} resets, best of {REPEATS}")
    for name, sps, rps in rows:
        print(f"  {name:26} {sps:10,.0f} steps/s  {rps:10,.0f} resets/s")
    if len(rows) == 2:
        (_, o_s, o_r), (_, t_s, t_r) = rows
        print(f"ratio (ours / TextArena): steps {o_s / t_s:.1f}x, resets {o_r / t_r:.1f}x")


if __name__ == "__main__":
    main()
