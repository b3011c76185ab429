"""The env contract checker: ``check_env_contract(env_id_or_factory)``.

Runs Gymnasium's ``check_env`` on the unwrapped env, then every rule of the agentenvs
contract (see DESIGN.md), each as a named check on fresh envs, so one broken rule does
not hide another. Every failure is collected; ``ContractError`` lists them all.

Checks (names as reported):

- ``gymnasium_check_env``: Gymnasium's own checker (render modes too, for a registered id).
- ``info_keys``: every standard info key, with its type, on reset and every step;
  ``turn`` counts steps, ``turns_left = max_turns - turn``, ``score`` within [0, 1].
- ``seed_determinism``: the same seed and options give the same first observation and
  the same trajectory (two envs, and the same env run again).
- ``cross_process``: the same trajectory in a fresh interpreter (its own hash seed)
  gives the same digests, and a pickled snapshot restored there steps the same.
- ``snapshot_roundtrip``: at random points, snapshot, step, restore, step again:
  identical results (twice over), with turn, state key and RNG put back.
- ``snapshot_pickle``: a snapshot through ``to_bytes``/``from_bytes`` restores into a
  fresh env (never reset, or reset elsewhere) and steps identically.
- ``budget_truncation``: with ``options={"max_turns": T}`` and invalid actions, the
  episode is truncated exactly at turn T, never terminated, with ``turns_left`` 0.
- ``step_after_end``: stepping before reset or after the episode ended raises
  ``gymnasium.error.ResetNeeded``.
- ``no_history_leak``: after long episodes, a reset with a seed gives what a fresh env
  gives, observation, info and the steps after.
- ``bad_actions``: empty, 1 MB, random-bytes, control-character and non-str actions give
  an observation with ``action_valid`` False, never an exception, and cost one turn.
- ``score_action``: returns a finite number and does not advance the env.
- ``error_action``: returns a str, the same one for equally seeded generators, and does
  not touch the env.
- ``task_id_option``: ``options={"task_id": ...}`` selects that task; an unknown id raises.
- ``close``: ``close()`` twice is fine.
- ``atomic_reset``: resets that raise (unknown task id, bad budgets, unknown or
  malformed options, bad seeds) leave the live episode exactly as it was: the same
  snapshot, and the same results for the next steps.
- ``atomic_restore``: corrupted snapshots (flipped or missing bytes, tampered base
  fields, foreign or truncated env states, a leaf of the state changed) raise only
  ``SnapshotError``, and the env is then exactly as it was; bytes never restore silently.
- ``file_modes``: for envs with files, given a ``FileProbe``: modes, empty dirs,
  symlinks and mtimes survive a restore, in the same env and in a fresh one.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import pickle
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

from agentenvs.core import info as keys
from agentenvs.core.errors import AgentEnvsError
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot
from agentenvs.testing._trajectory import (
    CHILD_CODE,
    ActionSource,
    EnvTarget,
    Record,
    branch,
    digest,
    first_divergence,
    make_env,
    replay,
    run_trajectory,
    short,
    target_name,
)

#: a str action that no env accepts and that must not end an episode
INVALID_ACTION = "\x00???"


@dataclass(frozen=True)
class FileProbe:
    """How the ``file_modes`` check reaches the files of an env that has them.

    ``options``: reset options (e.g. the task); ``setup``: actions that make files with
    unusual modes, an empty dir, a symlink, old mtimes; ``disturb``: actions that change
    them again; ``listing``: an action whose observation lists the files with their
    modes, types, link targets and mtimes (it may cost a turn; it must not change the
    files). Terminal-Bench's is ``agentenvs.envs.terminal`` tests' ``FILE_PROBE``.
    """

    options: Mapping[str, Any]
    setup: tuple[str, ...]
    disturb: tuple[str, ...]
    listing: str


@dataclass
class CheckResult:
    """The outcome of one named check: ``passed`` is None when it was skipped."""

    name: str
    passed: bool | None
    detail: str = ""
    seconds: float = 0.0


@dataclass
class ContractReport:
    """Every check's outcome for one env, and the warnings raised along the way."""

    target: str
    results: list[CheckResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.passed is not False for r in self.results)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.passed is False]

    @property
    def failure_names(self) -> list[str]:
        return [r.name for r in self.failures]

    @property
    def skipped(self) -> list[CheckResult]:
        return [r for r in self.results if r.passed is None]

    def result(self, name: str) -> CheckResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def summary(self) -> str:
        failed = len(self.failures)
        lines = [
            f"env contract for {self.target}: "
            + (f"{failed} of {len(self.results)} checks failed" if failed else "all checks passed")
        ]
        for r in self.results:
            mark = {True: "ok  ", False: "FAIL", None: "skip"}[r.passed]
            lines.append(f"  {mark} {r.name} ({r.seconds:.2f}s)")
            if r.detail and r.passed is not True:
                lines.extend("         " + line for line in r.detail.splitlines())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


class ContractError(AgentEnvsError, AssertionError):
    """An env broke its contract; ``report`` holds every check, ``failures`` the broken ones."""

    def __init__(self, report: ContractReport) -> None:
        self.report = report
        super().__init__(report.summary())

    @property
    def failures(self) -> list[CheckResult]:
        return self.report.failures

    @property
    def failure_names(self) -> list[str]:
        return self.report.failure_names


class _Failed(Exception):
    """Raised inside a check with the problems found."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class _Skipped(Exception):
    """Raised inside a check that cannot run for this env, with the reason."""


@dataclass
class _Context:
    target: EnvTarget
    env_kwargs: Mapping[str, Any]
    seed: int
    steps: int
    options: Mapping[str, Any]
    check_processes: bool
    process_timeout: float
    file_probe: FileProbe | None = None
    envs: list[gym.Env] = field(default_factory=list)

    def make(self) -> gym.Env:
        env = make_env(self.target, self.env_kwargs)
        self.envs.append(env)
        return env

    def reset(self, env: gym.Env, **overrides: Any) -> tuple[str, dict[str, Any]]:
        return env.reset(seed=self.seed, options={**self.options, **overrides})

    def close_all(self) -> None:
        for env in self.envs:
            with contextlib.suppress(Exception):
                env.close()
        self.envs.clear()


def _hint(traceback_text: str) -> str:
    """A known cause for a crash, recognised from its traceback."""
    if "env_data_reuse_passive_checker" in traceback_text:
        # gymnasium's PassiveEnvChecker (added by gym.make) assumes a reset came first
        return (
            " [gym.make's PassiveEnvChecker cannot step an env restored from a snapshot "
            "without a reset first; register the id with disable_env_checker=True]"
        )
    if "Cannot call env.step() before calling env.reset()" in traceback_text:
        # OrderEnforcing's message (the base env words its own ResetNeeded differently)
        return (
            " [gym.make's OrderEnforcing refuses a step on an env restored from a snapshot "
            "without a reset first; register the id with order_enforce=False]"
        )
    return ""


def _collect(problems: list[str]) -> None:
    if problems:
        shown = problems[:12]
        if len(problems) > len(shown):
            shown.append(f"... and {len(problems) - len(shown)} more")
        raise _Failed(shown)


# ---------------------------------------------------------------- the checks
def _check_gymnasium(ctx: _Context) -> str:
    env = ctx.make()
    inner = env.unwrapped
    has_spec = inner.spec is not None
    # the "human" render mode prints; keep it out of the caller's output
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            check_env(inner, skip_render_check=not has_spec)
        except AssertionError as exc:
            raise _Failed(f"gymnasium check_env: {exc}") from exc
    return "" if has_spec else "render modes not checked: the env has no spec (not made by id)"


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


def _check_info_keys(ctx: _Context) -> None:
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
    _collect(problems)


def _check_seed_determinism(ctx: _Context) -> None:
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
    _collect(problems)


def _check_cross_process(ctx: _Context) -> str:
    if not ctx.check_processes:
        raise _Skipped("disabled (check_processes=False)")
    env = ctx.make()
    records = run_trajectory(
        env, seed=ctx.seed, options=ctx.options, steps=ctx.steps, action_seed=ctx.seed + 2
    )
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
        raise _Skipped(
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
        raise _Failed(f"the child process ran past {ctx.process_timeout:.0f}s") from exc
    try:
        result = pickle.loads(proc.stdout)
    except Exception as exc:
        tail = proc.stderr.decode(errors="replace")[-2000:]
        raise _Failed(f"the child process gave no result (exit {proc.returncode}): {tail}") from exc
    if "error" in result:
        raise _Failed(f"the child process raised{_hint(result['error'])}:\n{result['error']}")
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
    if [digest(r) for r in expected] != result["replay"]:
        problems.append("a pickled snapshot restored in another process steps differently")
    _collect(problems)
    return f"{len(mine)} records and a {len(actions)}-step replay matched"


def _rng_state(env: gym.Env) -> Any:
    rng = getattr(env.unwrapped, "_np_random", None)
    return None if rng is None else rng.bit_generator.state


def _check_snapshot_roundtrip(ctx: _Context) -> str:
    env = ctx.make()
    inner = env.unwrapped
    rng = np.random.default_rng(ctx.seed + 4)
    source = ActionSource(ctx.seed + 5)
    ctx.reset(env)
    n_points = min(5, ctx.steps)
    points = {0, *(int(p) for p in rng.choice(ctx.steps, size=n_points, replace=False))}
    problems: list[str] = []
    tested = 0
    for i in range(ctx.steps):
        if i in points:
            where = f"snapshot at step {i} (turn {inner.turn})"
            turn, key, rng_before = inner.turn, inner.state_key(), _rng_state(env)
            snap = take_snapshot(env)
            actions, first = branch(env, source, 3)
            for attempt in ("first", "second"):
                restore_snapshot(env, snap)
                if inner.turn != turn or inner.state_key() != key:
                    problems.append(
                        f"{where}: after the {attempt} restore turn/state_key are "
                        f"{inner.turn}/{inner.state_key()}, expected {turn}/{key}"
                    )
                if _rng_state(env) != rng_before:
                    problems.append(f"{where}: the {attempt} restore did not put back np_random")
                again = replay(env, actions)
                if (diff := first_divergence(first, again)) is not None:
                    problems.append(
                        f"{where}: after the {attempt} restore, the same actions gave other "
                        f"results: {diff}"
                    )
            tested += 1
            if problems:
                break
            restore_snapshot(env, snap)  # carry on from the snapshot point
        _, _, terminated, truncated, _ = env.step(source(env))
        if terminated or truncated:
            env.reset()
    _collect(problems)
    return f"{tested} snapshot points"


def _check_snapshot_pickle(ctx: _Context) -> None:
    env = ctx.make()
    ctx.reset(env)
    source = ActionSource(ctx.seed + 6)
    _, prefix = branch(env, source, 4)
    if prefix and (prefix[-1][4] or prefix[-1][5]):
        ctx.reset(env)
    snap = take_snapshot(env)
    try:
        data = snap.to_bytes()
    except Exception as exc:
        raise _Failed(f"the snapshot cannot be pickled: {type(exc).__name__}: {exc}") from exc
    actions, expected = branch(env, source, 5)
    problems: list[str] = []
    for label in ("a fresh env", "a fresh env reset with another seed"):
        fresh = ctx.make()
        if "another seed" in label:
            fresh.reset(seed=ctx.seed + 1000)
        restore_snapshot(fresh, Snapshot.from_bytes(data))
        got = replay(fresh, actions)
        if (diff := first_divergence(expected, got)) is not None:
            problems.append(f"restored into {label}, the same actions gave other results: {diff}")
    _collect(problems)


def _check_budget_truncation(ctx: _Context) -> None:
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
    _collect(problems)


def _check_step_after_end(ctx: _Context) -> None:
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
    _collect(problems)


def _check_no_history_leak(ctx: _Context) -> None:
    fresh = ctx.make()
    expected_reset = ctx.reset(fresh)
    _, expected = branch(fresh, ActionSource(ctx.seed + 8), 6)

    used = ctx.make()
    run_trajectory(
        used,
        seed=ctx.seed + 1,
        options={**ctx.options, "max_turns": 2},
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
    _collect(problems)


def _bad_actions(seed: int) -> list[tuple[str, Any]]:
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


def _check_bad_actions(ctx: _Context) -> None:
    env = ctx.make()
    problems: list[str] = []
    for label, action in _bad_actions(ctx.seed):
        ctx.reset(env)
        try:
            obs, _, terminated, _, info = env.step(action)
        except Exception as exc:
            problems.append(f"{label}: step raised {type(exc).__name__}: {short(str(exc))}")
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
    _collect(problems)


def _twin_check(ctx: _Context, probe: Callable[[gym.Env, int], list[str]], seed: int) -> None:
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
    _collect(problems)


def _check_score_action(ctx: _Context) -> None:
    rng = np.random.default_rng(ctx.seed + 12)

    def probe(env: gym.Env, i: int) -> list[str]:
        inner = env.unwrapped
        candidates = [inner.error_action(rng), INVALID_ACTION, ""]
        problems = []
        for action in candidates:
            score = inner.score_action(action)
            ok = isinstance(score, int | float | np.number) and not isinstance(score, bool)
            if not (ok and math.isfinite(float(score))):
                problems.append(f"step {i}: score_action({short(action)}) = {short(score)}")
        return problems

    _twin_check(ctx, probe, ctx.seed + 13)


def _check_error_action(ctx: _Context) -> None:
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


def _check_task_id_option(ctx: _Context) -> str:
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
    _collect(problems)
    return f"{len(ids)} task ids"


def _live_state(env: gym.Env) -> Any:
    """What must not change: the whole snapshot (wrappers too) as comparable bytes."""
    snap = take_snapshot(env)
    return pickle.dumps(snap, protocol=pickle.HIGHEST_PROTOCOL)


def _bad_resets(ctx: _Context) -> list[tuple[str, dict[str, Any]]]:
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


def _check_atomic_reset(ctx: _Context) -> str:
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
        before = _live_state(env)
        try:
            env.reset(**kwargs)
        except Exception:
            raised += 1
            if _live_state(env) != before:
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
    _collect(problems)
    return f"{raised} of {len(_bad_resets(ctx))} bad resets raised, none changed anything"


def _flip_bytes(data: bytes, rng: np.random.Generator, n: int) -> list[tuple[str, bytes]]:
    out = []
    for _ in range(n):
        corrupt = bytearray(data)
        i = int(rng.integers(len(corrupt)))
        corrupt[i] ^= 1 << int(rng.integers(8))
        out.append((f"byte {i} flipped", bytes(corrupt)))
    for cut in (0, 8, len(data) // 2, len(data) - 1):
        out.append((f"cut to {cut} bytes", data[:cut]))
    return out


def _leaf_paths(value: Any, path: tuple[Any, ...] = (), depth: int = 0) -> list[tuple[Any, ...]]:
    """Paths to the leaves of a state made of dicts, lists and tuples (bounded)."""
    if depth > 6:
        return []
    if isinstance(value, dict):
        items = list(value.items())[:64]
    elif isinstance(value, list | tuple):
        items = list(enumerate(value))[:64]
    else:
        return [path]
    found = [path]  # the container itself can be replaced too
    for key, child in items:
        found.extend(_leaf_paths(child, (*path, key), depth + 1))
    return found


def _replace_at(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace_at(value[head], rest, new)}
    items = list(value)
    items[head] = _replace_at(items[head], rest, new)
    return type(value)(items) if isinstance(value, tuple) and type(value) is tuple else items


#: wrong-typed values a corrupted leaf takes
_GARBAGE: tuple[Any, ...] = (None, -1, "\x00garbage", b"\xff\x00garbage", 1e308, (), {"x": 1})


def _corrupted_snapshots(snap: Snapshot, rng: np.random.Generator) -> list[tuple[str, Any, bool]]:
    """(label, snapshot, must_raise): ``must_raise`` False for changes that may be a valid
    state (a leaf of the env's own state with another value)."""
    base = snap.base
    out: list[tuple[str, Any, bool]] = [
        ("not a Snapshot", {"base": base}, True),
        ("another env class", Snapshot("x.Other", snap.version, base, snap.state, snap.wrappers), True),
        ("another version", Snapshot(snap.env_class, snap.version + 1, base, snap.state, snap.wrappers), True),
        ("no base", Snapshot(snap.env_class, snap.version, {}, snap.state, snap.wrappers), True),
        ("state None", Snapshot(snap.env_class, snap.version, base, None, snap.wrappers), True),
        ("state of another type", Snapshot(snap.env_class, snap.version, base, ("x",), snap.wrappers), True),
    ]
    for field_name, value in (
        ("task_id", "\x00nope"), ("task_id", None), ("turn", -1), ("turn", "1"),
        ("episode_max_turns", 0), ("done", "no"), ("score", float("nan")),
        ("last_obs", None), ("rng", {"bit_generator": "PCG64"}), ("rng", None),
    ):
        tampered = Snapshot(snap.env_class, snap.version, {**base, field_name: value}, snap.state, snap.wrappers)
        out.append((f"base field {field_name}={value!r}", tampered, True))
    paths = _leaf_paths(snap.state)[1:]
    if paths:
        for i in rng.choice(len(paths), size=min(12, len(paths)), replace=False):
            path = paths[int(i)]
            garbage = _GARBAGE[int(rng.integers(len(_GARBAGE)))]
            state = _replace_at(snap.state, path, garbage)
            label = f"state leaf {list(path)} = {garbage!r}"
            out.append((label, Snapshot(snap.env_class, snap.version, base, state, snap.wrappers), False))
    return out


def _check_atomic_restore(ctx: _Context) -> str:
    env = ctx.make()
    source = ActionSource(ctx.seed + 22)
    rng = np.random.default_rng(ctx.seed + 23)
    ctx.reset(env)
    branch(env, source, 2)
    if env.unwrapped.done:
        ctx.reset(env)
    good = take_snapshot(env)
    branch(env, source, 1)
    if env.unwrapped.done:
        ctx.reset(env)
    problems: list[str] = []
    refused = accepted = 0
    data = good.to_bytes()
    for label, corrupt in _flip_bytes(data, rng, 16):
        try:
            Snapshot.from_bytes(corrupt)
        except AgentEnvsError as exc:
            if type(exc).__name__ != "SnapshotError":
                problems.append(f"bytes with a {label}: {type(exc).__name__}, not SnapshotError")
            refused += 1
        except Exception as exc:
            problems.append(f"bytes with a {label}: raised {type(exc).__name__}: {short(exc)}")
        else:
            problems.append(f"bytes with a {label} decoded without an error")
    for label, snap, must_raise in _corrupted_snapshots(good, rng):
        before = _live_state(env)
        try:
            restore_snapshot(env, snap)
        except AgentEnvsError as exc:
            refused += 1
            if type(exc).__name__ != "SnapshotError":
                problems.append(f"{label}: raised {type(exc).__name__}, not SnapshotError")
            if _live_state(env) != before:
                problems.append(f"{label}: restore raised but changed the env")
        except Exception as exc:
            problems.append(f"{label}: raised {type(exc).__name__}: {short(str(exc))}, not SnapshotError")
        else:
            accepted += 1
            if must_raise:
                problems.append(f"{label}: restored without an error")
            # a state the env accepted must be one it can play from
            try:
                if not env.unwrapped.done:
                    branch(env, source, 1)
            except Exception as exc:
                problems.append(f"{label}: accepted, then a step raised {type(exc).__name__}: {short(str(exc))}")
            restore_snapshot(env, good)
        if len(problems) >= 12:
            break
    # the good snapshot still restores and plays as it did
    restore_snapshot(env, good)
    fresh = ctx.make()
    restore_snapshot(fresh, Snapshot.from_bytes(data))
    actions, mine = branch(env, source, 4)
    if (diff := first_divergence(mine, replay(fresh, actions))) is not None:
        problems.append(f"after the bad restores, the good snapshot plays differently: {diff}")
    _collect(problems)
    return f"{refused} corrupted snapshots refused, {accepted} accepted as valid states"


def _check_file_modes(ctx: _Context) -> str:
    probe = ctx.file_probe
    if probe is None:
        raise _Skipped("no FileProbe given (envs without files)")
    env = ctx.make()
    env.reset(seed=ctx.seed, options={**ctx.options, **probe.options})
    for action in probe.setup:
        env.step(action)
    snap = take_snapshot(env)
    expected = env.step(probe.listing)[0]
    problems: list[str] = []
    restore_snapshot(env, snap)
    for action in probe.disturb:
        env.step(action)
    changed = env.step(probe.listing)[0]
    if changed == expected:
        problems.append("the probe's disturb actions changed nothing its listing shows")
    restore_snapshot(env, snap)
    if (got := env.step(probe.listing)[0]) != expected:
        problems.append(f"after a restore the files differ:\n  before: {short(expected, 600)}\n  after:  {short(got, 600)}")
    fresh = ctx.make()
    restore_snapshot(fresh, Snapshot.from_bytes(snap.to_bytes()))
    if (got := fresh.step(probe.listing)[0]) != expected:
        problems.append(f"restored into a fresh env the files differ:\n  before: {short(expected, 600)}\n  after:  {short(got, 600)}")
    _collect(problems)
    return f"{len(expected.splitlines())} listing lines kept"


def _check_close(ctx: _Context) -> None:
    env = make_env(ctx.target, ctx.env_kwargs)
    ctx.reset(env)
    env.close()
    try:
        env.close()
    except Exception as exc:
        raise _Failed(f"a second close() raised {type(exc).__name__}: {exc}") from exc


CHECKS: dict[str, Callable[[_Context], Any]] = {
    "gymnasium_check_env": _check_gymnasium,
    "info_keys": _check_info_keys,
    "seed_determinism": _check_seed_determinism,
    "cross_process": _check_cross_process,
    "snapshot_roundtrip": _check_snapshot_roundtrip,
    "snapshot_pickle": _check_snapshot_pickle,
    "budget_truncation": _check_budget_truncation,
    "step_after_end": _check_step_after_end,
    "no_history_leak": _check_no_history_leak,
    "bad_actions": _check_bad_actions,
    "score_action": _check_score_action,
    "error_action": _check_error_action,
    "task_id_option": _check_task_id_option,
    "close": _check_close,
    "atomic_reset": _check_atomic_reset,
    "atomic_restore": _check_atomic_restore,
    "file_modes": _check_file_modes,
}


def check_env_contract(
    env: EnvTarget,
    *,
    seed: int = 0,
    steps: int = 30,
    options: Mapping[str, Any] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    check_processes: bool = True,
    skip: Iterable[str] = (),
    raise_on_failure: bool = True,
    process_timeout: float = 120.0,
    file_probe: FileProbe | None = None,
) -> ContractReport:
    """Check that an env keeps the agentenvs contract; return the report.

    Arguments:
        env: a registered id (made with ``gym.make(env, **env_kwargs)``) or a factory
            called as ``env(**env_kwargs)``; for the cross-process check a factory must
            be picklable (a module-level function or class).
        seed: the seed for resets and for the checker's own action streams.
        steps: actions per trajectory.
        options: reset options used throughout (``task_id`` pins one task).
        check_processes: also replay in a fresh interpreter (about a second).
        skip: names of checks not to run (see ``CHECKS``).
        raise_on_failure: raise ``ContractError`` listing every failed check.
        file_probe: for envs with files, how ``file_modes`` reaches them (``FileProbe``);
            without it that check is skipped.

    Gymnasium's warnings are collected in ``report.warnings``, not raised.
    """
    skip = set(skip)
    unknown = skip - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown check name(s) {sorted(unknown)}; known: {list(CHECKS)}")
    if not (isinstance(env, str) or callable(env)):
        raise TypeError(f"env must be an env id or a factory, got {env!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    options = dict(options or {})
    if "max_turns" in options:
        raise ValueError("options must not set max_turns: the budget checks set it themselves")
    ctx = _Context(
        target=env,
        env_kwargs=dict(env_kwargs or {}),
        seed=int(seed),
        steps=steps,
        options=options,
        check_processes=check_processes,
        process_timeout=process_timeout,
        file_probe=file_probe,
    )
    report = ContractReport(target=target_name(env))
    seen: set[str] = set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name, check in CHECKS.items():
            if name in skip:
                report.results.append(CheckResult(name, None, "skipped by the caller"))
                continue
            start = time.perf_counter()
            try:
                note = check(ctx)
                result = CheckResult(name, True, note or "")
            except _Skipped as exc:
                result = CheckResult(name, None, str(exc))
            except _Failed as exc:
                result = CheckResult(name, False, "\n".join(exc.problems))
            except Exception as exc:
                tb = "".join(
                    traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3)
                )
                result = CheckResult(
                    name, False, f"raised {type(exc).__name__}: {exc}{_hint(tb)}\n{tb.rstrip()}"
                )
            finally:
                ctx.close_all()
            result.seconds = time.perf_counter() - start
            report.results.append(result)
    for w in caught:
        text = f"{w.category.__name__}: {w.message}"
        if text not in seen:
            seen.add(text)
            report.warnings.append(text)
    if raise_on_failure and not report.passed:
        raise ContractError(report)
    return report


def assert_env_contract(env: EnvTarget, **kwargs: Any) -> ContractReport:
    """``check_env_contract`` that always raises on failure (an ``AssertionError``)."""
    kwargs["raise_on_failure"] = True
    return check_env_contract(env, **kwargs)


def contract_test(*envs: EnvTarget, **kwargs: Any) -> Callable[[EnvTarget], None]:
    """A pytest test function parametrized over ``envs``, for a user's own test suite::

    test_my_envs = contract_test("mypkg/MyEnv-v0", make_other_env)
    """
    import pytest  # only needed by callers who build pytest tests

    @pytest.mark.parametrize("env", envs, ids=[target_name(e) for e in envs])
    def test_env_contract(env: EnvTarget) -> None:
        assert_env_contract(env, **kwargs)

    return test_env_contract
