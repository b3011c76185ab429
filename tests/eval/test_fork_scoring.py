"""Step quality's scoring in forks gives the numbers of restoring before each scoring."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.core.snapshot import restore_snapshot, take_snapshot
from agentenvs.eval.step_quality import score_from_state


def _sequential(env: gym.Env, snap, actions):  # type: ignore[no-untyped-def]
    """The path step quality took before forks: restore, score, for each action."""
    out = []
    for action in actions:
        restore_snapshot(env, snap)
        out.append(float(env.unwrapped.score_action(action)))
    restore_snapshot(env, snap)
    return out


def _actions(env: gym.Env, n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    inner = env.unwrapped
    found = [inner.error_action(rng) for _ in range(n // 2)]
    extra = {
        "agentenvs/FrozenLake-v0": ["Left", "Down", "Right", "Up", "jump"],
        "agentenvs/BFCL-v0": [inner.gold_reply() if hasattr(inner, "gold_reply") else "[]", "[]"],
        "agentenvs/InterCodeSQL-v0": [
            getattr(inner, "gold_query", "SELECT 1"),
            "SELECT 1",
            "DELETE FROM singer",
            "submit",
        ],
    }.get(inner.spec.id if inner.spec else "", [])
    return [*found, *extra] * 2  # repeats: equal texts are scored once


@pytest.mark.parametrize(
    "env_id",
    [
        "agentenvs/FrozenLake-v0",
        "agentenvs/BFCL-v0",
        "agentenvs/InterCodeSQL-v0",
        "agentenvs/DeepCoderMT-v0",
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_fork_scoring_equals_the_sequential_restores(env_id: str, seed: int) -> None:
    env = gym.make(env_id)
    env.reset(seed=seed)
    if not env.unwrapped.done and env_id.endswith("FrozenLake-v0"):
        env.step("Down")
    snap = take_snapshot(env)
    actions = _actions(env, 16, seed)
    expected = _sequential(env, snap, actions)
    for concurrency in (1, 4, None):
        got = score_from_state(env, snap, actions, concurrency=concurrency)
        assert got == expected, (concurrency, got, expected)
        assert take_snapshot(env).base == snap.base  # the env is left at the state
    env.close()
