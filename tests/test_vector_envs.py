"""Every registered env runs in Gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv``.

Free-text observations and actions batch as tuples of ``str`` (``FreeText`` registers
its batching with ``gymnasium.vector.utils``), so no ``observation_mode`` is needed;
``AsyncVectorEnv`` takes ``shared_memory=False``. Each vector env is checked step by
step against single envs driven by hand with the same seeds and actions and the same
autoreset rule: observations, rewards, episode ends and the batched info dicts must
match exactly, including the step that starts the next episode.

The actions are fixed text ("garbage", "submit", ...), so a 2-turn budget ends every
episode quickly and no candidate program reaches a sandbox.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from _services import env_id_params
from gymnasium.spaces import Tuple
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from agentenvs.core import FreeText
from agentenvs.core import info as keys
from agentenvs.core.errors import SandboxError, ServiceUnavailable

MAX_TURNS = 2
SEEDS = [11, 12]
#: cycled: invalid everywhere, a submission for SQL, a FrozenLake move
ACTIONS = ["garbage", "submit", "Left", "garbage"]
STEPS = 3 * MAX_TURNS + 1  # at least two episode ends and the restarts after them


def env_fn(env_id: str) -> Callable[[], gym.Env]:
    def make() -> gym.Env:
        import agentenvs  # noqa: F401 - registers the ids in a spawned worker

        return gym.make(env_id, max_turns=MAX_TURNS)

    return make


def make_or_skip(env_id: str) -> gym.Env:
    try:
        return env_fn(env_id)()
    except (ServiceUnavailable, SandboxError) as exc:
        pytest.skip(f"{env_id} needs a service that is not available here: {exc}")


class HandDriven:
    """Single envs with the vector env's autoreset rule, applied by hand."""

    def __init__(self, env_id: str, mode: AutoresetMode) -> None:
        self.envs = [env_fn(env_id)() for _ in SEEDS]
        self.mode = mode
        self.needs_reset = [False] * len(SEEDS)

    def reset(self) -> list[tuple[str, dict[str, Any]]]:
        self.needs_reset = [False] * len(SEEDS)
        return [env.reset(seed=seed) for env, seed in zip(self.envs, SEEDS, strict=True)]

    def step(self, action: str) -> list[tuple[str, float, bool, bool, dict[str, Any], Any]]:
        out = []
        for i, env in enumerate(self.envs):
            final = None
            if self.mode == AutoresetMode.NEXT_STEP and self.needs_reset[i]:
                observation, info = env.reset()
                reward, terminated, truncated = 0.0, False, False
                self.needs_reset[i] = False
            else:
                observation, reward, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    if self.mode == AutoresetMode.SAME_STEP:
                        final = (observation, info)
                        observation, info = env.reset()
                    else:
                        self.needs_reset[i] = True
            out.append((observation, reward, terminated, truncated, info, final))
        return out

    def close(self) -> None:
        for env in self.envs:
            env.close()


def assert_batched_info(infos: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    for key in keys.STANDARD_KEYS:
        assert infos[f"_{key}"].tolist() == [True] * len(expected), key
        assert list(infos[key]) == [info[key] for info in expected], key
    # benchmark-specific keys are batched too, masked where an env lacks them
    for i, info in enumerate(expected):
        for key, value in info.items():
            if isinstance(value, str | bool | int | float) and not isinstance(value, dict):
                assert infos[f"_{key}"][i] and infos[key][i] == value, key


def make_vector(kind: str, env_id: str, mode: AutoresetMode) -> gym.vector.VectorEnv:
    fns = [env_fn(env_id) for _ in SEEDS]
    if kind == "sync":
        return SyncVectorEnv(fns, autoreset_mode=mode)
    return AsyncVectorEnv(fns, shared_memory=False, autoreset_mode=mode)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=str)
@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("env_id", env_id_params())
def test_vector_env_matches_single_envs(env_id: str, kind: str, mode: AutoresetMode) -> None:
    make_or_skip(env_id).close()
    vector = make_vector(kind, env_id, mode)
    reference = HandDriven(env_id, mode)
    try:
        single = reference.envs[0]
        assert vector.single_observation_space == single.observation_space
        assert vector.single_action_space == single.action_space
        assert isinstance(vector.observation_space, Tuple)
        assert all(isinstance(s, FreeText) for s in vector.observation_space.spaces)
        assert vector.action_space.contains(vector.action_space.sample())
        assert vector.metadata["autoreset_mode"] == mode

        observations, infos = vector.reset(seed=SEEDS)
        expected = reference.reset()
        assert observations == tuple(obs for obs, _ in expected)
        assert vector.observation_space.contains(observations)
        assert_batched_info(infos, [info for _, info in expected])

        ends = restarts = 0
        for t in range(STEPS):
            action = ACTIONS[t % len(ACTIONS)]
            observations, rewards, terminated, truncated, infos = vector.step((action, action))
            expected = reference.step(action)
            assert observations == tuple(e[0] for e in expected)
            assert rewards.tolist() == [e[1] for e in expected]
            assert terminated.tolist() == [e[2] for e in expected]
            assert truncated.tolist() == [e[3] for e in expected]
            assert_batched_info(infos, [e[4] for e in expected])
            for i, (_, _, term, trunc, info, final) in enumerate(expected):
                ends += term or trunc
                # a new episode starts: turn 0 and the task's opening observation
                restarted = info[keys.TURN] == 0
                restarts += restarted
                if mode == AutoresetMode.NEXT_STEP:
                    assert "final_obs" not in infos
                    if restarted:
                        assert (rewards[i], terminated[i], truncated[i]) == (0.0, False, False)
                elif final is not None:
                    assert restarted and (term or trunc)
                    assert infos["_final_obs"][i] and infos["final_obs"][i] == final[0]
                    final_info = infos["final_info"]
                    assert final_info[keys.TURN][i] == final[1][keys.TURN] >= 1
                    assert final_info[keys.STATE_KEY][i] == final[1][keys.STATE_KEY]
                else:
                    assert not infos.get("_final_obs", np.zeros(len(SEEDS), bool))[i]
        assert ends >= len(SEEDS) and restarts >= len(SEEDS)
    finally:
        # after a failed step an async env still waits for its workers: kill them
        vector.close(terminate=sys.exc_info()[0] is not None)
        reference.close()


def test_async_shared_memory_is_refused_with_gymnasiums_hint() -> None:
    with pytest.raises(ValueError, match="shared_memory=False"):
        AsyncVectorEnv([env_fn("agentenvs/FrozenLake-v0")] * 2)


def test_free_text_batching_mirrors_text() -> None:
    from gymnasium.vector.utils import (
        batch_differing_spaces,
        batch_space,
        concatenate,
        create_empty_array,
        iterate,
    )

    space = FreeText(max_length=50, seed=3)
    batched = batch_space(space, 3)
    assert batched == Tuple([FreeText(50)] * 3)
    first = batched.sample()
    assert len(first) == 3 and all(isinstance(s, str) for s in first)
    assert batch_space(space, 3).sample() == first  # seeded from the space, reproducibly
    assert create_empty_array(space, 2) == ("", "")
    assert concatenate(space, ["a", "b"], create_empty_array(space, 2)) == ("a", "b")
    assert list(iterate(batched, ("x", "y", "z"))) == ["x", "y", "z"]
    differing = batch_differing_spaces([FreeText(5), FreeText(9)])
    assert [s.max_length for s in differing.spaces] == [5, 9]


def info_shapes(env_id: str, seeds: int = 12) -> list[dict[str, Any]]:
    """One info dict per distinct (key, type) layout seen over resets and fixed actions."""
    env = make_or_skip(env_id)
    seen: dict[tuple, dict[str, Any]] = {}
    try:
        for seed in range(seeds):
            _, info = env.reset(seed=seed)
            infos = [info]
            for action in ACTIONS:
                _, _, terminated, truncated, info = env.step(action)
                infos.append(info)
                if terminated or truncated:
                    break
            for info in infos:
                seen.setdefault(tuple(sorted((k, type(v).__name__) for k, v in info.items())), info)
    finally:
        env.close()
    return list(seen.values())


@pytest.mark.parametrize("env_id", env_id_params())
def test_infos_batch_whichever_env_comes_first(env_id: str) -> None:
    """Gymnasium types a batched info key by the first env that reports it: an int
    array cannot take ``None``, an array cannot take a dict. So a key's values keep one
    kind (optional values are left out, and masked, rather than ``None``)."""
    from gymnasium.vector import VectorEnv

    batcher = type("Batcher", (), {"num_envs": 2, "_add_info": VectorEnv._add_info})()
    shapes = info_shapes(env_id)
    for first in shapes:
        for second in shapes:
            batched = batcher._add_info(batcher._add_info({}, first, 0), second, 1)
            for key in set(first) & set(second):
                if not isinstance(first[key], dict):
                    assert batched[key][0] == first[key] and batched[key][1] == second[key], key
