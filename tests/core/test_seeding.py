"""A seeded reset's generator is Gymnasium's: the same draws, seed and seed sequence."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils import seeding

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core import rng as rng_module
from agentenvs.core.rng import seeded_rng

SEEDS = [*range(300), 2**31 - 1, 2**32, 2**63 + 5, 2**64 + 3, 10**30]


def test_seeded_rng_is_gymnasiums_over_many_seeds() -> None:
    for seed in SEEDS * 2:  # twice: the second time from the memo of seed words
        ours, our_seed = seeded_rng(seed)
        theirs, their_seed = seeding.np_random(seed)
        assert our_seed == their_seed == seed
        assert type(ours.bit_generator) is type(theirs.bit_generator)
        assert ours.bit_generator.state == theirs.bit_generator.state
        assert ours.random(8).tolist() == theirs.random(8).tolist()
        assert ours.integers(0, 2**62, 4).tolist() == theirs.integers(0, 2**62, 4).tolist()


def test_seed_sequence_reads_and_spawns_as_gymnasiums() -> None:
    ours, _ = seeded_rng(77)
    theirs, _ = seeding.np_random(77)
    ours_seq, theirs_seq = ours.bit_generator.seed_seq, theirs.bit_generator.seed_seq
    assert repr(ours_seq) == repr(theirs_seq)
    assert ours_seq.entropy == theirs_seq.entropy == 77
    assert ours_seq.pool.tolist() == theirs_seq.pool.tolist()
    assert ours_seq.generate_state(4, np.uint64).tolist() == theirs_seq.generate_state(
        4, np.uint64
    ).tolist()
    assert [g.random() for g in ours.spawn(3)] == [g.random() for g in theirs.spawn(3)]
    assert [g.random() for g in ours.spawn(2)] == [g.random() for g in theirs.spawn(2)]
    assert ours_seq.n_children_spawned == theirs_seq.n_children_spawned == 5


def test_two_generators_of_one_seed_share_nothing() -> None:
    a, _ = seeded_rng(5)
    b, _ = seeded_rng(5)
    a.random(100)
    a.bit_generator.seed_seq.spawn(4)
    assert b.random() == seeding.np_random(5)[0].random()
    assert b.bit_generator.seed_seq.n_children_spawned == 0


def test_pickled_and_copied_generators_hold_a_plain_seed_sequence() -> None:
    ours, _ = seeded_rng(9)
    ours.random(3)
    for made in (pickle.loads(pickle.dumps(ours)), copy.deepcopy(ours)):
        assert type(made.bit_generator.seed_seq) is np.random.SeedSequence
        assert made.bit_generator.seed_seq.entropy == 9
        assert made.bit_generator.state == ours.bit_generator.state


@pytest.mark.parametrize("seed", [-1, 1.5, np.int64(3), "7", True])
def test_bad_seeds_fail_or_pass_as_in_gymnasium(seed: object) -> None:
    try:
        expected = seeding.np_random(seed)  # type: ignore[arg-type]
    except Exception as exc:
        with pytest.raises(type(exc), match="Seed must be"):
            seeded_rng(seed)  # type: ignore[arg-type]
    else:
        got = seeded_rng(seed)  # type: ignore[arg-type]
        assert got[1] == expected[1]
        assert got[0].bit_generator.state == expected[0].bit_generator.state


def test_the_memo_is_bounded() -> None:
    for seed in range(10**9, 10**9 + rng_module._SEED_WORDS_MAX + 10):
        seeded_rng(seed)
    assert len(rng_module._SEED_WORDS) <= rng_module._SEED_WORDS_MAX


def test_env_reset_draws_as_gymnasium_seeding_would() -> None:
    env = gym.make("agentenvs/FrozenLake-v0", map_name="8x8").unwrapped
    for seed in (0, 1, 2, 123456789, 2**70):
        env.reset(seed=seed)
        expected, _ = seeding.np_random(seed)
        expected.integers(1)  # the task draw (one task)
        expected.random()  # the start-cell draw
        assert env.np_random.bit_generator.state == expected.bit_generator.state
        assert env.np_random_seed == seed
        env.step("Right")
        expected.random()
        assert env.np_random.random() == expected.random()


def test_a_failed_seeded_reset_keeps_the_old_generator_and_its_state() -> None:
    env = gym.make("agentenvs/FrozenLake-v0", map_name="4x4").unwrapped
    env.reset(seed=3)
    env.step("Down")
    before, state = env.np_random, env.np_random.bit_generator.state
    with pytest.raises(ValueError):
        env.reset(seed=4, options={"max_turns": 0})
    with pytest.raises(gym.error.Error):
        env.reset(seed=-4)
    assert env.np_random is before and env.np_random.bit_generator.state == state
    assert env.np_random_seed == 3
