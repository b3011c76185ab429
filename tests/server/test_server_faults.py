"""Faults through the env server: a server killed or stuck while a client steps, and an
env's infrastructure fault crossing the protocol, each raised as ``Fault`` by the client,
never an observation with a reward; the next reset works and nothing is left behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.errors import Fault
from agentenvs.server import client as client_module
from agentenvs.server.client import RemoteEnv, RemoteError, RemoteFault

FIXTURES = Path(__file__).resolve().parents[1] / "envs" / "intercode_sql_fixtures"
TASK = "concert-002"
GOLD = "SELECT name, country, age FROM singer ORDER BY age DESC"
WAIT_S = 60.0


def query(url: str, sql: str, args=None) -> list[tuple]:
    import pymysql

    from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url

    conn = pymysql.connect(**parse_mysql_url(url), autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    finally:
        conn.close()


def episodes_of(url: str, pid: int) -> set[str]:
    """Episode databases and users that process ``pid`` made on the server."""
    from agentenvs.envs.intercode_sql.backends.mysql import parse_episode_name

    names = {r[0] for r in query(url, "SHOW DATABASES LIKE 'ae\\_ep\\_%'")}
    names |= {r[0] for r in query(url, "SELECT User FROM mysql.user WHERE User LIKE 'ae\\_ep\\_%'")}
    return {n for n in names if (parse_episode_name(n) or (0,))[0] == pid}


def sessions_of(url: str, pid: int) -> dict[int, str | None]:
    """Process-list id -> running statement, of the episode sessions of process ``pid``."""
    from agentenvs.envs.intercode_sql.backends.mysql import parse_episode_name

    rows = query(url, "SELECT ID, USER, INFO FROM information_schema.PROCESSLIST")
    return {i: info for i, user, info in rows if (parse_episode_name(user) or (0,))[0] == pid}


def wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.02)


def intercode(start_server, url: str, **kwargs):
    kwargs = {"tasks_path": str(FIXTURES), "backend": "mysql", "mysql_url": url, **kwargs}
    return start_server("agentenvs/InterCodeSQL-v0", env_kwargs=kwargs)


# ----------------------------------------------------------------- the server goes away
def test_a_server_killed_between_steps_is_a_fault_of_the_env_server(start_server) -> None:
    server = start_server("agentenvs/FrozenLake-v0")

    async def main() -> None:
        env = await RemoteEnv(server.url).connect()
        await env.areset(seed=0)
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
        with pytest.raises(RemoteFault) as err:
            await env.astep("Down")
        fault = err.value
        assert isinstance(fault, Fault)
        assert (fault.kind, fault.attribution, fault.code) == (
            "env-server",
            "infrastructure",
            "CONNECTION_LOST",
        )
        assert fault.retryable and "connection" in fault.evidence
        # the next call opens a new session: there is no server to open it on
        with pytest.raises(RemoteFault) as err:
            await env.areset(seed=0)
        assert (err.value.kind, err.value.code) == ("env-server", "UNREACHABLE")
        await env.aclose()

    asyncio.run(main())


def test_a_server_that_never_answers_is_a_fault(monkeypatch) -> None:
    # a listener that accepts connections and never speaks: a stuck server
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"

    async def main() -> None:
        with pytest.raises(RemoteFault) as err:
            await RemoteEnv(url, timeout=1).areset(seed=0)
        assert (err.value.kind, err.value.attribution) == ("env-server", "infrastructure")

    try:
        asyncio.run(main())
    finally:
        listener.close()


def test_a_server_stopped_mid_session_is_a_fault_and_its_session_closed(
    start_server, monkeypatch
) -> None:
    monkeypatch.setattr(client_module, "PING_TIMEOUT_S", 1.0)
    server = start_server("agentenvs/FrozenLake-v0")

    async def main() -> None:
        env = await RemoteEnv(server.url, timeout=1).connect()
        await env.areset(seed=0)
        os.kill(server.proc.pid, signal.SIGSTOP)  # stuck: it answers neither steps nor pings
        try:
            with pytest.raises(RemoteFault) as err:
                await env.astep("Down")
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        assert (err.value.code, err.value.attribution) == ("TIMEOUT", "infrastructure")
        assert env._ws is None  # its late reply can never be read as the next one's
        obs, info = await env.areset(seed=0)  # a new session
        assert info["turn"] == 0
        await env.aclose()

    asyncio.run(main())
    assert server.wait_sessions(0) == 0


def test_a_message_too_big_is_the_callers_not_a_fault(start_server) -> None:
    server = start_server("agentenvs/FrozenLake-v0", "--max-message-bytes", "1024")

    async def main() -> None:
        env = await RemoteEnv(server.url).connect()
        await env.areset(seed=0)
        with pytest.raises(RemoteError) as err:  # not a Fault: an agent could send it
            await env.astep("x" * 8192)
        assert not isinstance(err.value, Fault)
        assert err.value.code == "MESSAGE_TOO_LARGE"
        await env.aclose()

    asyncio.run(main())


# ----------------------------------------------------------------- with InterCode on MySQL
@pytest.mark.mysql
def test_a_server_killed_while_a_client_steps_leaves_nothing_after_a_sweep(
    start_server, mysql_url
) -> None:
    from agentenvs.envs.intercode_sql.backends.mysql import sweep

    server = intercode(start_server, mysql_url, statement_timeout_s=30)
    pid = server.proc.pid

    async def main() -> None:
        env = await RemoteEnv(server.url).connect()
        await env.areset(seed=0, options={"task_id": TASK})
        step = asyncio.ensure_future(env.astep("SELECT SLEEP(3)"))
        await asyncio.to_thread(
            wait_for,
            lambda: any(i and "SLEEP" in i.upper() for i in sessions_of(mysql_url, pid).values()),
            "the step's statement runs",
        )
        server.proc.send_signal(signal.SIGKILL)
        with pytest.raises(RemoteFault) as err:
            await step
        assert (err.value.kind, err.value.code) == ("env-server", "CONNECTION_LOST")
        await env.aclose()

    asyncio.run(main())
    server.proc.wait()
    assert server.children() == set()
    # nothing could clean up after SIGKILL; the sweep of a later process drops it all
    assert episodes_of(mysql_url, pid)
    wait_for(lambda: not sessions_of(mysql_url, pid), "the killed server's sessions end")
    sweep(mysql_url)
    assert episodes_of(mysql_url, pid) == set()


@pytest.mark.mysql
def test_an_env_fault_crosses_the_protocol_and_the_session_resets(start_server, mysql_url) -> None:
    server = intercode(start_server, mysql_url)
    pid = server.proc.pid

    async def main() -> None:
        env = await RemoteEnv(server.url).connect()
        await env.areset(seed=0, options={"task_id": TASK})
        # the episode's session killed from outside, on the server's database
        (session,) = sessions_of(mysql_url, pid)
        query(mysql_url, f"KILL {int(session)}")
        assert env._ws is not None
        await env._ws.send(json.dumps({"type": "step", "data": {"text": GOLD}}))
        reply = json.loads(await env._ws.recv())
        assert reply["type"] == "error", reply  # never an observation with a reward
        data = reply["data"]
        assert data["code"] == "INFRASTRUCTURE_FAULT"
        fault = data["fault"]
        assert (fault["kind"], fault["attribution"]) == ("database", "infrastructure")
        assert fault["evidence"] and fault["retryable"] is True
        # after it, only a reset: the client raises the server's fault as a Fault
        with pytest.raises(RemoteError) as err:
            await env.astep(GOLD)
        assert err.value.code == "EXECUTION_ERROR" and "reset" in str(err.value)
        # the same fault through the client's own call
        await env.areset(seed=0, options={"task_id": TASK})
        (session,) = sessions_of(mysql_url, pid)
        query(mysql_url, f"KILL {int(session)}")
        with pytest.raises(RemoteFault) as caught:
            await env.astep(GOLD)
        assert isinstance(caught.value, Fault)
        assert (caught.value.kind, caught.value.attribution, caught.value.code) == (
            "database",
            "infrastructure",
            "INFRASTRUCTURE_FAULT",
        )
        assert "killed or dropped from outside" in caught.value.evidence
        # the session resets and scores as ever
        await env.areset(seed=0, options={"task_id": TASK})
        await env.astep(GOLD)
        _, reward, terminated, _, info = await env.astep("submit")
        assert (reward, terminated, info["success"]) == (1.0, True, True)
        await env.aclose()

    asyncio.run(main())
    assert server.wait_sessions(0) == 0
    wait_for(lambda: not episodes_of(mysql_url, pid), "the server drops its episode databases")
