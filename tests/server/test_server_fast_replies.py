"""The server's direct replies (``transport.FastReplies``): steps answered in the
protocol's own call give the same replies, in the same order, as the session's receive
loop, whatever way the client's frames arrive (many in one write, split, fragmented,
between control frames)."""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from typing import Any

import gymnasium as gym
from _token import TEST_TOKEN

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.server.models import TextObservation, json_safe, observation_payload
from tests.server.test_server_fast_paths import model_payload

FROZEN = "agentenvs/FrozenLake-v0"


def frame(payload: bytes, opcode: int = 0x1, fin: bool = True) -> bytes:
    """A masked client frame."""
    n = len(payload)
    first = (0x80 if fin else 0) | opcode
    if n < 126:
        head = struct.pack("!BB", first, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", first, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", first, 0x80 | 127, n)
    mask = os.urandom(4)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def message(kind: str, data: Any = None) -> bytes:
    body: dict[str, Any] = {"type": kind}
    if data is not None:
        body["data"] = data
    return frame(json.dumps(body).encode())


class RawClient:
    """A WebSocket client on a plain socket, writing frames exactly as a test lays them out."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.sendall(
            f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Authorization: Bearer {TEST_TOKEN}\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._read()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _read(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk

    def _exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self.buffer += self._read()
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def frame(self) -> tuple[int, bytes]:
        """The next frame from the server: (opcode, payload)."""
        b0, b1 = self._exactly(2)
        assert b1 & 0x80 == 0, "a server's frames are not masked"
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self._exactly(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._exactly(8))
        return b0 & 0x0F, self._exactly(n)

    def reply(self) -> dict[str, Any]:
        opcode, payload = self.frame()
        assert opcode == 0x1, (opcode, payload)
        return json.loads(payload)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()


def reset_payload(obs: str, info: dict[str, Any]) -> dict[str, Any]:
    """What the server's models make of an in-process reset."""
    return observation_payload(TextObservation(text=obs, info=json_safe(info)))


def test_frames_in_one_write_are_answered_in_order(start_server) -> None:
    server = start_server(FROZEN, env_kwargs={"map_name": "8x8"})
    local = gym.make(FROZEN, map_name="8x8")
    client = RawClient(server.url)
    try:
        client.send(message("reset", {"seed": 5}))
        assert client.reply()["data"] == reset_payload(*local.reset(seed=5))
        # steps, a state, a refused action and a reset in one write, the last step split
        up = message("step", {"text": "Up"})
        client.send(
            message("step", {"text": "Left"})
            + message("step", {"text": "Down"})
            + message("state")
            + message("step", {"text": 3})
            + message("step", {"text": "Right"})
            + message("reset", {"seed": 6})
            + message("step", {"text": "Down"})
            + up[:5]
        )
        time.sleep(0.2)
        client.send(up[5:])
        want = [model_payload(local.step("Left")), model_payload(local.step("Down"))]
        assert [client.reply()["data"] for _ in range(2)] == want
        state = client.reply()
        assert state["type"] == "state" and state["data"]["turn"] == 2
        refused = client.reply()
        assert refused["type"] == "error" and refused["data"]["code"] == "VALIDATION_ERROR"
        assert client.reply()["data"] == model_payload(local.step("Right"))
        assert client.reply()["data"] == reset_payload(*local.reset(seed=6))
        assert client.reply()["data"] == model_payload(local.step("Down"))
        assert client.reply()["data"] == model_payload(local.step("Up"))
    finally:
        client.close()


def test_fragments_control_frames_and_long_frames(start_server) -> None:
    server = start_server(FROZEN)
    local = gym.make(FROZEN)
    client = RawClient(server.url)
    try:
        client.send(message("reset", {"seed": 1}))
        client.reply()
        local.reset(seed=1)
        text = json.dumps({"type": "step", "data": {"text": "Down"}}).encode()
        # a message in two fragments with a ping between them
        client.send(
            frame(text[:10], fin=False) + frame(b"hi", opcode=0x9) + frame(text[10:], opcode=0x0)
        )
        assert client.frame() == (0xA, b"hi")
        assert client.reply()["data"] == model_payload(local.step("Down"))
        # a frame of a 16-bit length (metadata makes it long), then a plain one
        long = {"text": "Right", "metadata": {"note": "x" * 300}}
        client.send(message("step", long) + message("step", {"text": "Left"}))
        assert client.reply()["data"] == model_payload(local.step("Right"))
        assert client.reply()["data"] == model_payload(local.step("Left"))
    finally:
        client.close()


def test_errors_and_close(start_server) -> None:
    server = start_server(FROZEN)
    client = RawClient(server.url)
    try:
        client.send(message("step", {"text": "Left"}))  # no reset yet
        before = client.reply()
        assert before["type"] == "error", before
        client.send(message("reset", {"seed": 2}))
        client.reply()
        # nothing is answered after a close, even a step in the same write
        client.send(message("close") + message("step", {"text": "Left"}))
        opcode, _ = client.frame()
        assert opcode == 0x8  # the close frame, no observation
    finally:
        client.close()
    assert server.wait_sessions(0) == 0


def test_invalid_utf8_closes_the_connection(start_server) -> None:
    server = start_server(FROZEN)
    client = RawClient(server.url)
    try:
        client.send(message("reset", {"seed": 2}))
        client.reply()
        client.send(frame(b'{"type": "step", "data": {"text": "\xff"}}'))
        opcode, data = client.frame()
        assert opcode == 0x8 and struct.unpack("!H", data[:2])[0] == 1007
    finally:
        client.close()


def test_seeds_past_64_bits_and_episode_ids_on_the_wire(start_server) -> None:
    """A reset's seed is read exactly (orjson would make one past 64 bits a float): out of
    range it is refused, in range it plays as in process; an episode's id, drawn when
    first asked for, stays the same until the next reset, and a given one is kept."""
    server = start_server(FROZEN)
    client = RawClient(server.url)
    env = gym.make(FROZEN)
    try:
        for seed in (2**64, -(2**63) - 1):
            client.send(message("reset", {"seed": seed}))
            refused = client.reply()
            assert refused["type"] == "error", refused
            assert refused["data"]["code"] == "VALIDATION_ERROR", refused
            assert "64 bits" in refused["data"]["message"], refused
        seed = 2**64 - 1
        client.send(message("reset", {"seed": seed}))
        assert client.reply()["data"] == reset_payload(*env.reset(seed=seed))
        client.send(message("step", {"text": "Down"}) + message("state") + message("state"))
        assert client.reply()["data"] == model_payload(env.step("Down"))
        first, second = client.reply()["data"], client.reply()["data"]
        assert first["episode_id"] == second["episode_id"]
        assert len(first["episode_id"]) == 36 and first["step_count"] == 1
        client.send(message("reset", {"seed": 3}) + message("state"))
        client.reply()
        assert client.reply()["data"]["episode_id"] not in (None, first["episode_id"])
        client.send(message("reset", {"seed": 3, "episode_id": "mine"}) + message("state"))
        client.reply()
        assert client.reply()["data"]["episode_id"] == "mine"
    finally:
        client.close()
        env.close()
