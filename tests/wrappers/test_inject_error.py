"""InjectError: argument checks, firing at turn k or with probability p, seeding, snapshots."""

from __future__ import annotations

import gymnasium as gym
import pytest
from _toy_env import LineWalkEnv

from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot
from agentenvs.wrappers import INJECTED_ACTION, ORIGINAL_ACTION, InjectError


def fired(env: InjectError, seed: int, steps: int, action: str = "right") -> list[bool]:
    """Which steps the wrapper fired at (an error injected, or none of its candidates an
    error: the toy's "left" that slips into the goal), resetting at episode end."""
    out = []
    _, info = env.reset(seed=seed)
    assert info["error_injected"] is False
    for _ in range(steps):
        _, _, terminated, truncated, info = env.step(action)
        out.append(info["error_injected"] or info.get("error_unavailable", False))
        if terminated or truncated:
            env.reset()
    return out


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, ValueError),
        ({"turn": 1, "probability": 0.5}, ValueError),
        ({"turn": 0}, ValueError),
        ({"turn": 1.0}, ValueError),
        ({"turn": True}, ValueError),
        ({"probability": 1.5}, ValueError),
        ({"probability": -0.1}, ValueError),
        ({"probability": float("nan")}, ValueError),
        ({"probability": "0.5"}, TypeError),
        ({"turn": 2, "seed": -3}, ValueError),
    ],
)
def test_rejects_bad_arguments(kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        InjectError(LineWalkEnv(), **kwargs)


def test_rejects_an_env_without_error_action() -> None:
    class Plain(gym.Env):
        pass

    with pytest.raises(TypeError, match="error_action"):
        InjectError(Plain(), turn=1)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_fires_exactly_at_turn_k(k: int) -> None:
    env = InjectError(LineWalkEnv(max_turns=6), turn=k, seed=0)
    for seed in range(5):
        env.reset(seed=seed, options={"task_id": "line-7"})
        for turn in range(1, 7):
            _, _, terminated, truncated, info = env.step("stay")  # invalid: never ends early
            assert info["turn"] == turn
            unavailable = info.get("error_unavailable", False)
            assert (info["error_injected"] or unavailable) is (turn == k)
            if turn == k and not unavailable:
                assert info[ORIGINAL_ACTION] == "stay"
                assert info[INJECTED_ACTION].strip().lower() == "left"
                assert info["action_valid"] is True  # the env received the error action
                assert env.injections == 1
            else:
                assert INJECTED_ACTION not in info and ORIGINAL_ACTION not in info
            if terminated or truncated:
                break


def test_injected_action_is_what_the_env_would_produce() -> None:
    env = InjectError(LineWalkEnv(), turn=1, seed=4)
    env.reset(seed=2)
    snap = take_snapshot(env)
    _, _, _, _, info = env.step("right")
    # replaying the injected action by hand on the restored env gives the same result
    restore_snapshot(env, snap)
    reference = env.unwrapped
    obs_ref, *_ = reference.step(info[INJECTED_ACTION])
    restore_snapshot(env, snap)
    obs, *_ = env.step("right")
    assert obs == obs_ref


def test_probability_fires_at_about_p_and_is_seeded() -> None:
    a = fired(
        InjectError(LineWalkEnv(max_turns=50), probability=0.3), seed=1, steps=2000, action="stay"
    )
    b = fired(
        InjectError(LineWalkEnv(max_turns=50), probability=0.3), seed=1, steps=2000, action="stay"
    )
    c = fired(
        InjectError(LineWalkEnv(max_turns=50), probability=0.3), seed=2, steps=2000, action="stay"
    )
    assert a == b and a != c
    assert abs(sum(a) / len(a) - 0.3) < 0.04


def test_probability_zero_and_one() -> None:
    assert not any(fired(InjectError(LineWalkEnv(), probability=0.0), seed=0, steps=50))
    assert all(fired(InjectError(LineWalkEnv(), probability=1.0), seed=0, steps=50))


def test_counters_reset_with_each_episode() -> None:
    env = InjectError(LineWalkEnv(max_turns=3), turn=2, seed=0)
    for seed in range(3):
        env.reset(seed=seed)
        flags = [env.step("stay")[4]["error_injected"] for _ in range(3)]
        assert flags == [False, True, False]


def test_snapshot_round_trip_restores_rng_and_counters() -> None:
    env = InjectError(LineWalkEnv(max_turns=40), probability=0.5, seed=3)
    env.reset(seed=5)
    for _ in range(3):
        env.step("stay")
    snap = env.snapshot()
    state = snap.wrappers[0][1]
    assert state["steps"] == 3

    def run(e: InjectError) -> list[tuple]:
        out = []
        for _ in range(10):
            obs, reward, terminated, truncated, info = e.step("stay")
            out.append((obs, info["error_injected"], info.get(INJECTED_ACTION), info["state_key"]))
            if terminated or truncated:
                break
        return out

    first = run(env)
    env.restore(snap)
    assert run(env) == first

    # a fresh wrapped env, restored from bytes, continues identically
    fresh = InjectError(LineWalkEnv(max_turns=40), probability=0.5)
    restore_snapshot(fresh, Snapshot.from_bytes(snap.to_bytes()))
    assert run(fresh) == first


def test_turn_counter_is_restored() -> None:
    env = InjectError(LineWalkEnv(max_turns=6), turn=3, seed=0)
    env.reset(seed=0)
    env.step("stay")
    snap = env.snapshot()
    env.step("stay")
    env.step("stay")  # fires here
    env.restore(snap)
    assert env.step("stay")[4]["error_injected"] is False
    assert env.step("stay")[4]["error_injected"] is True
