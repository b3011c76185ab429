"""Checks of the suite's episode rules: the info keys, the turn budget set through
``reset(options={"max_turns": T})``, ``ResetNeeded`` after the end, the ``task_id`` option,
and resets that raise without changing the live episode."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from agentenvs.core import info as keys
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot
from agentenvs.testing._trajectory import (
    ActionSource,
    branch,
    first_divergence,
    replay,
    run_trajectory,
    short,
)
from agentenvs.testing.contract.context import INVALID_ACTION, Context, live_state
from agentenvs.testing.contract.report import collect


def _info_problems(where: str, info: Any) -> list[str]:
    if not isinstance(info, dict):
        return [f"{where}: info is {type(info).__name__}, not dict"]
    problems = [f"{where}: info lacks {k!r}" for k in keys.STANDARD_KEYS if k not in info]

    def bad(key: str, ok: Callable[[Any], bool], want: str) -> None:
        if key in info and not ok(info[key]):
            problems.append(f"{where}: info[{key!r}] = {short(info[key])}, expected {want}")

    def is_int(v: Any) -> bool:
        return isinstance(v, int | np.integer) and not isinstance(v, bool)

    bad(keys.TASK_ID, lambda v: isinstance(v, str) and v != "", "a non-empty str")
    bad(keys.TURN, lambda v: is_int(v) and v >= 0, "an int >= 0")
    bad(keys.MAX_TURNS, lambda v: is_int(v) and v >= 1, "an int >= 1")
    bad(keys.TURNS_LEFT, lambda v: is_int(v) and v >= 0, "an int >= 0")
    bad(keys.SUCCESS, lambda v: isinstance(v, bool), "a bool")
    bad(
        keys.SCORE,
        lambda v: isinstance(v, float) and math.isfinite(v) and 0.0 <= v <= 1.0,
        "a float within [0, 1]",
    )
    bad(keys.ACTION_VALID, lambda v: isinstance(v, bool), "a bool")
    bad(
        keys.STATE_KEY,
        lambda v: isinstance(v, str) and 0 < len(v) <= 256,
        "a non-empty str of at most 256 characters",
    )
    if not problems:
        left = info[keys.MAX_TURNS] - info[keys.TURN]
        if info[keys.TURNS_LEFT] != max(left, 0):
            problems.append(
                f"{where}: turns_left = {info[keys.TURNS_LEFT]}, expected max_turns - turn = {left}"
            )
    return problems


def check_info_keys(ctx: Context) -> None:
    env = ctx.make()
    records = run_trajectory(
        env, seed=ctx.seed, options=ctx.options, steps=ctx.steps, action_seed=ctx.seed + 11
    )
    problems: list[str] = []
    episode, prev = -1, None
    for record in records:
        if record[0] == "reset":
            _, obs, info = record
            episode += 1
            where = f"reset of episode {episode}"
            problems += _info_problems(where, info)
            if not isinstance(obs, str):
                problems.append(f"{where}: observation is {type(obs).__name__}, not str")
            if not problems and info[keys.TURN] != 0:
                problems.append(f"{where}: turn = {info[keys.TURN]}, expected 0")
        else:
            _, action, obs, reward, terminated, truncated, info = record
            turn = prev[keys.TURN] + 1 if isinstance(prev, dict) and keys.TURN in prev else "?"
            where = f"step {turn} of episode {episode} (action {short(action, 40)})"
            problems += _info_problems(where, info)
            if not isinstance(obs, str):
                problems.append(f"{where}: observation is {type(obs).__name__}, not str")
            is_number = isinstance(reward, int | float | np.number) and not isinstance(reward, bool)
            if not (is_number and math.isfinite(float(reward))):
                problems.append(f"{where}: reward {short(reward)} is not a finite number")
            if not (isinstance(terminated, bool) and isinstance(truncated, bool)):
                problems.append(f"{where}: terminated/truncated must be bool")
            if isinstance(prev, dict) and not problems:
                if info[keys.TURN] != turn:
                    problems.append(f"{where}: turn = {info[keys.TURN]}, expected {turn}")
                for key in (keys.TASK_ID, keys.MAX_TURNS):
                    if info[key] != prev[key]:
                        problems.append(
                            f"{where}: {key} changed within the episode: "
                            f"{short(prev[key])} -> {short(info[key])}"
                        )
                if truncated and info[keys.TURNS_LEFT] != 0:
                    problems.append(f"{where}: truncated with turns_left = {info[keys.TURNS_LEFT]}")
        prev = record[-1]
        if len(problems) > 12:
            break
    collect(problems)


def check_budget_truncation(ctx: Context) -> None:
    env = ctx.make()
    problems: list[str] = []
    for budget in (1, 3, 12):
        _, info = ctx.reset(env, max_turns=budget)
        if info.get(keys.MAX_TURNS) != budget or info.get(keys.TURNS_LEFT) != budget:
            problems.append(
                f"max_turns={budget}: reset info has max_turns={info.get(keys.MAX_TURNS)!r}, "
                f"turns_left={info.get(keys.TURNS_LEFT)!r}"
            )
        for turn in range(1, budget + 1):
            where = f"max_turns={budget}, turn {turn}"
            _, _, terminated, truncated, info = env.step(INVALID_ACTION)
            if terminated:
                problems.append(
                    f"{where}: terminated on an invalid action"
                    + (" (the budget must truncate, not terminate)" if turn == budget else "")
                )
                break
            if truncated != (turn == budget):
                problems.append(f"{where}: truncated={truncated}, expected {turn == budget}")
                break
            if info.get(keys.TURN) != turn or info.get(keys.TURNS_LEFT) != budget - turn:
                problems.append(
                    f"{where}: info turn={info.get(keys.TURN)!r} "
                    f"turns_left={info.get(keys.TURNS_LEFT)!r}, expected {turn}, {budget - turn}"
                )
                break
    collect(problems)


def check_step_after_end(ctx: Context) -> None:
    problems: list[str] = []

    def expect_reset_needed(env: gym.Env, when: str) -> None:
        try:
            env.step(INVALID_ACTION)
        except gym.error.ResetNeeded:
            return
        except Exception as exc:
            problems.append(f"{when}: raised {type(exc).__name__}, not ResetNeeded: {exc}")
            return
        problems.append(f"{when}: step() did not raise gymnasium.error.ResetNeeded")

    expect_reset_needed(ctx.make(), "step before any reset")
    env = ctx.make()
    ctx.reset(env, max_turns=1)
    _, _, terminated, truncated, _ = env.step(INVALID_ACTION)
    if terminated or truncated:
        expect_reset_needed(env, "step after the budget ran out")
    # an episode that ends on its own, where the action source can end one
    ctx.reset(env, max_turns=max(ctx.steps, 1))
    source = ActionSource(ctx.seed + 7)
    for _ in range(ctx.steps):
        _, _, terminated, truncated, _ = env.step(source(env))
        if terminated or truncated:
            expect_reset_needed(
                env, "step after the episode " + ("ended" if terminated else "truncated")
            )
            break
    collect(problems)


def check_task_id_option(ctx: Context) -> str:
    env = ctx.make()
    inner = env.unwrapped
    ids = list(getattr(inner, "task_ids", ()) or ())
    problems: list[str] = []
    if not ids:
        _, info = ctx.reset(env)
        ids = [info[keys.TASK_ID]]
    chosen = [ids[0], ids[-1]] if len(ids) > 1 else ids
    for task_id in chosen:
        _, info = env.reset(seed=ctx.seed + 1, options={**ctx.options, "task_id": task_id})
        if info.get(keys.TASK_ID) != task_id:
            problems.append(
                f"reset(options={{'task_id': {task_id!r}}}) gave task {info.get(keys.TASK_ID)!r}"
            )
    unknown = "\x00no-such-task"
    try:
        env.reset(seed=ctx.seed, options={**ctx.options, "task_id": unknown})
    except Exception:
        pass
    else:
        problems.append(f"reset with the unknown task_id {unknown!r} did not raise")
    collect(problems)
    return f"{len(ids)} task ids"


def _bad_resets(ctx: Context) -> list[tuple[str, dict[str, Any]]]:
    opts = dict(ctx.options)
    return [
        ("an unknown task_id with another budget", {"options": {**opts, "task_id": "\x00nope", "max_turns": 100}}),
        ("a task_id that is not a str", {"options": {**opts, "task_id": 12345}}),
        ("max_turns=0", {"options": {**opts, "max_turns": 0}}),
        ("max_turns=-7", {"options": {**opts, "max_turns": -7}}),
        ("max_turns='3'", {"options": {**opts, "max_turns": "3"}}),
        ("max_turns=2.5", {"options": {**opts, "max_turns": 2.5}}),
        ("max_turns=10**30", {"options": {**opts, "max_turns": 10**30}}),
        ("an unknown option", {"options": {**opts, "\x00colour": "red"}}),
        ("options that are not a dict", {"options": ["task_id"]}),
        ("seed=-1", {"seed": -1, "options": opts}),
        ("seed='x'", {"seed": "x", "options": opts}),
    ]


def check_atomic_reset(ctx: Context) -> str:
    env = ctx.make()
    twin = ctx.make()
    source = ActionSource(ctx.seed + 21)
    problems: list[str] = []
    ctx.reset(env, max_turns=5)
    branch(env, source, 2)
    if env.unwrapped.done:
        ctx.reset(env, max_turns=5)
    raised = 0
    for label, kwargs in _bad_resets(ctx):
        before = live_state(env)
        try:
            env.reset(**kwargs)
        except Exception:
            raised += 1
            if live_state(env) != before:
                problems.append(f"reset with {label} raised but changed the live episode")
                break
        else:
            ctx.reset(env, max_turns=5)  # accepted: a valid episode again, carry on
            branch(env, source, 2)
            if env.unwrapped.done:
                ctx.reset(env, max_turns=5)
    if raised == 0:
        problems.append("no bad reset raised (an unknown task_id at least must)")
    # the episode goes on exactly as an untouched copy of it
    restore_snapshot(twin, Snapshot.from_bytes(take_snapshot(env).to_bytes()))
    actions, mine = branch(env, source, 6)
    if (diff := first_divergence(mine, replay(twin, actions))) is not None:
        problems.append(f"after the failed resets the episode differs from an untouched copy: {diff}")
    collect(problems)
    return f"{raised} of {len(_bad_resets(ctx))} bad resets raised, none changed anything"
