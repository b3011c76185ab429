"""The server's guards below the protocol: slow and stalled clients, and HTTP body sizes.

- ``timed_http_protocol(timeout)``: uvicorn's HTTP protocol, closing a connection whose
  request line and headers have not all arrived ``timeout`` seconds after it opened (or
  after its previous response): a slow-loris client holds a connection that long at most.
- ``BoundedBodies``: an HTTP body larger than the message limit is answered 413 without
  being read further, and one that takes longer than ``timeout`` to arrive, 408.
- ``listening_socket(host, port, stall_timeout)``: the server's socket, whose connections
  are aborted by the kernel when data the server sent stays unacknowledged for
  ``stall_timeout`` seconds (``TCP_USER_TIMEOUT``; this covers a client that stops reading
  and leaves the server's replies in a full window), so a client that never reads cannot
  hold a session, its env and the replies buffered for it.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

ASGIApp = Any


def timed_http_protocol(timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (h11 or httptools, as uvicorn picks) with a deadline for
    each request's head."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    base: Any = AutoHTTPProtocol

    class TimedHTTPProtocol(base):  # type: ignore[misc, valid-type]
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            waiting_for = self.scope  # a new request replaces the scope
            self._head_timer = asyncio.get_running_loop().call_later(
                timeout, self._head_deadline, waiting_for
            )

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_deadline(self, waiting_for: Any) -> None:
            self._head_timer = None
            transport = self.transport
            if transport is None or transport.is_closing():
                return
            if transport.get_protocol() is not self:  # upgraded to a WebSocket
                return
            if self.scope is waiting_for:  # no request head since the timer was armed
                transport.close()

    return TimedHTTPProtocol


def lazy_pausing_ws_protocol() -> type[asyncio.Protocol] | None:
    """uvicorn's WebSocket protocol (on ``websockets``' sans-I/O core) reading a
    connection until a second message waits for the app, rather than pausing the socket
    after every message and resuming it at the app's next receive (two system calls and
    loop bookkeeping a message). A session reads one message at a time, so a client still
    has at most two messages held on the server. None where that protocol is missing."""
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import (
            WebSocketsSansIOProtocol,
        )
    except ImportError:
        return None

    class LazyPausingWSProtocol(WebSocketsSansIOProtocol):  # type: ignore[misc, valid-type]
        def send_receive_event_to_app(self) -> None:
            queue = self.__dict__.get("queue")
            # (a uvicorn whose protocol keeps other names gets its own behaviour)
            if self.__dict__.get("read_paused", True) or queue is None or not queue.empty():
                super().send_receive_event_to_app()  # pauses reading, as uvicorn does
                return
            # the app takes this one next: keep reading (a second one pauses)
            self.read_paused = True
            try:
                super().send_receive_event_to_app()
            finally:
                self.read_paused = False

    return LazyPausingWSProtocol


async def _reply(send: Any, status: int, message: str, code: str) -> None:
    body = json.dumps({"detail": message, "code": code}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"connection", b"close"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BoundedBodies:
    """ASGI middleware: HTTP bodies of at most ``max_bytes``, read within ``timeout`` s
    (None: no time limit)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, timeout: float | None) -> None:
        self.app = app
        self.max_bytes = int(max_bytes)
        self.timeout = timeout

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"the request body is over the server's limit of {self.max_bytes} bytes"
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and (not value.isdigit() or int(value) > self.max_bytes):
                await _reply(send, 413, too_large, "MESSAGE_TOO_LARGE")
                return
        chunks: list[bytes] = []
        size = 0
        loop = asyncio.get_running_loop()
        deadline = None if self.timeout is None else loop.time() + self.timeout
        while True:
            left = None if deadline is None else max(deadline - loop.time(), 0)
            try:
                message = await asyncio.wait_for(receive(), left)
            except TimeoutError:
                await _reply(send, 408, f"the request body took over {self.timeout} s", "TIMEOUT")
                return
            if message["type"] != "http.request":
                return  # http.disconnect: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _reply(send, 413, too_large, "MESSAGE_TOO_LARGE")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def listening_socket(host: str, port: int, stall_timeout: float | None) -> socket.socket:
    """A bound, listening TCP socket whose connections inherit ``TCP_USER_TIMEOUT``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on connections whose proto says TCP,
    # and without it a reply written in two parts waits for the client's delayed ACK (40 ms)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    user_timeout = getattr(socket, "TCP_USER_TIMEOUT", None)
    if stall_timeout is not None and user_timeout is not None:
        sock.setsockopt(socket.IPPROTO_TCP, user_timeout, max(1, int(stall_timeout * 1000)))
    sock.bind((host, port))
    sock.listen(2048)
    return sock


__all__ = [
    "BoundedBodies",
    "lazy_pausing_ws_protocol",
    "listening_socket",
    "timed_http_protocol",
]
