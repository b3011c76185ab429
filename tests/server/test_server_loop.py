"""The server's event loop: uvloop where installed, asyncio's own on request; both serve
the same episodes as the env in process."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.server.app import LOOP_VARIABLE, event_loop
from agentenvs.server.client import RemoteEnv
from agentenvs.server.models import json_safe

MOVES = ["Left", "Down", "Right", "Up", "jump"]  # "jump" is invalid: an explained error turn
KWARGS = {"map_name": "8x8", "max_turns": 8}


def actions(seed: int) -> list[str]:
    return [MOVES[(seed * 7 + i * 3) % 5] for i in range(8)]


def in_process(seed: int) -> list[Any]:
    env = gym.make("agentenvs/FrozenLake-v0", **KWARGS)
    obs, info = env.reset(seed=seed)
    out: list[Any] = [(obs, json_safe(info))]
    for action in actions(seed):
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs, float(reward), terminated, truncated, json_safe(info)))
        if terminated or truncated:
            break
    env.close()
    return out


async def remote(url: str, seed: int) -> list[Any]:
    async with RemoteEnv(url) as env:
        obs, info = await env.areset(seed=seed)
        out: list[Any] = [(obs, info)]
        for action in actions(seed):
            obs, reward, terminated, truncated, info = await env.astep(action)
            out.append((obs, float(reward), terminated, truncated, info))
            if terminated or truncated:
                break
    return out

uvloop_installed = pytest.mark.skipif(
    importlib.util.find_spec("uvloop") is None,
    reason="could not import uvloop: pip install 'agentenvs[server]'",
)


def test_the_variable_picks_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOOP_VARIABLE, "asyncio")
    assert event_loop() == "asyncio"
    monkeypatch.setenv(LOOP_VARIABLE, "tokio")
    with pytest.raises(ValueError, match="must be one of"):
        event_loop()


@uvloop_installed
def test_uvloop_is_the_default_where_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOOP_VARIABLE, raising=False)
    assert event_loop() == "uvloop"
    monkeypatch.setenv(LOOP_VARIABLE, "UVLoop")
    assert event_loop() == "uvloop"


@pytest.mark.parametrize("loop", ["asyncio", pytest.param("uvloop", marks=uvloop_installed)])
def test_each_loop_serves_the_in_process_episodes(start_server, loop: str) -> None:
    server = start_server(
        "agentenvs/FrozenLake-v0", "--max-sessions", "8", env_kwargs=KWARGS,
        extra_env={LOOP_VARIABLE: loop},
    )
    assert f"; {loop} loop)" in server.announced
    seeds = list(range(8))

    async def main() -> list[list[Any]]:
        return await asyncio.gather(*(remote(server.url, s) for s in seeds))

    for seed, episode in zip(seeds, asyncio.run(main()), strict=True):
        assert episode == in_process(seed)


def test_an_unknown_loop_stops_the_server_before_it_listens() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentenvs.cli", "serve", "--env", "agentenvs/FrozenLake-v0",
         "--port", "0", "--env-kwargs", json.dumps({"map_name": "4x4"})],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, LOOP_VARIABLE: "tokio"},
    )  # fmt: skip
    assert proc.returncode != 0
    assert "http://" not in proc.stdout
    assert LOOP_VARIABLE in proc.stdout + proc.stderr
