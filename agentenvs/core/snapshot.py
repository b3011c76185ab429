"""Snapshots: a picklable, self-contained copy of everything an agent can change.

``TextEnv.snapshot()`` captures the env alone. ``take_snapshot(env)`` walks a wrapper
chain as well: every wrapper that implements ``wrapper_state()`` and
``restore_wrapper_state(state)`` adds its state, so a wrapped env is restored whole.
"""

from __future__ import annotations

import hashlib
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
        """The snapshot as bytes: a header, a checksum of the payload, then the payload.

        ``from_bytes`` refuses bytes whose checksum does not match, so a flipped or lost
        byte is a ``SnapshotError``, never a silently different state.
        """
        payload = pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)
        return _MAGIC + hashlib.blake2b(payload, digest_size=_DIGEST_SIZE).digest() + payload

    @staticmethod
    def from_bytes(data: bytes) -> Snapshot:
        """Decode ``to_bytes``'s output; any other bytes raise ``SnapshotError``."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise SnapshotError(f"snapshot bytes expected, got {type(data).__name__}")
        data = bytes(data)
        head = len(_MAGIC) + _DIGEST_SIZE
        if len(data) <= head or not data.startswith(_MAGIC):
            raise SnapshotError(
                "not agentenvs snapshot bytes (no header: truncated, or not from to_bytes())"
            )
        digest, payload = data[len(_MAGIC) : head], data[head:]
        if hashlib.blake2b(payload, digest_size=_DIGEST_SIZE).digest() != digest:
            raise SnapshotError("snapshot bytes are corrupted: the checksum does not match")
        try:
            snap = pickle.loads(payload)
        except Exception as exc:  # a checksummed payload this version cannot read
            raise SnapshotError(f"cannot decode snapshot bytes: {exc}") from exc
        if not isinstance(snap, Snapshot):
            raise SnapshotError(f"bytes decode to {type(snap).__name__}, not a Snapshot")
        return snap


#: "agentenvs snapshot", format 1; the checksum guards the pickle that follows
_MAGIC = b"AESNAP1\n"
_DIGEST_SIZE = 32


@runtime_checkable
class SnapshotParticipant(Protocol):
    """A wrapper whose own state belongs in snapshots.

    It may also define ``check_wrapper_state(state)``, raising on a state it would not
    restore; ``restore_snapshot`` calls it on every wrapper before anything is changed,
    so ``restore_wrapper_state`` then only assigns.
    """

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
    """Restore an env and its stateful wrappers from ``take_snapshot``'s result.

    All or nothing: every part of ``snap`` is checked before anything is restored, and
    on ``SnapshotError`` the env and its wrappers are as they were.
    """
    if not isinstance(snap, Snapshot):
        raise SnapshotError(f"expected a Snapshot, got {type(snap).__name__}")
    participants = _participants(env)
    names = tuple(_qualname(w) for w in participants)
    wrappers = snap.wrappers
    if not isinstance(wrappers, tuple) or not all(
        isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str) for pair in wrappers
    ):
        raise SnapshotError("snapshot field 'wrappers' must be a tuple of (class name, state) pairs")
    saved = tuple(name for name, _ in wrappers)
    if names != saved:
        raise SnapshotError(
            f"wrapper chain differs: snapshot has {list(saved)}, this env has {list(names)}"
        )
    for wrapper, (name, state) in zip(participants, wrappers, strict=True):
        check = getattr(wrapper, "check_wrapper_state", None)
        if check is None:
            continue
        try:
            check(state)
        except Exception as exc:
            raise SnapshotError(f"snapshot state of wrapper {name} is not valid: {exc}") from exc
    inner = env.unwrapped
    restore = getattr(inner, "restore", None)
    if restore is None:
        raise SnapshotError(f"{_qualname(inner)} does not support snapshots")
    before = [w.wrapper_state() for w in participants]
    # a wrapper without a check may still refuse its state: keep the env's to undo with
    unchecked = any(getattr(w, "check_wrapper_state", None) is None for w in participants)
    prior = None
    if unchecked and getattr(inner, "task_id", None) is not None:
        prior = inner.snapshot()
    restore(snap)  # all or nothing itself
    try:
        for wrapper, (_, state) in zip(participants, wrappers, strict=True):
            wrapper.restore_wrapper_state(state)
    except Exception as exc:
        for wrapper, state in zip(participants, before, strict=True):
            wrapper.restore_wrapper_state(state)
        if prior is not None:
            restore(prior)
        raise SnapshotError(f"cannot restore a wrapper's state: {exc}") from exc
