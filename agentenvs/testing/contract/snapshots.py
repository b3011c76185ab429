"""Checks of ``snapshot()``/``restore()``: round trips at random points, pickled snapshots
restored into fresh envs, corrupted snapshots refused whole, and files kept by a restore."""

from __future__ import annotations

from typing import Any

import numpy as np

from agentenvs.core.errors import AgentEnvsError
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot
from agentenvs.testing._trajectory import (
    ActionSource,
    branch,
    first_divergence,
    replay,
    short,
)
from agentenvs.testing.contract.context import Context, live_state, rng_state
from agentenvs.testing.contract.report import Failed, Skipped, collect


def check_snapshot_roundtrip(ctx: Context) -> str:
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
            turn, key, rng_before = inner.turn, inner.state_key(), rng_state(env)
            snap = take_snapshot(env)
            actions, first = branch(env, source, 3)
            for attempt in ("first", "second"):
                restore_snapshot(env, snap)
                if inner.turn != turn or inner.state_key() != key:
                    problems.append(
                        f"{where}: after the {attempt} restore turn/state_key are "
                        f"{inner.turn}/{inner.state_key()}, expected {turn}/{key}"
                    )
                if rng_state(env) != rng_before:
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
    collect(problems)
    return f"{tested} snapshot points"


def check_snapshot_pickle(ctx: Context) -> None:
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
        raise Failed(f"the snapshot cannot be pickled: {type(exc).__name__}: {exc}") from exc
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
    collect(problems)


def flip_bytes(data: bytes, rng: np.random.Generator, n: int) -> list[tuple[str, bytes]]:
    """``n`` copies of ``data`` with one bit flipped each, and cut copies."""
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


def corrupted_snapshots(snap: Snapshot, rng: np.random.Generator) -> list[tuple[str, Any, bool]]:
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


def check_atomic_restore(ctx: Context) -> str:
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
    for label, corrupt in flip_bytes(data, rng, 16):
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
    for label, snap, must_raise in corrupted_snapshots(good, rng):
        before = live_state(env)
        try:
            restore_snapshot(env, snap)
        except AgentEnvsError as exc:
            refused += 1
            if type(exc).__name__ != "SnapshotError":
                problems.append(f"{label}: raised {type(exc).__name__}, not SnapshotError")
            if live_state(env) != before:
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
    collect(problems)
    return f"{refused} corrupted snapshots refused, {accepted} accepted as valid states"


def check_file_modes(ctx: Context) -> str:
    probe = ctx.file_probe
    if probe is None:
        raise Skipped("no FileProbe given (envs without files)")
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
    collect(problems)
    return f"{len(expected.splitlines())} listing lines kept"
