"""Checks of the probes that look at a state without playing it: ``score_action`` and
``error_action`` leave no trace, and ``error_action`` follows its generator."""

from __future__ import annotations

import math
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from agentenvs.testing._trajectory import ActionSource, first_divergence, short
from agentenvs.testing.contract.context import INVALID_ACTION, Context
from agentenvs.testing.contract.report import collect


def _twin_check(ctx: Context, probe: Callable[[gym.Env, int], list[str]], seed: int) -> None:
    """Step two equal envs with equal actions; ``probe`` pokes one before each step.

    Whatever the probe does must leave no trace: the two envs must stay identical.
    """
    poked, twin = ctx.make(), ctx.make()
    src_poked, src_twin = ActionSource(seed), ActionSource(seed)
    ctx.reset(poked)
    ctx.reset(twin)
    problems: list[str] = []
    for i in range(min(ctx.steps, 15)):
        inner = poked.unwrapped
        turn, key = inner.turn, inner.state_key()
        problems += probe(poked, i)
        if inner.turn != turn or inner.state_key() != key:
            problems.append(
                f"step {i}: turn/state_key changed from {turn}/{key} to "
                f"{inner.turn}/{inner.state_key()}"
            )
        a = poked.step(src_poked(poked))
        b = twin.step(src_twin(twin))
        if (diff := first_divergence([("step", None, *a)], [("step", None, *b)])) is not None:
            problems.append(f"step {i}: the next step differs from an untouched twin's: {diff}")
        if problems:
            break
        if a[2] or a[3]:
            poked.reset()
            twin.reset()
    collect(problems)


def check_score_action(ctx: Context) -> None:
    rng = np.random.default_rng(ctx.seed + 12)
    with_errors = ctx.has("error_action")

    # one kind of action a step, in turn (an error action, an invalid one, the empty one):
    # each kind is scored in several states, and each scoring (a test run in envs that
    # grade by running tests) is checked for traces by the steps after it; a run of
    # fewer steps than kinds scores them all each step
    kinds = (["error"] if with_errors else []) + ["invalid", "empty"]
    every_step = min(ctx.steps, 15) < len(kinds)

    def probe(env: gym.Env, i: int) -> list[str]:
        inner = env.unwrapped
        problems = []
        for kind in kinds if every_step else [kinds[i % len(kinds)]]:
            action = (
                inner.error_action(rng)
                if kind == "error"
                else INVALID_ACTION
                if kind == "invalid"
                else ""
            )
            score = inner.score_action(action)
            ok = isinstance(score, int | float | np.number) and not isinstance(score, bool)
            if not (ok and math.isfinite(float(score))):
                problems.append(f"step {i}: score_action({short(action)}) = {short(score)}")
        return problems

    _twin_check(ctx, probe, ctx.seed + 13)


def check_error_action(ctx: Context) -> None:
    def probe(env: gym.Env, i: int) -> list[str]:
        inner = env.unwrapped
        first = inner.error_action(np.random.default_rng(ctx.seed + i))
        second = inner.error_action(np.random.default_rng(ctx.seed + i))
        if not isinstance(first, str):
            return [f"step {i}: error_action returned {type(first).__name__}, not str"]
        if first != second:
            return [f"step {i}: equally seeded generators gave {short(first)} and {short(second)}"]
        return []

    _twin_check(ctx, probe, ctx.seed + 14)
