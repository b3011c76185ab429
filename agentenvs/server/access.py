"""Who may talk to the env server: its token, and the Host and Origin of each request.

One check in front of the three protocols' apps (OpenEnv's WebSocket and HTTP, MCP,
ORS): :class:`AccessGuard`, ASGI middleware that answers a refused request before any
of it reaches the app (its body is never read).

- **Host**: a loopback name or address (``127.0.0.1``, ``localhost``, ``[::1]``, any of
  ``127.0.0.0/8``) with the server's own port, or a name given by ``allow_hosts``
  (``name`` for any port, ``name:port`` for one). A page that rebinds its own DNS name
  to 127.0.0.1 sends its own name: refused (HTTP 421, ``HOST_REFUSED``).
- **Origin**, when the request has one (browsers send it on cross-site requests and on
  every WebSocket): the server's own (``http://`` and the Host) or one given by
  ``allow_origins`` (``scheme://host[:port]``). Refused: HTTP 403, ``ORIGIN_REFUSED``.
- **Token**, when the server has one (``agentenvs serve`` makes one unless told
  ``--no-auth``): ``Authorization: Bearer TOKEN``, or ``X-API-Key: TOKEN`` (what the ORS
  SDK's client sends for its ``api_key``), or, on a WebSocket only (for clients that
  cannot set headers, such as openenv's ``GenericEnvClient``), the query parameter
  ``?token=TOKEN``. Compared in constant time. Missing or wrong: HTTP 401,
  ``UNAUTHORIZED``. ``GET /health`` needs no token (it says only that the server is up).

A refused WebSocket is answered with the HTTP status before the upgrade where the server
supports it (uvicorn does), else the handshake is refused (403).

The token's other half is :func:`resolve_token` and :func:`write_token_file`: the token
comes from ``--token``, else ``AGENTENVS_SERVER_TOKEN``, else is made
(``secrets.token_urlsafe``) and written to a file only the user can read
(:func:`token_path`: ``$XDG_RUNTIME_DIR/agentenvs`` or ``/tmp/agentenvs-$UID``, mode
0700, the file 0600, named for the port), removed when the server stops. A client finds
it with :func:`find_token` (the environment variable, else that file for a loopback URL).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

#: the environment variable a server reads its token from, and the suite's clients too
TOKEN_ENV = "AGENTENVS_SERVER_TOKEN"
#: paths any client may read without the token (Host and Origin are still checked)
OPEN_PATHS = frozenset({"/health"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this
    machine's loopback."""
    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _split_host(value: str) -> tuple[str, int | None]:
    """``(name, port)`` of a Host header (``name``, ``name:port``, ``[v6]:port``); port
    None when the header has none."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        name, rest = value[: end + 1], value[end + 1 :]
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        name, port = value.split(":")
    else:
        name, port = value, ""
    if not port:
        return name, None
    return name, int(port) if port.isdigit() and len(port) <= 5 else -1


@dataclass(frozen=True)
class AccessPolicy:
    """What :class:`AccessGuard` lets through (see the module docstring).

    ``token`` None asks for no token (``--no-auth``: loopback only); ``allow_hosts`` and
    ``allow_origins`` add to the loopback names and the same origin.
    """

    token: str | None = None
    allow_hosts: tuple[str, ...] = ()
    allow_origins: tuple[str, ...] = ()
    open_paths: frozenset[str] = field(default=OPEN_PATHS)

    def host_refusal(self, host: str | None, port: int | None) -> str | None:
        """Why a request with this Host header, to a server on ``port``, is refused."""
        if not host:
            return "the request has no Host header"
        name, given = _split_host(host)
        if given is None:
            given = 80
        allowed = {h.strip().lower() for h in self.allow_hosts}
        if name in allowed or f"{name}:{given}" in allowed:
            return None
        if is_loopback(name) and (port is None or given == port):
            return None
        return (
            f"Host {host[:100]!r} is not this server's: it answers loopback names on its own "
            "port and the hosts given by --allow-host"
        )

    def origin_refusal(self, origin: str | None, host: str | None) -> str | None:
        """Why a request with this Origin header (None: none) is refused."""
        if origin is None:
            return None
        value = origin.strip().lower().rstrip("/")
        if host and value == f"http://{host.strip().lower()}":
            return None
        if value in {o.strip().lower().rstrip("/") for o in self.allow_origins}:
            return None
        return (
            f"Origin {origin[:100]!r} is not this server's: it answers its own origin and "
            "those given by --allow-origin"
        )

    def token_ok(self, presented: str | None) -> bool:
        if self.token is None:
            return True
        if presented is None:
            return False
        return hmac.compare_digest(presented.encode(), self.token.encode())


def _presented_token(scope: dict[str, Any], headers: dict[bytes, bytes]) -> str | None:
    auth = headers.get(b"authorization")
    if auth is not None:
        scheme, _, value = auth.decode("latin-1").partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    key = headers.get(b"x-api-key")
    if key is not None:
        return key.decode("latin-1").strip()
    if scope["type"] == "websocket":
        for name, value in parse_qsl(scope.get("query_string", b"").decode("latin-1")):
            if name == "token":
                return value
    return None


class AccessGuard:
    """ASGI middleware: the checks of :class:`AccessPolicy` on every HTTP request and
    WebSocket, before the app sees it; lifespan events pass."""

    def __init__(self, app: Any, *, policy: AccessPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, code, message = refusal
        if kind == "http":
            await _http_refusal(send, status, code, message)
        else:
            await _ws_refusal(scope, receive, send, status, code, message)

    def refusal(self, scope: dict[str, Any]) -> tuple[int, str, str] | None:
        """``(status, code, message)`` of a refused request; None when it may pass."""
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", ()):
            if name in headers:  # two Host or Origin headers: ambiguous, refused
                if name in (b"host", b"origin", b"authorization", b"x-api-key"):
                    return 400, "BAD_REQUEST", f"the request has two {name.decode()} headers"
                continue
            headers[name] = value
        server = scope.get("server")
        port = server[1] if server else None
        host = headers.get(b"host")
        host_text = host.decode("latin-1") if host is not None else None
        why = self.policy.host_refusal(host_text, port)
        if why is not None:
            return 421, "HOST_REFUSED", why
        origin = headers.get(b"origin")
        why = self.policy.origin_refusal(
            origin.decode("latin-1") if origin is not None else None, host_text
        )
        if why is not None:
            return 403, "ORIGIN_REFUSED", why
        if scope.get("path") in self.policy.open_paths and scope["type"] == "http":
            return None
        if not self.policy.token_ok(_presented_token(scope, headers)):
            return (
                401,
                "UNAUTHORIZED",
                "this server needs its token: 'Authorization: Bearer TOKEN' (a WebSocket "
                "may give ?token=TOKEN); agentenvs serve printed where it wrote the token",
            )
        return None


def _refusal_body(code: str, message: str) -> bytes:
    return json.dumps({"detail": message, "code": code}).encode()


async def _http_refusal(send: Any, status: int, code: str, message: str) -> None:
    body = _refusal_body(code, message)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _ws_refusal(
    scope: dict[str, Any], receive: Any, send: Any, status: int, code: str, message: str
) -> None:
    message_in = await receive()  # websocket.connect
    if message_in.get("type") != "websocket.connect":
        return
    if "websocket.http.response" in scope.get("extensions", {}):
        body = _refusal_body(code, message)
        await send(
            {
                "type": "websocket.http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "websocket.http.response.body", "body": body})
        return
    await send({"type": "websocket.close", "code": 1008})


# ------------------------------------------------------------------ the token
def token_dir() -> Path:
    """The per-user folder the server's token files go in (the one ``serve-model`` keeps
    its key in: ``agentenvs.policy.credentials.runtime_path``)."""
    from agentenvs.policy.credentials import runtime_path

    return runtime_path()


def token_path(port: int) -> Path:
    """Where ``agentenvs serve`` on ``port`` writes its token."""
    return token_dir() / f"server-{port}.token"


def resolve_token(given: str | None) -> tuple[str, str]:
    """``(token, where it came from)``: ``given`` (``--token``), else the environment's
    :data:`TOKEN_ENV`, else a new one."""
    if given:
        return given, "--token"
    env = os.environ.get(TOKEN_ENV)
    if env:
        return env, TOKEN_ENV
    return secrets.token_urlsafe(32), "made"


def write_token_file(token: str, port: int) -> Path:
    """Write ``token`` where only this user can read it (the folder 0700, the file 0600,
    neither followed through a link) and return the file's path."""
    from agentenvs.policy.credentials import write_key_file

    return write_key_file(token, token_path(port).name)


def find_token(url: str) -> str | None:
    """The token a client of the server at ``url`` sends: ``AGENTENVS_SERVER_TOKEN``,
    else, for a loopback server, the token file its ``agentenvs serve`` wrote for that
    port (the same user's: only they can read it); None when neither is there."""
    from urllib.parse import urlsplit

    env = os.environ.get(TOKEN_ENV)
    if env:
        return env
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.hostname is None or parts.port is None or not is_loopback(parts.hostname):
        return None
    try:
        return token_path(parts.port).read_text().strip() or None
    except OSError:
        return None


def remove_token_file(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


__all__ = [
    "OPEN_PATHS",
    "TOKEN_ENV",
    "AccessGuard",
    "AccessPolicy",
    "find_token",
    "is_loopback",
    "remove_token_file",
    "resolve_token",
    "token_dir",
    "token_path",
    "write_token_file",
]
