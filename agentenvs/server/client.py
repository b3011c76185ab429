"""``RemoteEnv``: a session on an agentenvs env server, with the env's own methods.

Any OpenEnv client (``openenv``'s ``GenericEnvClient``, TRL's and verifiers' OpenEnv
adapters) talks to the server as well; this client adds what those do not know: the
Gymnasium 5-tuple, reset options, and snapshots (as tokens naming snapshots the server keeps).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed


class RemoteError(RuntimeError):
    """The server answered an error; ``code`` is OpenEnv's error code."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(f"{message} (code: {code})")
        self.code = code


class RemoteEnv:
    """One session: ``await areset(...)``, ``await astep(text)``, snapshots, ``aclose()``.

    ``base_url`` is the server's ``http://host:port`` (or ``ws://``). Results have the
    shapes of the in-process env: ``(obs, info)`` and ``(obs, reward, terminated,
    truncated, info)``, with info as JSON carries it.
    """

    def __init__(self, base_url: str, *, timeout: float = 600.0) -> None:
        url = base_url.rstrip("/")
        if url.startswith("http://"):
            url = "ws://" + url[len("http://") :]
        elif url.startswith("https://"):
            url = "wss://" + url[len("https://") :]
        self.url = f"{url}/ws"
        self.timeout = timeout
        self._ws: ClientConnection | None = None

    async def connect(self) -> RemoteEnv:
        if self._ws is None:
            self._ws = await connect(self.url, max_size=64 << 20, open_timeout=self.timeout)
        return self

    async def _call(self, kind: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        await self.connect()
        assert self._ws is not None
        message: dict[str, Any] = {"type": kind}
        if data is not None:
            message["data"] = data
        try:
            await self._ws.send(json.dumps(message))
        except ConnectionClosed:
            pass  # a server refusing the session (at capacity) says why, then closes: read it
        reply = json.loads(await asyncio.wait_for(self._ws.recv(), timeout=self.timeout))
        if reply.get("type") == "error":
            err = reply.get("data") or {}
            raise RemoteError(str(err.get("message")), str(err.get("code")))
        return reply.get("data") or {}

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        options = dict(options or {})
        data: dict[str, Any] = {"seed": seed}
        for key in ("task_id", "max_turns"):
            if key in options:
                data[key] = options.pop(key)
        if options:
            data["options"] = options
        payload = await self._call("reset", data)
        obs = payload["observation"]
        return obs["text"], obs["info"]

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        payload = await self._call("step", {"text": action})
        obs = payload["observation"]
        return obs["text"], float(payload["reward"] or 0.0), obs["terminated"], obs["truncated"], obs["info"]

    async def asnapshot(self) -> str:
        return (await self._call("snapshot"))["snapshot"]

    async def arestore(self, token: str) -> tuple[str, dict[str, Any]]:
        payload = await self._call("restore", {"snapshot": token})
        obs = payload["observation"]
        return obs["text"], obs["info"]

    async def astate(self) -> dict[str, Any]:
        return await self._call("state")

    async def aclose(self) -> None:
        if self._ws is None:
            return
        ws, self._ws = self._ws, None
        try:
            await ws.send(json.dumps({"type": "close"}))
        except Exception:
            pass
        await ws.close()

    async def __aenter__(self) -> RemoteEnv:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["RemoteEnv", "RemoteError"]
