"""The HTTP side of ``agentenvs serve-model`` (stdlib ``asyncio``): who may ask, how much
one request may ask, and how many connections the server holds.

- ``Access``: the API key (``Authorization: Bearer``, compared with
  ``hmac.compare_digest``) every route but ``GET /health`` needs, and the ``Host`` and
  ``Origin`` a request may name: a loopback name with the server's port, or one the
  operator allowed (``--allow-host``); a page of another site (its ``Origin``) or a name
  rebound to loopback (its ``Host``) is refused before the key is even looked at.
- ``ServeLimits``: the caps (``n``, ``max_tokens``, the prompt's tokens and bytes, the
  body, the queue, a request's time, connections, a slow client's time).
- ``HTTPServer``: one event-loop thread holds every connection (a half-open one costs a
  socket, not a thread); a request is read within ``read_timeout`` seconds, its body only
  up to ``Content-Length`` and never past ``max_body_bytes`` (a larger announced length
  is refused before a byte of it is read); at ``max_connections`` the connection idle the
  longest (no request under way) is closed to make room. A request that got through is
  handed to a bounded pool of ``max_queue`` threads, and only while fewer than
  ``max_queue`` requests are admitted: the next one is answered 429 at once. ``Host``,
  ``Origin`` and the key are checked on the headers: a refused request's body is never
  read (and its connection is closed).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

#: names that reach this machine's loopback interface (a ``Host`` of another name that
#: resolves to 127.0.0.1 is a rebound name: refused)
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
#: the most bytes of request line and headers
MAX_HEAD_BYTES = 32 * 1024
_REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 408: "Request Timeout", 411: "Length Required",
    413: "Content Too Large", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 501: "Not Implemented", 503: "Service Unavailable",
}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is loopback."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServeLimits:
    """What one request, and the server as a whole, may take (see ``docs/policies.md``)."""

    #: choices per request (``n``)
    max_n: int = 16
    #: sequences a request generates or scores (``n`` x prompts)
    max_sequences: int = 64
    #: new tokens per choice (``max_tokens``)
    max_tokens: int = 4096
    #: tokens of one prompt (``None``: the model's context length)
    max_prompt_tokens: int | None = None
    #: bytes of a request's prompt text (its messages' or prompts' text together)
    max_prompt_bytes: int = 1 << 20
    #: bytes of a request body
    max_body_bytes: int = 4 << 20
    #: requests admitted at once (waiting for the model or running): the next is a 429
    max_queue: int = 32
    #: seconds a request may take from admission; a request past it is dropped with a 503
    request_timeout: float = 300.0
    #: seconds a client has to send a whole request (its headers and body)
    read_timeout: float = 30.0
    #: connections held at once (past it the longest idle one is closed)
    max_connections: int = 256

    def __post_init__(self) -> None:
        for name in ("max_n", "max_sequences", "max_tokens", "max_prompt_bytes",
                     "max_body_bytes", "max_queue", "max_connections"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.max_prompt_tokens is not None and int(self.max_prompt_tokens) < 1:
            raise ValueError(f"max_prompt_tokens must be >= 1, got {self.max_prompt_tokens!r}")
        if float(self.request_timeout) <= 0 or float(self.read_timeout) <= 0:
            raise ValueError("request_timeout and read_timeout must be > 0")


@dataclass(frozen=True)
class Access:
    """Who may ask: the key (``None``: none needed) and the ``Host`` names allowed besides
    loopback ones (``name`` or ``name:port``; ``*``: any)."""

    api_key: str | None
    allowed_hosts: frozenset[str] = frozenset()

    def host_allowed(self, value: str | None, port: int) -> bool:
        """Whether a ``Host`` header (or an ``Origin``'s host part) names this server."""
        if not value:
            return False
        if "*" in self.allowed_hosts:
            return True
        name, given_port = _split_host(value)
        if name is None:
            return False
        if value.lower() in self.allowed_hosts or name in self.allowed_hosts:
            return True
        return name in LOOPBACK_NAMES and given_port == port

    def origin_allowed(self, origin: str, port: int) -> bool:
        """A browser's ``Origin``: allowed only where it is this server itself."""
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null" (a sandboxed page, a file), a browser extension
        return self.host_allowed(parts.netloc, port)

    def key_matches(self, authorization: str | None) -> bool:
        if self.api_key is None:
            return True
        scheme, _, given = (authorization or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.api_key.encode()
        )


def _split_host(value: str) -> tuple[str | None, int | None]:
    """``name:port`` (``[v6]:port``) as (lower-case name, port; None when absent)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None, None
        name, rest = value[: end + 1], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None, None
        port_text = rest[1:]
    else:
        name, _, port_text = value.partition(":")
    if not port_text:
        return name, None
    if not port_text.isdigit():
        return None, None
    return name, int(port_text)


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Response:
    status: int
    payload: dict[str, Any] | None = None
    #: Server-Sent Events, sent chunked (instead of ``payload``)
    events: list[bytes] | None = None
    headers: dict[str, str] = field(default_factory=dict)


def error_response(
    status: int, message: str, kind: str, code: str | int | None = None, param: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """An error in OpenAI's shape."""
    error = {"message": message, "type": kind, "param": param,
             "code": status if code is None else code}
    return Response(status, {"error": error}, headers=dict(headers or {}))


class _Refused(Exception):
    def __init__(self, response: Response) -> None:
        super().__init__(response.status)
        self.response = response


class _Connection:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.busy = False
        self.since = time.monotonic()


class HTTPServer:
    """Serve ``handle`` (called in the pool with each admitted ``Request``; it returns a
    ``Response``) on ``host:port`` from an event loop in a thread of its own."""

    def __init__(
        self,
        handle: Callable[[Request], Response],
        host: str,
        port: int,
        access: Access,
        limits: ServeLimits,
        *,
        open_paths: frozenset[str] = frozenset({"/health"}),
    ) -> None:
        self.handle = handle
        self.access = access
        self.limits = limits
        self.open_paths = open_paths
        self.pool = ThreadPoolExecutor(limits.max_queue, thread_name_prefix="serve-model")
        self.admitted = 0
        self._connections: list[_Connection] = []
        self.loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.thread = threading.Thread(
            target=self._run, args=(host, port), name="serve-model-http", daemon=True
        )
        self.thread.start()
        self._ready.wait()
        if self._failure is not None:
            self.thread.join()
            raise self._failure
        assert self._server is not None
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    # ------------------------------------------------------------ lifecycle
    def _run(self, host: str, port: int) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self._server = self.loop.run_until_complete(
                asyncio.start_server(self._serve, host, port, limit=MAX_HEAD_BYTES)
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
            self._failure = exc
            self._ready.set()
            self.loop.close()
            return
        self._ready.set()
        self.loop.run_forever()
        self._server.close()
        for connection in list(self._connections):
            connection.writer.close()
        self.loop.run_until_complete(self._server.wait_closed())
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def close(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
        self.pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------ connections
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = _Connection(writer)
        if len(self._connections) >= self.limits.max_connections:
            idle = [c for c in self._connections if not c.busy]
            if not idle:
                writer.close()
                return
            oldest = min(idle, key=lambda c: c.since)
            self._connections.remove(oldest)
            oldest.writer.close()
        self._connections.append(connection)
        try:
            while True:
                connection.busy, connection.since = False, time.monotonic()
                try:
                    request = await asyncio.wait_for(
                        self._read(reader, writer), self.limits.read_timeout
                    )
                except TimeoutError:
                    await self._write(writer, error_response(
                        408, f"no whole request within {self.limits.read_timeout:g} s",
                        "invalid_request_error"), close=True)
                    return
                except _Refused as exc:
                    await self._write(writer, exc.response, close=True)
                    return
                if request is None:
                    return
                connection.busy = True
                keep = request.headers.get("connection", "").lower() != "close"
                response = await self._answer(request)
                if not await self._write(writer, response, close=not keep):
                    return
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            if connection in self._connections:
                self._connections.remove(connection)
            writer.close()

    async def _read(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Request | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial.strip():
                return None  # the client closed between requests
            raise _Refused(
                error_response(400, "incomplete request", "invalid_request_error")
            ) from None
        except asyncio.LimitOverrunError:
            raise _Refused(error_response(
                431, f"request line and headers past {MAX_HEAD_BYTES} bytes",
                "invalid_request_error")) from None
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise _Refused(error_response(400, "malformed request line", "invalid_request_error"))
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip() or line[0] in " \t":
                raise _Refused(error_response(400, "malformed header", "invalid_request_error"))
            key = name.lower()
            if key in headers and key in ("content-length", "host", "authorization", "origin"):
                raise _Refused(error_response(400, f"{name} given twice",
                                              "invalid_request_error"))
            headers[key] = value.strip()
        if version == "HTTP/1.0" and "keep-alive" not in headers.get("connection", "").lower():
            headers["connection"] = "close"
        if "transfer-encoding" in headers:
            raise _Refused(error_response(
                411, "a chunked body is not taken: send a Content-Length",
                "invalid_request_error"))
        length_text = headers.get("content-length", "0")
        if not length_text.isdigit():
            raise _Refused(error_response(400, "Content-Length must be a number of bytes",
                                          "invalid_request_error"))
        length = int(length_text)
        if length > self.limits.max_body_bytes:
            raise _Refused(error_response(
                413, f"a body of {length} bytes: this server takes at most "
                f"{self.limits.max_body_bytes} bytes (--max-body-bytes)",
                "invalid_request_error", "body_too_large"))
        request = Request(method, target.split("?", 1)[0].rstrip("/") or "/", headers, b"")
        refused = self._check_access(request)  # before a byte of the body is read
        if refused is not None:
            raise _Refused(refused)
        if length and headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # curl waits for it
        request.body = await reader.readexactly(length) if length else b""
        return request

    def _check_access(self, request: Request) -> Response | None:
        port = int(self.port)
        if not self.access.host_allowed(request.headers.get("host"), port):
            return error_response(
                403, f"Host {request.headers.get('host')!r} is not this server's (a loopback "
                "name with its port, or one given to --allow-host)", "permission_error",
                "host_not_allowed")
        origin = request.headers.get("origin")
        if origin is not None and not self.access.origin_allowed(origin, port):
            return error_response(
                403, f"requests from the page at {origin!r} are refused",
                "permission_error", "origin_not_allowed")
        if request.path in self.open_paths and request.method == "GET":
            return None
        if not self.access.key_matches(request.headers.get("authorization")):
            return error_response(
                401, "a valid API key is needed: Authorization: Bearer <key>",
                "authentication_error", "invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"})
        return None

    async def _answer(self, request: Request) -> Response:
        if request.method == "GET" and request.path in self.open_paths:
            return Response(200, {"status": "ok"})
        if self.admitted >= self.limits.max_queue:
            return error_response(
                429, f"{self.admitted} requests are already queued (--max-queue "
                f"{self.limits.max_queue}); try again shortly", "rate_limit_error",
                "queue_full", headers={"Retry-After": "1"})
        self.admitted += 1
        try:
            return await self.loop.run_in_executor(self.pool, self._handle, request)
        finally:
            self.admitted -= 1

    def _handle(self, request: Request) -> Response:
        try:
            return self.handle(request)
        except Exception as exc:  # noqa: BLE001 - a failure must answer, not hang the client
            return error_response(500, f"{type(exc).__name__}: {exc}", "server_error")

    async def _write(
        self, writer: asyncio.StreamWriter, response: Response, *, close: bool
    ) -> bool:
        """Send ``response``; False when the client is gone or does not read it in time."""
        status = response.status
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}"]
        headers = dict(response.headers)
        if close:
            headers["Connection"] = "close"
        if response.events is not None:
            headers.update({"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                            "Transfer-Encoding": "chunked"})
            body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in response.events if e)
            body += b"0\r\n\r\n"
        else:
            body = json.dumps(response.payload).encode()
            headers.update({"Content-Type": "application/json",
                            "Content-Length": str(len(body))})
        head += [f"{k}: {v}" for k, v in headers.items()]
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            await asyncio.wait_for(writer.drain(), self.limits.read_timeout)
        except (ConnectionError, TimeoutError):
            return False
        return True
