"""What the TextArena and reasoning-gym adapters cost per step against their sources
called directly, on the same actions in the same run.

- TextArena (``agentenvs/TextArena-v0``): each game's bare env, reset with the task's
  seed and stepped with the same texts (moves drawn once, all well-formed), its messages
  taken after each step as a player would (``get_observation``); against the adapter,
  which also renders the messages as text, keeps Python's ``random`` to the game, records
  the action and its digest for replay, and builds the suite's info dict. TicTacToe's
  opponent (``first``) moves on both sides. Episodes run to the game's end, then the
  next task.
- reasoning-gym (``agentenvs/ReasoningGym-v0``): ``extract_answer`` and the dataset's
  ``score_answer`` on each answer against the adapter's step; every answer is wrong, so
  episodes last the budget (10), then the next task.

Rounds alternate the two arms; medians of the rounds are printed with their ratio
(adapter / source: above 1 is the adapter's cost). Needs the ``ecosystem`` extra.

Usage: python benchmarks/bench_foreign_ecosystem.py [--steps 5000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.envs.foreign.reasoning_gym_env import ReasoningGymEnv, extract_answer
from agentenvs.envs.foreign.textarena_env import TextArenaEnv

GAMES: tuple[dict[str, Any], ...] = (
    {"game": "GuessTheNumber-v0"},
    {"game": "TowerOfHanoi-v0"},
    {"game": "TicTacToe-v0", "opponent": "first"},
)
GENERATORS = ("leg_counting", "basic_arithmetic", "spell_backward")
BUDGET = 10


def textarena_moves(kwargs: dict[str, Any], n: int) -> list[str]:
    env = TextArenaEnv(**kwargs)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    moves = []
    for _ in range(n):  # well-formed moves of the game, drawn once for both arms
        moves.append(env.error_action(rng))
        env.step(moves[-1])
        if env.done:
            env.reset()
    env.close()
    return moves


def textarena_source(kwargs: dict[str, Any], moves: list[str]) -> float:
    adapter = TextArenaEnv(**kwargs)
    game, opponent, players = adapter._make_source().env, adapter.opponent, adapter.num_players
    rng = np.random.default_rng(0)
    task = 0
    start = time.perf_counter()
    game.reset(num_players=players, seed=task)
    game.get_observation()
    for move in moves:
        done, _ = game.step(move)
        while not done and opponent is not None and game.state.current_player_id != 0:
            game.get_observation()
            done, _ = game.step(opponent(game, rng))
        game.get_observation()
        if done:
            task += 1
            game.reset(num_players=players, seed=task)
            game.get_observation()
    took = time.perf_counter() - start
    adapter.close()
    return took


def textarena_adapter(kwargs: dict[str, Any], moves: list[str]) -> float:
    env = TextArenaEnv(**kwargs, max_turns=10_000)
    task = 0
    start = time.perf_counter()
    env.reset(seed=0, options={"task_id": str(task)})
    for move in moves:
        _, _, terminated, truncated, _ = env.step(move)
        if terminated or truncated:
            task += 1
            env.reset(options={"task_id": str(task)})
    took = time.perf_counter() - start
    env.close()
    return took


def reasoning_answers(name: str, n: int) -> list[str]:
    env = ReasoningGymEnv(dataset=name, size=1000, max_turns=BUDGET)
    rng = np.random.default_rng(0)
    answers = []
    for i in range(n // BUDGET):
        env.reset(seed=0, options={"task_id": f"{name}/{i % 1000}"})
        answers += [env.error_action(rng) for _ in range(BUDGET)]
    env.close()
    return answers


def reasoning_source(name: str, answers: list[str]) -> float:
    dataset = ReasoningGymEnv(dataset=name, size=1000).datasets[name]
    start = time.perf_counter()
    for i in range(0, len(answers), BUDGET):
        entry = dataset[(i // BUDGET) % 1000]
        for text in answers[i : i + BUDGET]:
            dataset.score_answer(extract_answer(text), entry)
    return time.perf_counter() - start


def reasoning_adapter(name: str, answers: list[str]) -> float:
    env = ReasoningGymEnv(dataset=name, size=1000, max_turns=BUDGET)
    start = time.perf_counter()
    for i in range(0, len(answers), BUDGET):
        env.reset(seed=0, options={"task_id": f"{name}/{(i // BUDGET) % 1000}"})
        for text in answers[i : i + BUDGET]:
            env.step(text)
    took = time.perf_counter() - start
    env.close()
    return took


def report(label: str, src: list[float], ada: list[float], n: int) -> None:
    s, a = statistics.median(src) / n, statistics.median(ada) / n
    print(
        f"{label:28s} source {s * 1e6:8.1f} us/step, adapter {a * 1e6:8.1f} us/step (x{a / s:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for kwargs in GAMES:
        moves = textarena_moves(kwargs, args.steps)
        src, ada = [], []
        for _ in range(args.rounds):
            src.append(textarena_source(kwargs, moves))
            ada.append(textarena_adapter(kwargs, moves))
        report(f"TextArena {kwargs['game']}", src, ada, len(moves))
    for name in GENERATORS:
        answers = reasoning_answers(name, args.steps)
        # both arms generate each entry once: warm the word lists some generators load
        reasoning_source(name, answers[:BUDGET])
        src, ada = [], []
        for _ in range(args.rounds):
            src.append(reasoning_source(name, answers))
            ada.append(reasoning_adapter(name, answers))
        report(f"reasoning-gym {name}", src, ada, len(answers))


if __name__ == "__main__":
    main()
