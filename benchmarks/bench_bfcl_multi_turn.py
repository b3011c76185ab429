"""BFCLMultiTurn-v0: gold-policy step rate, and snapshot + restore against ``copy.deepcopy``.

1. Episode steps per second with the ``bfcl_mt/gold`` policy over every bundled entry
   (each user turn: one step with its ground-truth calls, one reply that ends the turn
   and runs the checker), per category, reset included.
2. Mid-episode (after the first user turn), for a small entry and a long-context one:
   ``snapshot()`` + ``restore()`` (both sides' backend instances in one pickle) against
   ``copy.deepcopy`` of the ``gym.make`` env, and the snapshot's pickled size; also the
   cost of the two halves of the snapshot state: pickling the instances vs deep-copying
   them. Prints absolute times and the ratios measured in this run.
"""

from __future__ import annotations

import copy
import pickle
import statistics
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401  (registers agentenvs/BFCLMultiTurn-v0)
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import make_policy

ENV_ID = "agentenvs/BFCLMultiTurn-v0"


def per_call(fn: Callable[[], object], number: int) -> float:
    """The median of five timings, in microseconds per call."""
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) / number * 1e6


def gold_rate(repeats: int = 20) -> None:
    env = gym.make(ENV_ID)
    policy = make_policy("bfcl_mt/gold")
    rng = np.random.default_rng(0)
    by_category: dict[str, list[float]] = {}
    for task_id in env.unwrapped.task_ids:
        category = env.unwrapped.task_set.entries[task_id].category
        steps, start = 0, time.perf_counter()
        for _ in range(repeats):
            obs, info = env.reset(seed=0, options={"task_id": task_id})
            conversation = Conversation(env=env)
            done = False
            while not done:
                _, _, terminated, truncated, info = env.step(policy.act(conversation, rng))
                steps += 1
                done = terminated or truncated
            assert info["success"], task_id
        elapsed = time.perf_counter() - start
        totals = by_category.setdefault(category, [0.0, 0.0])
        totals[0] += steps
        totals[1] += elapsed
    print("Gold policy, every bundled entry (reset included)")
    all_steps = sum(s for s, _ in by_category.values())
    all_time = sum(t for _, t in by_category.values())
    for category, (steps, elapsed) in by_category.items():
        print(f"  {category:<13} {steps / elapsed:9.0f} steps/s")
    print(f"  {'all':<13} {all_steps / all_time:9.0f} steps/s")


def snapshot_cost(task_id: str) -> None:
    env = gym.make(ENV_ID)
    env.reset(seed=0, options={"task_id": task_id})
    inner = env.unwrapped
    policy = make_policy("bfcl_mt/gold")
    rng = np.random.default_rng(0)
    while inner.user_turn == 0:  # play the first user turn
        env.step(policy.act(Conversation(env=env), rng))
    size = len(inner.snapshot().to_bytes())
    instances = (inner._model, inner._gt)

    def snap_restore() -> None:
        inner.restore(inner.snapshot())

    fast = per_call(snap_restore, 2_000)
    deep = per_call(lambda: copy.deepcopy(env), 200)
    pickled = per_call(
        lambda: pickle.loads(pickle.dumps(instances, protocol=pickle.HIGHEST_PROTOCOL)), 2_000
    )
    copied = per_call(lambda: copy.deepcopy(instances), 500)
    print(f"{task_id}, after user turn 0 (snapshot {size} bytes pickled)")
    print(f"  snapshot + restore:                 {fast:9.1f} us")
    print(f"  copy.deepcopy(env):                 {deep:9.1f} us")
    print(f"  ratio deepcopy / snapshot+restore:  {deep / fast:6.1f}x")
    print(
        f"  instances: pickle round trip {pickled:.1f} us, deepcopy {copied:.1f} us "
        f"({copied / pickled:.1f}x)"
    )


def main() -> None:
    gold_rate()
    for task_id in ("multi_turn_base_9", "multi_turn_long_context_1"):
        snapshot_cost(task_id)


if __name__ == "__main__":
    main()
