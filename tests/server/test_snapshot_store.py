"""The server's snapshot store on its own: ownership, least-recently-used eviction with a
session's fair share, the memory bound and expiry, on a clock the test moves."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.snapshot import take_snapshot
from agentenvs.server.protocol import SessionError
from agentenvs.server.snapshots import SnapshotStore


@pytest.fixture(scope="module")
def snap():
    env = gym.make("agentenvs/FrozenLake-v0")
    env.reset(seed=0)
    yield take_snapshot(env)
    env.close()


def test_a_session_over_its_share_loses_its_own_oldest_first(snap) -> None:
    store = SnapshotStore(max_count=4, fair_count=2)
    quiet = store.put("quiet", snap)
    greedy = [store.put("greedy", snap) for _ in range(6)]
    assert len(store) == 4
    assert store.get("quiet", quiet).base == snap.base  # the quiet session keeps its one
    for token in greedy[:3]:
        with pytest.raises(SessionError, match="gone"):
            store.get("greedy", token)
    assert all(store.get("greedy", t) for t in greedy[3:])


def test_restoring_keeps_a_snapshot_fresh_and_unused_ones_expire(snap) -> None:
    now = [0.0]
    store = SnapshotStore(max_count=2, ttl=10.0, clock=lambda: now[0])
    root, other = store.put("s", snap), store.put("s", snap)
    store.get("s", root)  # used: now the most recent
    store.put("s", snap)  # pushes out the least recently used, which is the other one
    with pytest.raises(SessionError, match="gone"):
        store.get("s", other)
    now[0] = 9.0
    store.get("s", root)
    now[0] = 18.0
    store.get("s", root)  # 9 s since its last use
    now[0] = 30.0
    with pytest.raises(SessionError, match="gone"):
        store.get("s", root)


def test_ownership_memory_and_sharing(snap) -> None:
    size = len(snap.to_bytes())
    store = SnapshotStore(max_bytes=3 * size)
    tokens = [store.put("a", snap) for _ in range(5)]
    assert len(store) == 3 and store.nbytes == 3 * size
    with pytest.raises(SessionError, match="another session"):
        store.get("b", tokens[-1])
    store.drop_owner("a")
    assert len(store) == 0 and store.nbytes == 0
    with pytest.raises(SessionError, match="more than the server keeps"):
        SnapshotStore(max_bytes=size - 1).put("a", snap)
    shared = SnapshotStore(shared=True)
    token = shared.put("a", snap)
    shared.drop_owner("a")  # shared snapshots outlive their session
    assert shared.get("b", token).base == snap.base
