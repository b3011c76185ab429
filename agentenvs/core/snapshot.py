"""Snapshots: a picklable, self-contained copy of everything an agent can change.

``TextEnv.snapshot()`` captures the env alone. ``take_snapshot(env)`` walks a wrapper
chain as well: every wrapper that implements ``wrapper_state()`` and
``restore_wrapper_state(state)`` adds its state, so a wrapped env is restored whole.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym

from agentenvs.core.errors import SnapshotError


@dataclass(slots=True)
class Snapshot:
    """The state of an env (and of its stateful wrappers) at one moment; treat it as immutable.

    ``env_class`` names the env class it came from (restoring into another class fails);
    ``base`` is the bookkeeping the base env owns (turn, budget, RNG, task);
    ``state`` is the benchmark's own state; ``wrappers`` holds ``(wrapper class, state)``
    pairs from the outermost wrapper inwards.
    """

    env_class: str
    version: int
    base: dict[str, Any]
    state: Any
    wrappers: tuple[tuple[str, Any], ...] = ()

    def to_bytes(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def from_bytes(data: bytes) -> Snapshot:
        try:
            snap = pickle.loads(data)
        except Exception as exc:  # a truncated or foreign payload
            raise SnapshotError(f"cannot decode snapshot bytes: {exc}") from exc
        if not isinstance(snap, Snapshot):
            raise SnapshotError(f"bytes decode to {type(snap).__name__}, not a Snapshot")
        return snap


@runtime_checkable
class SnapshotParticipant(Protocol):
    """A wrapper whose own state belongs in snapshots."""

    def wrapper_state(self) -> Any: ...

    def restore_wrapper_state(self, state: Any) -> None: ...


def _qualname(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _participants(env: gym.Env) -> list[Any]:
    found = []
    while isinstance(env, gym.Wrapper):
        if isinstance(env, SnapshotParticipant):
            found.append(env)
        env = env.env
    return found


def take_snapshot(env: gym.Env) -> Snapshot:
    """Snapshot an env and every stateful wrapper around it."""
    inner = env.unwrapped
    snapshot = getattr(inner, "snapshot", None)
    if snapshot is None:
        raise SnapshotError(f"{_qualname(inner)} does not support snapshots")
    snap = snapshot()
    wrappers = tuple((_qualname(w), w.wrapper_state()) for w in _participants(env))
    return replace(snap, wrappers=wrappers) if wrappers else snap


def restore_snapshot(env: gym.Env, snap: Snapshot) -> None:
    """Restore an env and its stateful wrappers from ``take_snapshot``'s result."""
    participants = _participants(env)
    names = tuple(_qualname(w) for w in participants)
    saved = tuple(name for name, _ in snap.wrappers)
    if names != saved:
        raise SnapshotError(
            f"wrapper chain differs: snapshot has {list(saved)}, this env has {list(names)}"
        )
    env.unwrapped.restore(snap)  # type: ignore[attr-defined]
    for wrapper, (_, state) in zip(participants, snap.wrappers, strict=True):
        wrapper.restore_wrapper_state(state)
