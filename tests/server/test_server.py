"""The env server on loopback: concurrent sessions equal in-process episodes, snapshots
through tokens, errors that keep the session, and nothing left when clients go away."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.server.client import RemoteEnv, RemoteError, RemoteFault
from agentenvs.server.client import openenv_client as agentenvs_openenv_client
from agentenvs.server.models import json_safe

openenv_client = pytest.importorskip(
    "openenv.core.generic_client", reason="could not import openenv-core: pip install 'agentenvs[integrations]'"
)

MOVES = ["Left", "Down", "Right", "Up", "jump"]  # "jump" is invalid: an explained error turn


def frozenlake_actions(seed: int) -> list[str]:
    return [MOVES[(seed * 7 + i * 3) % 5] for i in range(8)]


def in_process(env_id: str, seed: int, actions: list[str], env_kwargs: dict[str, Any]) -> list[Any]:
    env = gym.make(env_id, **env_kwargs)
    obs, info = env.reset(seed=seed)
    out: list[Any] = [(obs, None, False, False, json_safe(info))]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs, float(reward), terminated, truncated, json_safe(info)))
        if terminated or truncated:
            break
    env.close()
    return out


async def through_openenv(url: str, seed: int, actions: list[str]) -> list[Any]:
    """The same episode through openenv-core's own client."""
    out: list[Any] = []
    async with agentenvs_openenv_client(url) as client:
        result = await client.reset(seed=seed)
        o = result.observation
        out.append((o["text"], result.reward, o["terminated"], o["truncated"], o["info"]))
        for action in actions:
            result = await client.step({"text": action})
            o = result.observation
            assert result.done == (o["terminated"] or o["truncated"])
            out.append((o["text"], result.reward, o["terminated"], o["truncated"], o["info"]))
            if result.done:
                break
    return out


def test_64_frozenlake_sessions_equal_in_process_episodes(start_server) -> None:
    kwargs = {"map_name": "8x8", "max_turns": 8}
    server = start_server("agentenvs/FrozenLake-v0", "--max-sessions", "64", env_kwargs=kwargs)
    seeds = list(range(64))

    async def main() -> list[list[Any]]:
        return await asyncio.gather(*(through_openenv(server.url, s, frozenlake_actions(s)) for s in seeds))

    remote = asyncio.run(main())
    for seed, episode in zip(seeds, remote, strict=True):
        assert episode == in_process("agentenvs/FrozenLake-v0", seed, frozenlake_actions(seed), kwargs)
    assert server.wait_sessions(0) == 0


def test_16_intercode_sqlite_sessions_equal_in_process_episodes(start_server) -> None:
    server = start_server("agentenvs/InterCodeSQL-v0", "--max-sessions", "16")
    probe = gym.make("agentenvs/InterCodeSQL-v0")
    scripts = {}
    for seed in range(16):
        probe.reset(seed=seed)
        gold = probe.unwrapped.gold_query
        wrong = "SELECT * FROM no_such_table" if seed % 2 else "```sql\nSELECT 1\n```"
        scripts[seed] = [wrong, f"```sql\n{gold}\n```", "submit"]
    probe.close()

    async def main() -> list[list[Any]]:
        return await asyncio.gather(*(through_openenv(server.url, s, scripts[s]) for s in scripts))

    remote = asyncio.run(main())
    for seed, episode in zip(scripts, remote, strict=True):
        assert episode == in_process("agentenvs/InterCodeSQL-v0", seed, scripts[seed], {})
        assert episode[-1][1] == 1.0  # the gold query, then submit: full reward
    assert server.wait_sessions(0) == 0


def test_reset_options_snapshots_and_errors(start_server) -> None:
    # snapshots shared between sessions: one client's token restores into another's
    server = start_server(
        "agentenvs/FrozenLake-v0", "--max-sessions", "3", "--share-snapshots",
        env_kwargs={"map_name": "8x8"},
    )

    async def main() -> None:
        async with RemoteEnv(server.url) as env, RemoteEnv(server.url) as other:
            with pytest.raises(RemoteError, match="reset") as err:
                await env.astep("Down")
            assert err.value.code == "EXECUTION_ERROR"
            obs, info = await env.areset(seed=5, options={"task_id": "4x4", "max_turns": 3})
            assert info["task_id"] == "4x4" and info["max_turns"] == 3
            assert info["system_prompt"] and obs.startswith(info["system_prompt"])
            with pytest.raises(RemoteError) as err:
                await env.areset(seed=1, options={"no_such_option": 1})
            assert err.value.code == "VALIDATION_ERROR"
            # the session survives its errors
            await env.areset(seed=5, options={"task_id": "8x8"})
            await env.astep("Right")
            token = await env.asnapshot()
            after = [await env.astep(a) for a in ("Down", "Down", "Right")]
            restored_obs, restored_info = await other.arestore(token)
            assert restored_info["turn"] == 1 and restored_info["task_id"] == "8x8"
            assert [await other.astep(a) for a in ("Down", "Down", "Right")] == after
            state = await other.astate()
            assert state["turn"] == 4 and state["task_id"] == "8x8"
            # a reset can start from a snapshot too (for clients that know only reset)
            async with agentenvs_openenv_client(server.url) as client:
                result = await client.reset(snapshot=token)
                assert result.observation["text"] == restored_obs
                # ... but never from a token this server did not issue
                forged = token[:10] + ("A" if token[10] != "A" else "B") + token[11:]
                with pytest.raises(RuntimeError, match="not issued by this server"):
                    await client.reset(snapshot=forged)
            # the third session fills the server; a fourth is refused with OpenEnv's code,
            # which the client raises as a fault of the env server (retried, never scored)
            assert server.wait_sessions(2) == 2  # the openenv client's session has ended
            async with RemoteEnv(server.url) as third:
                await third.areset(seed=0)
                with pytest.raises(RemoteFault) as refused:
                    await RemoteEnv(server.url).areset(seed=0)
                assert (refused.value.code, refused.value.kind) == ("CAPACITY_REACHED", "env-server")
            for bad, code in ((["not an object"], "INVALID_JSON"), ({"type": "fly"}, "UNKNOWN_TYPE")):
                assert env._ws is not None
                await env._ws.send(json.dumps(bad))
                reply = json.loads(await env._ws.recv())
                assert reply["type"] == "error" and reply["data"]["code"] == code
            with pytest.raises(RemoteError) as err:
                await env._call("step", {"action": "Down"})
            assert err.value.code == "VALIDATION_ERROR"

    asyncio.run(main())
    assert server.wait_sessions(0) == 0
    schema = server.get("/schema")
    assert schema["action"]["required"] == ["text"]
    assert server.get("/metadata")["name"] == "agentenvs/FrozenLake-v0"


def test_idle_sessions_time_out(start_server) -> None:
    server = start_server("agentenvs/FrozenLake-v0", "--session-timeout", "0.5")

    async def main() -> None:
        env = await RemoteEnv(server.url).connect()
        await env.areset(seed=0)
        assert server.active_sessions() == 1
        assert server.wait_sessions(0, timeout=30) == 0
        with pytest.raises(Exception):  # noqa: B017 - the server closed the connection
            await env.astep("Down")

    asyncio.run(main())


CLIENT = """
import asyncio, sys
from agentenvs.server.client import RemoteEnv

async def main(url, n):
    envs = [await RemoteEnv(url).connect() for _ in range(n)]
    for i, env in enumerate(envs):
        await env.areset(seed=i)
        await env.astep("```bash\\nsleep 300 &\\necho started\\n```")
    print("ready", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


@pytest.mark.bwrap
def test_a_killed_client_leaves_no_env_behind(start_server) -> None:
    server = start_server("agentenvs/TerminalBench-v0", env_kwargs={"runtime": "local"})
    before = server.children()
    client = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CLIENT), server.url, "4"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert client.stdout is not None
        line = client.stdout.readline()
        assert line.strip() == "ready", line + client.stdout.read()
        assert server.active_sessions() == 4
        assert len(server.children() - before) >= 4  # a shell (and its sleep) per session
    finally:
        client.send_signal(signal.SIGKILL)
        client.wait()
    assert server.wait_sessions(0) == 0
    deadline = time.monotonic() + 60
    while server.children() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.children() - before == set()


def test_import_agentenvs_does_not_load_the_server() -> None:
    code = "import sys, agentenvs; print(any(m in sys.modules for m in ('fastapi', 'uvicorn', 'websockets')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
