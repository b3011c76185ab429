"""The copy path of fork(k): each child's RNG and spaces are its own, in the parent's state."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.testing import CHECKS, check_env_contract

FORK_CHECKS = {"fork_equivalence", "fork_independence", "fork_close"}
# DeepCoder-MT's fork is checked in tests/envs/test_fork_envs.py: a contract run of it
# earlier in the process left that test's parent without a sandbox to compare with
COPIED = [
    "agentenvs/FrozenLake-v0",
    "agentenvs/BFCL-v0",
    "agentenvs/BFCLMultiTurn-v0",
    "agentenvs/InterCodeSQL-v0",
]


def test_each_child_draws_as_the_parent_would_and_alone() -> None:
    env = gym.make("agentenvs/FrozenLake-v0").unwrapped
    env.reset(seed=5)
    env.action_space.seed(11)  # a seeded space: its generator is state to copy
    kids = env.fork(3)
    expected_draws = env.np_random.integers(0, 1 << 30, size=4).tolist()
    expected_sample = env.action_space.sample()
    for kid in kids:
        assert kid.np_random is not env.np_random
        assert kid.np_random.bit_generator is not env.np_random.bit_generator
        assert kid.action_space is not env.action_space
        assert kid.observation_space is not env.observation_space
        assert kid.action_space == env.action_space
        assert kid.np_random.integers(0, 1 << 30, size=4).tolist() == expected_draws
        assert kid.action_space.sample() == expected_sample
    # drawing in one child moved no sibling
    kids[0].np_random.random(100)
    kids[0].action_space.sample()
    assert kids[1].np_random.bit_generator.state == kids[2].np_random.bit_generator.state
    assert kids[1].action_space.sample() == kids[2].action_space.sample()
    for kid in kids:
        kid.close()
    env.close()


def test_a_child_of_an_unsampled_space_samples_from_its_own_generator() -> None:
    env = gym.make("agentenvs/BFCL-v0").unwrapped
    env.reset(seed=0)
    kid = env.fork(1)[0]
    kid.observation_space.sample()
    assert kid.observation_space.np_random is not None
    assert env.observation_space._np_random is None  # the parent's space was never touched
    kid.close()
    env.close()


@pytest.mark.parametrize("env_id", COPIED)
def test_the_contracts_fork_checks_pass(env_id: str) -> None:
    report = check_env_contract(
        env_id, raise_on_failure=False, check_processes=False, skip=set(CHECKS) - FORK_CHECKS
    )
    assert all(report.result(n).passed for n in FORK_CHECKS), report.summary()
