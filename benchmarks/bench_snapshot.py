"""Snapshot + restore of a FrozenLake env against ``copy.deepcopy`` of the env.

For the 4x4 and 8x8 maps, mid-episode: the time of ``snapshot()`` followed by
``restore()`` (the way search and step scoring use them), against ``copy.deepcopy`` of
the ``gym.make`` env, the naive way to save a state. Also the pickled snapshot's size
and a bytes round trip (``to_bytes``/``from_bytes`` + restore), the cost of sending a
state to another process. Prints absolute times and the ratios measured in this run.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable

import gymnasium as gym

import agentenvs  # noqa: F401  (registers agentenvs/FrozenLake-v0)
from agentenvs.core import Snapshot


def per_call(fn: Callable[[], object], number: int) -> float:
    """The median of five timings, in microseconds per call."""
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) / number * 1e6


def measure(map_name: str) -> None:
    env = gym.make("agentenvs/FrozenLake-v0", map_name=map_name, max_turns=100)
    env.reset(seed=0)
    for move in ("Right", "Right", "Down"):
        env.step(move)
    inner = env.unwrapped
    size = len(inner.snapshot().to_bytes())

    def snap_restore() -> None:
        inner.restore(inner.snapshot())

    def bytes_round_trip() -> None:
        inner.restore(Snapshot.from_bytes(inner.snapshot().to_bytes()))

    fast = per_call(snap_restore, 20_000)
    wire = per_call(bytes_round_trip, 20_000)
    deep = per_call(lambda: copy.deepcopy(env), 500)
    print(f"FrozenLake {map_name}, mid-episode (snapshot {size} bytes pickled)")
    print(f"  snapshot + restore:                {fast:8.2f} us")
    print(f"  snapshot -> bytes -> restore:      {wire:8.2f} us")
    print(f"  copy.deepcopy(env):                {deep:8.2f} us")
    print(
        f"  ratio deepcopy / snapshot+restore: {deep / fast:6.1f}x (via bytes: {deep / wire:.1f}x)"
    )


def main() -> None:
    for map_name in ("4x4", "8x8"):
        measure(map_name)


if __name__ == "__main__":
    main()
