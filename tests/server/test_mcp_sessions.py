"""MCP sessions' bounds: bad calls answered as errors with the session kept, a killed
client's env closed (stdio and HTTP), and a clear refusal past the sessions bound."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import anyio
import pytest

pytest.importorskip("mcp", reason="could not import mcp: pip install 'agentenvs[server]'")

from _mcp_helpers import (  # noqa: E402
    ROOT,
    child_env,
    http_server,
    http_session,
    serve_args,
    stdio_session,
    traversable_tmp,
)
from _token import AUTH, TEST_TOKEN  # noqa: E402

FROZENLAKE = "agentenvs/FrozenLake-v0"
TERMINAL = "agentenvs/TerminalBench-v0"


def _descendants(pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - found
        found |= frontier
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.add(pid)
        except OSError:
            pass
    return alive


def _sandbox_dirs(path) -> list[str]:  # noqa: ANN001
    return [p.name for p in path.iterdir() if not p.name.startswith(("agentenvs-pylib-", "agentenvs-etc-"))]


async def _bad_calls(session) -> None:  # noqa: ANN001
    early = await session.call_tool("move", {"direction": "Down"})
    assert early.is_error and early.structured_content["code"] == "NO_EPISODE"
    assert "call reset first" in early.content[0].text
    reset = await session.call_tool("reset", {"task_id": "4x4", "seed": 0})
    assert not reset.is_error and "`move`" in reset.content[0].text
    unknown = await session.call_tool("jump", {"height": 3})
    assert unknown.is_error and unknown.structured_content["code"] == "UNKNOWN_TOOL"
    assert "unknown tool 'jump'" in unknown.content[0].text
    assert "move" in unknown.content[0].text  # it names the tools there are
    wrong = await session.call_tool("move", {"direction": 3})
    assert wrong.is_error and wrong.structured_content["code"] == "VALIDATION_ERROR"
    assert "direction" in wrong.content[0].text and "string" in wrong.content[0].text
    choice = await session.call_tool("move", {"direction": "North"})
    assert choice.is_error and "North" in choice.content[0].text
    extra = await session.call_tool("move", {"direction": "Down", "speed": 2})
    assert extra.is_error and extra.structured_content["code"] == "VALIDATION_ERROR"
    bad_reset = await session.call_tool("reset", {"seed": "zero"})
    assert bad_reset.is_error
    # none of them cost a turn, and the session goes on
    state = await session.call_tool("state", {})
    assert state.structured_content["turn"] == 0
    move = await session.call_tool("move", {"direction": "Down"})
    assert not move.is_error and move.structured_content["turn"] == 1


def test_bad_calls_are_error_results_and_the_stdio_session_goes_on() -> None:
    async def main() -> None:
        async with stdio_session(FROZENLAKE) as session:
            await _bad_calls(session)

    anyio.run(main)


def test_bad_calls_are_error_results_and_the_http_session_goes_on() -> None:
    with http_server(FROZENLAKE) as server:

        async def main() -> None:
            async with http_session(server.url) as session:
                await _bad_calls(session)

        anyio.run(main)


# a client that starts a Terminal-Bench episode, says where, and waits to be killed
STDIO_CLIENT = """
import anyio, json, os, sys
from mcp import ClientSession, StdioServerParameters, stdio_client

async def main():
    args = json.loads(sys.argv[1])
    params = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("reset", {"seed": 0})
        assert not result.is_error, result.content[0].text
        result = await session.call_tool("run_command", {"command": "sleep 600 &"})
        assert not result.is_error, result.content[0].text
        print("ready", flush=True)
        await anyio.sleep(600)

anyio.run(main)
"""

HTTP_CLIENT = """
import anyio, httpx2, sys
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

async def main():
    headers = {"Authorization": "Bearer " + sys.argv[2]}
    async with httpx2.AsyncClient(headers=headers) as http, streamable_http_client(
        sys.argv[1], http_client=http
    ) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("reset", {"seed": 0})
            assert not result.is_error, result.content[0].text
            result = await session.call_tool("run_command", {"command": "sleep 600 &"})
            assert not result.is_error, result.content[0].text
            print("ready", flush=True)
            await anyio.sleep(600)

anyio.run(main)
"""


@pytest.mark.bwrap
def test_a_killed_stdio_client_leaves_nothing_behind() -> None:
    import json

    with traversable_tmp() as tmp:
        client = subprocess.Popen(
            [
                sys.executable,
                "-c",
                textwrap.dedent(STDIO_CLIENT),
                json.dumps(serve_args(TERMINAL, transport="stdio")),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=child_env(tmp),
            cwd=str(ROOT),
        )
        try:
            assert client.stdout is not None
            line = client.stdout.readline()
            assert line.strip() == "ready", line + client.stdout.read()
            held = _descendants(client.pid)  # the server, its shell, the shell's sleep
            assert len(held) >= 3
            assert _sandbox_dirs(tmp) != []
        finally:
            client.send_signal(signal.SIGKILL)
            client.wait()
        deadline = time.monotonic() + 120
        while (_alive(held) or _sandbox_dirs(tmp)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive(held) == set()  # the server saw its stdin end, closed the env, exited
        assert _sandbox_dirs(tmp) == []


@pytest.mark.bwrap
def test_a_killed_http_client_s_session_times_out_and_leaves_nothing_behind() -> None:
    with (
        traversable_tmp() as tmp,
        http_server(TERMINAL, "--session-timeout", "2", tmpdir=tmp) as server,
    ):
        before = _descendants(server.proc.pid)
        client = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(HTTP_CLIENT), server.url, TEST_TOKEN],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=child_env(),
        )
        try:
            assert client.stdout is not None
            line = client.stdout.readline()
            assert line.strip() == "ready", line + client.stdout.read()
            assert server.sessions()["envs"] == 1
            assert len(_descendants(server.proc.pid) - before) >= 2  # a shell and its sleep
        finally:
            client.send_signal(signal.SIGKILL)  # no DELETE: the session just goes quiet
            client.wait()
        assert server.wait_envs(0) == 0
        assert server.sessions()["active"] == 0
        deadline = time.monotonic() + 60
        while _descendants(server.proc.pid) - before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _descendants(server.proc.pid) - before == set()
        assert _sandbox_dirs(tmp) == []


def test_past_max_sessions_a_new_session_is_refused_clearly() -> None:
    with http_server(FROZENLAKE, "--max-sessions", "2") as server:

        async def main() -> str:
            async with http_session(server.url) as first, http_session(server.url) as second:
                for session in (first, second):
                    assert not (await session.call_tool("reset", {"seed": 1})).is_error
                assert server.sessions()["envs"] == 2
                try:
                    async with http_session(server.url):
                        pass
                except BaseException as exc:  # noqa: BLE001 - what the SDK raises is its own
                    refused = _messages(exc)
                else:
                    raise AssertionError("a third session was served")
                # the two sessions go on
                assert not (await first.call_tool("move", {"direction": "Down"})).is_error
            return refused

        refused = anyio.run(main)
        assert "capacity" in refused and "2 sessions" in refused, refused
        assert server.wait_envs(0) == 0

        async def again() -> None:  # room again once they ended
            async with http_session(server.url) as session:
                assert not (await session.call_tool("reset", {"seed": 1})).is_error

        anyio.run(again)


def _messages(exc: BaseException) -> str:
    parts = [f"{type(exc).__name__}: {exc}"]
    for inner in getattr(exc, "exceptions", ()):
        parts.append(_messages(inner))
    return " | ".join(parts)


def test_a_request_over_the_message_bound_is_refused_and_the_session_kept() -> None:
    import json
    import urllib.error
    import urllib.request

    with http_server(FROZENLAKE, "--max-message-bytes", "4096") as server:
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "move", "arguments": {"direction": "x" * 8192}},
            }
        )
        request = urllib.request.Request(
            server.url,
            data=body.encode(),
            method="POST",
            headers={
                **AUTH,
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
            },
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=30)
        assert info.value.code == 413
        assert server.sessions()["envs"] == 0  # refused before any session was made
