"""Failures inside a real env's reset or restore (a database that cannot be opened, a
state that cannot be loaded) leave the live episode exactly as it was."""

from __future__ import annotations

import pickle

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.core.errors import SnapshotError
from agentenvs.core.snapshot import Snapshot, take_snapshot


def _frozen(env: gym.Env) -> bytes:
    return pickle.dumps(take_snapshot(env))


def test_sql_reset_whose_database_cannot_open_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    env = gym.make("agentenvs/InterCodeSQL-v0")
    try:
        env.reset(seed=1, options={"max_turns": 4})
        env.step("DELETE FROM " + next(iter(env.unwrapped.task.db_tables)))
        before = _frozen(env)
        backend = env.unwrapped.backend

        def refuse(*args: object, **kwargs: object) -> None:
            raise OSError("disk full")

        monkeypatch.setattr(backend, "open_episode", refuse)
        other = next(t for t in env.unwrapped.task_ids if t != env.unwrapped.task_id)
        with pytest.raises(OSError, match="disk full"):
            env.reset(seed=2, options={"task_id": other, "max_turns": 50})
        assert _frozen(env) == before
        monkeypatch.undo()
        _, _, _, _, info = env.step("SELECT 1")
        assert info["turn"] == 2 and info["max_turns"] == 4
    finally:
        env.close()


def test_sql_restore_of_a_damaged_database_changes_nothing() -> None:
    env = gym.make("agentenvs/InterCodeSQL-v0")
    try:
        env.reset(seed=3)
        good = take_snapshot(env)
        env.step("DELETE FROM " + next(iter(env.unwrapped.task.db_tables)))
        before = _frozen(env)
        image = bytearray(good.state["db"])
        for where in (100, len(image) // 2, len(image) - 10):
            damaged = bytearray(image)
            damaged[where : where + 8] = b"\xff" * 8
            state = {**good.state, "db": bytes(damaged)}
            snap = Snapshot(good.env_class, good.version, good.base, state, good.wrappers)
            try:
                env.unwrapped.restore(snap)
            except SnapshotError:
                assert _frozen(env) == before
            else:  # a change SQLite's check cannot see: the state must still play
                env.step("SELECT 1")
                env.unwrapped.restore(pickle.loads(before))
        cut = {**good.state, "db": image[: len(image) // 2]}
        with pytest.raises(SnapshotError):
            env.unwrapped.restore(Snapshot(good.env_class, good.version, good.base, cut, good.wrappers))
        assert _frozen(env) == before
    finally:
        env.close()
