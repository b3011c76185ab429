"""What the OpenEnv, verifiers and GEM adapters cost per step against their sources
called directly, on the same actions in the same run.

- OpenEnv (``agentenvs/OpenEnv-v0``), in process: the test suite's number-guessing
  ``Environment`` stepped with its ``GuessAction`` models, against the adapter, which
  also validates the text into the model, renders the observation as text and keeps the
  replay record; remote: OpenEnv's own ``GenericEnvClient`` on a WebSocket session of
  OpenEnv's server (uvicorn on loopback, in this process) against the adapter on one.
- verifiers (``agentenvs/Verifiers-v0``): the test suite's taskset, its ``Env.run``
  rollout driven by the adapter's own source (each reply handed to ``interaction.turn``)
  against the adapter's step around it (parsing, replay record, info).
- GEM (``agentenvs/GEM-v0``): ``game:GuessTheNumber-v0-hard`` made by ``gem.make``,
  stepped with ``\\boxed{n}`` texts, against the adapter (Python's ``random`` swapped to
  the game's own each step).

Guesses are drawn once; episodes end at the source's end or the budget, then the next
task. Only steps are timed. Rounds alternate the arms; medians of the rounds are
printed with their ratio (adapter / source). The test envs are imported from
``tests/envs``; needs the ``ecosystem`` extra and gem-llm.

Usage: python benchmarks/bench_foreign_adapters.py [--episodes 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "envs"))


def _episodes(
    reset: Callable[[int], None], step: Callable[[int], bool], plan: list[list[int]]
) -> tuple[float, int]:
    spent, steps = 0.0, 0
    for ep, guesses in enumerate(plan):
        reset(ep)
        start = time.perf_counter()
        for g in guesses:
            steps += 1
            if step(g):
                break
        spent += time.perf_counter() - start
    return spent, steps


def _adapter(env: Any, n_tasks: int, text: Callable[[int], str]) -> tuple[Any, Any]:
    def reset(ep: int) -> None:
        env.reset(seed=ep, options={"task_id": str(ep % n_tasks)})

    def step(g: int) -> bool:
        _, _, terminated, truncated, _ = env.step(text(g))
        return terminated or truncated

    return reset, step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    import test_foreign_openenv as oe
    import test_foreign_verifiers as vt
    from openenv.core.generic_client import GenericEnvClient

    from agentenvs.envs.foreign.gem_env import GEMTextEnv
    from agentenvs.envs.foreign.openenv_env import OpenEnvTextEnv
    from agentenvs.envs.foreign.verifiers_env import VerifiersTextEnv

    arms: dict[str, tuple[tuple[Any, Any], tuple[Any, Any], list[list[int]]]] = {}
    closers: list[Callable[[], None]] = []

    # OpenEnv in process
    plan = [[int(x) for x in rng.integers(1, 33, size=6)] for _ in range(args.episodes)]
    source = oe.GuessNumberEnvironment()
    direct = (
        lambda ep: source.reset(seed=ep % 10, episode_id=str(ep)),
        lambda g: source.step(oe.GuessAction(guess=g)).done,
    )
    env = OpenEnvTextEnv(env_class=oe.GuessNumberEnvironment, n_tasks=10, max_turns=6)
    arms["openenv in process"] = (direct, _adapter(env, 10, str), plan)
    closers.append(env.close)

    # OpenEnv behind its server
    server = oe._Server()
    client = GenericEnvClient(base_url=server.url).sync()
    client.connect()
    remote = (
        lambda ep: client.reset(seed=ep % 10, episode_id=str(ep)),
        lambda g: client.step({"guess": g}).done,
    )
    renv = OpenEnvTextEnv(base_url=server.url, n_tasks=10, max_turns=6)
    arms["openenv remote (WebSocket)"] = (remote, _adapter(renv, 10, str), plan)
    closers += [client.close, renv.close, server.stop]

    # verifiers
    venv = VerifiersTextEnv(taskset="test_foreign_verifiers", max_turns=6)
    rollout = venv._make_source()
    n_rows = len(vt.ROWS)
    driven = (
        lambda ep: rollout.start(venv._tasks[ep % n_rows]),
        lambda g: rollout.reply(str(g)) is None,
    )
    arms["verifiers Env.run"] = (driven, _adapter(venv, n_rows, str), plan)
    closers += [rollout.close, venv.close]

    # GEM
    import gem

    gplan = [[int(x) for x in rng.integers(1, 51, size=7)] for _ in range(args.episodes)]
    game = gem.make("game:GuessTheNumber-v0-hard")

    def gem_step(g: int) -> bool:
        _, _, terminated, truncated, _ = game.step(f"\\boxed{{{g}}}")
        return bool(terminated or truncated)

    genv = GEMTextEnv(env_id="game:GuessTheNumber-v0-hard", n_tasks=10, max_turns=7)
    arms["gem GuessTheNumber-v0-hard"] = (
        (lambda ep: game.reset(seed=ep % 10), gem_step),
        _adapter(genv, 10, lambda g: f"\\boxed{{{g}}}"),
        gplan,
    )
    closers.append(genv.close)

    print(f"{'source':30s} {'steps':>6s} {'source us':>10s} {'adapter us':>11s} {'ratio':>6s}")
    try:
        for name, (src, adapted, p) in arms.items():
            src_us, ad_us, n = [], [], 0
            for _ in range(args.rounds):
                spent, n = _episodes(*src, p)
                src_us.append(spent / n * 1e6)
                spent, n_ad = _episodes(*adapted, p)
                ad_us.append(spent / n_ad * 1e6)
            s, a = statistics.median(src_us), statistics.median(ad_us)
            print(f"{name:30s} {n:6d} {s:10.1f} {a:11.1f} {a / s:6.2f}")
    finally:
        for close in closers:
            close()


if __name__ == "__main__":
    main()
