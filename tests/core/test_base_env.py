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

    def _check_reset(self, task_id: str, max_turns: int, options: Mapping[str, Any]) -> None:
        target = options.get("target", 2)
        if isinstance(target, bool) or not isinstance(target, int) or target < 1:
            raise ValueError(f"target must be a positive int, got {target!r}")

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        self.value = 0
        self.target = int(options.get("target", self.np_random.integers(2, 4)))
        return f"task {task_id}: reach {self.target}"

    def _check_state(self, state: Any, base: Mapping[str, Any]) -> None:
        value, target = state
        if not (isinstance(value, int) and isinstance(target, int) and 0 <= value <= target):
            raise ValueError(f"not a counter state: {state!r}")

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
    with pytest.raises(SnapshotError, match="not agentenvs snapshot bytes"):
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


# ---------------------------------------------------------------- atomic reset and restore
def _live(env: CounterEnv) -> tuple[Any, ...]:
    """Everything a failed reset or restore must leave alone."""
    return (
        env.task_id, env.turn, env.episode_max_turns, env.turns_left, env.done,
        env.state_key(), env.render() if env.render_mode else None, env._last_obs,
        env.np_random.bit_generator.state, env._get_state(),
    )


@pytest.mark.parametrize(
    "options",
    [
        {"task_id": "nope", "max_turns": 100},
        {"task_id": 7},
        {"max_turns": 0},
        {"max_turns": 2**63},
        {"max_turns": "3"},
        {"target": -1, "max_turns": 100},
        {"colour": "red"},
    ],
)
def test_a_reset_that_raises_changes_nothing(options: dict[str, Any]) -> None:
    env = CounterEnv()
    env.reset(seed=5, options={"max_turns": 3, "target": 9})
    env.step("x")
    before = _live(env)
    with pytest.raises((ValueError, KeyError, TypeError)):
        env.reset(seed=99, options=options)
    assert _live(env) == before
    # the episode goes on as if nothing happened: truncated at 3, not at 100
    _, _, _, trunc, info = env.step("x")
    assert info["turn"] == 2 and info["max_turns"] == 3 and not trunc
    _, _, _, trunc, info = env.step("x")
    assert trunc and info["turns_left"] == 0


def test_a_reset_with_a_bad_seed_changes_nothing() -> None:
    env = CounterEnv()
    env.reset(seed=5, options={"target": 9})
    before = _live(env)
    for seed in (-1, "seed", 1.5):
        with pytest.raises((ValueError, TypeError, gym.error.Error)):
            env.reset(seed=seed)  # type: ignore[arg-type]
        assert _live(env) == before


def test_a_reset_whose_load_fails_puts_back_base_and_rng() -> None:
    class Flaky(CounterEnv):
        fail = False

        def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
            self.np_random.random()  # a draw before the failure must be undone too
            if self.fail:
                raise RuntimeError("service down")
            return super()._load_task(task_id, options)

    env = Flaky()
    env.reset(seed=2, options={"target": 9})
    env.step("+")
    before = _live(env)
    env.fail = True
    with pytest.raises(RuntimeError):
        env.reset()  # unseeded: draws the task from the live generator
    assert _live(env) == before


def _tampered(snap: Snapshot, **base: Any) -> Snapshot:
    return Snapshot(snap.env_class, snap.version, {**snap.base, **base}, snap.state)


def test_restore_is_all_or_nothing_with_one_error() -> None:
    env = CounterEnv()
    env.reset(seed=3, options={"target": 4})
    env.step("+")
    good = env.snapshot()
    env.step("+")
    before = _live(env)
    bad = [
        "not a snapshot",
        Snapshot("x.Y", good.version, good.base, good.state),
        Snapshot(good.env_class, 99, good.base, good.state),
        Snapshot(good.env_class, good.version, {"turn": 1}, good.state),
        Snapshot(good.env_class, good.version, None, good.state),  # type: ignore[arg-type]
        Snapshot(good.env_class, good.version, good.base, ("a", "b")),
        Snapshot(good.env_class, good.version, good.base, None),
        Snapshot(good.env_class, good.version, good.base, (5, 4)),
        _tampered(good, task_id="nope"),
        _tampered(good, task_id=3),
        _tampered(good, turn=-1),
        _tampered(good, turn=True),
        _tampered(good, turn=9, episode_max_turns=5),
        _tampered(good, episode_max_turns=0),
        _tampered(good, turn=5, done=False),
        _tampered(good, done="no"),
        _tampered(good, score="1"),
        _tampered(good, score=float("inf")),
        _tampered(good, score=float("nan")),
        _tampered(good, last_obs=None),
        _tampered(good, rng={"bit_generator": "PCG64"}),
        _tampered(good, rng={"bit_generator": "seed"}),
        _tampered(good, rng=None),
    ]
    for snap in bad:
        with pytest.raises(SnapshotError):
            env.restore(snap)  # type: ignore[arg-type]
        assert _live(env) == before, snap
    env.restore(good)
    assert env.turn == 1 and env.value == 1


def test_restore_puts_the_env_back_when_set_state_fails_half_way() -> None:
    class HalfWay(CounterEnv):
        def _set_state(self, state: Any) -> None:
            self.value = state[0]  # changed before the failure
            if state[1] == 4:
                raise OSError("disk full")
            self.target = state[1]

    env = HalfWay()
    env.reset(seed=3, options={"target": 4})
    env.step("+")
    snap = env.snapshot()
    env.reset(seed=1, options={"target": 3})
    env.step("+")
    env.step("+")
    before = _live(env)
    with pytest.raises(SnapshotError, match="disk full"):
        env.restore(snap)
    assert _live(env) == before


def test_snapshot_bytes_carry_a_checksum() -> None:
    env = CounterEnv()
    env.reset(seed=3, options={"target": 4})
    data = env.snapshot().to_bytes()
    assert Snapshot.from_bytes(data) == env.snapshot()
    rng = np.random.default_rng(0)
    for _ in range(200):
        corrupt = bytearray(data)
        i = int(rng.integers(len(corrupt)))
        corrupt[i] ^= 1 << int(rng.integers(8))
        with pytest.raises(SnapshotError):
            Snapshot.from_bytes(bytes(corrupt))
    for cut in (0, 5, len(data) // 2, len(data) - 1):
        with pytest.raises(SnapshotError):
            Snapshot.from_bytes(data[:cut])
    with pytest.raises(SnapshotError, match="bytes expected"):
        Snapshot.from_bytes("text")  # type: ignore[arg-type]
    # a payload that passes its checksum but is not a Snapshot
    forged = bytearray(data)
    payload = pickle.dumps({"not": "a snapshot"})
    import hashlib

    head = data[: data.index(b"\n") + 1]
    forged = head + hashlib.blake2b(payload, digest_size=32).digest() + payload
    with pytest.raises(SnapshotError, match="not a Snapshot"):
        Snapshot.from_bytes(forged)
