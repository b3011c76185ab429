"""The env as an MCP server: one env episode per MCP session, its actions as typed tools.

``agentenvs serve --protocol mcp`` (``--transport stdio`` or ``http``) serves one env id
with the official ``mcp`` SDK's low-level server. What a session's tools are and answer is
:mod:`agentenvs.server.mcp_tools`; this module is the two transports and the sessions'
bounds.

- stdio (``serve_stdio``): the process is one session, for the client that started it
  (an agent harness's ``command``/``args``); the env is closed, and the process exits, when
  the client closes the pipe or dies (its stdin ends): nothing is left behind.
- streamable HTTP (``create_mcp_app``, ``serve_mcp_http``): ``POST``/``GET``/``DELETE``
  at ``/mcp``, sessions by the ``Mcp-Session-Id`` header (the SDK's stateful mode). A
  session's env is closed when the client ends the session (``DELETE``: the SDK's client
  sends it when it exits), after ``session_timeout`` s without a request (an HTTP client
  that vanished sends nothing else: over HTTP that timeout defaults to
  ``HTTP_IDLE_TIMEOUT``), or when the server stops. At most ``max_sessions`` sessions
  live at once: a new one past that is refused with HTTP 503 and a JSON-RPC error whose
  message says so. A request body over ``message_limit`` bytes is refused with 413 and
  not read (``transport.BoundedBodies``, as on the other protocols). Host, Origin and the
  token are checked first, by the same ``access.AccessGuard`` as the other protocols.
  Sessions need the protocol's handshake (``initialize``, versions up to 2025-11-25); a
  request of a sessionless protocol version is refused (400) since an episode lives in a
  session. ``GET /sessions`` counts live sessions and envs (as the OpenEnv server does).

The bounds reuse :class:`~agentenvs.server.app.ServerConfig`: ``max_sessions``,
``session_timeout``, ``max_message_bytes`` (``message_limit``; over stdio it bounds each
call's arguments).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agentenvs.server.app import ServerConfig
from agentenvs.server.mcp_tools import STATE_URI, Episode, ToolAnswer
from agentenvs.server.transport import BoundedBodies

#: a session's idle timeout over HTTP when ``session_timeout`` is not set (seconds)
HTTP_IDLE_TIMEOUT = 600.0
SESSION_HEADER = "mcp-session-id"
PROTOCOL_HEADER = "mcp-protocol-version"


def _require_mcp() -> None:
    from agentenvs.core.errors import require

    require("mcp", "server")


def _episode(config: ServerConfig) -> Episode:
    return Episode.for_config(config)


def _result(answer: ToolAnswer) -> Any:
    import mcp.types as types

    return types.CallToolResult(
        content=[types.TextContent(type="text", text=answer.text)],
        structured_content=answer.data or None,
        is_error=answer.error,
    )


def build_server(config: ServerConfig, find: Any, busy: Any = None) -> Any:
    """The SDK's low-level ``Server`` for ``config.env_id``; ``find(ctx)`` gives the
    request's :class:`Episode` (or None: the session is gone); ``busy(ctx, True)`` and
    ``busy(ctx, False)``, where given, bracket each tool call (an episode that is stepping
    is not idle)."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    import agentenvs

    def missing() -> Any:
        return _result(
            ToolAnswer("this session has no episode (it ended)", {"code": "NO_SESSION"}, True)
        )

    async def list_tools(ctx: Any, params: Any) -> Any:
        episode = find(ctx)
        specs = episode.tools() if episode is not None else []
        return types.ListToolsResult(
            tools=[
                types.Tool(name=s.name, description=s.description, input_schema=s.input_schema)
                for s in specs
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> Any:
        episode = find(ctx)
        if episode is None:
            return missing()
        if busy is not None:
            busy(ctx, True)
        try:
            answer, changed = await episode.call(params.name, params.arguments)
        finally:
            if busy is not None:
                busy(ctx, False)
        if changed:
            with contextlib.suppress(Exception):  # advisory: a client without a stream misses it
                await ctx.session.send_tool_list_changed()
        return _result(answer)

    async def list_resources(ctx: Any, params: Any) -> Any:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=STATE_URI,
                    name="episode state",
                    description="The episode's task, turn, turns left, done, success, score "
                    "and summed reward (JSON).",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(ctx: Any, params: Any) -> Any:
        from mcp.shared.exceptions import MCPError

        if str(params.uri) != STATE_URI:
            raise MCPError(types.INVALID_PARAMS, f"unknown resource {str(params.uri)[:100]!r}")
        episode = find(ctx)
        state = await episode.state() if episode is not None else {"started": False}
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=STATE_URI, mime_type="application/json", text=json.dumps(state)
                )
            ]
        )

    return Server(
        f"agentenvs:{config.env_id}",
        version=agentenvs.__version__,
        instructions=f"One episode of {config.env_id} per session: call reset, then act "
        "through the env's tools; state (or the resource " + STATE_URI + ") reads the episode.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


def _init_options(server: Any) -> Any:
    from mcp.server.lowlevel.server import NotificationOptions

    return server.create_initialization_options(NotificationOptions(tools_changed=True))


# ------------------------------------------------------------------ stdio
async def run_stdio(config: ServerConfig) -> None:
    """Serve one session over this process's stdin/stdout until the client goes."""
    from mcp.server.stdio import stdio_server

    episode = _episode(config)
    server = build_server(config, lambda ctx: episode)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, _init_options(server))
    finally:
        await episode.aclose()


def serve_stdio(config: ServerConfig) -> None:
    """Run ``run_stdio`` (the CLI's ``--transport stdio``)."""
    import anyio

    import agentenvs  # noqa: F401 - registers the ids

    _require_mcp()
    anyio.run(run_stdio, config)


# ------------------------------------------------------------------ streamable HTTP
class McpSessions:
    """The HTTP sessions: one SDK transport and one :class:`Episode` each, the bound on
    their number, the idle timeout, and closing them (an ASGI app for ``/mcp``)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.timeout = config.session_timeout or HTTP_IDLE_TIMEOUT
        self.server = build_server(config, self.find, self._busy)
        # Host, Origin and the token are checked in front of the app (``AccessGuard``),
        # as for the other protocols; the SDK's own check would refuse --allow-host names
        self.security = None
        self._bounded = BoundedBodies(
            self._handle, max_bytes=config.message_limit, timeout=config.request_timeout
        )
        self.transports: dict[str, Any] = {}
        self.episodes: dict[str, Episode] = {}
        self.envs = 0  # sessions' envs not yet closed
        self._scopes: dict[str, Any] = {}
        self._calls: dict[str, int] = {}  # tool calls under way, per session
        self._tg: Any = None

    def _sid(self, ctx: Any) -> str | None:
        request = getattr(ctx, "request", None)
        return request.headers.get(SESSION_HEADER) if request is not None else None

    def find(self, ctx: Any) -> Episode | None:
        sid = self._sid(ctx)
        return self.episodes.get(sid) if sid else None

    def _busy(self, ctx: Any, begin: bool) -> None:
        """A session is not idle while a tool call of its runs (a slow reset or test run)."""
        import math

        sid = self._sid(ctx)
        if sid is None or sid not in self._scopes:
            return
        count = self._calls.get(sid, 0) + (1 if begin else -1)
        self._calls[sid] = count
        if count > 0:
            self._scopes[sid].deadline = math.inf
        else:
            self._touch(sid)

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        import anyio

        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    def _touch(self, sid: str) -> None:
        import anyio

        scope = self._scopes.get(sid)
        if scope is not None and not self._calls.get(sid):
            scope.deadline = anyio.current_time() + self.timeout

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # the server's own bound (``transport.BoundedBodies``): a body announced over the
        # limit is refused unread, and the connection closed (the SDK's reads it to the end)
        await self._bounded(scope, receive, send)

    async def _handle(self, scope: Any, receive: Any, send: Any) -> None:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
        from starlette.requests import Request

        request = Request(scope, receive)
        version = request.headers.get(PROTOCOL_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await _jsonrpc_error(
                scope,
                receive,
                send,
                400,
                f"protocol version {version[:40]!r} has no sessions, and an episode lives in a "
                f"session: use one of {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}",
            )
            return
        sid = request.headers.get(SESSION_HEADER)
        if sid is not None:
            transport = self.transports.get(sid)
            if transport is None:
                await _jsonrpc_error(scope, receive, send, 404, "Session not found")
                return
            self._touch(sid)
            try:
                await transport.handle_request(scope, receive, send)
            finally:
                self._touch(sid)
            return
        if self.envs >= self.config.max_sessions:
            await _jsonrpc_error(
                scope,
                receive,
                send,
                503,
                f"the server is at capacity ({self.config.max_sessions} sessions at once): "
                "CAPACITY_REACHED",
            )
            return
        sid = await self._open()
        await self.transports[sid].handle_request(scope, receive, send)

    async def _open(self) -> str:
        import anyio
        from mcp.server.runner import serve_loop
        from mcp.server.streamable_http import StreamableHTTPServerTransport

        if self._tg is None:
            raise RuntimeError("McpSessions.run() is not running")
        sid = uuid.uuid4().hex
        transport = StreamableHTTPServerTransport(
            mcp_session_id=sid, security_settings=self.security
        )
        episode = _episode(self.config)
        self.transports[sid] = transport
        self.episodes[sid] = episode
        self.envs += 1
        idle = anyio.CancelScope(deadline=anyio.current_time() + self.timeout)
        self._scopes[sid] = idle

        async def run_session(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
            try:
                async with transport.connect() as (read_stream, write_stream):
                    task_status.started()
                    with idle:
                        await serve_loop(
                            self.server,
                            read_stream,
                            write_stream,
                            lifespan_state={},
                            session_id=sid,
                            init_options=_init_options(self.server),
                        )
            finally:
                # out of the tables first, so no request reaches an env that is closing
                self.transports.pop(sid, None)
                self.episodes.pop(sid, None)
                self._scopes.pop(sid, None)
                self._calls.pop(sid, None)
                with anyio.CancelScope(shield=True):
                    try:
                        if not transport.is_terminated:
                            await transport.terminate()
                    finally:
                        try:
                            await episode.aclose()
                        finally:
                            self.envs -= 1

        await self._tg.start(run_session)
        return sid


async def _jsonrpc_error(scope: Any, receive: Any, send: Any, status: int, message: str) -> None:
    from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError
    from starlette.responses import Response

    body = JSONRPCError(
        jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=message)
    )
    response = Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=status,
        media_type="application/json",
    )
    await response(scope, receive, send)


def create_mcp_app(config: ServerConfig) -> Any:
    """The Starlette app: MCP at ``/mcp``, ``GET /health`` and ``GET /sessions``."""
    import gymnasium as gym
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    import agentenvs  # noqa: F401 - registers the ids
    from agentenvs.server.access import AccessGuard

    _require_mcp()
    gym.spec(config.env_id)  # an unknown id fails here, before the server starts
    sessions = McpSessions(config)

    async def health(request: Any) -> Any:
        return JSONResponse({"status": "healthy"})

    async def counts(request: Any) -> Any:
        return JSONResponse(
            {
                "active": len(sessions.transports),
                "max": config.max_sessions,
                "envs": sessions.envs,
                "idle_timeout": sessions.timeout,
                "max_message_bytes": config.message_limit,
            }
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with sessions.run():
            yield

    app = Starlette(
        routes=[
            Route("/mcp", endpoint=sessions),
            Route("/health", health),
            Route("/sessions", counts),
        ],
        lifespan=lifespan,
        # outermost: a refused request is answered before its body is read
        middleware=[Middleware(AccessGuard, policy=config.access)],
    )
    app.state.sessions = sessions
    return app


def serve_mcp_http(
    config: ServerConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    announce: Any = print,
    on_bound: Any = None,
) -> None:
    """Serve MCP over streamable HTTP until interrupted; ``port=0`` picks a free port."""
    from agentenvs.server.app import check_bind, run_app

    config = check_bind(config, host)
    run_app(
        create_mcp_app(config),
        config,
        host=host,
        port=port,
        log_level=log_level,
        announce=announce,
        what=f"MCP streamable HTTP, up to {config.max_sessions} sessions",
        path="/mcp",
        on_bound=on_bound,
    )


__all__ = [
    "HTTP_IDLE_TIMEOUT",
    "McpSessions",
    "build_server",
    "create_mcp_app",
    "run_stdio",
    "serve_mcp_http",
    "serve_stdio",
]
