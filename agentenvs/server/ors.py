"""``agentenvs serve --protocol ors``: one env served by the Open Reward Standard's server.

The server is ``ors-sdk``'s (``ors.Server``, the ``ors`` extra); this module gives it one
``ors.Environment`` class for the served env id (:func:`environment_class`) and wraps its
app with the bounds the other servers have (:func:`create_ors_app`).

What an ORS client sees (``ors.client.AsyncORS(base_url).environment(NAME)``; ``NAME``
is the id without its namespace, ``FrozenLake-v0``):

- **Tasks**: one split, ``test``, of the env's task ids; each task is the spec
  ``{"task_id": ID}``. A session is one episode: ``POST /create`` takes a task spec with
  the keys ``task_id``, ``seed`` and ``max_turns`` (all optional; others are refused), or a
  listed task by ``split`` and ``index``. The seed is the episode's: the same spec gives the
  same episode in any process; without one the episode draws its randomness afresh, like
  ``reset(seed=None)``. ORS has no reset in a session: a new episode is a new session.
- **Prompt**: ``GET /{env}/prompt`` answers one text block, the rules and the task as tool
  mode shows them (``integrations.common.tool_mode_text``); its ``detail`` holds
  ``task_id``, ``max_turns``, ``turns_left`` and the tool names.
- **Tools**: the env's actions, the table the MCP server and the trainer adapters use
  (``integrations.common.ACTION_TOOLS``, through ``server.mcp_tools.Episode``), as
  ``@tool`` methods whose one argument is a pydantic model made from the tool's parameters
  (ORS reads tools from Python signatures): FrozenLake ``move(direction)``, InterCode-SQL
  ``execute_sql(query)`` and ``submit()``, DeepCoder-MT ``run_tests(code)``,
  Terminal-Bench ``run_command(command)`` and ``submit()``. BFCL lists ``submit()`` and
  BFCL multi-turn ``reply(message)``; their task's functions are the session's task tools
  (``GET /{env}/task_tools``, which BFCL multi-turn changes as its user turns go).
- **Results**: ``ToolOutput(blocks=[the observation], reward, finished, metadata)``:
  ``reward`` is the step's reward and ``finished`` whether the episode ended (solved,
  over, out of turns); ``metadata`` holds the step's figures as the MCP server's
  ``structuredContent`` has them (``terminated``, ``truncated``, ``return``, ``turn``,
  ``turns_left``, ``success``, ``score``, ``action_valid``, less the env's hidden keys). A BFCL function call only
  records the call: ``reward`` None, ``finished`` false.
- **Errors**: ``RunToolError(error)``, whose text starts with its code and a colon
  (:func:`error_code` reads it): ``UNKNOWN_TOOL``, ``VALIDATION_ERROR`` (arguments that do
  not fit the tool, or over the message bound), ``EPISODE_OVER``, ``EXECUTION_ERROR``. None
  costs a turn, and the session goes on. A task spec the env refuses is HTTP 400 on the
  session's first request, with its code in the detail.
- **Faults**: ORS's only channel for them is the error string, so an env's
  :class:`~agentenvs.core.errors.Fault` is the error ``INFRASTRUCTURE_FAULT: ... fault=
  {record}``, never a ``ToolOutput``: no reward (not 0) reaches a trainer for a faulted
  episode, and :func:`fault_record` reads the fault's record back (kind, attribution,
  message, evidence, retryable). Every later call of the session answers the same fault;
  a fault while the env is made or reset is that error on every tool call and HTTP 503 on
  ``/prompt``. Run the episode again in a new session with the same spec.

Bounds (the reference server's session store has none; ``ServerConfig``'s):

- ``max_sessions`` sessions at once, a ``POST /create`` counted from the moment it
  arrives (before any await: concurrent creations cannot pass the bound): past it HTTP 503
  whose detail names the bound and ``CAPACITY_REACHED`` (the SDK's client retries twice,
  then raises);
- one tool call at a time per session: a call while another runs is the error
  ``SESSION_BUSY`` at once, so calls a client queued do not run after it hung up;
- a task spec's ``max_turns`` at most ``ServerConfig.turns_cap`` (HTTP 400 past it);
- Host, Origin and the token (``X-API-Key``, what the SDK's client sends for its
  ``api_key``, or ``Authorization: Bearer``) checked first (``access.AccessGuard``);
  ``metadata`` and the results leave out the env's ``hidden_info_keys``;
- an idle timeout, ``session_timeout`` or :data:`IDLE_TIMEOUT`: a session neither pinged
  (the SDK's client pings every 10 s) nor called that long is deleted and its env closed,
  so a killed client's env goes; a session whose tool call runs, or whose env is still
  being set up, is never idle. Keep it
  well above the client's ping period;
- ``max_message_bytes`` per HTTP body (413 past it) and per call's arguments
  (``VALIDATION_ERROR``), with ``request_timeout`` and ``stall_timeout`` as the other
  servers have them (``agentenvs.server.transport``).

A session's env is closed when its client deletes it (the SDK's client does on exit), when
it goes idle, or when the server stops. ``GET /sessions`` counts sessions (``active``) and
envs not yet closed (``envs``); ``GET /health`` is the SDK's.

The ORS server's per-session tables are the SDK's own (``ors-sdk`` 0.1: the ``ors`` extra
pins it); :class:`OrsSessions` is the one place that reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from agentenvs.server.app import ServerConfig
from agentenvs.server.mcp_tools import CONTROL_TOOLS, FAULT_CODE, Episode, ToolAnswer

#: a session's idle timeout when ``session_timeout`` is not set (seconds; the SDK's client
#: pings every 10 s)
IDLE_TIMEOUT = 60.0
#: the one split: every task of the env
SPLIT = "test"
#: the keys of a task spec
TASK_KEYS = ("task_id", "seed", "max_turns")
_CODE = re.compile(r"^(?:\(sid=[^)]*\) )?([A-Z][A-Z_]+): ")  # the SDK's client adds the sid
_FAULT_TAIL = " fault="


def error_code(error: str) -> str | None:
    """The code an ORS tool error of this server starts with (``VALIDATION_ERROR``, ...),
    read from the error's text (or from the SDK client's ``ToolCallError``, which puts
    ``(sid=...)`` before it)."""
    match = _CODE.match(error)
    return match.group(1) if match else None


def fault_record(error: str) -> dict[str, Any] | None:
    """The fault's record in an ``INFRASTRUCTURE_FAULT`` tool error (None for any other)."""
    if error_code(error) != FAULT_CODE or _FAULT_TAIL not in error:
        return None
    return json.loads(error.rsplit(_FAULT_TAIL, 1)[1])


def _fault_error(record: dict[str, Any]) -> str:
    return (
        f"{FAULT_CODE}: infrastructure fault ({record.get('kind')}): {record.get('message')}; "
        "the episode is over and is not scored: run it again in a new session"
        f"{_FAULT_TAIL}{json.dumps(record)}"
    )


def require_ors() -> Any:
    """Import ``ors`` (the ``ors`` extra), quiet: call it before anything imports ``ors``."""
    from agentenvs.core.errors import require

    # the SDK logs every request to stdout at INFO unless told otherwise (its own knob)
    os.environ.setdefault("ORS_LOG_LEVEL", "WARNING")
    return require("ors", "ors")


class ToolCallError(RuntimeError):
    """A tool method called in process was answered with an error (its text)."""


# ------------------------------------------------------------------ the environment class
def _input_model(name: str, schema: dict[str, Any]) -> Any:
    """The pydantic model of a tool's arguments (the JSON schema of its parameters)."""
    from pydantic import ConfigDict, Field, create_model

    from agentenvs.integrations.tool_schemas import tool_params

    fields: dict[str, Any] = {}
    for p in tool_params(schema):
        default = ... if p.required else None
        alias = p.schema_name if p.schema_name != p.name else None
        fields[p.name] = (p.hint, Field(default, alias=alias, description=p.description))
    title = "".join(part.capitalize() for part in name.split("_")) + "Input"
    return create_model(
        title, __config__=ConfigDict(extra="forbid", populate_by_name=True), **fields
    )


def _tool_method(spec: Any) -> Any:
    """An ORS ``@tool`` method for one of the episode's fixed tools."""
    import ors

    name = spec.name
    if spec.input_schema.get("properties"):
        model = _input_model(name, spec.input_schema)

        async def method(self: Any, inp: Any) -> Any:
            return self._unwrap(await self._run(name, inp.model_dump(by_alias=True)))

        method.__annotations__ = {"inp": model, "return": ors.ToolOutput}
    else:

        async def method(self: Any) -> Any:  # type: ignore[misc]
            return self._unwrap(await self._run(name, {}))

        method.__annotations__ = {"return": ors.ToolOutput}
    method.__name__ = method.__qualname__ = name
    method.__doc__ = spec.description
    return ors.tool(method)


def environment_class(config: ServerConfig) -> type:
    """The ``ors.Environment`` subclass that serves ``config.env_id`` (see the module
    docstring); its ORS name is the id without its namespace."""
    ors = require_ors()
    from fastapi import HTTPException

    probe = Episode(config.env_id, config.make_env, message_limit=config.message_limit)
    fixed = [spec for spec in probe.tools() if spec.name not in CONTROL_TOOLS]
    env_name = config.env_id.rsplit("/", 1)[-1]

    class AgentEnvsEnvironment(ors.Environment):
        _config: ClassVar[ServerConfig] = config
        _task_ids: ClassVar[list[str] | None] = None
        #: envs of this class not yet closed (made or being made)
        open_envs: ClassVar[int] = 0

        def __init__(self, task_spec: Any = None, secrets: Any = None) -> None:
            super().__init__(task_spec=dict(task_spec or {}), secrets=dict(secrets or {}))
            self._episode = Episode.for_config(config)
            self._prompt: list[Any] = []
            self._fault: dict[str, Any] | None = None
            self._open = True
            type(self).open_envs += 1
            self.busy = 0  # tool calls under way: the session is not idle
            self.ready_at = 0.0  # when setup ended: the idle clock starts no earlier

        @classmethod
        def name(cls) -> str:
            return env_name

        @classmethod
        def list_splits(cls) -> list[Any]:
            return [ors.Split(name=SPLIT, type="test")]

        @classmethod
        async def list_tasks(cls, split: str) -> list[dict[str, Any]]:
            if split != SPLIT:
                return []
            if cls._task_ids is None:

                def read() -> list[str]:
                    env = config.make_env()
                    try:
                        return [str(t) for t in env.unwrapped.task_ids]
                    finally:
                        env.close()

                cls._task_ids = await asyncio.to_thread(read)
            return [{"task_id": task_id} for task_id in cls._task_ids]

        # ------------------------------------------------------------ the episode
        async def setup(self) -> None:
            try:
                await self._start()
            except BaseException:  # refused, or cancelled (the session deleted meanwhile):
                await _shielded(self._close())  # the SDK tears down only envs it keeps
                raise
            finally:
                self.ready_at = time.monotonic()

        async def _start(self) -> None:
            spec = dict(self.task_spec)
            unknown = sorted(set(spec) - set(TASK_KEYS))
            if unknown:
                raise HTTPException(
                    400,
                    f"VALIDATION_ERROR: a task spec's keys are {', '.join(TASK_KEYS)}; "
                    f"got {', '.join(map(repr, unknown))}",
                )
            answer, _ = await self._episode.call("reset", spec)
            if answer.error:
                if answer.data.get("code") == FAULT_CODE:
                    self._fault = dict(answer.data.get("fault") or {})
                    return  # every call answers the fault; the env closes with the session
                raise HTTPException(
                    400, f"{answer.data.get('code')}: task spec {spec}: {answer.text}"
                )
            detail = dict(answer.data)
            detail["tools"] = [n for n in detail.get("tools", ()) if n not in CONTROL_TOOLS]
            self._prompt = [ors.TextBlock(text=answer.text, detail=detail)]

        async def teardown(self) -> None:
            await self._close()

        async def _close(self) -> None:
            try:
                await self._episode.aclose()
            finally:
                if self._open:
                    self._open = False
                    type(self).open_envs -= 1

        def get_prompt(self) -> list[Any]:
            if self._fault is not None:
                raise HTTPException(503, _fault_error(self._fault))
            return self._prompt

        def list_task_tools(self) -> Any:
            return ors.ListToolsOutput(
                tools=[
                    ors.ToolSpec(
                        name=s.name, description=s.description, input_schema=s.input_schema
                    )
                    for s in self._episode.tools()
                    if s.name in self._task_tool_names()
                ]
            )

        @classmethod
        def _shared(cls) -> set[str]:
            return {spec.name for spec in cls.list_tools().tools}

        # ------------------------------------------------------------ calls
        async def _call_tool(self, name: str, input: Any) -> Any:
            """Every call goes through the episode, listed tools and task tools alike, so
            its errors are the episode's (the SDK's own dispatch knows only methods)."""
            return await self._run(name, dict(input or {}))

        async def _run(self, name: str, arguments: dict[str, Any]) -> Any:
            self.busy += 1
            try:
                if self._fault is not None:
                    return _error(_fault_error(self._fault))
                tools = [*self._shared(), *self._task_tool_names()]
                if name in CONTROL_TOOLS or name not in tools:
                    return _error(
                        f"UNKNOWN_TOOL: unknown tool {name[:100]!r}; this episode's tools: "
                        + ", ".join(tools)
                    )
                answer, _ = await self._episode.call(name, arguments)
                return self._result(answer)
            finally:
                self.busy -= 1

        def _task_tool_names(self) -> list[str]:
            taken = self._shared() | set(CONTROL_TOOLS)
            return [s.name for s in self._episode.tools() if s.name not in taken]

        def _result(self, answer: ToolAnswer) -> Any:
            code = answer.data.get("code")
            if code == FAULT_CODE:
                self._fault = dict(answer.data.get("fault") or {})
                return _error(_fault_error(self._fault))
            if answer.error:
                text = answer.text
                if code == "EPISODE_OVER":
                    text = "the episode is over: a new episode is a new session"
                return _error(f"{code or 'EXECUTION_ERROR'}: {text}")
            data = dict(answer.data)
            reward = data.get("reward")
            output = ors.ToolOutput(
                blocks=[ors.TextBlock(text=answer.text)],
                metadata=data,
                reward=None if reward is None else float(reward),
                finished=bool(data.get("done", False)),
            )
            return ors.RunToolOutput(ors.RunToolSuccess(output=output))

        @staticmethod
        def _unwrap(result: Any) -> Any:
            if isinstance(result.root, ors.RunToolError):
                raise ToolCallError(result.root.error)
            return result.root.output

    for spec in fixed:
        setattr(AgentEnvsEnvironment, spec.name, _tool_method(spec))
    AgentEnvsEnvironment.__name__ = AgentEnvsEnvironment.__qualname__ = (
        env_name.split("-v")[0] + "Environment"
    )
    return AgentEnvsEnvironment


def _error(text: str) -> Any:
    import ors

    return ors.RunToolOutput(ors.RunToolError(error=text))


async def _shielded(coro: Any) -> None:
    task = asyncio.ensure_future(coro)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await task


# ------------------------------------------------------------------ the bounds
class OrsSessions:
    """ASGI app in front of the SDK's: ``GET /sessions``, the bound on sessions at
    ``POST /create``, and the idle reaper (run by the app's lifespan). The SDK keeps its
    sessions in ``Server._active_envs`` (sid -> env, None while it starts) and
    ``_last_ping`` (sid -> last ping or call); ``ors.server._delete_session`` ends one."""

    def __init__(self, server: Any, env_class: Any, config: ServerConfig) -> None:
        from agentenvs.server.access import AccessGuard
        from agentenvs.server.transport import BoundedBodies

        self.server = server
        self.env_class = env_class
        self.config = config
        self.timeout = config.session_timeout or IDLE_TIMEOUT
        self.inner = BoundedBodies(
            server.app, max_bytes=config.message_limit, timeout=config.request_timeout
        )
        # in front of everything: a refused request is answered before its body is read
        self.guard = AccessGuard(self._route, policy=config.access)
        self.reaped = 0
        #: session ids of ``POST /create`` requests under way: counted from the moment the
        #: request arrives, before any await, so concurrent creates cannot pass the bound
        self.creating: set[str] = set()

    # ------------------------------------------------------------ counts
    @property
    def active(self) -> int:
        return len(self.server._active_envs)

    @property
    def envs(self) -> int:
        """Envs made or being made and not yet closed."""
        return int(self.env_class.open_envs)

    def counts(self) -> dict[str, Any]:
        return {
            "active": self.active,
            "envs": self.envs,
            "max": self.config.max_sessions,
            "idle_timeout": self.timeout,
            "max_message_bytes": self.config.message_limit,
        }

    def _held(self) -> int:
        """Sessions held: the SDK's, those being created, and envs still closing (a
        session being deleted holds its env until it is closed)."""
        active = self.server._active_envs
        new = sum(1 for sid in self.creating if sid not in active)
        return max(len(active), self.envs) + new

    def _full(self) -> bool:
        return self._held() >= self.config.max_sessions

    # ------------------------------------------------------------ ASGI
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.guard(scope, receive, send)

    async def _route(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.responses import JSONResponse

        if scope["type"] == "http":
            path, method = scope.get("path", ""), scope.get("method", "")
            if path == "/sessions" and method == "GET":
                await JSONResponse(self.counts())(scope, receive, send)
                return
            if path == "/create" and method == "POST":
                await self._create(scope, receive, send)
                return
        await self.inner(scope, receive, send)

    async def _create(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.responses import JSONResponse

        sid = ""
        for name, value in scope.get("headers", ()):
            if name == b"x-session-id":
                sid = value.decode("latin-1").strip()
        if sid in self.creating:
            detail = "VALIDATION_ERROR: this session is already being created"
            await JSONResponse({"detail": detail}, status_code=409)(scope, receive, send)
            return
        if self._full():
            detail = (
                f"the server is at capacity ({self.config.max_sessions} sessions at once): "
                "CAPACITY_REACHED"
            )
            await JSONResponse({"detail": detail}, status_code=503)(scope, receive, send)
            return
        self.creating.add(sid)  # before the first await: the bound holds
        try:
            await self.inner(scope, receive, send)
        finally:
            self.creating.discard(sid)

    # ------------------------------------------------------------ idle sessions
    async def reap(self) -> None:
        """Delete the sessions idle longer than the timeout, until cancelled."""
        from ors.server import _delete_session

        period = min(self.timeout / 4, 5.0)
        server = self.server
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for sid, last in list(server._last_ping.items()):
                env = server._active_envs.get(sid)
                ready = server._ready.get(sid)
                if getattr(env, "busy", 0) or (ready is not None and not ready.is_set()):
                    # a call under way, or the env still being set up (a slow start on a
                    # loaded host): not idle; the timeout counts from when it is ready
                    server._last_ping[sid] = now
                    continue
                if now - max(last, getattr(env, "ready_at", 0.0)) <= self.timeout:
                    continue
                with contextlib.suppress(Exception):  # the SDK logs a failed teardown
                    await _delete_session(
                        sid,
                        server._active_envs,
                        server._last_ping,
                        server._setup_tasks,
                        server._ready,
                        server._setup_errors,
                    )
                self.reaped += 1


def create_ors_app(config: ServerConfig) -> OrsSessions:
    """The ASGI app: the SDK's ORS server for ``config.env_id``, bounded (see the module
    docstring); its ``server`` is the ``ors.Server``."""
    import gymnasium as gym

    import agentenvs  # noqa: F401 - registers the ids

    ors = require_ors()
    gym.spec(config.env_id)  # an unknown id fails here, before the server starts
    env_class = environment_class(config)
    server = ors.Server([env_class], return_errors="exception")
    sessions = OrsSessions(server, env_class, config)
    sdk_lifespan = server.app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with sdk_lifespan(app) as state:  # its exit closes every session left
            reaper = asyncio.create_task(sessions.reap())
            try:
                yield state
            finally:
                reaper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reaper

    server.app.router.lifespan_context = lifespan
    return sessions


def serve_ors(
    config: ServerConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    announce: Any = print,
    on_bound: Any = None,
) -> None:
    """Serve ORS over HTTP until interrupted; ``port=0`` picks a free port."""
    from agentenvs.server.app import check_bind, run_app

    config = check_bind(config, host)
    name = config.env_id.rsplit("/", 1)[-1]
    run_app(
        create_ors_app(config),
        config,
        host=host,
        port=port,
        log_level=log_level,
        announce=announce,
        what=f"ORS environment {name!r}, up to {config.max_sessions} sessions",
        on_bound=on_bound,
        lifespan="on",
        access_log=False,
    )


__all__ = [
    "IDLE_TIMEOUT",
    "SPLIT",
    "TASK_KEYS",
    "OrsSessions",
    "ToolCallError",
    "create_ors_app",
    "environment_class",
    "error_code",
    "fault_record",
    "require_ors",
    "serve_ors",
]
