"""How often an injected FrozenLake error is no error at all (zero regret).

Episodes, one per seed, until ``DRAWS`` of them reach their injection turn: a bundled task (the standard maps), a turn ``k`` in
1..8 and a budget of 8 to 20 turns drawn from the seed; seeded random moves up to turn
``k``, where ``InjectError(turn=k)`` replaces the move. Before that step the exact
oracle's Q of the state is read here, independently of the wrapper, and the injected
move's regret ``max_a Q(s, a) - Q(s, injected)`` is measured from it. Prints the number
of injections, the share with regret at or below ``REGRET_TOL`` (no worse than the best
move), the states where the wrapper found no error to inject, and the redraws it spent.
For comparison, the same share for the env's bare ``error_action`` drawn at the same
states: what the wrapper injected before it checked regrets.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401  (registers agentenvs/FrozenLake-v0)
from agentenvs.core import info as keys
from agentenvs.envs.frozenlake.env import format_action, parse_moves
from agentenvs.wrappers.inject_error import INJECTED_ACTION, InjectError

DRAWS = 10_000
REGRET_TOL = 1e-9


def main() -> None:
    base = gym.make("agentenvs/FrozenLake-v0")
    task_ids = list(base.unwrapped.task_ids)
    base.close()
    injected = zero = unavailable = redraws = bare_zero = 0
    regrets: list[float] = []
    seed = -1
    while injected + unavailable < DRAWS:
        seed += 1
        rng = np.random.default_rng(seed)
        task = task_ids[int(rng.integers(len(task_ids)))]
        turn, budget = int(rng.integers(1, 9)), int(rng.integers(8, 21))
        env = InjectError(gym.make("agentenvs/FrozenLake-v0", max_turns=budget), turn=turn, seed=seed)
        env.reset(seed=seed, options={"task_id": task})
        for step in range(1, turn + 1):
            if step == turn:
                q = env.unwrapped.q_values()
                (bare,) = parse_moves(env.unwrapped.error_action(np.random.default_rng(seed)))
                bare_zero += q.max() - q[bare] <= REGRET_TOL
            _, _, terminated, truncated, info = env.step(format_action(int(rng.integers(4))))
            if terminated or truncated:
                break
        if step == turn:
            redraws += int(info.get("error_redraws", 0))
            if info[keys.ERROR_INJECTED]:
                injected += 1
                (move,) = parse_moves(info[INJECTED_ACTION])
                regret = float(q.max() - q[move])
                regrets.append(regret)
                zero += regret <= REGRET_TOL
            else:
                unavailable += 1
        env.close()
    print(f"episodes reaching the injection turn: {injected + unavailable} of {seed + 1}")
    print(f"bare error_action at those states (unchecked): zero regret {bare_zero} "
          f"({bare_zero / DRAWS:.1%})")
    print(f"injected errors: {injected}; zero regret (<= {REGRET_TOL:g}): {zero} "
          f"({zero / max(injected, 1):.1%})")
    print(f"states with no error to inject (skipped): {unavailable}; redraws: {redraws}")
    if regrets:
        print(f"regret of injected errors: min {min(regrets):.3g}, mean {np.mean(regrets):.3g}")


if __name__ == "__main__":
    main()
