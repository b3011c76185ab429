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
- ``lazy_pausing_ws_protocol()``: uvicorn's WebSocket protocol, reading on while the app
  is about to take the message, and answering the messages the app registers a handler
  for (``FastReplies``: a step or a reset of an env on the event loop) in its own call,
  without the ASGI round of queue, task switch and send a message.
"""

from __future__ import annotations

import asyncio
import json
import select
import socket
from collections.abc import Callable
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


#: poll events of a peer that has gone (POLLRDHUP: it closed its side; Linux)
_HANGUP = getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR

#: the scope's ``extensions`` key of a connection's ``FastReplies``
FAST_REPLIES = "agentenvs.fast_replies"


class FastReplies:
    """Where the app registers a connection's direct replies: ``handler(text)`` answers a
    text message with the reply's text as UTF-8 bytes, or None to leave it to the app's
    receive loop.
    The app sets it while it serves the session and clears it before it ends. ``lost``
    turns True when the connection is gone: messages the client sent before it went, still
    queued for the app, are then not worth answering (a slow step each, for nobody)."""

    __slots__ = ("handler", "lost", "probe")

    def __init__(self) -> None:
        self.handler: Callable[[str], bytes | None] | None = None
        self.lost = False
        #: whether the peer has gone, asked of the socket itself (a paused socket, which
        #: the loop does not read, reports no loss until it is read again)
        self.probe: Callable[[], bool] | None = None

    def gone(self) -> bool:
        return self.lost or (self.probe is not None and self.probe())


def lazy_pausing_ws_protocol() -> type[asyncio.Protocol] | None:
    """uvicorn's WebSocket protocol (on ``websockets``' sans-I/O core) with two shortcuts
    for established connections; None where that protocol is missing.

    - reading on while the message is the next the app takes (a second one pauses the
      socket), rather than pausing after every message and resuming at the app's next
      receive (two system calls and loop bookkeeping a message);
    - direct replies: the app may register a handler (``FastReplies.handler``, found in
      the scope's ``extensions`` under ``FAST_REPLIES``) that answers a text message at
      once, in the protocol's own call, or returns None to leave it to the app. While the
      app waits for its next message with none queued, each whole, unfragmented, masked
      text frame of under 64 KiB that arrives is unmasked, decoded and offered to the
      handler, and its reply written as a text frame, the replies to the frames of one
      read written together: no queue, task switch or ASGI message a step. The first
      frame the handler declines, and everything after it, goes the ordinary way (in
      order: the app answers it before any later frame is offered), as does anything
      while the app is busy, a message is queued, the socket's buffer is over its high
      mark, a fragmented message is under way or the connection is closing.
    """
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import (
            WebSocketsSansIOProtocol,
        )
        from websockets.protocol import State
    except ImportError:
        return None
    try:
        from websockets.speedups import apply_mask
    except ImportError:  # pragma: no cover - the pure-Python masking of websockets
        from websockets.utils import apply_mask

    open_state = State.OPEN

    class LazyPausingWSProtocol(WebSocketsSansIOProtocol):  # type: ignore[misc, valid-type]
        fast: FastReplies | None = None
        app_waiting = False

        def handle_connect(self, event: Any) -> None:
            super().handle_connect(event)
            scope = self.__dict__.get("scope")
            if scope is not None and isinstance(scope.get("extensions"), dict):
                self.fast = FastReplies()
                self.fast.probe = self._peer_gone
                scope["extensions"][FAST_REPLIES] = self.fast

        def _peer_gone(self) -> bool:
            """The peer hung up (reset, or closed its side), read from the socket without
            taking any data: ``poll`` for hang-up events only."""
            transport = self.transport
            if transport is None or transport.is_closing():
                return True
            sock = transport.get_extra_info("socket")
            if sock is None:
                return False
            poller = select.poll()
            poller.register(sock.fileno(), _HANGUP)
            return bool(poller.poll(0))

        def connection_lost(self, exc: Exception | None) -> None:
            if self.fast is not None:
                self.fast.lost = True
            super().connection_lost(exc)

        async def receive(self) -> Any:
            self.app_waiting = True
            try:
                return await super().receive()
            finally:
                self.app_waiting = False

        def data_received(self, data: bytes) -> None:
            fast = self.fast
            if fast is None or fast.handler is None or not self._may_answer():
                super().data_received(data)
                return
            handler = fast.handler
            replies: list[bytes] = []
            pos, end = 0, len(data)
            while pos < end:
                frame = _text_frame(data, pos, end)
                if frame is None:
                    break
                start, stop = frame
                payload = apply_mask(data[start:stop], data[start - 4 : start])
                try:
                    text = payload.decode()
                except UnicodeDecodeError:
                    break  # the ordinary way closes the connection (1007)
                body = handler(text)
                if body is None:
                    break
                n = len(body)
                if n < 126:
                    replies.append(bytes((0x81, n)) + body)
                elif n < 1 << 16:
                    replies.append(b"\x81\x7e" + n.to_bytes(2, "big") + body)
                else:
                    replies.append(b"\x81\x7f" + n.to_bytes(8, "big") + body)
                pos = stop
                if len(replies) >= 32:  # a client sending many at once: the buffer's bound
                    self.transport.write(b"".join(replies))
                    replies = []
                    if not self._may_answer():
                        break
            if replies:
                self.transport.write(b"".join(replies))
            if pos < end:
                super().data_received(data[pos:] if pos else data)

        def _may_answer(self) -> bool:
            """Whether the next frame may be answered directly: the app waits with none
            queued, the connection is open with no partial frame or message held, and
            the socket's buffer is under its high mark."""
            return (
                self.app_waiting
                and self.queue.empty()
                and not self.close_sent
                and self.writable.is_set()
                and self.conn.state is open_state
                and not self.conn.expect_continuation_frame
                and not self.conn.reader.buffer
                and not self.transport.is_closing()
            )

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


def _text_frame(data: bytes, pos: int, end: int) -> tuple[int, int] | None:
    """``(payload start, payload end)`` of the frame at ``data[pos:]`` when it is a whole,
    final, masked text frame without extension bits and under 64 KiB; else None."""
    if end - pos < 6 or data[pos] != 0x81:
        return None
    n = data[pos + 1]
    if n < 0x80 or n == 0xFF:  # unmasked (a protocol error the ordinary way reports), or 64-bit
        return None
    n &= 0x7F
    start = pos + 6
    if n == 126:
        if end - pos < 8:
            return None
        n = (data[pos + 2] << 8) | data[pos + 3]
        start = pos + 8
    stop = start + n
    return (start, stop) if stop <= end else None


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
    "FAST_REPLIES",
    "BoundedBodies",
    "FastReplies",
    "lazy_pausing_ws_protocol",
    "listening_socket",
    "timed_http_protocol",
]
