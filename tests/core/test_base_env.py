"""The base env's own contract: budget, options, info keys, order, snapshots, bad input."""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from agentenvs.core import FreeText, Snapshot, SnapshotError, TextEnv, Transition
from agentenvs.core.errors import UnknownTaskError


class CounterEnv(TextEnv):
    """Count up to a target drawn at reset; "+" adds one, anything else is invalid."""

    default_max_turns = 5
    extra_options = frozenset({"target"})

    @property
    def task_ids(self) -> list[str]:
        return ["a", "b"]

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        self.value = 0
        self.target = int(options.get("target", self.np_random.integers(2, 4)))
        return f"task {task_id}: reach {self.target}"

    def _apply(self, action: str) -> Transition:
        if action.strip() != "+":
            return Transition("say +", action_valid=False)
        self.value += 1
        done = self.value >= self.target
        return Transition(
            f"value {self.value}", reward=float(done), terminated=done, success=done,
            score=self.value / self.target,
        )

    def _get_state(self) -> Any:
        return (self.value, self.target)

    def _set_state(self, state: Any) -> None:
        self.value, self.target = state

    def _state_key(self) -> str:
        return f"{self.value}/{self.target}"

    def error_action(self, rng: np.random.Generator) -> str:
        return "-"


def test_info_keys_and_budget_override() -> None:
    env = CounterEnv(max_turns=3)
    obs, info = env.reset(seed=1, options={"task_id": "b", "max_turns": 2, "target": 9})
    assert obs == "task b: reach 9"
    assert info["max_turns"] == 2 and info["turns_left"] == 2 and info["turn"] == 0
    _, _, term, trunc, info = env.step("+")
    assert (term, trunc, info["turns_left"]) == (False, False, 1)
    _, _, term, trunc, info = env.step("+")
    assert (term, trunc, info["turns_left"], info["turn"]) == (False, True, 0, 2)
    # the next episode goes back to the make-time budget
    _, info = env.reset(seed=1)
    assert info["max_turns"] == 3


def test_visible_budget_and_invalid_action() -> None:
    env = CounterEnv(show_budget=True)
    obs, _ = env.reset(seed=0, options={"task_id": "a", "target": 3})
    assert obs.endswith("[5 turns left]")
    obs, reward, _, _, info = env.step(None)  # type: ignore[arg-type]
    assert "expected text" in obs and not info["action_valid"] and reward == 0.0
    obs, _, _, _, info = env.step("x" * (env.max_action_chars + 1))
    assert "over the limit" in obs and not info["action_valid"]
    assert obs.endswith("[3 turns left]")


def test_options_validated() -> None:
    env = CounterEnv()
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"budget": 3})
    with pytest.raises(ValueError, match="positive integer"):
        env.reset(options={"max_turns": 0})
    with pytest.raises(UnknownTaskError, match="unknown task_id"):
        env.reset(options={"task_id": "zzz"})
    with pytest.raises(ValueError, match="positive integer"):
        CounterEnv(max_turns=True)  # type: ignore[arg-type]


def test_step_before_reset_and_after_end() -> None:
    env = CounterEnv()
    with pytest.raises(gym.error.ResetNeeded):
        env.step("+")
    env.reset(seed=0, options={"target": 2})
    env.step("+")
    _, _, term, _, info = env.step("+")
    assert term and info["success"] and info["score"] == 1.0
    with pytest.raises(gym.error.ResetNeeded):
        env.step("+")


def test_snapshot_roundtrip_and_class_check() -> None:
    env = CounterEnv()
    env.reset(seed=3, options={"target": 3})
    env.step("+")
    snap = Snapshot.from_bytes(env.snapshot().to_bytes())
    first = env.step("+")
    fresh = CounterEnv()
    fresh.restore(snap)
    assert fresh.step("+") == first
    assert fresh.state_key() == env.state_key()

    class Other(CounterEnv):
        pass

    with pytest.raises(SnapshotError, match="cannot be restored"):
        Other().restore(snap)
    with pytest.raises(SnapshotError, match="call reset"):
        CounterEnv().snapshot()
    with pytest.raises(SnapshotError, match="cannot decode"):
        Snapshot.from_bytes(b"not a pickle")


def test_score_action_does_not_advance() -> None:
    env = CounterEnv()
    env.reset(seed=0, options={"target": 2})
    key, turn = env.state_key(), env.turn
    assert env.score_action("+") == 0.5
    assert env.score_action("?") == 0.0
    assert (env.state_key(), env.turn) == (key, turn)


def test_free_text_space() -> None:
    space = FreeText(10, seed=0)
    assert space.contains("abc") and not space.contains("x" * 11) and not space.contains(3)
    samples = [space.sample() for _ in range(20)]
    assert all(space.contains(s) for s in samples)
    assert pickle.loads(pickle.dumps(space)) == space
