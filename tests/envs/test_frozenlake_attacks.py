"""Answers a reward-maximizing policy would try on FrozenLake, through ``gym.make`` and ``step``.

None moves the player in a way its text does not name: several moves where one is
allowed, move words inside prose, or garbage are invalid actions that spend the turn and
leave the player where it was; the observation shows only what Gymnasium's env shows
(the grid and what the move did), never the oracle's values.
"""

from __future__ import annotations

import re

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids


def _env(**kwargs: object) -> gym.Env:
    return gym.make("agentenvs/FrozenLake-v0", map_name="4x4", max_turns=20, **kwargs)


INVALID = [
    "Left Down",
    "Left || Down",
    "Left, Down",
    "<answer>Left || Down || Right || Up</answer>",
    "I will go Left",
    "Down, because Left is a hole",
    "<answer>go Down</answer>",
    "14",
    "0",
    "5",
    "LeftDown",
    "Left" * 40,
    "",
    "\x00",
    "<answer></answer>",
    "<answer>" + "Down " * 100_000 + "</answer>",
]


@pytest.mark.parametrize("answer", INVALID, ids=[repr(a[:30]) for a in INVALID])
def test_answers_that_name_no_single_move_are_invalid_and_never_move(answer: str) -> None:
    env = _env()
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(answer)
    assert info["action_valid"] is False and reward == 0.0 and not terminated
    assert info["position"] == (0, 0) and info["turn"] == 1  # the turn is spent
    assert "Invalid action" in obs


VALID = [
    ("LEFT", "Left"),
    ("down", "Down"),
    ("<answer>Right</answer>", "Right"),
    ("<ANSWER>up</ANSWER>", "Up"),
    ("<answer>Left</answer> then <answer>Down</answer>", "Down"),  # the last tag counts
    ("<answer>Left</answer> or maybe <answer>Down", "Down"),
    ("3", "Right"),
    ("(D).", "Down"),
]


@pytest.mark.parametrize(("answer", "move"), VALID)
def test_valid_answers_make_exactly_one_move(answer: str, move: str) -> None:
    env = _env()
    env.reset(seed=0)
    *_, info = env.step(answer)
    assert info["action_valid"] is True and info["last_action"] == move


def test_more_moves_than_allowed_are_refused_whatever_the_budget() -> None:
    env = _env(actions_per_turn=2)
    env.reset(seed=0)
    *_, info = env.step("<answer>Down || Down || Right</answer>")
    assert info["action_valid"] is False and info["position"] == (0, 0)
    *_, info = env.step("<answer>Down || Down</answer>")
    assert info["action_valid"] is True and info["last_action"] == "Down || Down"


def test_observations_show_no_oracle_value() -> None:
    env = _env()
    obs, info = env.reset(seed=0)
    fl = env.unwrapped
    values = [fl.optimal_success_probability(), *fl.q_values().tolist()]
    numbers = {float(x) for x in re.findall(r"\d+\.\d+", obs)}
    # the rules state the slip probabilities (as Gymnasium's docs do), nothing else
    assert numbers <= {0.333}, numbers
    assert not any(round(v, 3) in numbers for v in values if v not in (0.0, 1.0))
    assert not {"q_values", "value", "optimal", "reachable"} & set(info)
    for _ in range(5):
        obs, _, terminated, _, info = env.step("Down")
        assert not re.search(r"\d\.\d", obs) and "probab" not in obs.lower()
        if terminated:
            break


def test_a_snapshot_replays_the_same_slip_so_restoring_cannot_reroll_it() -> None:
    env = _env()
    env.reset(seed=3)
    fl = env.unwrapped
    snap = fl.snapshot()
    first = env.step("Right")[0]
    for _ in range(5):
        fl.restore(snap)
        assert env.step("Right")[0] == first
