"""BFCL-v0's per-task caches and its own info builder and reset give what the base gives.

The env derives a task's language, relevance and info keys once per task, builds its
info dicts in one literal and resets to a task met before by a short path; these tests
hold all three to the plain path: the base's ``_info`` and ``reset`` (every field of the
env equal), the uncached task lookups, and a fresh env restored from a snapshot (which
meets the task without a reset).
"""

from __future__ import annotations

import keyword
from typing import Any

import numpy as np
import pytest

from agentenvs.core.env import TextEnv
from agentenvs.core.errors import UnknownTaskError
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


def _fields(env: BFCLEnv) -> dict[str, Any]:
    return {k: v for k, v in vars(env).items() if k not in ("_init_args", "_load_task")}


def test_a_reset_to_a_known_task_does_what_the_base_reset_does() -> None:
    # two envs with the same history: one resets through BFCLEnv.reset (the short path
    # once a task was met), the other through the base's reset; every field, the
    # observation and the info must be equal after each
    fast, base = (BFCLEnv(max_turns=2, show_budget=True, rules="official") for _ in range(2))
    ids = list(fast.task_ids)[:30]
    rng = np.random.default_rng(2)
    loads: list[str] = []
    load_task = fast._load_task

    def counted(task_id: str, options: Any) -> str:
        loads.append(task_id)
        return load_task(task_id, options)

    fast._load_task = counted  # type: ignore[method-assign]
    for round_ in range(3):
        for task_id in ids:
            options = {"task_id": task_id}
            got = fast.reset(options=options)
            want = TextEnv.reset(base, options=dict(options))
            assert got[0] == want[0]
            assert list(got[1].items()) == list(want[1].items())
            assert _fields(fast) == _fields(base)
            if round_ == 1:  # a graded step, then the next reset starts from it
                reply = fast.error_action(np.random.default_rng(int(rng.integers(1 << 30))))
                assert fast.step(reply)[1:] == base.step(reply)[1:]
                assert _fields(fast) == _fields(base)
    assert loads == ids  # the base's path the first time only
    # other resets take the base's path, and its checks
    seeded = fast.reset(seed=3, options={"task_id": ids[0]})
    assert seeded[0] == TextEnv.reset(base, seed=3, options={"task_id": ids[0]})[0]
    with pytest.raises(UnknownTaskError):
        fast.reset(options={"task_id": "no such task"})
    with pytest.raises(TypeError):
        fast.reset(options=[("task_id", ids[0])])  # type: ignore[arg-type]


def test_a_step_does_what_the_base_step_does() -> None:
    # twins again: BFCLEnv.step (its short path for text replies) against the base's
    # step, reply by reply, on invalid, failing and accepted replies, with a budget of 2
    # so that an invalid reply leaves a turn and a second one truncates
    for rules in ("official", "strict"):
        fast, base = (BFCLEnv(max_turns=2, show_budget=True, rules=rules) for _ in range(2))
        rng = np.random.default_rng(3)
        for task_id in list(fast.task_ids)[:40]:
            fast.reset(options={"task_id": task_id})
            near = fast.error_action(rng)
            plans = [
                [fast.gold_reply()],
                [near],
                ["", near],
                ["not calls (", "\x00"],
                [b"[f()]", "x" * 100_001],  # the base's own path: bytes, too long
            ]
            for plan in plans:
                fast.reset(options={"task_id": task_id})
                TextEnv.reset(base, options={"task_id": task_id})
                for reply in plan:
                    got = fast.step(reply)  # type: ignore[arg-type]
                    want = TextEnv.step(base, reply)  # type: ignore[arg-type]
                    assert got[:4] == want[:4]
                    assert list(got[4].items()) == list(want[4].items())
                    assert _fields(fast) == _fields(base)
                    if got[2] or got[3]:
                        break
