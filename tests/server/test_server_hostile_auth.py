"""The env server against a hostile client that is not the one it serves, on loopback,
for its three protocols (OpenEnv, MCP, ORS): requests a web page would send (a foreign
Origin, a DNS-rebound Host), requests without the token or with a wrong one, floods of
session creations past ``--max-sessions``, calls queued by a client that then hangs up,
bodies announced at 2 GB, and turn budgets over the cap; and what no agent-facing
protocol may send (the env's hidden info keys). Each attack fails, and a client with the
token is served afterwards."""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from _mcp_helpers import child_env, http_server, http_session, traversable_tmp
from _ors_helpers import ors_env, ors_name, ors_server, task
from _token import TEST_TOKEN

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.server.client import RemoteEnv, RemoteError

pytest.importorskip("mcp", reason="could not import mcp: pip install 'agentenvs[server]'")
pytest.importorskip("ors", reason="could not import ors: pip install 'agentenvs[ors]'")

FROZEN = "agentenvs/FrozenLake-v0"
TERMINAL = "agentenvs/TerminalBench-v0"
DEEPCODER = "agentenvs/DeepCoderMT-v0"
EVIL = "evil.example"
BEARER = {"Authorization": f"Bearer {TEST_TOKEN}"}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "hostile", "version": "0"},
        },
    }
).encode()


# ---------------------------------------------------------------- raw HTTP and WebSocket
def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


def request(
    url: str,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    host: str | None = None,
) -> tuple[int, bytes, dict[str, str]]:
    """One HTTP request with exactly these headers (``host``: the Host header, default
    the server's own); ``(status, body, headers)``."""
    port = port_of(url)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host or f"127.0.0.1:{port}")
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        if body or method == "POST":
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body or None)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, data, {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def ws_handshake(url: str, path: str, headers: dict[str, str] | None = None, host: str | None = None) -> int:
    """The HTTP status a WebSocket upgrade of ``path`` is answered with (101: opened)."""
    port = port_of(url)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: {host or f'127.0.0.1:{port}'}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        *(f"{k}: {v}" for k, v in (headers or {}).items()),
    ]
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                break
            head += chunk
    return int(head.split(b" ", 2)[1])


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def send_huge_body(url: str, path: str, headers: dict[str, str], *, announced: int, total: int) -> int:
    """Announce ``announced`` bytes of body and send up to ``total``; the bytes the server
    took before it answered, hung up or stopped reading (10 s without progress)."""
    port = port_of(url)
    head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Content-Length: {announced}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    chunk = b"x" * (1 << 20)
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        try:
            while sent < total:
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:  # reset, broken pipe, or no progress for 10 s
            pass
    return sent


# ---------------------------------------------------------------- servers
def descendants(pid: int) -> dict[int, str]:
    """Live descendants of ``pid`` and their command lines (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
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
    out = {}
    for p in found:
        try:
            with open(f"/proc/{p}/cmdline", "rb") as fh:
                out[p] = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return out


def sleepers(pid: int, marker: str) -> set[int]:
    return {p for p, cmd in descendants(pid).items() if marker in cmd and "sleep" in cmd}


def wait_for(predicate: Any, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# ---------------------------------------------------------------- OpenEnv: who may connect
def test_openenv_refuses_pages_and_rebound_hosts(start_server) -> None:
    server = start_server(FROZEN)
    port = port_of(server.url)
    good = f"/ws?token={TEST_TOKEN}"
    # a page's WebSocket: its Origin is its own, even with the token in the URL
    assert ws_handshake(server.url, good, {"Origin": f"http://{EVIL}"}) == 403
    # a rebound name: the page's own Host, on the server's port
    assert ws_handshake(server.url, good, host=f"{EVIL}:{port}") == 421
    assert ws_handshake(server.url, good, host=f"127.0.0.1:{port + 1}") == 421  # another port
    # the cross-site "simple" POST that made an env
    status, body, _ = request(
        server.url, "POST", "/reset", b"{}",
        {"Content-Type": "text/plain", "Origin": f"http://{EVIL}", **BEARER},
    )
    assert status == 403 and json.loads(body)["code"] == "ORIGIN_REFUSED"
    status, body, _ = request(server.url, "POST", "/reset", b"{}", BEARER, host=f"{EVIL}:{port}")
    assert status == 421 and json.loads(body)["code"] == "HOST_REFUSED"
    assert server.get("/sessions")["envs"] == 0  # nothing was made
    # the server's own origin, and a client with the token, are served
    assert ws_handshake(server.url, good, {"Origin": f"http://127.0.0.1:{port}"}) == 101
    assert ws_handshake(server.url, good, host=f"localhost:{port}") == 101
    status, body, _ = request(server.url, "POST", "/reset", b"{}", BEARER)
    assert status == 200 and json.loads(body)["observation"]["info"]["task_id"]


def test_openenv_needs_its_token(start_server) -> None:
    server = start_server(FROZEN)
    for path, headers in [
        ("/ws", {}),
        ("/ws?token=wrong", {}),
        ("/ws", {"Authorization": "Bearer wrong"}),
        ("/ws", {"Authorization": f"Basic {TEST_TOKEN}"}),
    ]:
        assert ws_handshake(server.url, path, headers) == 401, (path, headers)
    for method, path in [("POST", "/reset"), ("GET", "/sessions"), ("GET", "/metadata")]:
        status, body, headers = request(server.url, method, path, b"{}" if method == "POST" else b"")
        assert status == 401 and json.loads(body)["code"] == "UNAUTHORIZED", path
        assert headers.get("www-authenticate") == "Bearer"
        status, _, _ = request(server.url, method, path, b"{}" if method == "POST" else b"",
                               {"Authorization": "Bearer wrong"})
        assert status == 401
    # the health check needs none, and says nothing else
    status, body, _ = request(server.url, "GET", "/health")
    assert status == 200 and json.loads(body) == {"status": "healthy"}

    async def main() -> None:
        with pytest.raises(RemoteError) as info:
            await RemoteEnv(server.url, token="wrong").areset(seed=0)
        assert info.value.code == "UNAUTHORIZED"
        async with RemoteEnv(server.url, token=TEST_TOKEN) as env:
            _, info_ = await env.areset(seed=0)
            assert info_["task_id"]

    asyncio.run(main())
    assert server.get("/sessions")["envs"] == 0


def test_a_made_token_is_printed_and_written_for_the_user_only(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("AGENTENVS_SERVER_TOKEN")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**child_env(), "XDG_RUNTIME_DIR": str(runtime)}
    env.pop("AGENTENVS_SERVER_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentenvs.cli", "serve", "--env", FROZEN, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        port = re.search(r"http://127\.0\.0\.1:(\d+) ", first)
        assert port is not None, first
        second = proc.stdout.readline()
        match = re.search(r"token (\S+) \(also in (\S+),", second)
        assert match is not None, second
        token, path = match.group(1), Path(match.group(2))
        assert path == runtime / "agentenvs" / f"server-{port.group(1)}.token"
        assert path.read_text().strip() == token and len(token) >= 32
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.parent.stat().st_mode & 0o777 == 0o700
        url = f"http://127.0.0.1:{port.group(1)}"
        assert wait_for(lambda: request(url, "GET", "/health")[0] == 200)
        assert request(url, "GET", "/sessions")[0] == 401
        assert request(url, "GET", "/sessions", headers={"Authorization": f"Bearer {token}"})[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert not path.exists()  # gone with the server


def test_no_auth_is_loopback_only_and_says_so(start_server) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "agentenvs.cli", "serve", "--env", FROZEN, "--no-auth",
         "--host", "0.0.0.0", "--port", "0"],
        capture_output=True, text=True, env=child_env(), timeout=120,
    )
    assert refused.returncode != 0 and "--no-auth" in refused.stderr + refused.stdout
    server = start_server(FROZEN, "--no-auth", token=None)
    line = server.proc.stdout.readline()
    assert "no token" in line
    assert ws_handshake(server.url, "/ws") == 101
    # a page still cannot reach it
    assert ws_handshake(server.url, "/ws", {"Origin": f"http://{EVIL}"}) == 403
    assert ws_handshake(server.url, "/ws", host=f"{EVIL}:{port_of(server.url)}") == 421


# ---------------------------------------------------------------- MCP and ORS: who may connect
def test_mcp_refuses_pages_rebound_hosts_and_no_token() -> None:
    with http_server(FROZEN) as server:
        port = port_of(server.base)
        cases = [
            ({**MCP_HEADERS}, None, 401),
            ({**MCP_HEADERS, "Authorization": "Bearer wrong"}, None, 401),
            ({**MCP_HEADERS, **BEARER}, f"{EVIL}:{port}", 421),
            ({**MCP_HEADERS, **BEARER, "Origin": f"http://{EVIL}"}, None, 403),
        ]
        for headers, host, expected in cases:
            status, _, _ = request(server.base, "POST", "/mcp", INITIALIZE, headers, host=host)
            assert status == expected, (headers, host)
        assert server.sessions()["envs"] == 0 and server.sessions()["active"] == 0
        status, _, headers = request(server.base, "POST", "/mcp", INITIALIZE, {**MCP_HEADERS, **BEARER})
        assert status == 200 and headers.get("mcp-session-id")

        async def main() -> None:
            async with http_session(server.url) as session:
                result = await session.call_tool("reset", {"seed": 0})
                assert not result.is_error

        anyio.run(main)


def test_ors_refuses_pages_rebound_hosts_and_no_token() -> None:
    with ors_server(FROZEN) as server:
        port = port_of(server.url)
        body = json.dumps({"env_name": ors_name(FROZEN), "task_spec": {"task_id": "4x4"}}).encode()
        cases = [
            ({}, None, 401),
            ({"X-API-Key": "wrong"}, None, 401),
            ({"X-API-Key": TEST_TOKEN}, f"{EVIL}:{port}", 421),
            ({**BEARER, "Origin": f"http://{EVIL}"}, None, 403),
        ]
        for headers, host, expected in cases:
            sid = {"X-Session-ID": str(uuid.uuid4()), "Content-Type": "application/json"}
            status, _, _ = request(server.url, "POST", "/create", body, {**sid, **headers}, host=host)
            assert status == expected, (headers, host)
            call = json.dumps({"name": "move", "input": {"direction": "Down"}}).encode()
            status, _, _ = request(
                server.url, "POST", f"/{ors_name(FROZEN)}/call", call, {**sid, **headers}, host=host
            )
            assert status == expected
        assert server.sessions()["active"] == 0 and server.sessions()["envs"] == 0

        async def main() -> float | None:
            async with ors_env(server.url, FROZEN) as env, env.session(
                task=task(FROZEN, {"task_id": "4x4", "seed": 0})
            ) as session:
                out = await session.call_tool("move", {"direction": "Down"})
                return out.reward

        assert asyncio.run(main()) is not None


# ---------------------------------------------------------------- floods past --max-sessions
def test_a_flood_of_ors_creations_gets_max_sessions_at_most() -> None:
    with ors_server(FROZEN, "--max-sessions", "2") as server:
        body = json.dumps({"env_name": ors_name(FROZEN), "task_spec": {"task_id": "4x4"}}).encode()
        barrier = threading.Barrier(12)
        sids = [str(uuid.uuid4()) for _ in range(12)]

        def create(sid: str) -> int:
            barrier.wait(30)
            headers = {"X-Session-ID": sid, "Content-Type": "application/json", **BEARER}
            return request(server.url, "POST", "/create", body, headers)[0]

        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            statuses = list(pool.map(create, sids))
        assert statuses.count(200) <= 2 and set(statuses) <= {200, 503}, statuses
        assert 200 in statuses
        counts = server.sessions()
        assert counts["active"] <= 2 and counts["envs"] <= 2
        for sid, status in zip(sids, statuses, strict=True):
            if status == 200:
                request(server.url, "POST", "/delete", b"", {"X-Session-ID": sid, **BEARER})
        assert server.wait_envs(0) == 0

        async def main() -> None:  # a well-behaved client is served once the slots are free
            async with ors_env(server.url, FROZEN) as env, env.session(
                task=task(FROZEN, {"task_id": "4x4", "seed": 0})
            ) as session:
                assert (await session.call_tool("move", {"direction": "Down"})).reward is not None

        asyncio.run(main())


def test_a_flood_of_mcp_and_openenv_sessions_gets_max_sessions_at_most(start_server) -> None:
    with http_server(FROZEN, "--max-sessions", "2") as server:
        barrier = threading.Barrier(12)

        def initialize(_: int) -> int:
            barrier.wait(30)
            return request(server.base, "POST", "/mcp", INITIALIZE, {**MCP_HEADERS, **BEARER})[0]

        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            statuses = list(pool.map(initialize, range(12)))
        assert statuses.count(200) == 2 and statuses.count(503) == 10, statuses
        assert server.sessions()["envs"] <= 2
    openenv = start_server(FROZEN, "--max-sessions", "2")

    async def main() -> None:
        from websockets.asyncio.client import connect

        async def open_one() -> str:
            try:
                async with connect(openenv.ws_url) as ws:
                    await ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
                    reply = json.loads(await asyncio.wait_for(ws.recv(), 60))
                    if reply["type"] == "observation":
                        await asyncio.sleep(1.0)  # hold the slot while the others try
                    return reply["type"] if reply["type"] != "error" else reply["data"]["code"]
            except Exception as exc:  # refused: closed after its error
                return type(exc).__name__

        kinds = await asyncio.gather(*(open_one() for _ in range(12)))
        assert kinds.count("observation") <= 2, kinds
        assert openenv.wait_envs(0) == 0
        async with RemoteEnv(openenv.url) as env:
            assert (await env.areset(seed=0))[1]["task_id"]

    asyncio.run(main())


# ---------------------------------------------------------------- one call at a time
@pytest.mark.bwrap
def test_an_ors_client_that_queues_calls_and_hangs_up_runs_one() -> None:
    """One call of a session runs at a time: while a command runs, more calls are refused
    (``SESSION_BUSY``), so a client that sends many and hangs up leaves none queued, and
    its session goes at its idle timeout, not after every queued call."""
    marker = "7.25"  # an unusual duration names the test's sleeps
    with (
        traversable_tmp() as tmp,
        ors_server(TERMINAL, "--session-timeout", "3", tmpdir=tmp) as server,
    ):
        sid = str(uuid.uuid4())
        headers = {"X-Session-ID": sid, "Content-Type": "application/json", **BEARER}
        body = json.dumps({"env_name": ors_name(TERMINAL), "task_spec": {"seed": 0}}).encode()
        assert request(server.url, "POST", "/create", body, headers)[0] == 200
        status, prompt, _ = request(server.url, "GET", f"/{ors_name(TERMINAL)}/prompt", b"", headers)
        assert status == 200, prompt
        call = json.dumps({"name": "run_command", "input": {"command": f"sleep {marker}"}}).encode()
        path = f"/{ors_name(TERMINAL)}/call"

        def fire() -> socket.socket:
            """Send a call and keep the connection, unread (closed later: a hang-up)."""
            sock = socket.create_connection(("127.0.0.1", port_of(server.url)), timeout=30)
            head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port_of(server.url)}",
                    f"Content-Length: {len(call)}", *(f"{k}: {v}" for k, v in headers.items())]
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + call)
            return sock

        first = fire()
        assert wait_for(lambda: sleepers(server.proc.pid, marker)), "the first command runs"
        seen = set(sleepers(server.proc.pid, marker))
        # forty more while it runs: each answered at once, refused
        replies = []
        for _ in range(40):
            status, data, _ = request(server.url, "POST", path, call, headers)
            replies.append((status, data))
        assert all(b"SESSION_BUSY" in data for _, data in replies), replies[:2]
        # then more, hung up before any answer
        hung = [fire() for _ in range(10)]
        for sock in [first, *hung]:
            sock.close()
        # the env goes at the idle timeout after its one command; no queued command runs
        deadline = time.monotonic() + 120
        while server.sessions()["envs"] and time.monotonic() < deadline:
            seen |= sleepers(server.proc.pid, marker)
            time.sleep(0.05)
        assert server.sessions()["envs"] == 0
        assert len(seen) <= 1, f"{len(seen)} queued commands ran"


@pytest.mark.bwrap
def test_an_mcp_session_runs_one_call_at_a_time() -> None:
    marker = "6.75"
    with (
        traversable_tmp() as tmp,
        http_server(TERMINAL, "--session-timeout", "3", tmpdir=tmp) as server,
    ):

        async def main() -> list[Any]:
            async with http_session(server.url) as session:
                result = await session.call_tool("reset", {"seed": 0})
                assert not result.is_error, result.content[0].text
                async with anyio.create_task_group() as tg:
                    tg.start_soon(session.call_tool, "run_command", {"command": f"sleep {marker}"})
                    with anyio.fail_after(60):
                        while not sleepers(server.proc.pid, marker):
                            await anyio.sleep(0.05)
                    busy = [
                        await session.call_tool("run_command", {"command": f"sleep {marker}"})
                        for _ in range(5)
                    ]
                    state = await session.call_tool("state", {})
                return [*busy, state]

        answers = anyio.run(main)
        for answer in answers:
            assert answer.is_error and (answer.structured_content or {})["code"] == "SESSION_BUSY"
        assert server.wait_envs(0) == 0


# ---------------------------------------------------------------- bodies announced at 2 GB
def _rss_after_huge_body(pid: int, url: str, path: str, headers: dict[str, str]) -> tuple[int, int]:
    before = rss_bytes(pid)
    sent = send_huge_body(url, path, headers, announced=2 << 30, total=300 << 20)
    return sent, rss_bytes(pid) - before


def test_announced_huge_bodies_are_not_read_on_any_protocol(start_server) -> None:
    openenv = start_server(FROZEN)
    ors_cm = ors_server(FROZEN)
    mcp_cm = http_server(FROZEN)
    with ors_cm as ors_srv, mcp_cm as mcp_srv:
        targets = [
            (openenv.proc.pid, openenv.url, "/reset"),
            (mcp_srv.proc.pid, mcp_srv.base, "/mcp"),
            (ors_srv.proc.pid, ors_srv.url, "/create"),
        ]
        for pid, url, path in targets:
            for headers in ({}, {**BEARER, "X-API-Key": TEST_TOKEN, "X-Session-ID": "x"}):
                sent, grown = _rss_after_huge_body(
                    pid, url, path, {"Content-Type": "application/json", **headers}
                )
                assert sent < 64 << 20, f"{url}{path} read {sent >> 20} MiB of a 2 GB body"
                assert grown < 64 << 20, f"{url}{path} grew {grown >> 20} MiB"
        # and each still serves
        assert request(openenv.url, "POST", "/reset", b"{}", BEARER)[0] == 200
        assert request(mcp_srv.base, "POST", "/mcp", INITIALIZE, {**MCP_HEADERS, **BEARER})[0] == 200
        assert ors_srv.sessions()["envs"] == 0


# ---------------------------------------------------------------- turn budgets over the cap
def test_max_turns_over_the_cap_is_refused_on_every_protocol(start_server) -> None:
    openenv = start_server(FROZEN, "--max-turns-cap", "50")

    async def openenv_side() -> None:
        with pytest.raises(RemoteError) as info:
            await RemoteEnv(openenv.url).areset(seed=0, options={"max_turns": 1_000_000})
        assert info.value.code == "VALIDATION_ERROR" and "cap of 50" in str(info.value)
        async with RemoteEnv(openenv.url) as env:
            _, info_ = await env.areset(seed=0, options={"max_turns": 50})
            assert info_["max_turns"] == 50

    asyncio.run(openenv_side())

    with http_server(FROZEN) as server:  # the default cap: the env's own budget (20)

        async def mcp_side() -> None:
            async with http_session(server.url) as session:
                result = await session.call_tool("reset", {"seed": 0, "max_turns": 1_000_000})
                assert result.is_error
                assert result.structured_content["code"] == "VALIDATION_ERROR"
                result = await session.call_tool("reset", {"seed": 0, "max_turns": 21})
                assert result.is_error
                result = await session.call_tool("reset", {"seed": 0, "max_turns": 20})
                assert not result.is_error and result.structured_content["max_turns"] == 20

        anyio.run(mcp_side)

    with ors_server(FROZEN) as server:
        sid = str(uuid.uuid4())
        headers = {"X-Session-ID": sid, "Content-Type": "application/json", **BEARER}
        spec = {"task_id": "4x4", "max_turns": 1_000_000}
        body = json.dumps({"env_name": ors_name(FROZEN), "task_spec": spec}).encode()
        request(server.url, "POST", "/create", body, headers)
        status, data, _ = request(server.url, "GET", f"/{ors_name(FROZEN)}/prompt", b"", headers)
        assert status == 400 and b"VALIDATION_ERROR" in data and b"cap" in data
        assert server.wait_envs(0) == 0


# ---------------------------------------------------------------- hidden figures
WRONG_PROGRAM = "print(0)"


@pytest.mark.bwrap
def test_deepcoder_hidden_pass_rate_reaches_no_agent_protocol() -> None:
    hidden = {"score", "tests_passed", "tests_total", "test_results", "state_key"}
    with traversable_tmp() as tmp, http_server(DEEPCODER, tmpdir=tmp) as server:

        async def mcp_side() -> list[dict[str, Any]]:
            async with http_session(server.url) as session:
                await session.call_tool("reset", {"seed": 0})
                result = await session.call_tool("run_tests", {"code": WRONG_PROGRAM})
                assert not result.is_error, result.content[0].text
                state = await session.call_tool("state", {})
                resource = await session.read_resource("agentenvs://episode/state")
                return [
                    dict(result.structured_content or {}),
                    dict(state.structured_content or {}),
                    json.loads(resource.contents[0].text),
                ]

        for data in anyio.run(mcp_side):
            assert not hidden & set(data), data
    with traversable_tmp() as tmp, ors_server(DEEPCODER, tmpdir=tmp) as server:

        async def ors_side() -> dict[str, Any]:
            async with ors_env(server.url, DEEPCODER) as env, env.session(
                task=task(DEEPCODER, {"seed": 0})
            ) as session:
                out = await session.call_tool("run_tests", {"code": WRONG_PROGRAM})
                return dict(out.metadata or {})

        metadata = asyncio.run(ors_side())
        assert "reward" in metadata and not hidden & set(metadata), metadata


# ---------------------------------------------------------------- connections at once
def test_connections_past_the_bound_are_answered_503(start_server) -> None:
    server = start_server(FROZEN, "--max-connections", "4")
    port = port_of(server.url)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(4)]
    try:
        # (once the server has taken the four: they wait in its backlog until then)
        assert wait_for(lambda: request(server.url, "GET", "/sessions", headers=BEARER)[0] == 503, 20)
    finally:
        for sock in idle:
            sock.close()
    assert wait_for(lambda: request(server.url, "GET", "/sessions", headers=BEARER)[0] == 200)


def test_allowed_hosts_and_origins_are_served_and_no_others(start_server) -> None:
    server = start_server(
        FROZEN, "--allow-host", "envs.internal", "--allow-origin", "https://app.example"
    )
    port = port_of(server.url)
    good = f"/ws?token={TEST_TOKEN}"
    assert ws_handshake(server.url, good, host=f"envs.internal:{port}") == 101
    assert ws_handshake(server.url, good, {"Origin": "https://app.example"}) == 101
    assert ws_handshake(server.url, good, host=f"other.internal:{port}") == 421
    assert ws_handshake(server.url, good, {"Origin": "https://app.example.evil"}) == 403
    assert ws_handshake(server.url, good, {"Origin": "null"}) == 403  # a sandboxed page
    # two Host headers: which one a proxy read is unknown, so neither is taken
    assert ws_handshake(server.url, good, {"Host": f"{EVIL}:{port}"}) == 400


@pytest.mark.bwrap
def test_an_openenv_client_that_pipelines_steps_and_hangs_up_runs_one(start_server) -> None:
    """A session answers one message at a time; steps a client sent ahead and left queued
    when it hung up are dropped: only the one under way runs (the socket, paused while
    a message waits, is asked whether its peer is gone before each next message)."""
    marker = "7.75"
    with traversable_tmp() as tmp:
        server = start_server(TERMINAL, env_kwargs={"runtime": "local"}, extra_env={"TMPDIR": str(tmp)})

        async def main() -> None:
            from websockets.asyncio.client import connect

            ws = await connect(server.ws_url)
            await ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 120))["type"] == "observation"
            step = json.dumps({"type": "step", "data": {"text": f"```bash\nsleep {marker}\n```"}})
            for _ in range(10):
                await ws.send(step)
            while not sleepers(server.proc.pid, marker):
                await asyncio.sleep(0.05)
            ws.transport.abort()  # gone, without a close frame

        asyncio.run(asyncio.wait_for(main(), 120))
        seen: set[int] = set()
        deadline = time.monotonic() + 120
        while server.get("/sessions")["envs"] and time.monotonic() < deadline:
            seen |= sleepers(server.proc.pid, marker)
            time.sleep(0.05)
        assert server.get("/sessions")["envs"] == 0
        assert len(seen) <= 1, f"{len(seen)} of the 10 steps ran"
