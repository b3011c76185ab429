"""The env server: one agentenvs env per WebSocket session, OpenEnv's protocol on the wire.

Endpoints (as an OpenEnv server has them):

- ``WS /ws``: a session. Messages ``{"type": "reset", "data": {...}}``, ``{"type": "step",
  "data": {"text": ...}}``, ``{"type": "state"}``, ``{"type": "close"}``; answers
  ``{"type": "observation", "data": {"observation": {...}, "reward": r, "done": d}}``,
  ``{"type": "state", "data": {...}}`` or ``{"type": "error", "data": {"message", "code"}}``
  (the session stays open after an error; see Faults for ``INFRASTRUCTURE_FAULT``). Two more types reach the env's snapshots:
  ``{"type": "snapshot"}`` answers ``{"type": "snapshot", "data": {"snapshot": TOKEN}}``
  and ``{"type": "restore", "data": {"snapshot": TOKEN}}`` answers an observation;
  ``reset`` also takes ``{"snapshot": TOKEN}``, for clients that know only reset.
  A session answers its messages one at a time, in order: a step sent while a reset is
  under way is answered after it; nothing is answered after ``close``.
- ``GET /health``, ``/metadata``, ``/schema``, ``/state``; ``POST /reset`` (stateless, as
  in OpenEnv: a fresh env is made, reset and closed); ``POST /step`` answers 409, since an
  agentenvs episode needs a session; ``GET /sessions`` counts live sessions (``active``),
  live envs (``envs``: sessions' and HTTP resets' together) and kept snapshots.

Every session's env is built, stepped and closed on a thread of its own (``AsyncEnv``),
so slow steps of one session never hold up the others; an env whose calls are all short
computations (FrozenLake, BFCL: ``calls_wait``) runs on the event loop itself. A session ends, and its env is
closed (shell, sandbox, container, database), when the client sends ``close``, when the
connection drops (a client that is killed included), after ``session_timeout`` seconds
without a message, or when the server stops.

Access (``agentenvs.server.access``, the same for the MCP and ORS servers): every HTTP
request and WebSocket passes ``AccessGuard`` first: a Host of this server's (loopback
names on its port, ``allow_hosts``), no foreign Origin (``allow_origins`` aside), and the
token when ``token`` is set (``agentenvs serve`` sets one unless ``--no-auth``). A
refused request is answered 421, 403 or 401 before any of it is read. This protocol is
the trainer's: an observation's ``info`` is the env's whole info (its hidden keys
included, which the agent-facing MCP and ORS servers leave out).

Bounds against any client:

- a reset's ``max_turns``: at most ``turns_cap`` (``max_turns_cap``, else the env's own
  budget), else ``VALIDATION_ERROR``; connections: ``connection_limit`` at once (HTTP 503
  past it);
- envs: ``max_sessions`` envs at once, WebSocket sessions and ``POST /reset`` counted
  together; past it a session is refused with ``CAPACITY_REACHED`` (then closed, code
  1013) and an HTTP reset with 503;
- messages: ``max_message_bytes`` per message (``agentenvs.server.protocol``: also depth
  and number limits); a message up to four times that is read and answered
  ``MESSAGE_TOO_LARGE``, one larger is not read at all: the connection is closed with
  code 1009 (message too big) and the session ends. Malformed messages of any kind
  (bad JSON, wrong types, binary frames) are answered with an error, the session open;
- slow and stalled clients (``agentenvs.server.transport``): an HTTP request head must
  arrive within ``request_timeout`` s, and its body too; a client that leaves the
  server's replies unread for ``stall_timeout`` s is disconnected and its env closed.
  Each session reads one message at a time and sends its reply before reading the
  next, and its connection stops being read while a second message waits, so a client
  that never reads its replies holds at most one reply and two messages on the server,
  besides the sockets' buffers.

Speed (``benchmarks/bench_server.py``): replies are written with orjson, steps answered
without the typed models (the same payload), a short env's step made in the session's own
turn of the loop, per-message compression declined, and a connection read on while the
app is about to take its message (``transport.lazy_pausing_ws_protocol``). A short env's
step or reset (not from a snapshot) that arrives while the session waits for its next
message is answered in the protocol's own call (``_answer_now``, registered as the
connection's ``transport.FastReplies``): the same reply, without the ASGI round a
message; the protocol's other messages take the receive loop, in order.

Faults: an env that raises :class:`~agentenvs.core.errors.Fault` (its database lost, its
container killed from outside) is answered ``{"type": "error", "data": {"message", "code":
"INFRASTRUCTURE_FAULT", "fault": Fault.record()}}``, never an observation with a reward;
this is so from ``reset``, ``step``, ``snapshot``, ``restore`` and ``state`` alike, and
from making the env (then the session is closed, code 1013). The session stays open: the
env has dropped what the fault left (only a reset can follow) and a new ``reset`` starts
afresh. ``POST /reset`` answers a fault with HTTP 503 and the same ``code`` and
``fault``. ``RemoteEnv`` re-raises it as a ``Fault`` (``agentenvs.server.client``).

Snapshots stay on the server (``agentenvs.server.snapshots``): a token is a random id,
opaque to the client; it restores only into the session that took it unless the server
shares snapshots (``share_snapshots``, ``--share-snapshots``: branching from many
clients), and the store keeps at most ``max_snapshots`` (``snapshot_bytes`` of bytes),
each expiring ``snapshot_ttl`` s after its last use. Nothing a client sends is unpickled.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
import json
import math
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from agentenvs.core.aio import AsyncEnv, calls_wait
from agentenvs.core.errors import Fault
from agentenvs.core.snapshot import restore_snapshot
from agentenvs.server.access import AccessGuard, AccessPolicy, is_loopback
from agentenvs.server.models import (
    EnvState,
    ResetParams,
    TextAction,
    TextObservation,
    json_safe,
    observation_payload,
)
from agentenvs.server.protocol import (
    SessionError,
    default_message_bytes,
    parse_json,
    parse_message,
    reset_options,
    reset_params,
)
from agentenvs.server.snapshots import SnapshotStore
from agentenvs.server.transport import FAST_REPLIES, BoundedBodies, FastReplies

#: a message up to this many times ``max_message_bytes`` is read and refused; a larger
#: one closes the connection unread
OVERSIZE_FACTOR = 4
#: the error code of an env's infrastructure fault (the reply carries ``Fault.record()``)
FAULT_CODE = "INFRASTRUCTURE_FAULT"


@dataclass
class ServerConfig:
    """What the server serves, how many at once, and its bounds (see the module docstring).

    ``max_message_bytes`` None: ``protocol.default_message_bytes`` (the env's longest
    action, escaped); ``snapshot_ttl``, ``session_timeout``, ``request_timeout`` and
    ``stall_timeout`` None: no limit.
    """

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_sessions: int = 64
    session_timeout: float | None = None
    max_message_bytes: int | None = None
    share_snapshots: bool = False
    max_snapshots: int = 4096
    snapshot_bytes: int = 256 << 20
    snapshot_ttl: float | None = 3600.0
    request_timeout: float | None = 30.0
    stall_timeout: float | None = 60.0
    #: the token every request must bring (``agentenvs.server.access``); None: none asked
    token: str | None = None
    allow_hosts: tuple[str, ...] = ()
    allow_origins: tuple[str, ...] = ()
    #: the largest ``max_turns`` a client may ask for; None: the env's own budget
    max_turns_cap: int | None = None
    #: open connections at once (uvicorn's ``limit_concurrency``); None: ``connection_limit``
    max_connections: int | None = None

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {self.max_sessions}")
        for name in ("max_turns_cap", "max_connections"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1 (or None), got {value}")
        self.allow_hosts = tuple(self.allow_hosts)
        self.allow_origins = tuple(self.allow_origins)
        if self.max_message_bytes is not None and self.max_message_bytes < 1024:
            raise ValueError(
                f"max_message_bytes must be at least 1024, got {self.max_message_bytes}"
            )
        for name in ("session_timeout", "snapshot_ttl", "request_timeout", "stall_timeout"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive (or None), got {value}")

    def make_env(self) -> gym.Env:
        return gym.make(self.env_id, **self.env_kwargs)

    @property
    def message_limit(self) -> int:
        if self.max_message_bytes is not None:
            return int(self.max_message_bytes)
        return default_message_bytes(self.env_id, self.env_kwargs)

    @property
    def access(self) -> AccessPolicy:
        return AccessPolicy(self.token, self.allow_hosts, self.allow_origins)

    @property
    def turns_cap(self) -> int:
        """The largest turn budget a client may ask for: ``max_turns_cap``, else the env's
        own (its ``max_turns`` argument, else its class's default)."""
        if self.max_turns_cap is not None:
            return int(self.max_turns_cap)
        own = self.env_kwargs.get("max_turns")
        if isinstance(own, int) and own >= 1:
            return own
        return int(getattr(_env_class(self.env_id), "default_max_turns", 10))

    @property
    def hidden_info_keys(self) -> frozenset[str]:
        """The info keys the env keeps from the agent (its class's ``hidden_info_keys``):
        the agent-facing protocols (MCP, ORS) never send them."""
        return frozenset(getattr(_env_class(self.env_id), "hidden_info_keys", ()))

    @property
    def connection_limit(self) -> int:
        """Connections at once: ``max_connections``, else four a session and 64 more."""
        if self.max_connections is not None:
            return int(self.max_connections)
        return 4 * self.max_sessions + 64

    def check_turns(self, max_turns: Any) -> None:
        """Refuse a turn budget over ``turns_cap`` (``SessionError``, ``VALIDATION_ERROR``)."""
        if max_turns is None or isinstance(max_turns, bool) or not isinstance(max_turns, int):
            return  # the env judges other values
        cap = self.turns_cap
        if max_turns > cap:
            raise SessionError(
                f"max_turns {max_turns} is over this server's cap of {cap} (--max-turns-cap)",
                "VALIDATION_ERROR",
            )

    @property
    def inline(self) -> bool:
        """Envs whose calls are all short (FrozenLake, BFCL) run on the server's event loop;
        the others each on a thread of its own."""
        return not calls_wait(self.env_id, self.env_kwargs)


def _observe(
    obs: str, info: dict[str, Any], reward: float | None, terminated: bool, truncated: bool
) -> TextObservation:
    return TextObservation(
        text=obs,
        terminated=bool(terminated),
        truncated=bool(truncated),
        done=bool(terminated or truncated),
        reward=None if reward is None else float(reward),
        info=json_safe(info),
    )


#: JSON scalars that ``json_safe`` keeps as they are (a float too, when finite)
_SCALARS = frozenset({str, bool, int, type(None)})


def _plain_info(info: dict[str, Any]) -> dict[str, Any]:
    """What ``json_safe(info)`` writes, quickly for the usual info: text keys, and values
    that are plain JSON scalars or tuples and lists of them, kept as they are (a reply's
    JSON writes a tuple as a list, as ``json_safe`` makes it); any other info goes through
    ``json_safe``."""
    isfinite = math.isfinite
    for key, value in info.items():
        kind = type(value)
        if type(key) is not str:
            return json_safe(info)
        if kind in _SCALARS:
            continue
        if kind is float:
            if value - value == 0.0:  # finite (infinity and NaN give NaN), without a call
                continue
            return json_safe(info)
        if kind is tuple or kind is list:
            for item in value:
                if type(item) in _SCALARS or (type(item) is float and isfinite(item)):
                    continue
                return json_safe(info)
            continue
        return json_safe(info)
    return info


def _restored_view(env: gym.Env) -> tuple[str, dict[str, Any], bool]:
    inner: Any = env.unwrapped
    info = inner._info(action_valid=True)
    if inner.turn == 0:
        info.update(inner._reset_info())
    return inner._last_obs, info, bool(inner.done)


def _step_payload(
    obs: Any, info: dict[str, Any], reward: Any, terminated: Any, truncated: Any
) -> dict[str, Any]:
    """A step's reply data, as ``observation_payload`` of the model writes it."""
    if type(obs) is not str:  # not an observation: the model refuses it
        return observation_payload(_observe(obs, info, reward, terminated, truncated))
    return {
        "observation": {
            "text": obs,
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "info": _plain_info(info),
        },
        "reward": float(reward),
        "done": bool(terminated or truncated),
    }


class Session:
    """One client's env and episode bookkeeping; its snapshots are kept in ``store``
    under its id."""

    def __init__(
        self, session_id: str, env: AsyncEnv, config: ServerConfig, store: SnapshotStore
    ) -> None:
        self.id = session_id
        self.env = env
        self.config = config
        self.store = store
        self._episode_id: str | None = None
        self._id_owed = False  # an episode began without an id: one is drawn when read
        self.step_count = 0
        self.last_activity = time.monotonic()

    @property
    def episode_id(self) -> str | None:
        """The episode's id: the reset's ``episode_id``, else a random UUID, drawn when
        first read (most episodes' ids are never asked for); None before any reset."""
        if self._id_owed:
            self._episode_id, self._id_owed = str(uuid.uuid4()), False
        return self._episode_id

    def _begin_episode(self, episode_id: str | None) -> None:
        self._episode_id, self._id_owed = episode_id, not episode_id

    async def reset(self, data: dict[str, Any]) -> TextObservation:
        params = reset_params(data)
        if params.snapshot is not None:
            obs = await self.restore(params.snapshot)
            self._begin_episode(params.episode_id)
            return obs
        try:
            obs, info = await self.env.areset(seed=params.seed, options=self._options(params))
        except (ValueError, KeyError, TypeError) as exc:
            raise SessionError(f"reset failed: {_short(exc)}", "VALIDATION_ERROR") from None
        return self._started(params.episode_id, obs, info)

    def reset_now(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """``observation_payload(await self.reset(data))`` of an env on the event loop
        (``env.inline``), made in this call and built without the models; None for a
        reset from a snapshot, which ``reset`` makes."""
        seed = data.get("seed")
        if len(data) == (seed is not None) and (
            seed is None or (type(seed) is int and 0 <= seed < 1 << 64)
        ):  # ``{"seed": N}`` or ``{}``: as ``ResetParams`` reads it, without the model
            episode_id, options = None, None
        else:
            params = reset_params(data)
            if params.snapshot is not None:
                return None
            seed, episode_id, options = params.seed, params.episode_id, self._options(params)
        try:
            obs, info = self.env.env.reset(seed=seed, options=options)
        except (ValueError, KeyError, TypeError) as exc:
            raise SessionError(f"reset failed: {_short(exc)}", "VALIDATION_ERROR") from None
        if type(obs) is not str:  # not an observation: the model refuses it
            return observation_payload(self._started(episode_id, obs, info))
        self._begin_episode(episode_id)
        self.step_count = 0
        return {
            "observation": {
                "text": obs,
                "terminated": False,
                "truncated": False,
                "info": _plain_info(info),
            },
            "reward": None,
            "done": False,
        }

    def _options(self, params: ResetParams) -> dict[str, Any] | None:
        """The reset's options, its turn budget within the server's cap."""
        options = reset_options(params)
        if options is not None:
            self.config.check_turns(options.get("max_turns"))
        return options

    def _started(self, episode_id: str | None, obs: str, info: dict[str, Any]) -> TextObservation:
        self._begin_episode(episode_id)
        self.step_count = 0
        return _observe(obs, info, reward=None, terminated=False, truncated=False)

    async def step(self, data: dict[str, Any]) -> TextObservation:
        return _observe(*await self._step(data))

    async def step_payload(self, data: dict[str, Any]) -> dict[str, Any]:
        """``observation_payload(await self.step(data))``, built without the models."""
        return _step_payload(*await self._step(data))

    def step_now(self, data: dict[str, Any]) -> dict[str, Any]:
        """``step_payload(data)`` of an env on the event loop (``env.inline``), made in
        this call: the server's direct replies (``transport.FastReplies``)."""
        text = self._action(data)
        try:
            obs, reward, terminated, truncated, info = self.env.env.step(text)
        except gym.error.ResetNeeded as exc:
            raise SessionError(str(exc), "EXECUTION_ERROR") from None
        self.step_count += 1
        return _step_payload(obs, info, reward, terminated, truncated)

    def _action(self, data: dict[str, Any]) -> Any:
        """A step's text: ``data["text"]`` of a plain ``{"text": ...}`` (with optional
        ``metadata``), else as ``TextAction`` reads it (which words a refusal)."""
        text = data.get("text")
        if type(text) is str and (
            len(data) == 1 or (len(data) == 2 and type(data.get("metadata")) is dict)
        ):
            return text
        try:
            return TextAction.model_validate(data).text
        except ValidationError as exc:
            raise SessionError(
                f'invalid action (expected {{"text": "..."}}): {_short(exc)}',
                "VALIDATION_ERROR",
            ) from None

    async def _step(self, data: dict[str, Any]) -> tuple[Any, dict[str, Any], Any, Any, Any]:
        text = self._action(data)
        try:
            if self.env.inline and not self.env.closed:
                # a short call: made here, since the session yields to the loop at its
                # next receive anyway (AsyncEnv's inline call would also yield after it)
                obs, reward, terminated, truncated, info = self.env.env.step(text)
            else:
                obs, reward, terminated, truncated, info = await self.env.astep(text)
        except gym.error.ResetNeeded as exc:
            raise SessionError(str(exc), "EXECUTION_ERROR") from None
        self.step_count += 1
        return obs, info, reward, terminated, truncated

    async def snapshot(self) -> str:
        try:
            snap = await self.env.asnapshot()
        except Fault:
            raise
        except Exception as exc:  # SnapshotError before any reset, or an env without snapshots
            raise SessionError(f"snapshot failed: {_short(exc)}") from None
        return self.store.put(self.id, snap)

    async def restore(self, token: Any) -> TextObservation:
        if not isinstance(token, str):
            raise SessionError('restore needs {"snapshot": TOKEN}', "VALIDATION_ERROR")
        snap = self.store.get(self.id, token)  # refuses others' tokens before decoding

        def restore(env: gym.Env) -> tuple[str, dict[str, Any], bool]:
            restore_snapshot(env, snap)
            return _restored_view(env)

        try:
            obs, info, done = await self.env.call(restore)
        except Fault:
            raise
        except Exception as exc:
            raise SessionError(f"restore failed: {_short(exc)}") from None
        self.step_count = int(info.get("turn", 0))
        return _observe(obs, info, reward=None, terminated=done, truncated=False)

    async def state(self) -> EnvState:
        def read(env: gym.Env) -> dict[str, Any]:
            inner: Any = env.unwrapped
            started = inner.task_id is not None
            return {
                "task_id": inner.task_id,
                "turn": inner.turn,
                "max_turns": inner.episode_max_turns,
                "turns_left": inner.turns_left,
                "done": inner.done,
                "success": bool(inner._success) if started else False,
                "score": float(inner._score) if started else 0.0,
                "state_key": inner.state_key() if started else None,
            }

        fields = await self.env.call(read)
        return EnvState(
            episode_id=self.episode_id,
            step_count=self.step_count,
            env_id=self.config.env_id,
            **fields,
        )

    async def aclose(self) -> None:
        # its snapshots go first, in the same step of the event loop that took the session
        # out of the count: no request sees a closed session's snapshots while its env
        # takes its time to close (a database dropped, a container removed)
        try:
            self.store.drop_owner(self.id)
        finally:
            await self.env.aclose()


class SessionManager:
    """Live sessions, the one limit on envs (sessions' and HTTP resets'), the snapshot
    store, the idle reaper, and closing them all."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.store = SnapshotStore(
            max_count=config.max_snapshots,
            max_bytes=config.snapshot_bytes,
            ttl=config.snapshot_ttl,
            shared=config.share_snapshots,
            fair_count=max(1, config.max_snapshots // config.max_sessions),
        )
        self.sessions: dict[str, Session] = {}
        self._sockets: dict[str, WebSocket] = {}
        self.envs = 0  # live envs and envs being made, sessions' and HTTP resets' together
        self._reaper: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def env_slot(self) -> AsyncIterator[None]:
        """Hold one of ``max_sessions`` env slots; ``CAPACITY_REACHED`` when none is free."""
        if self.envs >= self.config.max_sessions:
            raise SessionError(
                f"the server is at capacity ({self.config.max_sessions} envs at once, "
                "sessions and HTTP resets together)",
                "CAPACITY_REACHED",
            )
        self.envs += 1
        try:
            yield
        finally:
            self.envs -= 1

    async def make_env(self) -> AsyncEnv:
        try:
            return await AsyncEnv.create(self.config.make_env, inline=self.config.inline)
        except Fault as exc:
            raise _fault_error(exc) from None
        except Exception as exc:
            raise SessionError(
                f"could not make {self.config.env_id}: {_short(exc)}", "FACTORY_ERROR"
            ) from None

    def register(self, session: Session, websocket: WebSocket) -> None:
        self.sessions[session.id] = session
        self._sockets[session.id] = websocket

    async def close(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        self._sockets.pop(session.id, None)
        await session.aclose()

    async def close_all(self) -> None:
        sessions = list(self.sessions.values())
        await asyncio.gather(*(self.close(s) for s in sessions), return_exceptions=True)

    def start_reaper(self) -> None:
        if self.config.session_timeout is not None and self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def stop_reaper(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        for task in list(self._closing):
            task.cancel()

    async def _reap(self) -> None:
        timeout = float(self.config.session_timeout or 0)
        while True:
            await asyncio.sleep(min(max(timeout / 4, 0.05), 5.0))
            now = time.monotonic()
            for sid, session in list(self.sessions.items()):
                socket = self._sockets.pop(sid, None)
                if socket is None or now - session.last_activity <= timeout:
                    if socket is not None:
                        self._sockets[sid] = socket
                    continue
                # closing the socket ends the session's receive loop, which closes the env;
                # each on a task of its own, so a client that does not read cannot stall the
                # reaper (the stall timeout ends that connection)
                task = asyncio.get_running_loop().create_task(_close_socket(socket))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)


async def _close_socket(socket: WebSocket) -> None:
    with contextlib.suppress(Exception):
        await socket.close(code=1001, reason="session idle timeout")


def _short(exc: BaseException, limit: int = 500) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + " ..."


def _env_class(env_id: str) -> Any:
    import agentenvs  # noqa: F401 - registers the ids

    entry = gym.spec(env_id).entry_point
    if isinstance(entry, str):
        module, _, name = entry.partition(":")
        import importlib

        return getattr(importlib.import_module(module), name)
    return entry


def _describe(env_id: str) -> str:
    doc = inspect.getdoc(_env_class(env_id)) or ""
    return doc.split("\n\n")[0].strip()


def _fault_error(exc: Fault) -> SessionError:
    return SessionError(
        f"infrastructure fault ({exc.kind}): {_short(exc)}", FAULT_CODE, exc.record()
    )


def _http_error(exc: SessionError) -> JSONResponse:
    status = {
        "CAPACITY_REACHED": 503,
        "MESSAGE_TOO_LARGE": 413,
        "FACTORY_ERROR": 500,
        FAULT_CODE: 503,
    }
    body: dict[str, Any] = {"detail": str(exc), "code": exc.code}
    if exc.fault is not None:
        body["fault"] = exc.fault
    return JSONResponse(body, status_code=status.get(exc.code, 422))


def create_app(config: ServerConfig) -> FastAPI:
    """The FastAPI app serving ``config.env_id``."""
    import agentenvs  # noqa: F401 - registers the ids

    gym.spec(config.env_id)  # an unknown id fails here, before the server starts
    manager = SessionManager(config)
    limit = config.message_limit

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
        manager.start_reaper()
        try:
            yield
        finally:
            await manager.stop_reaper()
            await manager.close_all()

    app = FastAPI(title=f"agentenvs: {config.env_id}", lifespan=lifespan)
    app.state.sessions = manager

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.get("/metadata")
    async def metadata() -> dict[str, Any]:

        return {
            "name": config.env_id,
            "description": _describe(config.env_id),
            "version": agentenvs.__version__,
            "author": None,
            "documentation_url": None,
            "readme_content": None,
        }

    @app.get("/schema")
    async def schema() -> dict[str, Any]:
        return {
            "action": TextAction.model_json_schema(),
            "observation": TextObservation.model_json_schema(),
            "state": EnvState.model_json_schema(),
        }

    @app.get("/sessions")
    async def sessions() -> dict[str, Any]:
        return {
            "active": len(manager.sessions),
            "max": config.max_sessions,
            "envs": manager.envs,
            "snapshots": len(manager.store),
            "snapshot_bytes": manager.store.nbytes,
            "max_message_bytes": limit,
        }

    @app.get("/state")
    async def state() -> dict[str, Any]:
        return EnvState(env_id=config.env_id).model_dump()

    @app.post("/reset")
    async def http_reset(request: Request) -> Any:
        try:
            raw = await request.body()
            body = parse_json(raw, max_bytes=limit) if raw.strip() else None
            if body is not None and not isinstance(body, dict):
                raise SessionError("the reset body must be a JSON object", "VALIDATION_ERROR")
            async with manager.env_slot():
                env = await manager.make_env()
                session = Session(f"http-{uuid.uuid4()}", env, config, manager.store)
                try:
                    obs = await session.reset(body or {})
                except Fault as exc:
                    raise _fault_error(exc) from None
                finally:
                    await session.aclose()
        except SessionError as exc:
            return _http_error(exc)
        return observation_payload(obs)

    @app.post("/step")
    async def http_step() -> Any:
        return JSONResponse(
            {
                "detail": "an agentenvs episode lives in a session: open a WebSocket at /ws, "
                "send reset, then step",
                "code": "EXECUTION_ERROR",
            },
            status_code=409,
        )

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            async with manager.env_slot():
                env = await manager.make_env()
                session = Session(str(uuid.uuid4()), env, config, manager.store)
                manager.register(session, websocket)
                conn = websocket.scope.get("extensions", {}).get(FAST_REPLIES)
                if not isinstance(conn, FastReplies):
                    conn = None
                fast = conn if env.inline else None
                try:
                    if fast is not None:
                        fast.handler = functools.partial(_answer_now, session, limit)
                    await _serve_session(websocket, session, limit, conn)
                finally:
                    if fast is not None:
                        fast.handler = None  # nothing is answered past the session's end
                    await asyncio.shield(manager.close(session))
        except SessionError as exc:  # at capacity, or the env could not be made
            with contextlib.suppress(Exception):
                await websocket.send_json(_error(str(exc), exc.code, exc.fault))
                await websocket.close(code=1013)
            return
        with contextlib.suppress(Exception):
            await websocket.close()

    app.add_middleware(BoundedBodies, max_bytes=limit, timeout=config.request_timeout)
    # outermost: a refused request is answered before its body is read
    app.add_middleware(AccessGuard, policy=config.access)
    return app


async def _serve_session(
    websocket: WebSocket, session: Session, limit: int, conn: FastReplies | None = None
) -> None:
    """Answer the client's messages one at a time until it closes or goes away; once the
    connection is gone (``conn.gone()``), messages it left queued are dropped unanswered."""
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect" or (conn is not None and conn.gone()):
            return
        session.last_activity = time.monotonic()
        raw = message.get("text")
        if raw is None:
            raw = message.get("bytes")
        reply, closing = await _answer(session, raw, limit)
        if reply is not None:
            await websocket.send({"type": "websocket.send", "text": _dumps(reply)})
        if closing:
            return
        session.last_activity = time.monotonic()


def _answer_now(session: Session, limit: int, raw: str) -> bytes | None:
    """The reply of a step or a reset as UTF-8 JSON, made at once for an env on the event
    loop (the connection's direct replies, ``transport.FastReplies``); None for any other
    message, which the session's receive loop answers (``_answer``). The same replies as
    ``_answer``."""
    if session.env.closed:
        return None
    try:
        kind, data = parse_message(raw, max_bytes=limit)
    except SessionError:
        return None  # worded by the receive loop
    if kind != "step" and kind != "reset":
        return None
    session.last_activity = time.monotonic()
    try:
        if kind == "step":
            reply = {"type": "observation", "data": session.step_now(data)}
        else:
            payload = session.reset_now(data)
            if payload is None:  # from a snapshot: the receive loop restores it
                return None
            reply = {"type": "observation", "data": payload}
    except SessionError as exc:
        reply = _error(str(exc), exc.code, exc.fault)
    except Fault as exc:
        reply = _error(str(_fault_error(exc)), FAULT_CODE, exc.record())
    except Exception as exc:  # an env bug: report it, keep the session
        reply = _error(f"{type(exc).__name__}: {_short(exc)}", "EXECUTION_ERROR")
    session.last_activity = time.monotonic()
    return _dump_bytes(reply)


async def _answer(
    session: Session, raw: str | bytes | None, limit: int
) -> tuple[dict[str, Any] | None, bool]:
    try:
        kind, data = parse_message(raw, max_bytes=limit)
        if kind == "reset":
            return {
                "type": "observation",
                "data": observation_payload(await session.reset(data)),
            }, False
        if kind == "step":
            return {"type": "observation", "data": await session.step_payload(data)}, False
        if kind == "state":
            return {"type": "state", "data": (await session.state()).model_dump()}, False
        if kind == "snapshot":
            return {"type": "snapshot", "data": {"snapshot": await session.snapshot()}}, False
        if kind == "restore":
            obs = await session.restore(data.get("snapshot"))
            return {"type": "observation", "data": observation_payload(obs)}, False
        if kind == "close":
            return None, True
    except SessionError as exc:
        return _error(str(exc), exc.code, exc.fault), False
    except Fault as exc:  # never an observation: the env dropped what it left, a reset follows
        return _error(str(_fault_error(exc)), FAULT_CODE, exc.record()), False
    except Exception as exc:  # an env bug: report it, keep the session
        return _error(f"{type(exc).__name__}: {_short(exc)}", "EXECUTION_ERROR"), False
    return _error(
        f"unknown message type {kind[:100]!r}; expected reset, step, state, snapshot, restore or close",
        "UNKNOWN_TYPE",
    ), False


try:  # a fast JSON writer when installed (the server extra has it)
    import orjson as _orjson
except ImportError:  # pragma: no cover - without it, the standard library's
    _orjson = None


def _dumps(reply: dict[str, Any]) -> str:
    """A reply as JSON text, as Starlette's ``send_json`` writes it (compact, UTF-8);
    orjson where it can write the value (it refuses integers past 64 bits and lone
    surrogates, which the standard library writes)."""
    if _orjson is not None:
        try:
            return _orjson.dumps(reply).decode()
        except TypeError:
            pass
    return json.dumps(reply, separators=(",", ":"), ensure_ascii=False)


def _dump_bytes(reply: dict[str, Any]) -> bytes:
    """``_dumps(reply)`` encoded as UTF-8, without the round through text where orjson
    writes it."""
    if _orjson is not None:
        try:
            return _orjson.dumps(reply)
        except TypeError:
            pass
    return _dumps(reply).encode()


def _error(message: str, code: str, fault: dict[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"message": message, "code": code}
    if fault is not None:
        data["fault"] = fault
    return {"type": "error", "data": data}


def serve(
    config: ServerConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    announce: Any = print,
    on_bound: Any = None,
) -> None:
    """Run the server until interrupted; ``port=0`` picks a free port (announced);
    ``on_bound`` as ``run_app`` takes it."""
    from agentenvs.server.transport import lazy_pausing_ws_protocol

    config = check_bind(config, host)
    run_app(
        create_app(config),
        config,
        host=host,
        port=port,
        log_level=log_level,
        announce=announce,
        what=f"WebSocket /ws, up to {config.max_sessions} sessions",
        on_bound=on_bound,
        ws=lazy_pausing_ws_protocol() or "auto",
        ws_max_size=OVERSIZE_FACTOR * config.message_limit,
        ws_max_queue=1,
        # compressing replies of a few hundred bytes costs more than it saves on a
        # loopback or LAN; a client that offers the extension is answered without it
        ws_per_message_deflate=False,
    )


def check_bind(config: ServerConfig, host: str) -> ServerConfig:
    """``config`` for a server on ``host``: refused on a non-loopback address without a
    token (anyone who reaches it could run the env's actions: shell commands, SQL,
    programs); a specific address is allowed as a Host (an address, unlike a name,
    cannot be rebound by a page)."""
    if config.token is None and not is_loopback(host):
        raise ValueError(
            f"serving {host} without a token: anyone who reaches it can act in the env; "
            "give a token, or bind a loopback address"
        )
    if not is_loopback(host) and host not in ("0.0.0.0", "::", ""):
        name = f"[{host}]" if ":" in host else host
        return dataclasses.replace(config, allow_hosts=(*config.allow_hosts, name))
    return config


#: the environment variable that picks the server's event loop: ``uvloop`` or ``asyncio``
LOOP_VARIABLE = "AGENTENVS_SERVER_LOOP"
LOOPS = ("uvloop", "asyncio")


def event_loop() -> str:
    """The event loop the server runs on: uvloop where it is installed (the ``server``
    extra brings it; about 1.5x the steps a second of asyncio's), else asyncio's own;
    ``AGENTENVS_SERVER_LOOP`` names one (``asyncio`` to compare, ``uvloop`` to insist)."""
    import importlib.util

    asked = os.environ.get(LOOP_VARIABLE, "").strip().lower()
    if asked and asked not in LOOPS:
        raise ValueError(f"{LOOP_VARIABLE} must be one of {LOOPS}, got {asked!r}")
    if asked == "asyncio":
        return "asyncio"
    if importlib.util.find_spec("uvloop") is not None:
        return "uvloop"
    if asked == "uvloop":
        raise ValueError(
            f"{LOOP_VARIABLE}=uvloop, but uvloop is not installed: pip install 'agentenvs[server]'"
        )
    return "asyncio"


def run_app(
    app: Any,
    config: ServerConfig,
    *,
    host: str,
    port: int,
    log_level: str,
    announce: Any,
    what: str,
    path: str = "",
    on_bound: Any = None,
    **uvicorn_options: Any,
) -> None:
    """Serve ``app`` (any of the three protocols) with uvicorn on ``host:port`` until
    interrupted, with the server's bounds: the request and stall timeouts and the
    connection limit. The first announced line names the address; then
    ``on_bound(port)`` runs (the CLI writes the token there), and what it returns, if
    callable, runs when the server stops."""
    import uvicorn

    from agentenvs.server.transport import listening_socket, timed_http_protocol

    check_bind(config, host)  # the caller made its app for this host
    loop = event_loop()
    sock = listening_socket(host, port, config.stall_timeout)
    bound = sock.getsockname()[1]
    http: Any = "auto"
    if config.request_timeout is not None:
        http = timed_http_protocol(config.request_timeout)
    cleanups: list[Any] = []

    class Server(uvicorn.Server):  # type: ignore[misc]
        async def shutdown(self, sockets: Any = None) -> None:
            # uvicorn re-raises the signal that stopped it after this (the process ends
            # there): what ``on_bound`` left is removed here
            try:
                await super().shutdown(sockets)
            finally:
                while cleanups:
                    cleanups.pop()()

    server = Server(
        uvicorn.Config(
            app,
            log_level=log_level,
            http=http,
            limit_concurrency=config.connection_limit,
            loop=loop,
            **uvicorn_options,
        )
    )
    shown = f"[{host}]" if ":" in host else host
    announce(
        f"agentenvs serve: {config.env_id} on http://{shown}:{bound}{path} ({what}; {loop} loop)"
    )
    done = on_bound(bound) if on_bound is not None else None
    if callable(done):
        cleanups.append(done)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        while cleanups:
            cleanups.pop()()


__all__ = ["ServerConfig", "SessionError", "check_bind", "create_app", "run_app", "serve"]
