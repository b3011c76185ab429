"""A reset or restore that raises through any wrapper chain changes nothing: not the env,
not a wrapper's generator, budget, counters or log."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from _toy_env import LineWalkEnv

from agentenvs.core.errors import SnapshotError
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot
from agentenvs.wrappers import BudgetMix, InjectError, RecordEpisode
from agentenvs.wrappers.group import GroupEnv


def chain(tmp_path: Path) -> gym.Env:
    env: gym.Env = LineWalkEnv()
    env = InjectError(env, probability=0.3, seed=4)
    env = BudgetMix(env, [2, 3, 50], seed=1)
    return RecordEpisode(env, tmp_path / "log.jsonl")


def live(env: gym.Env) -> tuple[Any, ...]:
    snap = take_snapshot(env)
    inner = env.unwrapped
    return (inner.turn, inner.episode_max_turns, inner.task_id, snap.base, snap.state, snap.wrappers)


BAD_RESETS = [
    {"options": {"task_id": "nope", "max_turns": 100}},
    {"options": {"task_id": "nope"}},
    {"options": {"max_turns": -3}},
    {"options": {"colour": 1}},
    {"options": "task"},
    {"seed": -5},
    {"seed": "x"},
]


@pytest.mark.parametrize("kwargs", BAD_RESETS)
def test_a_failed_reset_through_wrappers_changes_nothing(tmp_path: Path, kwargs: dict) -> None:
    env = chain(tmp_path)
    env.reset(seed=3, options={"max_turns": 3})
    env.step("right")
    before = live(env)
    log = (tmp_path / "log.jsonl").read_bytes()
    with pytest.raises((ValueError, KeyError, TypeError)):
        env.reset(**kwargs)
    assert live(env) == before
    assert (tmp_path / "log.jsonl").read_bytes() == log
    # and the next unseeded reset draws what it would have drawn without the failure
    (tmp_path / "twin").mkdir()
    twin = chain(tmp_path / "twin")
    twin.reset(seed=3, options={"max_turns": 3})
    twin.step("right")
    assert env.reset()[1]["max_turns"] == twin.reset()[1]["max_turns"]


def test_the_issue_example_through_budgetmix() -> None:
    env = BudgetMix(LineWalkEnv(), [7], seed=0)
    env.reset(seed=1, options={"max_turns": 3})
    env.unwrapped.slip = 0.0
    env.step("x")
    with pytest.raises(KeyError):
        env.reset(options={"task_id": "nope", "max_turns": 100})
    turns = []
    for _ in range(2):
        _, _, _, truncated, info = env.step("x")
        turns.append((info["turn"], info["max_turns"], truncated))
    assert turns == [(2, 3, False), (3, 3, True)]


def test_a_budget_sampler_that_fails_changes_nothing() -> None:
    calls = []

    def sampler(rng: Any) -> int:
        calls.append(1)
        return 0 if len(calls) == 2 else int(rng.integers(2, 9))

    env = BudgetMix(LineWalkEnv(), sampler, seed=0)
    env.reset(seed=1)
    before = live(env)
    with pytest.raises(ValueError, match="not a positive integer"):
        env.reset()
    assert live(env) == before


def _with_wrapper_state(snap: Snapshot, index: int, state: Any) -> Snapshot:
    wrappers = list(snap.wrappers)
    wrappers[index] = (wrappers[index][0], state)
    return Snapshot(snap.env_class, snap.version, snap.base, snap.state, tuple(wrappers))


def test_restore_through_wrappers_is_all_or_nothing(tmp_path: Path) -> None:
    env = chain(tmp_path)
    env.reset(seed=3)
    env.step("right")
    good = take_snapshot(env)
    env.step("left")
    before = live(env)
    rec, mix, inj = (w for _, w in good.wrappers)
    bad = [
        _with_wrapper_state(good, 0, {"episode": "x", "turn": 0}),
        _with_wrapper_state(good, 0, None),
        _with_wrapper_state(good, 1, {**mix, "episode_budget": 0}),
        _with_wrapper_state(good, 1, {**mix, "rng": {"bit_generator": "MT19937"}}),
        _with_wrapper_state(good, 2, {**inj, "steps": -1}),
        _with_wrapper_state(good, 2, {}),
        Snapshot(good.env_class, good.version, good.base, good.state, good.wrappers[:2]),
        Snapshot(good.env_class, good.version, good.base, good.state, ("x",)),  # type: ignore[arg-type]
        Snapshot(good.env_class, good.version, {**good.base, "turn": -1}, good.state, good.wrappers),
        Snapshot(good.env_class, good.version, good.base, {"pos": "a"}, good.wrappers),
        "snapshot",
    ]
    for snap in bad:
        with pytest.raises(SnapshotError):
            restore_snapshot(env, snap)  # type: ignore[arg-type]
        assert live(env) == before
    restore_snapshot(env, copy.deepcopy(good))
    assert live(env) != before and take_snapshot(env) == good


def test_group_reset_that_raises_changes_nothing() -> None:
    group = GroupEnv(lambda: BudgetMix(LineWalkEnv(), [4, 5], seed=2), 3)
    group.reset(seed=7)
    group.step({a: "right" for a in group.agents})
    before = ([live(group.rollout_env(a)) for a in group.possible_agents], group.episode_seed, list(group.agents))
    rng = group._rng.bit_generator.state
    with pytest.raises(KeyError):
        group.reset(seed=8, options={"task_id": "nope"})
    with pytest.raises(TypeError):
        group.reset(options={"snapshot": "nope"})
    after = ([live(group.rollout_env(a)) for a in group.possible_agents], group.episode_seed, list(group.agents))
    assert after == before and group._rng.bit_generator.state == rng
    group.close()
