"""BFCLMultiTurn-v0 at BFCL's step limit, under both rules, and against bfcl-eval's own run.

bfcl-eval's inference force-quits a user turn on its 21st step with calls
(``count > MAXIMUM_STEP_LIMIT``), keeps that turn and asks for no later one; its runner
fails a result with fewer turns than the ground truth (``multi_turn:force_terminated``)
and hands a full one to the checker. So officially 21 steps in the last turn are judged
as that turn stands, 21 steps in an earlier turn fail, and 20 steps are an ordinary turn.
Strict rules fail the episode at the limit in every turn.
"""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.envs.bfcl.decode import format_calls
from agentenvs.envs.bfcl.multi_turn.checker import (
    FORCE_TERMINATED,
    RESPONSE_MISMATCH,
    STATE_MISMATCH,
)
from agentenvs.envs.bfcl.multi_turn.env import END_TURN_REPLY, MAXIMUM_STEP_LIMIT

ENV_ID = "agentenvs/BFCLMultiTurn-v0"
#: changes nothing on the file system: fills a turn's steps up to the limit
PWD = "[pwd()]"


def _env(rules: str) -> gym.Env:
    return gym.make(ENV_ID, rules=rules, max_turns=200)


def _gold_turn(env: gym.Env) -> list[str]:
    """The current turn's gold calls, one reply each."""
    return [format_calls([c]) for c in env.unwrapped.gold_calls()]


def _pass_turns(env: gym.Env, n: int) -> None:
    for _ in range(n):
        for reply in [format_calls(list(env.unwrapped.gold_calls())), END_TURN_REPLY]:
            *_, terminated, truncated, info = env.step(reply)
            assert not (terminated or truncated), info.get("turn_check")
    assert info["turns_passed"] == n


def _steps(env: gym.Env, replies: list[str]) -> tuple[float, bool, dict]:
    """Sends ``replies`` and returns the last step's reward, terminated and info; every
    earlier step must leave the episode running."""
    for i, reply in enumerate(replies):
        _, reward, terminated, truncated, info = env.step(reply)
        assert not truncated
        if i < len(replies) - 1:
            assert not terminated, (i, info.get("turn_check"))
    return reward, terminated, info


@pytest.mark.parametrize("rules", ["official", "strict"])
def test_21_steps_ending_in_the_last_turn(rules: str) -> None:
    env = _env(rules)
    env.reset(options={"task_id": "multi_turn_base_0"})
    _pass_turns(env, 2)  # turns 1 and 2 of 3
    gold = _gold_turn(env)
    replies = gold + [PWD] * (MAXIMUM_STEP_LIMIT + 1 - len(gold))
    # before the 21st step it is an ordinary turn under both rules
    reward, terminated, info = _steps(env, replies[:-1])
    assert not terminated and info["call_steps"] == MAXIMUM_STEP_LIMIT
    assert env.unwrapped.score_action(replies[-1]) == (1.0 if rules == "official" else 0.0)
    obs, reward, terminated, truncated, info = env.step(replies[-1])
    assert terminated and not truncated
    assert info["call_steps"] == MAXIMUM_STEP_LIMIT + 1 and "Step limit reached" in obs
    assert "current_working_directory" in info["results"][0]  # the step's call ran
    if rules == "official":  # force-quit but kept: checked as it stands, and it is right
        assert reward == 1.0 and info["success"] is True and info["score"] == 1.0
        assert info["turn_check"]["valid"] is True and info["turn_check"]["checked"] is True
    else:  # the agent never handed the turn back: no reward for running into the limit
        assert reward == 0.0 and info["success"] is False
        assert info["turn_check"]["error_type"] == FORCE_TERMINATED
        assert info["turns_passed"] == 2
    # the episode is over either way
    assert env.unwrapped.score_action("[pwd()]") == float(info["success"])


@pytest.mark.parametrize("rules", ["official", "strict"])
def test_a_last_turn_at_the_limit_is_checked_not_waved_through(rules: str) -> None:
    env = _env(rules)
    env.reset(options={"task_id": "multi_turn_base_0"})
    _pass_turns(env, 2)
    # 21 steps that do nothing of what the last turn asks
    reward, terminated, info = _steps(env, [PWD] * (MAXIMUM_STEP_LIMIT + 1))
    assert terminated and reward == 0.0 and info["success"] is False
    expected = {STATE_MISMATCH, RESPONSE_MISMATCH} if rules == "official" else {FORCE_TERMINATED}
    assert info["turn_check"]["error_type"] in expected


@pytest.mark.parametrize("rules", ["official", "strict"])
def test_exactly_20_steps_then_handing_the_turn_back(rules: str) -> None:
    env = _env(rules)
    env.reset(options={"task_id": "multi_turn_base_0"})
    _pass_turns(env, 2)
    gold = _gold_turn(env)
    replies = gold + [PWD] * (MAXIMUM_STEP_LIMIT - len(gold)) + [END_TURN_REPLY]
    reward, terminated, info = _steps(env, replies)
    assert terminated and reward == 1.0 and info["success"] is True
    assert info["call_steps"] == MAXIMUM_STEP_LIMIT and info["turn_check"]["valid"] is True


@pytest.mark.parametrize("rules", ["official", "strict"])
def test_21_steps_in_an_earlier_turn_fail(rules: str) -> None:
    env = _env(rules)
    env.reset(options={"task_id": "multi_turn_base_0"})
    _pass_turns(env, 1)
    gold = _gold_turn(env)  # right calls, spread over too many steps
    replies = gold + [PWD] * (MAXIMUM_STEP_LIMIT + 1 - len(gold))
    assert env.unwrapped.score_action(replies[0]) == 0.0  # one call of two: not yet
    reward, terminated, info = _steps(env, replies)
    # officially the result is a turn short of the ground truth: force-terminated
    assert terminated and reward == 0.0 and info["success"] is False
    assert info["turn_check"]["error_type"] == FORCE_TERMINATED
    assert info["user_turn"] == 1 and info["turns_passed"] == 1
    with pytest.raises(gym.error.ResetNeeded):  # no later turn is played
        env.step(END_TURN_REPLY)


@pytest.mark.parametrize("rules", ["official", "strict"])
def test_a_smaller_step_limit_is_applied_the_same_way(rules: str) -> None:
    env = gym.make(ENV_ID, rules=rules, step_limit=2)
    env.reset(options={"task_id": "multi_turn_long_context_2"})  # two turns
    _pass_turns(env, 1)
    gold = _gold_turn(env)
    assert len(gold) == 1
    reward, terminated, info = _steps(env, gold + [PWD, PWD])
    assert terminated and info["call_steps"] == 3
    assert reward == (1.0 if rules == "official" else 0.0)


# ---------------------------------------------------------------- against bfcl-eval
def _official_available() -> None:
    if importlib.util.find_spec("bfcl_eval") is None:
        # worded so that CI (services required) fails instead of skipping
        pytest.skip("could not import 'bfcl_eval' (make test installs it)")
    pytest.importorskip("overrides")  # imported by bfcl-eval's inference loop (bfcl extra)


def test_the_three_cases_agree_with_bfcl_eval_on_a_single_turn_entry() -> None:
    _official_available()
    from agentenvs.envs.bfcl.agreement import (
        LIMIT_KINDS,
        compare_step_limit,
        official_entry,
        step_limit_plans,
    )
    from agentenvs.envs.bfcl.multi_turn.env import BFCLMultiTurnEnv
    from agentenvs.envs.bfcl.reference import official_multi_turn_run

    env = BFCLMultiTurnEnv(tasks_path="bfcl-eval", rules="official", max_turns=1000)
    env.reset(options={"task_id": "multi_turn_base_46"})  # one user turn, four calls
    entry = env.entry
    plans = dict(step_limit_plans(env))
    assert set(plans) == set(LIMIT_KINDS) - {"earlier_turn_over_limit"}
    verdicts = {
        kind: official_multi_turn_run(replies, official_entry(entry), entry.ground_truth_text)
        for kind, replies in plans.items()
    }
    assert verdicts["last_turn_over_limit"].valid  # force-quit, kept, checked: right
    assert verdicts["last_turn_over_limit"].detail["turns_played"] == 1
    assert verdicts["last_turn_at_limit"].valid
    assert verdicts["last_turn_fillers_over_limit"].error_type == STATE_MISMATCH
    report = compare_step_limit("bfcl-eval", ids=["multi_turn_base_46"])
    assert report.cases == 3 and report.agree == 3, report.disagreements
    # an entry of several turns: the inference stops after the force-quit first turn
    env.reset(options={"task_id": "multi_turn_base_0"})
    entry = env.entry
    replies = dict(step_limit_plans(env))["earlier_turn_over_limit"]
    theirs = official_multi_turn_run(replies, official_entry(entry), entry.ground_truth_text)
    assert theirs.error_type == FORCE_TERMINATED and theirs.detail["turns_played"] == 1
    assert entry.n_turns > 1


def test_step_limit_verdicts_agree_with_bfcl_eval_on_a_sample() -> None:
    _official_available()
    from agentenvs.envs.bfcl.agreement import LIMIT_KINDS, compare_step_limit

    # 8 entries a category; every entry in `python -m agentenvs.envs.bfcl.agreement`
    report = compare_step_limit("bfcl-eval", per_category=8, seed=0)
    assert report.entries == 32 and set(report.by_category) == set(LIMIT_KINDS)
    assert report.by_category["earlier_turn_over_limit"][0] > 0
    assert 0 < report.accepted < report.cases
    assert report.agree == report.cases, report.disagreements[:10]
