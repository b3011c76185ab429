"""FrozenLake side by side: TextArena's ``FrozenLake-v0`` vs ``agentenvs/FrozenLake-v0``.

The same games on both sides: game ``g`` is the 4x4 map TextArena draws for seed ``g``
(3 holes, start top left, goal bottom right), which ours plays as the task
``desc:ROW/ROW/..`` (not slippery, 100 turns, as TextArena's), and the same moves: a
seeded random walk that never steps off the grid (TextArena counts a wall as an invalid
move, ours as a move in place), until a hole, the goal or 100 moves. Each side checks
that its game ends on the walk's last move.

Each side is used as its own users use it:
- TextArena, as its documented loop plays a game: ``ta.make`` (with its default
  wrappers), ``reset(num_players=1, seed=g)``, then ``get_observation()`` before each
  move and ``step(text)``, and ``close()`` at the end: one env per game (a reused one
  keeps every past message and renders them all for each observation);
- ours: one ``gym.make`` env (its wrappers included), ``reset(seed=g, options={"task_id":
  ...})`` per game, ``step(text)``, whose return is the next prompt.

"Reset" is what starts (and, for TextArena, ends) a game: ``make`` + ``reset`` + the first
observation + ``close`` for TextArena, ``reset`` for ours. Rounds alternate which side
goes first; each round plays every game on both sides. Prints, per side, the medians
over rounds of steps/s and resets/s (wall), CPU time a step and a reset (this process and
its children, ``resource.getrusage``), and the median of single calls; then the ratios
(median of the rounds' paired ratios). GEM (``gem-llm``) is listed with the reason it is
not measured: its release has no FrozenLake.

Peers come from the ``bench-peers`` extra; a missing one is skipped with the reason.
Usage: python benchmarks/peers/bench_frozenlake.py   (BENCH_GAMES, default 300;
BENCH_ROUNDS, default 5)
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401  (registers agentenvs/FrozenLake-v0)
from agentenvs.envs.frozenlake.env import format_action

GAMES, ROUNDS = int(os.environ.get("BENCH_GAMES", 300)), int(os.environ.get("BENCH_ROUNDS", 5))
MAX_MOVES = 100
#: Gymnasium's action order (left, down, right, up) as (row, col) steps and TextArena words
DELTAS = ((0, -1), (1, 0), (0, 1), (-1, 0))
WORDS = ("[left]", "[down]", "[right]", "[up]")


def cpu() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def walk(grid: list[list[str]], rng: np.random.Generator) -> list[int]:
    """Random moves that stay on the grid, until a hole, the goal or MAX_MOVES."""
    size, (r, c), moves = len(grid), (0, 0), []
    while len(moves) < MAX_MOVES:
        legal = [
            a for a, (dr, dc) in enumerate(DELTAS) if 0 <= r + dr < size and 0 <= c + dc < size
        ]
        a = legal[int(rng.integers(len(legal)))]
        moves.append(a)
        r, c = r + DELTAS[a][0], c + DELTAS[a][1]
        if grid[r][c] in "HG":
            break
    return moves


class Side:
    """One side's timings: per round, wall and CPU of its steps and resets; every call."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rounds: list[dict[str, float]] = []
        self.step_calls: list[float] = []
        self.reset_calls: list[float] = []

    def median(self, key: str) -> float:
        return statistics.median(r[key] for r in self.rounds)


def play_round(side: Side, play: Callable[[int], tuple[list[float], list[float]]]) -> None:
    """Play every game; ``play(g)`` returns (reset call times, step call times)."""
    resets: list[float] = []
    steps: list[float] = []
    c0 = cpu()
    for g in range(GAMES):
        r, s = play(g)
        resets += r
        steps += s
    total_cpu = cpu() - c0
    wall_r, wall_s = sum(resets), sum(steps)
    side.rounds.append({
        "steps/s": len(steps) / wall_s,
        "resets/s": len(resets) / wall_r,
        "wall": wall_r + wall_s,
        "cpu": total_cpu,
        # CPU split between steps and resets by their share of the wall time
        "cpu/step": total_cpu * wall_s / (wall_r + wall_s) / len(steps),
        "cpu/reset": total_cpu * wall_r / (wall_r + wall_s) / len(resets),
        "steps": len(steps),
    })  # fmt: skip
    side.step_calls += steps
    side.reset_calls += resets


def main() -> None:
    try:
        import textarena as ta
    except ImportError as exc:
        print(f"TextArena: skipped ({exc}; pip install 'agentenvs[bench-peers]')")
        print("GEM (gem-llm 0.1.0): not measured, its release has no FrozenLake env")
        return

    def inner(env):  # the game under TextArena's wrappers
        while not hasattr(env, "state") and hasattr(env, "env"):
            env = env.env
        return env

    # the maps TextArena draws, and one walk per map
    maps, walks = [], []
    rng = np.random.default_rng(0)
    for g in range(GAMES):
        env = ta.make("FrozenLake-v0")
        env.reset(num_players=1, seed=g)
        grid = [row[:] for row in inner(env).state.game_state["grid"]]
        env.close()
        rows = ["".join({" ": "F"}.get(cell, cell) for cell in row) for row in grid]
        rows[0] = "S" + rows[0][1:]
        maps.append("desc:" + "/".join(rows))
        walks.append(walk(grid, rng))
    ours_texts = [[format_action(a) for a in w] for w in walks]
    theirs_texts = [[WORDS[a] for a in w] for w in walks]
    ours_env = gym.make("agentenvs/FrozenLake-v0", is_slippery=False, max_turns=MAX_MOVES)

    def ours(g: int) -> tuple[list[float], list[float]]:
        t0 = time.perf_counter()
        ours_env.reset(seed=g, options={"task_id": maps[g]})
        resets = [time.perf_counter() - t0]
        steps, texts = [], ours_texts[g]
        for i, text in enumerate(texts):
            t0 = time.perf_counter()
            _, _, terminated, truncated, _ = ours_env.step(text)
            steps.append(time.perf_counter() - t0)
            if (terminated or truncated) != (i == len(texts) - 1):
                raise RuntimeError(f"ours: game {g} ended at move {i + 1} of {len(texts)}")
        return resets, steps

    def theirs(g: int) -> tuple[list[float], list[float]]:
        t0 = time.perf_counter()
        env = ta.make("FrozenLake-v0")
        env.reset(num_players=1, seed=g)
        env.get_observation()
        start = time.perf_counter() - t0
        steps, texts, done = [], theirs_texts[g], False
        for i, word in enumerate(texts):
            t0 = time.perf_counter()
            done, _ = env.step(word)
            if not done:
                env.get_observation()
            steps.append(time.perf_counter() - t0)
            if done != (i == len(texts) - 1):
                raise RuntimeError(f"TextArena: game {g} ended at move {i + 1} of {len(texts)}")
        t0 = time.perf_counter()
        env.close()
        return [start + time.perf_counter() - t0], steps

    sides = {"ours": Side("agentenvs/FrozenLake-v0"), "theirs": Side("TextArena FrozenLake-v0")}
    plays = {"ours": ours, "theirs": theirs}
    ours(0), theirs(0)  # warm-up: imports, first-call caches
    for k in range(ROUNDS):
        for key in ("ours", "theirs") if k % 2 == 0 else ("theirs", "ours"):
            play_round(sides[key], plays[key])
    ours_env.close()

    o, t = sides["ours"], sides["theirs"]
    moves = sum(len(w) for w in walks)
    print("GEM (gem-llm 0.1.0): not measured, its release has no FrozenLake env")
    print(
        f"{GAMES} games (TextArena's 4x4 maps for seeds 0..{GAMES - 1}, not slippery), {moves} "
        f"moves in all, {ROUNDS} rounds taking turns; medians over rounds; load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(
        f"  {'':26} {'steps/s':>10} {'resets/s':>10} {'CPU/step':>9} {'CPU/reset':>10} "
        f"{'step p50':>9} {'reset p50':>10} {'round wall':>10} {'round CPU':>9}"
    )
    for side in (o, t):
        print(
            f"  {side.name:26} {side.median('steps/s'):10,.0f} {side.median('resets/s'):10,.0f} "
            f"{side.median('cpu/step') * 1e6:7.1f}µs {side.median('cpu/reset') * 1e6:8.1f}µs "
            f"{statistics.median(side.step_calls) * 1e6:7.1f}µs "
            f"{statistics.median(side.reset_calls) * 1e6:8.1f}µs "
            f"{side.median('wall'):9.3f}s {side.median('cpu'):8.3f}s"
        )
    paired = lambda key: statistics.median(  # noqa: E731
        a[key] / b[key] for a, b in zip(o.rounds, t.rounds, strict=True)
    )
    cpu_paired = lambda key: statistics.median(  # noqa: E731
        b[key] / a[key] for a, b in zip(o.rounds, t.rounds, strict=True)
    )
    print(
        f"ratio (ours / TextArena), median of paired rounds: steps/s {paired('steps/s'):.1f}x, "
        f"resets/s {paired('resets/s'):.1f}x; CPU a step {cpu_paired('cpu/step'):.1f}x less, "
        f"a reset {cpu_paired('cpu/reset'):.1f}x less; whole games (wall) "
        f"{cpu_paired('wall'):.1f}x"
    )


if __name__ == "__main__":
    main()
