"""ORS sessions' bounds, through ``ors-sdk``'s client: bad calls answered as errors with the
session kept, a killed client's env closed, a clear refusal past the sessions bound, the
message bound, and an env's infrastructure fault reported as a fault, never a reward."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("ors", reason="could not import ors: pip install 'agentenvs[ors]'")

from _mcp_helpers import ROOT, child_env, traversable_tmp  # noqa: E402
from _ors_helpers import ors_env, ors_server, task  # noqa: E402
from test_mcp_sessions import _alive, _descendants, _sandbox_dirs  # noqa: E402

from agentenvs.core.errors import Fault  # noqa: E402
from agentenvs.envs.frozenlake.env import FrozenLakeEnv  # noqa: E402
from agentenvs.server.app import ServerConfig  # noqa: E402
from agentenvs.server.ors import create_ors_app, error_code, fault_record  # noqa: E402

FROZENLAKE = "agentenvs/FrozenLake-v0"
TERMINAL = "agentenvs/TerminalBench-v0"
SPEC = {"task_id": "4x4", "seed": 0}


def _refusal(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc} {getattr(exc, 'status', '')}"


async def _raises(coro: Any) -> str:
    try:
        await coro
    except Exception as exc:  # noqa: BLE001 - the SDK's own error types
        return _refusal(exc)
    raise AssertionError("the call was answered")


async def _error(coro: Any) -> str:
    """The text of the SDK client's ``ToolCallError`` for a call answered with an error."""
    from ors.client._types import ToolCallError

    try:
        await coro
    except ToolCallError as exc:
        return str(exc)
    raise AssertionError("the call was answered")


def test_bad_calls_are_errors_and_the_session_goes_on() -> None:
    with ors_server(FROZENLAKE) as server:

        async def main() -> None:
            async with (
                ors_env(server.url, FROZENLAKE) as env,
                env.session(task=task(FROZENLAKE, SPEC)) as session,
            ):
                unknown = await _raises(session.call_tool("jump", {"height": 3}))
                assert "UNKNOWN_TOOL: unknown tool 'jump'" in unknown
                assert "tools: move" in unknown  # it names the tools there are
                reset = await _raises(session.call_tool("reset", {"seed": 1}))
                assert "UNKNOWN_TOOL" in reset  # a new episode is a new session
                wrong = await _raises(session.call_tool("move", {"direction": 3}))
                assert "VALIDATION_ERROR" in wrong and "direction" in wrong
                assert "string" in wrong
                choice = await _raises(session.call_tool("move", {"direction": "North"}))
                assert "VALIDATION_ERROR" in choice and "North" in choice
                extra = await _raises(session.call_tool("move", {"direction": "Down", "n": 2}))
                assert "VALIDATION_ERROR" in extra
                # none of them cost a turn, and the session goes on
                move = await session.call_tool("move", {"direction": "Down"})
                assert move.metadata["turn"] == 1 and move.reward == 0.0

            # a task spec the env refuses: HTTP 400 naming it, on the session's first request
            for spec, words in (
                ({"task_id": "no-such-map"}, "no-such-map"),
                ({"task_id": "4x4", "sed": 1}, "'sed'"),
                ({"max_turns": 0}, "max_turns"),
            ):
                async with env_session(server.url, spec) as session:
                    refused = await _raises(session.get_prompt())
                    assert "400" in refused and words in refused, refused
                    assert "ERROR" in refused

        asyncio.run(main())
        assert server.wait_envs(0) == 0


def env_session(url: str, spec: dict[str, Any]) -> Any:
    """A session of FrozenLake on its own client (closed with it)."""
    import contextlib

    @contextlib.asynccontextmanager
    async def opened() -> Any:
        async with ors_env(url, FROZENLAKE) as env, env.session(task=task(FROZENLAKE, spec)) as s:
            yield s

    return opened()


# a client that starts an episode, says so, and waits to be killed
CLIENT = """
import asyncio, json, sys
from ors.client import AsyncORS
from ors.client._types import Task

async def main():
    url, name, spec, call = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
    client = AsyncORS(url)
    env = client.environment(name)
    async with env.session(task=Task(environment_name=name, task_spec=spec)) as session:
        await session.call_tool(*call)
        print("ready", flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


def _killed_client(server: Any, env_id: str, spec: dict, call: list) -> set[int]:
    """Start a client that plays one call and waits; kill it; return the server's
    children the session had made."""
    import json

    before = _descendants(server.proc.pid)
    name = env_id.rsplit("/", 1)[-1]
    client = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(CLIENT),
            server.url,
            name,
            json.dumps(spec),
            json.dumps(call),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=child_env(),
        cwd=str(ROOT),
    )
    try:
        assert client.stdout is not None
        line = client.stdout.readline()
        assert line.strip() == "ready", line + client.stdout.read()
        assert server.sessions()["envs"] == 1
        made = _descendants(server.proc.pid) - before
    finally:
        client.send_signal(signal.SIGKILL)  # no delete: the session just goes quiet
        client.wait()
    return made


def test_a_killed_client_s_session_times_out_and_its_env_is_closed() -> None:
    with ors_server(FROZENLAKE, "--session-timeout", "2") as server:
        _killed_client(server, FROZENLAKE, SPEC, ["move", {"direction": "Down"}])
        assert server.wait_envs(0) == 0
        assert server.sessions()["active"] == 0


@pytest.mark.bwrap
def test_a_killed_client_leaves_no_process_or_sandbox_dir() -> None:
    with (
        traversable_tmp() as tmp,
        ors_server(TERMINAL, "--session-timeout", "2", tmpdir=tmp) as server,
    ):
        before = _descendants(server.proc.pid)
        made = _killed_client(
            server, TERMINAL, {"seed": 0}, ["run_command", {"command": "sleep 600 &"}]
        )
        assert len(made) >= 2  # a shell and its sleep
        assert _sandbox_dirs(tmp) != []
        assert server.wait_envs(0) == 0
        assert server.sessions()["active"] == 0
        deadline = time.monotonic() + 60
        while _alive(made) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive(made) == set()
        assert _descendants(server.proc.pid) - before == set()
        assert _sandbox_dirs(tmp) == []


def test_past_max_sessions_a_new_session_is_refused_clearly() -> None:
    with ors_server(FROZENLAKE, "--max-sessions", "2") as server:

        async def main() -> str:
            async with (
                env_session(server.url, SPEC) as first,
                env_session(server.url, SPEC) as second,
            ):
                for session in (first, second):
                    assert (await session.get_prompt())[0].detail["task_id"] == "4x4"
                assert server.sessions()["envs"] == 2
                try:
                    async with env_session(server.url, SPEC):
                        pass
                except Exception as exc:  # noqa: BLE001 - the SDK's own error
                    refused = _refusal(exc)
                else:
                    raise AssertionError("a third session was served")
                # the two sessions go on
                assert (await first.call_tool("move", {"direction": "Down"})).metadata["turn"] == 1
            return refused

        refused = asyncio.run(main())
        assert "capacity" in refused and "2 sessions" in refused, refused
        assert "CAPACITY_REACHED" in refused
        assert server.wait_envs(0) == 0

        async def again() -> None:  # room again once they ended
            async with env_session(server.url, SPEC) as session:
                assert (await session.call_tool("move", {"direction": "Down"})).reward == 0.0

        asyncio.run(again())


def test_a_call_over_the_message_bound_is_refused_and_the_session_kept() -> None:
    with ors_server("agentenvs/InterCodeSQL-v0", "--max-message-bytes", "4096") as server:

        async def main() -> None:
            async with env_session_of(server.url, "agentenvs/InterCodeSQL-v0") as session:
                big = "SELECT '" + "x" * 8000 + "'"
                refused = await _raises(session.call_tool("execute_sql", {"query": big}))
                assert "413" in refused, refused
                out = await session.call_tool("execute_sql", {"query": "SELECT 1"})
                assert out.metadata["turn"] == 1

        asyncio.run(main())
        assert server.wait_envs(0) == 0


def env_session_of(url: str, env_id: str) -> Any:
    import contextlib

    @contextlib.asynccontextmanager
    async def opened() -> Any:
        async with ors_env(url, env_id) as env, env.session(split="test", index=0) as s:
            yield s

    return opened()


# ------------------------------------------------------------------ faults
class FaultingLakeEnv(FrozenLakeEnv):
    """FrozenLake whose infrastructure fails: at its second step, or at reset when asked."""

    def __init__(self, *, fault_at_reset: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fault_at_reset = fault_at_reset

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        if self.fault_at_reset:
            raise Fault("the lake's server went away", kind="sandbox", evidence="test")
        return super().reset(seed=seed, options=options)

    def step(self, action: str) -> Any:
        if self.turn >= 1:
            raise Fault("the lake's server went away", kind="sandbox", evidence="test")
        return super().step(action)


FAULTY = "orstest/FrozenLake-v0"
if FAULTY not in gym.registry:
    gym.register(FAULTY, entry_point=FaultingLakeEnv, kwargs={"max_turns": 10})


class SlowStartLakeEnv(FrozenLakeEnv):
    """FrozenLake whose reset takes ``delay`` seconds: a slow start on a loaded host."""

    def __init__(self, *, delay: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay = delay

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        time.sleep(self.delay)
        return super().reset(seed=seed, options=options)


SLOW = "orstest/SlowStartFrozenLake-v0"
if SLOW not in gym.registry:
    gym.register(SLOW, entry_point=SlowStartLakeEnv, kwargs={"max_turns": 10})


@contextmanager
def in_process_server(config: ServerConfig) -> Iterator[str]:
    """The ORS app on loopback, served by uvicorn on a thread of this process."""
    import uvicorn

    from agentenvs.server.transport import listening_socket

    app = create_ors_app(config)
    sock = listening_socket("127.0.0.1", 0, None)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the ORS server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def test_a_fault_is_an_infrastructure_fault_error_with_its_record_never_a_reward() -> None:
    with in_process_server(ServerConfig(FAULTY)) as url:

        async def main() -> None:
            async with (
                ors_env(url, FAULTY) as env,
                env.session(task=task(FAULTY, SPEC)) as session,
            ):
                first = await session.call_tool("move", {"direction": "Down"})
                assert first.reward == 0.0 and not first.finished
                for _ in range(2):  # the fault, then the same fault: the episode is over
                    error = await _error(session.call_tool("move", {"direction": "Down"}))
                    assert error_code(error) == "INFRASTRUCTURE_FAULT", error
                    record = fault_record(error)
                    assert record is not None, error
                    assert record["kind"] == "sandbox" and record["retryable"] is True
                    assert "went away" in record["message"]

        asyncio.run(main())


def test_a_fault_at_reset_is_the_fault_on_every_call() -> None:
    config = ServerConfig(FAULTY, {"fault_at_reset": True})
    with in_process_server(config) as url:

        async def main() -> None:
            async with (
                ors_env(url, FAULTY) as env,
                env.session(task=task(FAULTY, SPEC)) as session,
            ):
                error = await _error(session.call_tool("move", {"direction": "Down"}))
                record = fault_record(error)
                assert record is not None and record["kind"] == "sandbox", error

        asyncio.run(main())


def test_the_servers_connections_send_small_replies_at_once() -> None:
    """Every ORS call is an HTTP request: the listening socket's connections have
    TCP_NODELAY (as asyncio sets it on TCP sockets), so a reply written as head then body
    does not wait for the client's delayed ACK."""
    import socket

    from agentenvs.server.transport import listening_socket

    async def main() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def accepted(reader: Any, writer: Any) -> None:
            sock = writer.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=listening_socket("127.0.0.1", 0, 60))
        async with server:
            port = server.sockets[0].getsockname()[1]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            value = await asyncio.wait_for(seen, 30)
            writer.close()
            return value

    assert asyncio.run(main()) != 0


def test_a_session_whose_env_is_still_starting_is_not_idle() -> None:
    """The idle timeout counts from when the env is ready: a start that takes four times
    the timeout (a loaded host) does not lose the session, which then plays as usual."""
    config = ServerConfig(SLOW, {"delay": 2.0}, session_timeout=0.5)
    with in_process_server(config) as url:

        async def main() -> None:
            async with (
                ors_env(url, SLOW) as env,
                env.session(task=task(SLOW, SPEC)) as session,
            ):
                first = await session.call_tool("act", {"action": "Down"})
                assert not first.finished, first

        asyncio.run(main())
