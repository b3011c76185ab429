"""The env server against hostile clients, on loopback through its real protocol: one
limit on envs for HTTP and WebSocket alike, malformed and oversized messages answered
with errors (the session usable after them), snapshot tokens opaque and bound to their
session, and slow, stalled or erratic clients that leave nothing behind."""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import os
import pickle
import socket
import time
import urllib.error
import urllib.request
from typing import Any

import gymnasium as gym
import pytest
from _token import authorized
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.server.models import json_safe

FROZEN = "agentenvs/FrozenLake-v0"


def ws_url(server: Any) -> str:
    return server.ws_url  # with the server's token


async def ask(ws: Any, message: Any) -> dict[str, Any]:
    await ws.send(message if isinstance(message, str | bytes) else json.dumps(message))
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=60))


def post(server: Any, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    req = authorized(server.url + path, body, **{"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def in_process_step(seed: int, action: str, **kwargs: Any) -> tuple[str, float, bool, bool, Any]:
    env = gym.make(FROZEN, **kwargs)
    env.reset(seed=seed)
    obs, reward, terminated, truncated, info = env.step(action)
    env.close()
    return obs, float(reward), terminated, truncated, json_safe(info)


def as_step(reply: dict[str, Any]) -> tuple[str, float, bool, bool, Any]:
    assert reply["type"] == "observation", reply
    obs = reply["data"]["observation"]
    return (
        obs["text"],
        float(reply["data"]["reward"]),
        obs["terminated"],
        obs["truncated"],
        obs["info"],
    )


# ---------------------------------------------------------------- one limit on envs


def test_http_resets_count_against_max_sessions(start_server) -> None:
    server = start_server(FROZEN, "--max-sessions", "1")

    async def main() -> None:
        async with connect(ws_url(server)) as ws:
            assert (await ask(ws, {"type": "reset", "data": {"seed": 0}}))["type"] == "observation"
            assert server.get("/sessions")["envs"] == 1
            with concurrent.futures.ThreadPoolExecutor(10) as pool:
                replies = list(
                    pool.map(lambda i: post(server, "/reset", b'{"seed": 1}'), range(10))
                )
            assert [status for status, _ in replies] == [503] * 10
            assert all(body["code"] == "CAPACITY_REACHED" for _, body in replies)
        assert server.wait_sessions(0) == 0
        status, body = post(server, "/reset", b'{"seed": 1}')
        assert status == 200 and body["observation"]["info"]["task_id"]
        assert server.get("/sessions")["envs"] == 0

    asyncio.run(main())


@pytest.mark.bwrap
def test_concurrent_http_resets_start_no_sandbox_past_the_limit(start_server) -> None:
    server = start_server(
        "agentenvs/TerminalBench-v0", "--max-sessions", "1", env_kwargs={"runtime": "local"}
    )
    before = server.children()

    async def main() -> None:
        async with connect(ws_url(server)) as ws:
            assert (await ask(ws, {"type": "reset", "data": {"seed": 0}}))["type"] == "observation"
            holding = server.children() - before  # the one session's sandbox
            assert holding
            with concurrent.futures.ThreadPoolExecutor(10) as pool:
                replies = list(pool.map(lambda i: post(server, "/reset", b"{}"), range(10)))
            assert [status for status, _ in replies] == [503] * 10
            assert server.children() - before <= holding  # no sandbox was started for them
        assert server.wait_sessions(0) == 0
        # the slot is free once the session's env has closed, not when the session left
        assert server.wait_envs(0) == 0
        # with the slot free, ten at once: each either served or refused, never more than one
        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            replies = list(pool.map(lambda i: post(server, "/reset", b"{}"), range(10)))
        statuses = sorted(status for status, _ in replies)
        assert 200 in statuses and set(statuses) <= {200, 503}

    asyncio.run(main())
    deadline = time.monotonic() + 60
    while server.children() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.children() - before == set()
    assert server.get("/sessions")["envs"] == 0


# ---------------------------------------------------------------- malformed messages

DEEP = "[" * 100_000 + "]" * 100_000
BAD_MESSAGES: list[tuple[str, str | bytes, str]] = [
    ("not JSON", "{type: reset", "INVALID_JSON"),
    (
        "a 5,000-digit seed",
        '{"type": "reset", "data": {"seed": 1' + "0" * 5000 + "}}",
        "INVALID_JSON",
    ),
    (
        "a 100-digit seed",
        json.dumps({"type": "reset", "data": {"seed": 10**100}}),
        "VALIDATION_ERROR",
    ),
    (
        "a seed past 64 bits",
        json.dumps({"type": "reset", "data": {"seed": 2**64}}),
        "VALIDATION_ERROR",
    ),
    ("a negative seed", json.dumps({"type": "reset", "data": {"seed": -1}}), "VALIDATION_ERROR"),
    ("NaN", '{"type": "reset", "data": {"seed": NaN}}', "INVALID_JSON"),
    ("an infinite float", '{"type": "reset", "data": {"seed": 1e999}}', "INVALID_JSON"),
    ("100,000 nested arrays", DEEP, "INVALID_JSON"),
    (
        "options nested 40 deep",
        '{"type": "reset", "data": {"options": {"a": ' + "[" * 40 + "]" * 40 + "}}}",
        "INVALID_JSON",
    ),
    ("a list", "[1, 2]", "INVALID_JSON"),
    ("a number as type", '{"type": 5}', "INVALID_JSON"),
    ("data as a list", '{"type": "step", "data": [1]}', "VALIDATION_ERROR"),
    ("data as a string", '{"type": "reset", "data": "seed"}', "VALIDATION_ERROR"),
    ("text as a number", '{"type": "step", "data": {"text": 5}}', "VALIDATION_ERROR"),
    ("an unknown type", '{"type": "fly"}', "UNKNOWN_TYPE"),
    ("a binary frame", b"\x00\x01binary", "INVALID_JSON"),
    ("a binary JSON frame", b'{"type": "state"}', "INVALID_JSON"),
    (
        "a negative max_turns",
        json.dumps({"type": "reset", "data": {"max_turns": -3}}),
        "VALIDATION_ERROR",
    ),
    (
        "a zero max_turns",
        json.dumps({"type": "reset", "data": {"max_turns": 0}}),
        "VALIDATION_ERROR",
    ),
    (
        "max_turns past 64 bits",
        json.dumps({"type": "reset", "data": {"max_turns": 10**30}}),
        "VALIDATION_ERROR",
    ),
    (
        "an unknown task_id",
        json.dumps({"type": "reset", "data": {"task_id": "no-such-map"}}),
        "VALIDATION_ERROR",
    ),
    (
        "a task_id object",
        json.dumps({"type": "reset", "data": {"task_id": {"$ne": ""}}}),
        "VALIDATION_ERROR",
    ),
    (
        "a 100 KB task_id",
        json.dumps({"type": "reset", "data": {"task_id": "x" * 100_000}}),
        "VALIDATION_ERROR",
    ),
    (
        "an unknown option",
        json.dumps({"type": "reset", "data": {"options": {"gold": True}}}),
        "VALIDATION_ERROR",
    ),
    ("an unknown field", json.dumps({"type": "reset", "data": {"reward": 1}}), "VALIDATION_ERROR"),
    ("a restore without token", '{"type": "restore"}', "VALIDATION_ERROR"),
    (
        "a 1 MB token",
        json.dumps({"type": "restore", "data": {"snapshot": "A" * 1_000_000}}),
        "VALIDATION_ERROR",
    ),
]


def test_malformed_messages_are_answered_and_the_session_stays_usable(start_server) -> None:
    kwargs = {"map_name": "8x8", "max_action_chars": 1000}
    server = start_server(FROZEN, "--max-message-bytes", str(1 << 20), env_kwargs=kwargs)
    expected = in_process_step(3, "Down", **kwargs)

    async def main() -> None:
        async with connect(ws_url(server), max_size=None) as ws:
            await ask(ws, {"type": "reset", "data": {"seed": 3}})
            for name, message, code in BAD_MESSAGES:
                reply = await ask(ws, message)
                assert reply["type"] == "error", (name, reply)
                assert reply["data"]["code"] == code, (name, reply)
                assert len(reply["data"]["message"]) < 2000, name  # nothing echoed back whole
            # the episode is untouched by all that: its first step is the in-process one
            assert as_step(await ask(ws, {"type": "step", "data": {"text": "Down"}})) == expected
            # a reset with a bad option leaves the episode as it was, too
            reply = await ask(ws, {"type": "reset", "data": {"seed": 4, "options": {"x": 1}}})
            assert reply["data"]["code"] == "VALIDATION_ERROR"
            state = (await ask(ws, {"type": "state"}))["data"]
            assert state["turn"] == 1
            # an action longer than the env's limit is the env's invalid action, as in process
            long = "Down " * 400
            got = as_step(await ask(ws, {"type": "step", "data": {"text": long}}))
            assert got[1] == 0.0 and got[4]["action_valid"] is False
            assert "over the limit of 1000" in got[0]
        assert server.wait_sessions(0) == 0

    asyncio.run(main())


def test_oversized_messages_are_refused_then_cut_off(start_server) -> None:
    server = start_server(FROZEN, "--max-message-bytes", str(64 << 10))
    assert server.get("/sessions")["max_message_bytes"] == 64 << 10

    async def main() -> None:
        async with connect(ws_url(server), max_size=None) as ws:
            await ask(ws, {"type": "reset", "data": {"seed": 0}})
            for size in (65 << 10, 200 << 10):  # over the limit, within four times it
                text = "é" * (size // 2)  # two bytes of UTF-8 each
                message = json.dumps({"type": "step", "data": {"text": text}}, ensure_ascii=False)
                reply = await ask(ws, message)
                assert reply["data"]["code"] == "MESSAGE_TOO_LARGE", reply
            assert (await ask(ws, {"type": "state"}))["data"]["turn"] == 0  # no turn spent
            # far past the limit: the connection is closed unread (1009), the env with it;
            # the close may meet the client still sending (a reset), or waiting for a reply
            with pytest.raises(ConnectionClosed) as closed:
                await ws.send(json.dumps({"type": "step", "data": {"text": "x" * (1 << 20)}}))
                await asyncio.wait_for(ws.recv(), timeout=60)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        assert server.wait_sessions(0) == 0
        assert server.get("/sessions")["envs"] == 0
        async with connect(ws_url(server)) as ws:  # the server serves on
            assert (await ask(ws, {"type": "reset", "data": {"seed": 0}}))["type"] == "observation"

    asyncio.run(main())


def test_malformed_http_resets_are_answered(start_server) -> None:
    server = start_server(FROZEN, "--max-message-bytes", str(64 << 10))
    for body, status, code in [
        (b'{"seed": 1' + b"0" * 5000 + b"}", 422, "INVALID_JSON"),
        (b"[" * 20_000 + b"]" * 20_000, 422, "INVALID_JSON"),
        (b"[1]", 422, "VALIDATION_ERROR"),
        (b'{"seed": -1}', 422, "VALIDATION_ERROR"),
        (b'{"task_id": "no-such-map"}', 422, "VALIDATION_ERROR"),
        (b'{"snapshot": "AAAA"}', 422, "VALIDATION_ERROR"),
        (b" " * (1 << 20), 413, "MESSAGE_TOO_LARGE"),
    ]:
        try:
            got_status, got = post(server, "/reset", body)
        except (ConnectionError, urllib.error.URLError) as exc:
            # the server answers an oversized body without reading it and closes: a client
            # still sending then meets a reset before it can read the 413 (on a loaded
            # machine), which refuses the request as well
            assert status == 413, (body[:40], exc)
            continue
        assert (got_status, got.get("code")) == (status, code), body[:40]
    status, body = post(server, "/reset", b'{"seed": 2}')
    assert status == 200
    assert server.get("/sessions")["envs"] == 0


# ---------------------------------------------------------------- snapshots


def test_snapshot_tokens_are_opaque_and_bound_to_their_session(start_server) -> None:
    server = start_server("agentenvs/InterCodeSQL-v0")
    probe = gym.make("agentenvs/InterCodeSQL-v0")
    probe.reset(seed=0)
    gold = probe.unwrapped.gold_query
    probe.close()

    async def main() -> None:
        async with connect(ws_url(server)) as ws, connect(ws_url(server)) as other:
            await ask(ws, {"type": "reset", "data": {"seed": 0}})
            await ask(other, {"type": "reset", "data": {"seed": 0}})
            token = (await ask(ws, {"type": "snapshot"}))["data"]["snapshot"]
            # a random id: nothing of the episode (its gold query) can be read from it
            assert len(token) <= 64
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            assert gold.encode() not in raw and b"SELECT" not in raw.upper()
            with pytest.raises(Exception):  # noqa: B017 - not a pickle
                pickle.loads(raw)
            # another session cannot restore it, by restore or by reset
            for message in (
                {"type": "restore", "data": {"snapshot": token}},
                {"type": "reset", "data": {"snapshot": token}},
            ):
                reply = await ask(other, message)
                assert reply["data"]["code"] == "VALIDATION_ERROR"
                assert "another session" in reply["data"]["message"]
            status, body = post(server, "/reset", json.dumps({"snapshot": token}).encode())
            assert status == 422 and "another session" in body["detail"]
            # its own session can
            await ask(ws, {"type": "step", "data": {"text": "submit"}})
            reply = await ask(ws, {"type": "restore", "data": {"snapshot": token}})
            assert (
                reply["type"] == "observation" and reply["data"]["observation"]["info"]["turn"] == 0
            )
            assert server.get("/sessions")["snapshots"] == 1
        # the session's snapshots go with it
        assert server.wait_sessions(0) == 0
        assert server.get("/sessions")["snapshots"] == 0

    asyncio.run(main())


def test_old_style_and_forged_tokens_are_never_unpickled(start_server, tmp_path) -> None:
    server = start_server(FROZEN)
    marker = tmp_path / "unpickled"

    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    payload = pickle.dumps(Boom())
    forged = [
        base64.urlsafe_b64encode(b"\0" * 32 + payload).decode(),  # the former signed layout
        base64.urlsafe_b64encode(payload).decode(),
        "not base64 at all !!",
    ]

    async def main() -> None:
        async with connect(ws_url(server)) as ws:
            await ask(ws, {"type": "reset", "data": {"seed": 0}})
            for token in forged:
                reply = await ask(ws, {"type": "restore", "data": {"snapshot": token}})
                assert reply["data"]["code"] == "VALIDATION_ERROR"
                assert "not issued by this server" in reply["data"]["message"]

    asyncio.run(main())
    assert not marker.exists()


def test_snapshots_are_bounded_and_expire(start_server) -> None:
    server = start_server(FROZEN, "--max-snapshots", "3", "--snapshot-ttl", "0.5")

    async def main() -> None:
        async with connect(ws_url(server)) as ws:
            await ask(ws, {"type": "reset", "data": {"seed": 0}})
            tokens = [(await ask(ws, {"type": "snapshot"}))["data"]["snapshot"] for _ in range(5)]
            assert len(set(tokens)) == 5
            assert server.get("/sessions")["snapshots"] == 3
            for token in tokens[:2]:  # pushed out by newer ones
                reply = await ask(ws, {"type": "restore", "data": {"snapshot": token}})
                assert (
                    "not issued by this server, or its snapshot is gone" in reply["data"]["message"]
                )
            await asyncio.sleep(1.0)  # past the time to live
            reply = await ask(ws, {"type": "restore", "data": {"snapshot": tokens[-1]}})
            assert reply["data"]["code"] == "VALIDATION_ERROR"

    asyncio.run(main())


def test_tokens_of_another_server_and_env_are_refused(start_server) -> None:
    frozen = start_server(FROZEN, "--share-snapshots")
    bfcl = start_server("agentenvs/BFCL-v0", "--share-snapshots")

    async def main() -> None:
        async with connect(ws_url(frozen)) as a, connect(ws_url(bfcl)) as b:
            await ask(a, {"type": "reset", "data": {"seed": 0}})
            await ask(b, {"type": "reset", "data": {"seed": 0}})
            token = (await ask(a, {"type": "snapshot"}))["data"]["snapshot"]
            reply = await ask(b, {"type": "restore", "data": {"snapshot": token}})
            assert reply["data"]["code"] == "VALIDATION_ERROR"
            assert (await ask(b, {"type": "state"}))["data"]["env_id"] == "agentenvs/BFCL-v0"
            # shared within its own server: a second session branches from it
            async with connect(ws_url(frozen)) as c:
                reply = await ask(c, {"type": "restore", "data": {"snapshot": token}})
                assert reply["type"] == "observation"

    asyncio.run(main())


# ---------------------------------------------------------------- erratic clients


def test_many_sessions_opening_and_closing_fast_leave_nothing(start_server) -> None:
    server = start_server(FROZEN, "--max-sessions", "4")

    async def one(i: int) -> str:
        try:
            async with connect(ws_url(server)) as ws:
                if i % 3 == 0:
                    return "opened"  # gone without a word
                reply = await ask(ws, {"type": "reset", "data": {"seed": i}})
                if reply["type"] == "error":
                    return reply["data"]["code"]
                if i % 3 == 1:
                    await ws.send(json.dumps({"type": "close"}))
                return "served"
        except ConnectionClosed:
            return "closed"

    async def main() -> list[str]:
        out: list[str] = []
        for start in range(0, 240, 40):
            out += await asyncio.gather(*(one(i) for i in range(start, start + 40)))
        return out

    outcomes = asyncio.run(main())
    assert set(outcomes) <= {"opened", "served", "CAPACITY_REACHED", "closed"}
    assert "served" in outcomes
    assert server.wait_sessions(0) == 0
    assert server.get("/sessions")["envs"] == 0


def test_a_step_sent_during_a_reset_is_answered_after_it(start_server) -> None:
    server = start_server(FROZEN, env_kwargs={"map_name": "8x8"})
    expected = in_process_step(7, "Right", map_name="8x8")

    async def main() -> None:
        async with connect(ws_url(server)) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": 7}}))
            await ws.send(json.dumps({"type": "step", "data": {"text": "Right"}}))
            first = json.loads(await ws.recv())
            second = json.loads(await ws.recv())
            assert first["type"] == "observation" and first["data"]["reward"] is None
            assert as_step(second) == expected

    asyncio.run(main())


def test_nothing_is_answered_after_close(start_server) -> None:
    server = start_server(FROZEN)

    async def main() -> None:
        async with connect(ws_url(server)) as ws:
            await ask(ws, {"type": "reset", "data": {"seed": 0}})
            await ws.send(json.dumps({"type": "close"}))
            with pytest.raises(ConnectionClosed):
                for _ in range(3):
                    await ws.send(json.dumps({"type": "step", "data": {"text": "Down"}}))
                await asyncio.wait_for(ws.recv(), timeout=60)
        assert server.wait_sessions(0) == 0
        assert server.get("/sessions")["envs"] == 0

    asyncio.run(main())


def test_slow_loris_connections_are_closed(start_server) -> None:
    server = start_server(FROZEN, "--request-timeout", "1")
    port = int(server.url.rsplit(":", 1)[1])
    slow = []
    for i in range(20):
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        # half a request head (some a WebSocket upgrade), never finished
        head = b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n" if i % 2 else b"GET /heal"
        sock.sendall(head)
        slow.append(sock)
    try:
        assert server.get("/health") == {"status": "healthy"}
        for sock in slow:
            assert sock.recv(1024) == b""  # the server hung up (recv waits up to 60 s)
        # a body that never comes is cut off as well
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        slow.append(sock)
        sock.sendall(
            f"POST /reset HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 100\r\n"
            f"Authorization: Bearer {server.token}\r\n\r\n{{".encode()
        )
        reply = sock.recv(4096)
        assert b" 408 " in reply.split(b"\r\n", 1)[0]
    finally:
        for sock in slow:
            sock.close()
    assert server.get("/sessions")["envs"] == 0


def test_a_client_that_never_reads_is_disconnected(start_server) -> None:
    server = start_server("agentenvs/BFCL-v0", "--stall-timeout", "2")
    port = int(server.url.rsplit(":", 1)[1])

    async def main() -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window, soon full
        sock.connect(("127.0.0.1", port))
        sock.setblocking(False)
        ws = await connect(ws_url(server), sock=sock, max_queue=1, compression=None)
        # resets whose replies (a task each, about 2 KB) are never read
        sent = 0
        try:
            while sent < 20_000:
                # padded to 10 KB, so that 20,000 of them are more than any socket buffers
                message = json.dumps({"type": "reset", "data": {"seed": sent}}) + " " * 10_000
                await asyncio.wait_for(ws.send(message), timeout=30)
                sent += 1
        except (TimeoutError, ConnectionClosed):
            pass  # the buffers are full: the server stopped reading, as it should
        # the server drops the stalled session and closes its env
        assert server.wait_sessions(0, timeout=120) == 0
        ws.transport.abort()
        return sent

    sent = asyncio.run(main())
    assert sent < 20_000
    assert server.get("/sessions")["envs"] == 0
