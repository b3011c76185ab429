"""Checks that apply to any ``gymnasium.Env``: Gymnasium's own checker, seed determinism in
one process and across processes, no history leaking across resets, bad inputs, close."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import pickle
import subprocess
import sys
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

from agentenvs.core import info as keys
from agentenvs.core.snapshot import take_snapshot
from agentenvs.testing._trajectory import (
    CHILD_CODE,
    ActionSource,
    Record,
    branch,
    digest,
    first_divergence,
    in_space,
    make_env,
    run_trajectory,
    short,
)
from agentenvs.testing.contract.context import PLAIN_NEEDS, Context, hint
from agentenvs.testing.contract.report import Failed, Skipped, collect


def check_gymnasium(ctx: Context) -> str:
    env = ctx.make()
    inner = env.unwrapped
    has_spec = inner.spec is not None
    # the "human" render mode prints; keep it out of the caller's output
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            check_env(inner, skip_render_check=not has_spec)
        except AssertionError as exc:
            raise Failed(f"gymnasium check_env: {exc}") from exc
    return "" if has_spec else "render modes not checked: the env has no spec (not made by id)"


def check_seed_determinism(ctx: Context) -> None:
    def trajectory(env: gym.Env) -> list[Record]:
        return run_trajectory(
            env, seed=ctx.seed, options=ctx.options, steps=ctx.steps, action_seed=ctx.seed + 1
        )

    first = ctx.make()
    a = trajectory(first)
    b = trajectory(ctx.make())
    problems = []
    if (diff := first_divergence(a, b)) is not None:
        problems.append(f"two envs, same seed and actions: {diff}")
    again = trajectory(first)
    if (diff := first_divergence(a, again)) is not None:
        problems.append(f"the same env reset with the same seed again: {diff}")
    collect(problems)


def _defined_in_main(target: Any) -> bool:
    """Whether the factory (or a registered id's entry point) lives in ``__main__``, which
    a fresh interpreter cannot import: a class or function of the user's script."""
    if isinstance(target, str):
        target = gym.spec(target).entry_point
    while isinstance(target, functools.partial):
        target = target.func
    return getattr(target, "__module__", None) == "__main__"


def check_cross_process(ctx: Context) -> str:
    if not ctx.check_processes:
        raise Skipped("disabled (check_processes=False)")
    if _defined_in_main(ctx.target):
        raise Skipped(
            "the env is defined in __main__, which another interpreter cannot import; "
            "define it in a module to check across processes"
        )
    env = ctx.make()
    records = run_trajectory(
        env, seed=ctx.seed, options=ctx.options, steps=ctx.steps, action_seed=ctx.seed + 2
    )
    snap_bytes, actions, expected = None, [], []
    if ctx.has("snapshot"):
        # a snapshot a few steps into a fresh episode, with the branch that follows it here
        snap_env = ctx.make()
        ctx.reset(snap_env)
        source = ActionSource(ctx.seed + 3)
        _, prefix = branch(snap_env, source, 3)
        if prefix and (prefix[-1][4] or prefix[-1][5]):
            snap_env.reset(seed=ctx.seed + 1)
        snap_bytes = take_snapshot(snap_env).to_bytes()
        actions, expected = branch(snap_env, source, 5)
    job = {
        "target": ctx.target,
        # an id registered at run time (not on import) must be registered there too
        "spec": gym.spec(ctx.target) if isinstance(ctx.target, str) else None,
        "env_kwargs": dict(ctx.env_kwargs),
        "seed": ctx.seed,
        "options": dict(ctx.options),
        "steps": ctx.steps,
        "action_seed": ctx.seed + 2,
        "snapshot": snap_bytes,
        "actions": actions,
    }
    try:
        payload = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise Skipped(
            f"the env factory cannot be pickled ({exc}); pass a module-level function or "
            "class to check across processes"
        ) from exc
    child_env = dict(os.environ)
    # the child sees what this process sees (factories defined beside the caller too),
    # and draws its own hash seed, which exposes order that depends on hash()
    child_env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
    child_env["PYTHONHASHSEED"] = "random"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD_CODE],
            input=payload,
            capture_output=True,
            timeout=ctx.process_timeout,
            env=child_env,
        )
    except subprocess.TimeoutExpired as exc:
        raise Failed(f"the child process ran past {ctx.process_timeout:.0f}s") from exc
    try:
        result = pickle.loads(proc.stdout)
    except Exception as exc:
        tail = proc.stderr.decode(errors="replace")[-2000:]
        raise Failed(f"the child process gave no result (exit {proc.returncode}): {tail}") from exc
    if "error" in result:
        raise Failed(f"the child process raised{hint(result['error'])}:\n{result['error']}")
    problems = []
    mine = [digest(r) for r in records]
    theirs = result["trajectory"]
    for i, (x, y) in enumerate(zip(mine, theirs, strict=False)):
        if x != y:
            problems.append(
                f"trajectory differs in another process from record {i} ({records[i][0]}); "
                f"here: {short(records[i], 300)}"
            )
            break
    else:
        if len(mine) != len(theirs):
            problems.append(f"trajectory length differs: {len(mine)} here, {len(theirs)} there")
    if snap_bytes is not None and [digest(r) for r in expected] != result["replay"]:
        problems.append("a pickled snapshot restored in another process steps differently")
    collect(problems)
    if snap_bytes is None:
        needs = ctx.capabilities.missing["snapshot"]
        return f"{len(mine)} records matched; no snapshot replay (needs {needs})"
    return f"{len(mine)} records and a {len(actions)}-step replay matched"


def check_no_history_leak(ctx: Context) -> None:
    fresh = ctx.make()
    expected_reset = ctx.reset(fresh)
    _, expected = branch(fresh, ActionSource(ctx.seed + 8), 6)

    used = ctx.make()
    short_budget = {"max_turns": 2} if ctx.has("budget_option") else {}
    run_trajectory(
        used,
        seed=ctx.seed + 1,
        options={**ctx.options, **short_budget},
        steps=ctx.steps,
        action_seed=ctx.seed + 9,
    )
    run_trajectory(
        used, seed=ctx.seed + 2, options=ctx.options, steps=ctx.steps, action_seed=ctx.seed + 10
    )
    got_reset = ctx.reset(used)
    _, got = branch(used, ActionSource(ctx.seed + 8), 6)
    problems = []
    if (
        diff := first_divergence([("reset", *expected_reset)], [("reset", *got_reset)])
    ) is not None:
        problems.append(f"reset after earlier episodes differs from a fresh env's: {diff}")
    elif (diff := first_divergence(expected, got)) is not None:
        problems.append(f"steps after earlier episodes differ from a fresh env's: {diff}")
    collect(problems)


def bad_actions(seed: int) -> list[tuple[str, Any]]:
    rng = np.random.default_rng(seed)
    return [
        ("empty string", ""),
        ("whitespace", " \n\t "),
        ("1 MB string", "\x00" + "A" * (1 << 20)),
        ("random bytes decoded", rng.bytes(512).decode("utf-8", errors="replace")),
        ("control characters", "\x00\x01\x02\x07\x08\x1b[2J\x7f"),
        ("lone surrogate", "\ud800 \udfff"),
        ("None", None),
        ("int", 123),
        ("list", ["left"]),
    ]


def check_bad_actions(ctx: Context) -> str:
    env = ctx.make()
    inputs = bad_actions(ctx.seed)
    rules = ctx.has("turn_rules")
    if not rules:
        # an env without the suite's turn rules owes nothing to actions outside its space
        inputs = [(label, a) for label, a in inputs if in_space(env.action_space, a)]
        if not inputs:
            raise Skipped(f"none of the bad inputs is within the action space {env.action_space}")
    problems: list[str] = []
    for label, action in inputs:
        ctx.reset(env)
        try:
            obs, _, terminated, _, info = env.step(action)
        except Exception as exc:
            problems.append(f"{label}: step raised {type(exc).__name__}: {short(str(exc))}")
            continue
        if not rules:
            if not in_space(env.observation_space, obs):
                problems.append(f"{label}: observation {short(obs)} is not in the observation space")
            continue
        if not isinstance(obs, str) or not obs.strip():
            problems.append(f"{label}: observation {short(obs)} does not explain the problem")
        if info.get(keys.ACTION_VALID) is not False:
            problems.append(
                f"{label}: action_valid = {info.get(keys.ACTION_VALID)!r}, expected False"
            )
        if info.get(keys.TURN) != 1:
            problems.append(f"{label}: turn = {info.get(keys.TURN)!r} after one step, expected 1")
        if terminated:
            problems.append(f"{label}: an invalid action ended the episode")
    collect(problems)
    if rules:
        return ""
    return (
        f"{len(inputs)} input{'s' if len(inputs) != 1 else ''} within the action space "
        "stepped without an error; "
        f"not checked: {PLAIN_NEEDS['turn_rules']}"
    )


def check_close(ctx: Context) -> None:
    env = make_env(ctx.target, ctx.env_kwargs)
    ctx.reset(env)
    env.close()
    try:
        env.close()
    except Exception as exc:
        raise Failed(f"a second close() raised {type(exc).__name__}: {exc}") from exc
