"""The env server's fast paths answer exactly as its typed models would."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import gymnasium as gym
from websockets.asyncio.client import connect

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.server.models import TextObservation, json_safe

FROZEN = "agentenvs/FrozenLake-v0"


def ws_url(server: Any) -> str:
    return server.ws_url  # with the server's token


async def ask(ws: Any, message: Any) -> dict[str, Any]:
    await ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=60))


def model_payload(step: tuple[Any, ...]) -> dict[str, Any]:
    """What the server's models make of an in-process step."""
    obs, reward, terminated, truncated, info = step
    model = TextObservation(
        text=obs,
        terminated=terminated,
        truncated=truncated,
        done=terminated or truncated,
        reward=float(reward),
        info=json_safe(info),
    )
    return {
        "observation": model.model_dump(exclude={"reward", "done", "metadata"}),
        "reward": model.reward,
        "done": model.done,
    }


async def pipelined(url: str, moves: list[str]) -> list[dict[str, Any]]:
    """Reset, then every step sent before any reply is read; the steps' replies."""
    async with connect(url) as ws:
        await ask(ws, {"type": "reset", "data": {"seed": 3}})
        for move in moves:
            await ws.send(json.dumps({"type": "step", "data": {"text": move}}))
        return [json.loads(await ws.recv())["data"] for _ in moves]


def test_step_replies_are_the_models_payload_in_order(start_server) -> None:
    cases = [
        (FROZEN, {"map_name": "8x8"}, ["Left", "Down", "Right", "nonsense", "Down"]),
        # an info with nested values (the verdict): the general conversion
        ("agentenvs/BFCL-v0", {}, ["[f(x=1)]", "not a call", "[]"]),
    ]
    for env_id, kwargs, moves in cases:
        server = start_server(env_id, env_kwargs=kwargs)
        local = gym.make(env_id, **kwargs)
        local.reset(seed=3)
        want = []
        for move in moves:
            step = local.step(move)
            want.append(model_payload(step))
            if step[2] or step[3]:
                break

        got = asyncio.run(pipelined(ws_url(server), moves[: len(want)]))
        assert got == want
        assert [list(g["observation"]) for g in got] == [list(w["observation"]) for w in want]


def test_actions_off_the_fast_path_are_judged_by_the_model(start_server) -> None:
    server = start_server(FROZEN)

    async def main() -> None:
        async with connect(ws_url(server)) as ws:
            await ask(ws, {"type": "reset", "data": {"seed": 0}})
            with_metadata = {"text": "Left", "metadata": {"why": "a test"}}
            reply = await ask(ws, {"type": "step", "data": with_metadata})
            assert reply["type"] == "observation"
            assert reply["data"]["observation"]["info"]["turn"] == 1
            for data in (
                {"text": 3},
                {"text": "Left", "extra": 1},
                {},
                {"text": "Left", "metadata": 1},
            ):
                reply = await ask(ws, {"type": "step", "data": data})
                assert reply["type"] == "error", data
                assert reply["data"]["code"] == "VALIDATION_ERROR"
                assert reply["data"]["message"].startswith("invalid action"), reply
            state = await ask(ws, {"type": "state"})
            assert state["data"]["turn"] == 1  # refused actions spend no turn

    asyncio.run(main())


def test_replies_are_not_compressed(start_server) -> None:
    server = start_server(FROZEN)

    async def main() -> None:
        async with connect(ws_url(server), compression="deflate") as ws:
            assert ws.protocol.extensions == []  # the offer is declined
            reply = await ask(ws, {"type": "reset", "data": {"seed": 0}})
            assert reply["type"] == "observation"

    asyncio.run(main())
