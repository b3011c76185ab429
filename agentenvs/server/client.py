"""``RemoteEnv``: a session on an agentenvs env server, with the env's own methods.

Any OpenEnv client (``openenv``'s ``GenericEnvClient``, TRL's and verifiers' OpenEnv
adapters) talks to the server as well, given the server's token: ``RemoteEnv(url,
token=...)`` sends it as ``Authorization: Bearer`` (default: the environment's
``AGENTENVS_SERVER_TOKEN``, else the token file a loopback server wrote for its port), and :func:`openenv_client` puts it in the WebSocket's
``?token=`` for ``GenericEnvClient``, which sets no headers. A server that refuses the
token, the Host or the Origin raises :class:`RemoteError` (``UNAUTHORIZED``, ...); this client adds what those do not know: the
Gymnasium 5-tuple, reset options, and snapshots (as tokens naming snapshots the server keeps).

Faults are not failures: no call returns an observation or a reward that the
infrastructure made. Each raises :class:`RemoteFault`, a
:class:`~agentenvs.core.errors.Fault`, when

- the env failed on the server for a reason not the agent's (a database lost, a container
  killed): the server's ``INFRASTRUCTURE_FAULT`` reply, re-raised with the kind,
  attribution, evidence and retryable flag the env gave it (``code`` names the reply);
- the server cannot be reached, its connection is lost (a server killed or restarted
  drops it; one stuck stops answering the WebSocket's pings, which the client sends every
  20 s), or it is at capacity (``CAPACITY_REACHED``): ``kind="env-server"``,
  attribution ``"infrastructure"``;
- no reply came within ``timeout`` s: ``kind="env-server"``, ``"infrastructure"`` when
  the server then answers no ping, else ``"unknown"`` (a step the agent made long cannot
  be told from a stuck env). The session is closed, since its late reply would be read
  as the next one's.

After a lost connection the next call opens a new session (a reset starts afresh; a step
is answered that a reset is needed). Every other error reply raises :class:`RemoteError`,
the caller's or the agent's doing (a bad request, a message over the server's limit).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from agentenvs.core.errors import FAULT_KINDS, INFRASTRUCTURE, UNKNOWN, Fault
from agentenvs.server.access import find_token

#: how long a client waits for the pong that tells whether a silent server is alive
PING_TIMEOUT_S = 10.0


class RemoteError(RuntimeError):
    """The server answered an error; ``code`` is OpenEnv's error code."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(f"{message} (code: {code})")
        self.code = code


class RemoteFault(Fault):
    """A fault met through the env server: the env's own (``code``
    ``"INFRASTRUCTURE_FAULT"``, its kind and evidence kept) or the server's and its
    connection's (``kind="env-server"``; ``code`` ``"CAPACITY_REACHED"``,
    ``"CONNECTION_LOST"``, ``"UNREACHABLE"`` or ``"TIMEOUT"``)."""

    def __init__(self, message: str, *, code: str, **fault: Any) -> None:
        super().__init__(message, **fault)
        self.code = code

    @classmethod
    def from_record(cls, message: str, record: Any) -> RemoteFault:
        """The fault a server's ``INFRASTRUCTURE_FAULT`` reply carries (``Fault.record()``)."""
        record = record if isinstance(record, dict) else {}
        kind = record.get("kind")
        attribution = record.get("attribution")
        return cls(
            str(record.get("message") or message),
            code="INFRASTRUCTURE_FAULT",
            kind=kind if kind in FAULT_KINDS else "env-server",
            # a server cannot make a fault the agent's (a Fault never is)
            attribution=attribution if attribution in (INFRASTRUCTURE, UNKNOWN) else UNKNOWN,
            evidence=str(record.get("evidence") or ""),
            retryable=record.get("retryable") is not False,
        )


def _closed(exc: ConnectionClosed) -> str:
    frame = exc.rcvd
    if frame is None:
        return (
            "the connection dropped without a close frame (the server died or the network failed)"
        )
    return f"the server closed the connection (code {frame.code}{', ' + frame.reason if frame.reason else ''})"


class RemoteEnv:
    """One session: ``await areset(...)``, ``await astep(text)``, snapshots, ``aclose()``.

    ``base_url`` is the server's ``http://host:port`` (or ``ws://``). Results have the
    shapes of the in-process env: ``(obs, info)`` and ``(obs, reward, terminated,
    truncated, info)``, with info as JSON carries it.
    """

    def __init__(
        self, base_url: str, *, timeout: float = 600.0, token: str | None = None
    ) -> None:
        self.url = f"{_ws_base(base_url)}/ws"
        self.timeout = timeout
        #: the server's token (``agentenvs serve`` prints it); default: ``find_token``'s
        #: (``AGENTENVS_SERVER_TOKEN``, else the token file of a loopback server's port)
        self.token = token if token is not None else find_token(base_url)
        self._ws: ClientConnection | None = None

    async def connect(self) -> RemoteEnv:
        if self._ws is None:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
            try:
                self._ws = await connect(
                    self.url,
                    max_size=64 << 20,
                    open_timeout=self.timeout,
                    additional_headers=headers,
                )
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status in (401, 403, 421):  # the caller's doing: no token, a wrong one
                    raise RemoteError(
                        f"the env server at {self.url} refused the session (HTTP {status}): "
                        f"{exc.response.body.decode(errors='replace')[:300]}",
                        {401: "UNAUTHORIZED", 403: "ORIGIN_REFUSED"}.get(status, "HOST_REFUSED"),
                    ) from None
                raise RemoteFault(
                    f"cannot reach the env server at {self.url}: HTTP {status}",
                    code="UNREACHABLE",
                    kind="env-server",
                    evidence=f"opening the WebSocket failed: HTTP {status}",
                ) from exc
            except (OSError, TimeoutError, InvalidHandshake) as exc:
                raise RemoteFault(
                    f"cannot reach the env server at {self.url}: {type(exc).__name__}: {exc}",
                    code="UNREACHABLE",
                    kind="env-server",
                    evidence=f"opening the WebSocket failed: {type(exc).__name__}: {exc}"[:500],
                ) from exc
        return self

    async def _call(self, kind: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        await self.connect()
        ws = self._ws
        assert ws is not None
        message: dict[str, Any] = {"type": kind}
        if data is not None:
            message["data"] = data
        try:
            await ws.send(json.dumps(message))
        except ConnectionClosed:
            pass  # a server refusing the session (at capacity) says why, then closes: read it
        try:
            async with asyncio.timeout(self.timeout):  # no task of its own, as wait_for has
                raw = await ws.recv()
        except ConnectionClosed as exc:
            self._ws = None
            if exc.rcvd is not None and exc.rcvd.code == 1009:  # the caller's message
                raise RemoteError(
                    f"the server closed the session: {exc.rcvd.reason or 'message too big'}",
                    "MESSAGE_TOO_LARGE",
                ) from None
            raise RemoteFault(
                f"lost the env server during {kind!r}: {_closed(exc)}",
                code="CONNECTION_LOST",
                kind="env-server",
                evidence=_closed(exc),
            ) from exc
        except TimeoutError:
            raise await self._timed_out(ws, kind) from None
        reply = json.loads(raw)
        if reply.get("type") == "error":
            err = reply.get("data") or {}
            code, text = str(err.get("code")), str(err.get("message"))
            if code == "INFRASTRUCTURE_FAULT":
                raise RemoteFault.from_record(text, err.get("fault"))
            if code == "CAPACITY_REACHED":
                self._ws = None  # the server closes a session it refused
                raise RemoteFault(
                    text,
                    code=code,
                    kind="env-server",
                    evidence="the server answered CAPACITY_REACHED",
                )
            raise RemoteError(text, code)
        return reply.get("data") or {}

    async def _timed_out(self, ws: ClientConnection, kind: str) -> RemoteFault:
        """The fault of a reply that did not come in time; the session is closed."""
        self._ws = None
        try:
            pong = await ws.ping()
            await asyncio.wait_for(pong, timeout=PING_TIMEOUT_S)
            alive = True
        except (ConnectionClosed, TimeoutError, RuntimeError):
            alive = False
        try:
            await asyncio.wait_for(ws.close(), timeout=PING_TIMEOUT_S)
        except Exception:
            pass
        if alive:
            return RemoteFault(
                f"no reply to {kind!r} within {self.timeout:g} s",
                code="TIMEOUT",
                kind="env-server",
                attribution=UNKNOWN,
                evidence=f"no reply within {self.timeout:g} s; the server still answered a ping, "
                "so the env itself took that long (a long step cannot be told from a stuck env)",
            )
        return RemoteFault(
            f"no reply to {kind!r} within {self.timeout:g} s, and no answer to a ping",
            code="TIMEOUT",
            kind="env-server",
            attribution=INFRASTRUCTURE,
            evidence=f"no reply within {self.timeout:g} s, and no pong within {PING_TIMEOUT_S:g} s",
        )

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
        return (
            obs["text"],
            float(payload["reward"] or 0.0),
            obs["terminated"],
            obs["truncated"],
            obs["info"],
        )

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


def _ws_base(base_url: str) -> str:
    url = base_url.rstrip("/")
    if url.startswith("http://"):
        return "ws://" + url[len("http://") :]
    if url.startswith("https://"):
        return "wss://" + url[len("https://") :]
    return url


def openenv_client(base_url: str, *, token: str | None = None, **kwargs: Any) -> Any:
    """openenv's ``GenericEnvClient`` for an agentenvs server, with its token (default:
    ``find_token``'s). That client sets no headers, so the token goes in the
    WebSocket's query (``?token=``), which the server accepts on ``/ws`` only."""
    from openenv.core.generic_client import GenericEnvClient

    client = GenericEnvClient(base_url=base_url, **kwargs)
    token = token if token is not None else find_token(base_url)
    if token:
        # openenv 0.3 keeps the socket's URL here and has no way to pass headers
        client._ws_url = f"{_ws_base(base_url)}/ws?token={quote(token, safe='')}"
    return client


__all__ = ["RemoteEnv", "RemoteError", "RemoteFault", "openenv_client"]
