"""BFCL-v0's per-task caches and its own info builder give what the base env gives.

The env derives a task's language, relevance and info keys once per task and builds its
info dicts in one literal; these tests hold both to the plain path: the base's
``_info``, the uncached task lookups, and a fresh env restored from a snapshot (which
meets the task without a reset).
"""

from __future__ import annotations

import keyword
from typing import Any

import numpy as np

from agentenvs.core.env import TextEnv
from agentenvs.envs.bfcl.ast_checker import check_reply
from agentenvs.envs.bfcl.decode import DecodeError, decode_calls, surely_not_calls
from agentenvs.envs.bfcl.env import BFCLEnv


def _base_info(env: BFCLEnv, action_valid: bool) -> list[tuple[str, Any]]:
    return list(TextEnv._info(env, action_valid=action_valid).items())


def _info(env: BFCLEnv, action_valid: bool) -> list[tuple[str, Any]]:
    return list(env._info(action_valid=action_valid).items())


def test_info_equals_the_base_info_in_every_state() -> None:
    env = BFCLEnv(max_turns=2, rules="official")
    for valid in (True, False):
        assert _info(env, valid) == _base_info(env, valid)  # before any reset
    rng = np.random.default_rng(0)
    for task_id in list(env.task_ids)[:60]:
        _, info = env.reset(options={"task_id": task_id})
        base = dict(_base_info(env, True))
        assert list(info)[: len(base)] == list(base)
        assert {k: info[k] for k in base} == base
        for valid in (True, False):
            assert _info(env, valid) == _base_info(env, valid)
        for reply in ("", env.error_action(rng)):
            if env.done:
                break
            _, _, _, _, info = env.step(reply)
            assert {k: info[k] for k in base} == dict(_base_info(env, info["action_valid"]))
            assert _info(env, True) == _base_info(env, True)


def test_a_restored_env_grades_and_reports_as_the_one_it_came_from() -> None:
    env = BFCLEnv(rules="official")
    rng = np.random.default_rng(1)
    for task_id in list(env.task_ids)[:40]:
        env.reset(options={"task_id": task_id})
        fresh = BFCLEnv(rules="official")
        fresh.restore(env.snapshot())  # the task is met without a reset
        assert _info(fresh, True) == _base_info(fresh, True) == _info(env, True)
        task = env.task
        for reply in (env.gold_reply(), env.error_action(rng), "None of them fits."):
            ours = fresh.verdict_of(reply)[0]
            plain = check_reply(reply, task.functions, task.ground_truth, task.category)
            if ours is not None:
                assert ours.as_dict() == plain.as_dict()


def test_prose_is_surely_not_calls_only_where_decoding_fails() -> None:
    names = [*keyword.kwlist, *keyword.softkwlist, "x", "of", "rb", "f", "The", "I"]
    tails = ["", "]", "(x=1)]", "'s'", " = 1", ": 1", ", y", ".z(a=1)]", " if x else y", "é"]
    told = 0
    for first in names:
        for second in names:
            for tail in tails:
                text = f"{first} {second}{tail}"
                if surely_not_calls(text):
                    told += 1
                    try:
                        decode_calls(text)
                    except DecodeError:
                        continue
                    raise AssertionError(f"{text!r} decodes")
    assert told > 1000
    assert surely_not_calls("None of these functions can do that.")
    for text in ("[f(a=1)]", "x if y else z", "not x", '{"name": "f"}', "<think>a b</think>"):
        assert not surely_not_calls(text)
    assert not surely_not_calls("The weather", language="java")
