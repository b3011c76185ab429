"""The env server: one agentenvs env per WebSocket session, OpenEnv's protocol on the wire.

Endpoints (as an OpenEnv server has them):

- ``WS /ws``: a session. Messages ``{"type": "reset", "data": {...}}``, ``{"type": "step",
  "data": {"text": ...}}``, ``{"type": "state"}``, ``{"type": "close"}``; answers
  ``{"type": "observation", "data": {"observation": {...}, "reward": r, "done": d}}``,
  ``{"type": "state", "data": {...}}`` or ``{"type": "error", "data": {"message", "code"}}``
  (the session stays open after an error). Two more types reach the env's snapshots:
  ``{"type": "snapshot"}`` answers ``{"type": "snapshot", "data": {"snapshot": TOKEN}}``
  and ``{"type": "restore", "data": {"snapshot": TOKEN}}`` answers an observation;
  ``reset`` also takes ``{"snapshot": TOKEN}``, for clients that know only reset.
- ``GET /health``, ``/metadata``, ``/schema``, ``/state``; ``POST /reset`` (stateless, as
  in OpenEnv: a fresh env is made, reset and closed); ``POST /step`` answers 409, since an
  agentenvs episode needs a session; ``GET /sessions`` counts live sessions.

Every session's env is built, stepped and closed on a thread of its own (``AsyncEnv``),
so slow steps of one session never hold up the others; an env whose calls are all short
computations (FrozenLake, BFCL: ``calls_wait``) runs on the event loop itself. A session ends, and its env is
closed (shell, sandbox, container, database), when the client sends ``close``, when the
connection drops (a client that is killed included), after ``session_timeout`` seconds
without a message, or when the server stops.

Snapshot tokens are the snapshot's bytes signed with a key known only to this server
(HMAC-SHA256): a token restores into any session of the same server, and the server
refuses bytes it did not sign, since unpickling foreign bytes would run foreign code.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import inspect
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from fastapi import FastAPI, HTTPException, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from agentenvs.core.aio import AsyncEnv, calls_wait
from agentenvs.core.snapshot import Snapshot, restore_snapshot
from agentenvs.server.models import (
    EnvState,
    ResetParams,
    TextAction,
    TextObservation,
    json_safe,
    observation_payload,
)

_MAC_BYTES = 32


class SessionError(Exception):
    """A request a session cannot serve; ``code`` is OpenEnv's error code."""

    def __init__(self, message: str, code: str = "EXECUTION_ERROR") -> None:
        super().__init__(message)
        self.code = code


@dataclass
class ServerConfig:
    """What the server serves and how many at once."""

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_sessions: int = 64
    session_timeout: float | None = None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def make_env(self) -> gym.Env:
        return gym.make(self.env_id, **self.env_kwargs)

    @property
    def inline(self) -> bool:
        """Envs whose calls are all short (FrozenLake, BFCL) run on the server's event loop;
        the others each on a thread of its own."""
        return not calls_wait(self.env_id, self.env_kwargs)


class SnapshotSigner:
    """Turns snapshots into signed tokens and back; refuses tokens it did not sign."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def token(self, snapshot: Snapshot) -> str:
        data = snapshot.to_bytes()
        mac = hmac.new(self._secret, data, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac + data).decode("ascii")

    def snapshot(self, token: str) -> Snapshot:
        try:
            raw = base64.urlsafe_b64decode(token.encode("ascii"))
        except (ValueError, UnicodeEncodeError) as exc:
            raise SessionError(f"the snapshot token is not base64: {exc}", "VALIDATION_ERROR") from None
        mac, data = raw[:_MAC_BYTES], raw[_MAC_BYTES:]
        expected = hmac.new(self._secret, data, hashlib.sha256).digest()
        if len(mac) != _MAC_BYTES or not hmac.compare_digest(mac, expected):
            raise SessionError(
                "the snapshot token was not issued by this server (bad signature)", "VALIDATION_ERROR"
            )
        return Snapshot.from_bytes(data)


def _observe(
    obs: str, info: dict[str, Any], *, reward: float | None, terminated: bool, truncated: bool
) -> TextObservation:
    return TextObservation(
        text=obs,
        terminated=bool(terminated),
        truncated=bool(truncated),
        done=bool(terminated or truncated),
        reward=None if reward is None else float(reward),
        info=json_safe(info),
    )


def _restored_view(env: gym.Env) -> tuple[str, dict[str, Any], bool]:
    inner: Any = env.unwrapped
    info = inner._info(action_valid=True)
    if inner.turn == 0:
        info.update(inner._reset_info())
    return inner._last_obs, info, bool(inner.done)


class Session:
    """One client's env and episode bookkeeping."""

    def __init__(self, session_id: str, env: AsyncEnv, config: ServerConfig, signer: SnapshotSigner) -> None:
        self.id = session_id
        self.env = env
        self.config = config
        self.signer = signer
        self.episode_id: str | None = None
        self.step_count = 0
        self.last_activity = time.monotonic()

    async def reset(self, data: dict[str, Any]) -> TextObservation:
        try:
            params = ResetParams.model_validate(data)
        except ValidationError as exc:
            raise SessionError(f"invalid reset data: {exc}", "VALIDATION_ERROR") from None
        self.episode_id = params.episode_id or str(uuid.uuid4())
        self.step_count = 0
        if params.snapshot is not None:
            if params.task_id is not None or params.max_turns is not None or params.options or params.seed is not None:
                raise SessionError(
                    "a reset from a snapshot takes no seed or options: the snapshot fixes them",
                    "VALIDATION_ERROR",
                )
            return await self.restore(params.snapshot)
        options = dict(params.options)
        if params.task_id is not None:
            options["task_id"] = params.task_id
        if params.max_turns is not None:
            options["max_turns"] = params.max_turns
        try:
            obs, info = await self.env.areset(seed=params.seed, options=options or None)
        except (ValueError, KeyError, TypeError) as exc:
            raise SessionError(f"reset failed: {exc}", "VALIDATION_ERROR") from None
        return _observe(obs, info, reward=None, terminated=False, truncated=False)

    async def step(self, data: dict[str, Any]) -> TextObservation:
        try:
            action = TextAction.model_validate(data)
        except ValidationError as exc:
            raise SessionError(
                f'invalid action (expected {{"text": "..."}}): {exc}', "VALIDATION_ERROR"
            ) from None
        try:
            obs, reward, terminated, truncated, info = await self.env.astep(action.text)
        except gym.error.ResetNeeded as exc:
            raise SessionError(str(exc), "EXECUTION_ERROR") from None
        self.step_count += 1
        return _observe(obs, info, reward=reward, terminated=terminated, truncated=truncated)

    async def snapshot(self) -> str:
        try:
            snap = await self.env.asnapshot()
        except Exception as exc:  # SnapshotError before any reset, or an env without snapshots
            raise SessionError(f"snapshot failed: {exc}") from None
        return self.signer.token(snap)

    async def restore(self, token: Any) -> TextObservation:
        if not isinstance(token, str):
            raise SessionError('restore needs {"snapshot": TOKEN}', "VALIDATION_ERROR")
        snap = self.signer.snapshot(token)

        def restore(env: gym.Env) -> tuple[str, dict[str, Any], bool]:
            restore_snapshot(env, snap)
            return _restored_view(env)

        try:
            obs, info, done = await self.env.call(restore)
        except Exception as exc:
            raise SessionError(f"restore failed: {exc}") from None
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
            episode_id=self.episode_id, step_count=self.step_count, env_id=self.config.env_id, **fields
        )

    async def aclose(self) -> None:
        await self.env.aclose()


class SessionManager:
    """Live sessions, their limit, the idle reaper, and closing them all."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.signer = SnapshotSigner(config.secret)
        self.sessions: dict[str, Session] = {}
        self._sockets: dict[str, WebSocket] = {}
        self._reserved = 0
        self._reaper: asyncio.Task[None] | None = None

    async def open(self, websocket: WebSocket) -> Session:
        if len(self.sessions) + self._reserved >= self.config.max_sessions:
            raise SessionError(
                f"the server is at capacity ({self.config.max_sessions} sessions)", "CAPACITY_REACHED"
            )
        self._reserved += 1
        try:
            try:
                env = await AsyncEnv.create(self.config.make_env, inline=self.config.inline)
            except Exception as exc:
                raise SessionError(f"could not make {self.config.env_id}: {exc}", "FACTORY_ERROR") from None
            session = Session(str(uuid.uuid4()), env, self.config, self.signer)
            self.sessions[session.id] = session
            self._sockets[session.id] = websocket
            return session
        finally:
            self._reserved -= 1

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

    async def _reap(self) -> None:
        timeout = float(self.config.session_timeout or 0)
        while True:
            await asyncio.sleep(min(max(timeout / 4, 0.05), 5.0))
            now = time.monotonic()
            for sid, session in list(self.sessions.items()):
                if now - session.last_activity > timeout:
                    socket = self._sockets.get(sid)
                    # closing the socket ends the session's receive loop, which closes the env
                    if socket is not None:
                        with contextlib.suppress(Exception):
                            await socket.close(code=1001, reason="session idle timeout")


def _describe(env_id: str) -> str:
    spec = gym.spec(env_id)
    entry = spec.entry_point
    if isinstance(entry, str):
        module, _, name = entry.partition(":")
        import importlib

        cls = getattr(importlib.import_module(module), name)
    else:
        cls = entry
    doc = inspect.getdoc(cls) or ""
    return doc.split("\n\n")[0].strip()


def create_app(config: ServerConfig) -> FastAPI:
    """The FastAPI app serving ``config.env_id``."""
    import agentenvs  # noqa: F401 - registers the ids

    gym.spec(config.env_id)  # an unknown id fails here, before the server starts
    manager = SessionManager(config)

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
    async def sessions() -> dict[str, int]:
        return {"active": len(manager.sessions), "max": config.max_sessions}

    @app.get("/state")
    async def state() -> dict[str, Any]:
        return EnvState(env_id=config.env_id).model_dump()

    @app.post("/reset")
    async def http_reset(body: dict[str, Any] | None = None) -> dict[str, Any]:
        env = await AsyncEnv.create(config.make_env, inline=config.inline)
        try:
            session = Session("http", env, config, manager.signer)
            obs = await session.reset(body or {})
        except SessionError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None
        finally:
            await env.aclose()
        return observation_payload(obs)

    @app.post("/step")
    async def http_step(body: dict[str, Any] | None = None) -> dict[str, Any]:
        raise HTTPException(
            status_code=409,
            detail="an agentenvs episode lives in a session: open a WebSocket at /ws, "
            "send reset, then step",
        )

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            session = await manager.open(websocket)
        except SessionError as exc:
            await websocket.send_json({"type": "error", "data": {"message": str(exc), "code": exc.code}})
            await websocket.close(code=1013)
            return
        try:
            while True:
                raw = await websocket.receive_text()
                session.last_activity = time.monotonic()
                reply, closing = await _answer(session, raw)
                if reply is not None:
                    await websocket.send_json(reply)
                if closing:
                    break
                session.last_activity = time.monotonic()
        except WebSocketDisconnect:
            pass
        finally:
            await asyncio.shield(manager.close(session))
            with contextlib.suppress(Exception):
                await websocket.close()

    return app


async def _answer(session: Session, raw: str) -> tuple[dict[str, Any] | None, bool]:
    import json

    try:
        message = json.loads(raw)
    except json.JSONDecodeError as exc:
        return _error(f"Invalid JSON: {exc}", "INVALID_JSON"), False
    if not isinstance(message, dict):
        return _error("a message must be a JSON object with a 'type'", "INVALID_JSON"), False
    kind = message.get("type")
    data = message.get("data") or {}
    try:
        if kind == "reset":
            return {"type": "observation", "data": observation_payload(await session.reset(data))}, False
        if kind == "step":
            return {"type": "observation", "data": observation_payload(await session.step(data))}, False
        if kind == "state":
            return {"type": "state", "data": (await session.state()).model_dump()}, False
        if kind == "snapshot":
            return {"type": "snapshot", "data": {"snapshot": await session.snapshot()}}, False
        if kind == "restore":
            obs = await session.restore(data.get("snapshot") if isinstance(data, dict) else None)
            return {"type": "observation", "data": observation_payload(obs)}, False
        if kind == "close":
            return None, True
    except SessionError as exc:
        return _error(str(exc), exc.code), False
    except Exception as exc:  # an env bug: report it, keep the session
        return _error(f"{type(exc).__name__}: {exc}", "EXECUTION_ERROR"), False
    return _error(
        f"unknown message type {kind!r}; expected reset, step, state, snapshot, restore or close",
        "UNKNOWN_TYPE",
    ), False


def _error(message: str, code: str) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code}}


def serve(
    config: ServerConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    announce: Any = print,
) -> None:
    """Run the server until interrupted; ``port=0`` picks a free port (announced)."""
    import socket

    import uvicorn

    app = create_app(config)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    bound = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, ws_max_size=64 << 20))
    announce(
        f"agentenvs serve: {config.env_id} on http://{host}:{bound} "
        f"(WebSocket /ws, up to {config.max_sessions} sessions)"
    )
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


__all__ = ["ServerConfig", "SessionError", "create_app", "serve"]


