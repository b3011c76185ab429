"""The env server under load: steps/s and step latency at many sessions, and its round trip.

Starts ``agentenvs serve`` for FrozenLake (8x8) in a subprocess on 127.0.0.1 and drives it
from load-generator *processes* (``--clients``), each holding its share of ``--sessions``
WebSocket sessions on an event loop of its own, so the generator is not what is measured.
Every session plays the same seeded episodes as the env does in process and checks each
reply against them. A generator's session is a socket protocol (``_FastSession``: the
upgrade, masked text frames, each message sent from the previous reply's callback);
``--stream-client`` drives them instead with the stream-and-coroutine client
(``_session``), which costs the generator about twice the Python calls a step. Prints, per server: steps/s over all sessions, p50/p99 step latency
(send to reply, as a session sees it), the CPU the server and the generators used per
step, and the round trip of one session against an in-process step; the best round and
the median of the rounds.

Three arms of the current server run in every round, taking turns in alternating order:
the default (its token, sent once in each session's upgrade, and the Host and Origin
checks; uvloop where installed), the same on asyncio's own loop
(``AGENTENVS_SERVER_LOOP=asyncio``), and ``--no-auth``; the ratios are the loop's gain
and the cost of those checks. ``--baseline REV`` also starts the server of
git revision ``REV`` (its ``agentenvs``
package, exported to a temporary folder) and drives both, taking turns, in the same run:
the ratio between them holds on a loaded machine, where absolute figures do not.

Usage: python benchmarks/bench_server.py [--sessions 64] [--clients 3] [--steps 400]
       [--rounds 3] [--baseline REV] [--stream-client]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing as mp
import os
import random
import re
import secrets
import statistics
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.integrations.common import json_safe

MOVES = ["Left", "Down", "Right", "Up"]
KWARGS = {"map_name": "8x8", "max_turns": 20}
ROOT = Path(__file__).resolve().parents[1]


def script(steps: int, offset: int = 0) -> list[tuple[int, str]]:
    """(episode seed, move) for each step: 20 steps an episode, a fixed move pattern."""
    return [(offset + i // 20, MOVES[(i * 7) % 4]) for i in range(steps)]


def in_process(plan: list[tuple[int, str]]) -> tuple[float, list[Any]]:
    """Seconds and (obs, reward, terminated, truncated, info) of each step, in process."""
    env = gym.make("agentenvs/FrozenLake-v0", **KWARGS)
    out, current, done = [], None, True
    t0 = time.perf_counter()
    for episode, move in plan:
        if episode != current or done:
            env.reset(seed=episode)
            current, done = episode, False
        obs, reward, terminated, truncated, info = env.step(move)
        done = terminated or truncated
        out.append((obs, float(reward), terminated, truncated, info))
    elapsed = time.perf_counter() - t0
    return elapsed, [(*step[:4], json_safe(step[4])) for step in out]


# ------------------------------------------------------------------ the load generator
class _Socket:
    """A minimal WebSocket client (RFC 6455 text frames, masked with a fresh key each),
    lighter than a full client library, so that the generator costs little per step."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, url: str) -> _Socket:
        address, auth = _split(url)
        host, port = address.split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\n{auth}Upgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError(f"no WebSocket upgrade: {head[:200]!r}")
        return cls(reader, writer)

    def send(self, text: str, opcode: int = 0x1) -> None:
        from websockets.speedups import apply_mask

        data = text.encode()
        n = len(data)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        mask = os.urandom(4)
        self.writer.write(head + mask + apply_mask(data, mask))

    async def recv(self) -> str:
        while True:
            b0, b1 = await self.reader.readexactly(2)
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", await self.reader.readexactly(8))
            data = await self.reader.readexactly(n)
            opcode = b0 & 0x0F
            if opcode == 0x1:
                return data.decode()
            if opcode == 0x9:  # a ping: pong with its data
                self.send(data.decode("latin-1"), opcode=0xA)
            elif opcode == 0x8:
                raise ConnectionError(f"the server closed the session: {data!r}")

    def close(self) -> None:
        self.send(json.dumps({"type": "close"}))
        self.writer.close()


async def _session(url: str, plan: list[tuple[int, str]], gate: float) -> tuple[list[int], list]:
    """One session: the plan's resets and steps; the latency (ns) of each step."""
    latencies: list[int] = []
    got: list[Any] = []
    steps = {m: json.dumps({"type": "step", "data": {"text": m}}) for m in MOVES}
    ws = await _Socket.open(url)
    ws.send(json.dumps({"type": "reset", "data": {"seed": 10**6}}))
    await ws.recv()  # connected and served once before the clock starts
    await asyncio.sleep(max(0.0, gate - time.time()))
    current, done = None, True
    clock = time.perf_counter_ns
    for episode, move in plan:
        if episode != current or done:
            ws.send(json.dumps({"type": "reset", "data": {"seed": episode}}))
            await ws.recv()
            current, done = episode, False
        t0 = clock()
        ws.send(steps[move])
        raw = await ws.recv()
        latencies.append(clock() - t0)
        payload = json.loads(raw)["data"]
        obs = payload["observation"]
        done = obs["terminated"] or obs["truncated"]
        got.append(
            (
                obs["text"],
                float(payload["reward"]),
                obs["terminated"],
                obs["truncated"],
                obs["info"],
            )
        )
    ws.close()
    return latencies, got


class _FastSession(asyncio.Protocol):
    """One load-generator session as a protocol on the loop's socket callbacks: the real
    WebSocket protocol (the upgrade, masked text frames with a fresh key each, pings
    answered), its plan's resets and steps sent from the reply's own callback, without a
    stream reader or a coroutine switch a message; every step's reply kept for checking."""

    def __init__(
        self, host: str, plan: list[tuple[int, str]], gate: float, auth: str = ""
    ) -> None:
        import orjson  # the server extra's JSON reader, quicker than the standard one
        from websockets.speedups import apply_mask

        self.loads, self.apply_mask = orjson.loads, apply_mask
        self.mask = random.Random(os.urandom(8)).randbytes  # a fresh masking key each frame
        self.host, self.plan, self.gate, self.auth = host, plan, gate, auth
        self.steps = {m: json.dumps({"type": "step", "data": {"text": m}}).encode() for m in MOVES}
        self.latencies: list[int] = []
        self.got: list[Any] = []
        self.buffer = b""
        self.open = False
        self.index = -1  # the warm-up reset's reply comes first
        self.current: int | None = None
        self.done_episode = True
        self.stepping = False  # the reply awaited is a step's
        self.t0 = 0
        self.finished = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        key = base64.b64encode(os.urandom(16)).decode()
        transport.write(
            f"GET /ws HTTP/1.1\r\nHost: {self.host}\r\n{self.auth}Upgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.finished.done():
            self.finished.set_exception(ConnectionError(f"the server closed the session: {exc}"))

    def send(self, data: bytes, opcode: int = 0x1) -> None:
        n = len(data)
        if n < 126:
            head = bytes((0x80 | opcode, 0x80 | n))
        else:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        mask = self.mask(4)
        self.transport.write(head + mask + self.apply_mask(data, mask))

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        if not self.open:
            head, sep, buffer = buffer.partition(b"\r\n\r\n")
            if not sep:
                self.buffer = head
                return
            if not head.startswith(b"HTTP/1.1 101"):
                raise RuntimeError(f"no WebSocket upgrade: {head[:200]!r}")
            self.open = True
            self.send(b'{"type": "reset", "data": {"seed": 1000000}}')
        pos, end = 0, len(buffer)
        while end - pos >= 2:
            n = buffer[pos + 1] & 0x7F
            start = pos + 2
            if n == 126:
                n = int.from_bytes(buffer[start : start + 2], "big")
                start += 2
            elif n == 127:
                n = int.from_bytes(buffer[start : start + 8], "big")
                start += 8
            if start + n > end:
                break
            opcode = buffer[pos] & 0x0F
            payload = buffer[start : start + n]
            pos = start + n
            if opcode == 0x1:
                self.reply(payload)
            elif opcode == 0x9:  # a ping: pong with its data
                self.send(payload, 0xA)
            elif opcode == 0x8:
                raise ConnectionError(f"the server closed the session: {payload!r}")
        self.buffer = buffer[pos:] if pos < end else b""

    def reply(self, raw: bytes) -> None:
        if self.stepping:
            self.latencies.append(time.perf_counter_ns() - self.t0)
            payload = self.loads(raw)["data"]
            obs = payload["observation"]
            self.done_episode = obs["terminated"] or obs["truncated"]
            self.got.append(
                (
                    obs["text"],
                    float(payload["reward"]),
                    obs["terminated"],
                    obs["truncated"],
                    obs["info"],
                )
            )
            self.stepping = False
        elif self.index < 0:  # the warm-up reset: the clock starts at the gate
            self.index = 0
            loop = asyncio.get_running_loop()
            loop.call_later(max(0.0, self.gate - time.time()), self.next)
            return
        self.next()

    def next(self) -> None:
        if self.index >= len(self.plan):
            self.send(b'{"type": "close"}')
            self.transport.close()
            self.finished.set_result((self.latencies, self.got))
            return
        episode, move = self.plan[self.index]
        if episode != self.current or self.done_episode:
            self.current, self.done_episode = episode, False
            self.send(b'{"type": "reset", "data": {"seed": %d}}' % episode)
            return
        self.index += 1
        self.stepping = True
        self.t0 = time.perf_counter_ns()
        self.send(self.steps[move])


async def _fast_session(
    url: str, plan: list[tuple[int, str]], gate: float
) -> tuple[list[int], list]:
    """``_session`` on ``_FastSession``: the same messages, checked the same way."""
    address, auth = _split(url)
    host, port = address.split(":")
    loop = asyncio.get_running_loop()
    _, session = await loop.create_connection(
        lambda: _FastSession(f"{host}:{port}", plan, gate, auth), host, int(port)
    )
    return await session.finished


def _split(url: str) -> tuple[str, str]:
    """``host:port`` of a server's ``ws://host:port[#token]``, and the header line that
    carries its token (empty without one)."""
    address, _, token = url.removeprefix("ws://").partition("#")
    return address, f"Authorization: Bearer {token}\r\n" if token else ""


def _client(
    url: str, plans: list[list[tuple[int, str]]], gate: float, out: Any, stream: bool = False
) -> None:
    """A generator process: its sessions on one event loop; reports through ``out``."""
    session = _session if stream else _fast_session

    async def run() -> tuple[float, float, float, list]:
        tasks = [asyncio.ensure_future(session(url, p, gate)) for p in plans]
        await asyncio.sleep(max(0.0, gate - time.time()))
        start, cpu0 = time.time(), time.process_time()
        results = await asyncio.gather(*tasks)
        return start, time.time(), time.process_time() - cpu0, results

    start, end, cpu, results = asyncio.run(run())
    expected = [in_process(p)[1] for p in plans]
    same = all(got == want for (_, got), want in zip(results, expected, strict=True))
    latencies = [x for lat, _ in results for x in lat]
    out.put((start, end, latencies, same, cpu))


def load(
    url: str, sessions: int, clients: int, steps: int, server_pid: int, stream: bool = False
) -> dict[str, Any]:
    """Drive ``sessions`` sessions of ``steps`` steps each from ``clients`` processes."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    gate = time.time() + 1.5 + 0.05 * sessions  # every session connected by then
    plans = [script(steps, offset=1000 * s) for s in range(sessions)]
    shares = [plans[i::clients] for i in range(clients)]
    procs = [
        ctx.Process(target=_client, args=(url, share, gate, queue, stream))
        for share in shares
        if share
    ]
    for p in procs:
        p.start()
    time.sleep(max(0.0, gate - time.time()))
    cpu0 = _cpu_seconds(server_pid)  # from the gate on: connecting and making envs left out
    reports = [queue.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    server_cpu = _cpu_seconds(server_pid) - cpu0
    start = min(r[0] for r in reports)
    end = max(r[1] for r in reports)
    lat = sorted(x for r in reports for x in r[2])
    total = sessions * steps
    return {
        "steps_per_s": total / (end - start),
        "p50_us": lat[len(lat) // 2] / 1e3,
        "p99_us": lat[min(len(lat) - 1, int(len(lat) * 0.99))] / 1e3,
        "server_cpu_us": server_cpu / total * 1e6,  # its resets included
        "client_cpu_us": sum(r[4] for r in reports) / total * 1e6,
        "same": all(r[3] for r in reports),
    }


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------ servers
def start_server(
    package_root: Path, sessions: int, extra: tuple[str, ...] = (), loop: str | None = None
) -> tuple[subprocess.Popen, str]:
    """A server of the package at ``package_root`` (on event loop ``loop``: ``asyncio`` or
    ``uvloop``; None: the server's own choice); its ``ws://host:port``, followed by
    ``#TOKEN`` when ``extra`` gives one (``--token``)."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{package_root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    env.pop("AGENTENVS_SERVER_LOOP", None)
    if loop is not None:
        env["AGENTENVS_SERVER_LOOP"] = loop
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentenvs.cli", "serve", "--env", "agentenvs/FrozenLake-v0",
         "--port", "0", "--max-sessions", str(sessions + 8), "--env-kwargs", json.dumps(KWARGS),
         *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        cwd=package_root,  # `python -m` puts the working dir first on the path
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:\d+", line)
    if match is None:
        proc.kill()
        raise SystemExit(f"the server did not start: {line}{proc.stdout.read()}")
    url = match.group(0).replace("http://", "ws://")
    if "--token" in extra:
        url += "#" + extra[extra.index("--token") + 1]
    return proc, url


def _loop_name() -> str:
    """The loop the default server runs on (``agentenvs.server.app.event_loop``)."""
    from agentenvs.server.app import event_loop

    return event_loop()


def export_revision(rev: str, into: Path) -> Path:
    """The ``agentenvs`` package of git revision ``rev``, written under ``into``."""
    archive = into / "tree.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), rev, "agentenvs"],
        check=True,
    )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into


def one_session(url: str, steps: int) -> float:
    """µs per step of one session alone (after a warm-up)."""
    plan = script(steps)
    asyncio.run(_session(url, plan[:100], time.time()))
    t0 = time.perf_counter()
    asyncio.run(_session(url, plan, time.time()))
    return (time.perf_counter() - t0) / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--clients", type=int, default=3, help="load-generator processes")
    parser.add_argument("--steps", type=int, default=400, help="steps per session")
    parser.add_argument("--rounds", type=int, default=3, help="runs per server, taking turns")
    parser.add_argument("--baseline", default=None, help="a git revision to compare with")
    parser.add_argument(
        "--stream-client", action="store_true", help="generators on the stream client"
    )
    args = parser.parse_args()
    token = secrets.token_hex(32)  # no leading '-', which argparse would read as an option
    with tempfile.TemporaryDirectory() as tmp:
        # the default server (its token and Host checks, uvloop where installed) beside
        # the same on asyncio's own loop, and one with --no-auth
        servers: dict[str, tuple[Path, tuple[str, ...], str | None]] = {
            "current": (ROOT, ("--token", token), None),
            "current --no-auth": (ROOT, ("--no-auth",), None),
            "current on asyncio": (ROOT, ("--token", token), "asyncio"),
        }
        if args.baseline:
            servers[f"baseline {args.baseline}"] = (
                export_revision(args.baseline, Path(tmp)), ("--token", token), None
            )
        running = {
            name: start_server(root, args.sessions, extra, loop)
            for name, (root, extra, loop) in servers.items()
        }
        try:
            best: dict[str, dict[str, Any]] = {}
            rounds: list[list[dict[str, Any]]] = []  # each round: every server once
            for r in range(args.rounds):
                rounds.append([])
                # the servers take turns, in alternating order, so none always goes first
                order = list(running.items()) if r % 2 == 0 else list(running.items())[::-1]
                for name, (proc, url) in order:
                    got = load(
                        url, args.sessions, args.clients, args.steps, proc.pid, args.stream_client
                    )
                    got["name"] = name
                    rounds[-1].append(got)
                    if name not in best or got["steps_per_s"] > best[name]["steps_per_s"]:
                        best[name] = got
            local_us = in_process(script(2000))[0] / 2000 * 1e6
            print(
                f"FrozenLake 8x8, {args.sessions} sessions from {args.clients} generator processes, "
                f"{args.steps} steps each, best of {args.rounds} (CPUs: {os.cpu_count()}, load "
                f"average {os.getloadavg()[0]:.1f}); in-process step {local_us:.1f} µs"
            )
            for name, (_, url) in running.items():
                r = best[name]
                print(
                    f"  {name:<22} {r['steps_per_s']:8.0f} steps/s  p50 {r['p50_us']:7.0f} µs  "
                    f"p99 {r['p99_us']:7.0f} µs  server CPU {r['server_cpu_us']:5.1f} µs/step  "
                    f"generators {r['client_cpu_us']:5.1f} µs/step  "
                    f"1 session {one_session(url, 1000):5.0f} µs/step  "
                    f"replies equal to in-process: {r['same']}"
                )
            rounds = [sorted(got, key=lambda g: list(running).index(g["name"])) for got in rounds]
            for i, name in enumerate(running):
                ours = [got[i] for got in rounds]

                def median(key: str, ours: list[dict[str, Any]] = ours) -> float:
                    return statistics.median(got[key] for got in ours)

                print(
                    f"  {name:<22} median of the rounds: {median('steps_per_s'):8.0f} steps/s  "
                    f"p50 {median('p50_us'):7.0f} µs  p99 {median('p99_us'):7.0f} µs  server CPU "
                    f"{median('server_cpu_us'):5.1f} µs/step  generators "
                    f"{median('client_cpu_us'):5.1f} µs/step  "
                    f"every reply equal in every round: {all(got['same'] for got in ours)}"
                )
            names = list(best)
            pairs = [
                ("current", "current on asyncio", f"{_loop_name()} / asyncio loop"),
                ("current", "current --no-auth", "token + Host checks / --no-auth"),
            ]
            if args.baseline:
                pairs.append(("current", names[3], "current / baseline"))
            for a_name, b_name, label in pairs:
                i, j = names.index(a_name), names.index(b_name)
                ratio = best[a_name]["steps_per_s"] / best[b_name]["steps_per_s"]
                # rounds next to each other see much the same load from the rest of the machine
                speed = statistics.median(r[i]["steps_per_s"] / r[j]["steps_per_s"] for r in rounds)
                cpu = statistics.median(
                    r[j]["server_cpu_us"] / r[i]["server_cpu_us"] for r in rounds
                )
                print(
                    f"  ratio {label}: best {ratio:.2f}x steps/s; median of the "
                    f"{len(rounds)} rounds {speed:.2f}x steps/s, {cpu:.2f}x less server CPU a step"
                )
        finally:
            for proc, _ in running.values():
                proc.terminate()
                proc.wait(timeout=30)


if __name__ == "__main__":
    main()
