"""A direct reset reply (``Session.reset_now``) is the one the receive loop would make."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.aio import AsyncEnv
from agentenvs.server.app import ServerConfig, Session, _dumps
from agentenvs.server.models import observation_payload
from agentenvs.server.protocol import SessionError
from agentenvs.server.snapshots import SnapshotStore

CONFIG = ServerConfig(env_id="agentenvs/FrozenLake-v0", env_kwargs={"map_name": "4x4"})

DATA = [
    {},
    {"seed": 0},
    {"seed": 7},
    {"seed": 2**64 - 1},
    {"seed": None},
    {"seed": 3, "episode_id": "ep-1"},
    {"episode_id": "ep-2"},
    {"seed": 4, "max_turns": 5},
    {"seed": True},
    {"seed": 5.0},
    {"seed": -1},
    {"seed": 2**64},
    {"seed": "7"},
    {"seed": 1, "colour": "red"},
]


def _session() -> Session:
    env = gym.make(CONFIG.env_id, **CONFIG.env_kwargs)
    return Session("s", AsyncEnv(env, None), CONFIG, SnapshotStore())


def _outcome(call: Any) -> Any:
    try:
        return ("reply", json.loads(_dumps(call())))  # as the wire carries it
    except SessionError as exc:
        return ("error", str(exc), exc.code)


@pytest.mark.parametrize("data", DATA, ids=[repr(d) for d in DATA])
def test_reset_now_replies_as_the_receive_loop(data: dict[str, Any]) -> None:
    direct, loop = _session(), _session()
    got = _outcome(lambda: direct.reset_now(dict(data)))
    want = _outcome(lambda: observation_payload(asyncio.run(loop.reset(dict(data)))))
    assert got == want
    if got[0] == "reply":
        assert (direct.episode_id is None) == (loop.episode_id is None)
        if "episode_id" in data:
            assert direct.episode_id == loop.episode_id == data["episode_id"]
        if data.get("seed") is not None:
            states = [s.env.env.unwrapped.np_random.bit_generator.state for s in (direct, loop)]
            assert states[0] == states[1]
