"""Checks of ``fork(k)``: each child plays as a restore of the same snapshot, the children
and the parent are independent, and closing them leaves nothing behind."""

from __future__ import annotations

import os
import time

import gymnasium as gym

from agentenvs.core.fork import fork_env
from agentenvs.core.snapshot import restore_snapshot, take_snapshot
from agentenvs.testing._trajectory import ActionSource, branch, first_divergence, replay, short
from agentenvs.testing.contract.context import Context, live_state, rng_state
from agentenvs.testing.contract.report import collect

#: children per fork in the checks
FORK_K = 3
#: how long closed children's processes may take to be gone (they are killed, then reaped)
_GONE_WAIT_S = 30.0


def _fork(ctx: Context, env: gym.Env, k: int = FORK_K) -> list[gym.Env]:
    kids = fork_env(env, k)
    ctx.envs.extend(kids)  # closed by the run whatever the check finds
    return kids


def _started(ctx: Context, source: ActionSource, steps: int) -> gym.Env:
    """An env a few steps into an episode that is still live."""
    env = ctx.make()
    ctx.reset(env)
    branch(env, source, steps)
    if env.unwrapped.done:
        ctx.reset(env)
    return env


def check_fork_equivalence(ctx: Context) -> str:
    source = ActionSource(ctx.seed + 30)
    env = _started(ctx, source, 3)
    inner = env.unwrapped
    turn, key, rng_before = inner.turn, inner.state_key(), rng_state(env)
    snap = take_snapshot(env)
    kids = _fork(ctx, env)
    problems: list[str] = []
    for i, kid in enumerate(kids):
        got = (kid.unwrapped.turn, kid.unwrapped.state_key(), rng_state(kid))
        if got != (turn, key, rng_before):
            problems.append(
                f"child {i} starts at turn/state_key {got[0]}/{got[1]} (RNG equal: "
                f"{got[2] == rng_before}), the parent is at {turn}/{key}"
            )
    if rng_state(env) != rng_before or inner.turn != turn:
        problems.append("fork() changed the parent's turn or RNG")
    actions, first = branch(kids[0], source, 4)
    restore_snapshot(env, snap)
    expected = replay(env, actions)
    for label, got_records in (
        ("child 0", first),
        *((f"child {i}", replay(kid, actions)) for i, kid in enumerate(kids[1:], 1)),
    ):
        if (diff := first_divergence(expected, got_records)) is not None:
            problems.append(f"{label} plays otherwise than the restored parent: {diff}")
    collect(problems)
    return f"{len(kids)} children played {len(actions)} actions as restores do"


def check_fork_independence(ctx: Context) -> str:
    source = ActionSource(ctx.seed + 31)
    env = _started(ctx, source, 2)
    kids = _fork(ctx, env)
    problems: list[str] = []
    held = [kid.unwrapped.held_resources() for kid in kids]
    parent_held = env.unwrapped.held_resources()
    for i, names in enumerate(held):
        shared = names & (parent_held | set().union(*held[:i], *held[i + 1 :]))
        if shared:
            problems.append(f"child {i} shares {sorted(shared)} with the parent or a sibling")
    parent_before, other_before = live_state(env), live_state(kids[1])
    branch(kids[0], source, 3)
    if live_state(env) != parent_before:
        problems.append("stepping child 0 changed the parent")
    if live_state(kids[1]) != other_before:
        problems.append("stepping child 0 changed child 1")
    restore_snapshot(kids[0], take_snapshot(kids[2]))
    if live_state(kids[1]) != other_before or live_state(env) != parent_before:
        problems.append("restoring child 0 changed child 1 or the parent")
    if not env.unwrapped.done:
        branch(env, source, 2)
    if live_state(kids[1]) != other_before:
        problems.append("stepping the parent changed child 1")
    collect(problems)
    return f"{len(kids)} children, each stepped or restored alone"


def _descendants() -> set[tuple[int, str]]:
    """(pid, start time) of every live descendant of this process (empty without /proc)."""
    children: dict[int, list[tuple[int, str]]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":  # a zombie holds nothing
            continue
        children.setdefault(int(fields[1]), []).append((int(name), fields[19]))
    found: set[tuple[int, str]] = set()
    todo = [os.getpid()]
    while todo:
        for pid, start in children.get(todo.pop(), []):
            if (pid, start) not in found:
                found.add((pid, start))
                todo.append(pid)
    return found


def _left_behind(names: frozenset[str]) -> list[str]:
    """Of closed children's resources, those still there that this process can see."""
    return [
        name
        for name in sorted(names)
        if name.startswith("sandbox dir ") and os.path.lexists(name.removeprefix("sandbox dir "))
    ]


def check_fork_close(ctx: Context) -> str:
    source = ActionSource(ctx.seed + 32)
    env = _started(ctx, source, 2)
    # after the parent started: what the process starts once for every env is not a leak
    before = _descendants()
    kids = _fork(ctx, env)
    problems: list[str] = []
    held: frozenset[str] = frozenset().union(*(k.unwrapped.held_resources() for k in kids))
    kids[0].close()
    actions, mine = branch(kids[1], source, 2)
    env.close()  # the parent first: the children live on
    if (diff := first_divergence(mine, replay(kids[2], actions))) is not None:
        problems.append(f"after child 0 and the parent closed, child 2 plays otherwise: {diff}")
    for kid in kids:
        kid.close()
        kid.close()  # twice is fine
    for i, kid in enumerate(kids):
        if kid.unwrapped.held_resources():
            problems.append(
                f"closed child {i} still holds {sorted(kid.unwrapped.held_resources())}"
            )
    if left := _left_behind(held):
        problems.append(f"closed children left {left}")
    deadline = time.monotonic() + _GONE_WAIT_S
    extra = _descendants() - before
    while extra and time.monotonic() < deadline:
        time.sleep(0.2)
        extra = _descendants() - before
    if extra:
        problems.append(
            f"{len(extra)} processes of the closed envs still run: {short(sorted(extra))}"
        )
    collect(problems)
    return f"{len(kids)} children closed, {len(held)} resources they held released"
