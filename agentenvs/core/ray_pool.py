"""Envs on a Ray cluster, lent through the same interface as ``AsyncEnvPool``.

``RayEnvPool`` is a drop-in for :class:`agentenvs.core.aio.AsyncEnvPool` whose envs live
as Ray actors, one env an actor, on any node of a cluster: each actor builds its env
with ``gym.make`` on its own node, and ``async with pool.env() as env`` lends a
``RayEnv`` with the methods of ``AsyncEnv`` (``areset``, ``astep``, ``asnapshot``,
``arestore``, ``ascore_action``, ``call``, ``aclose``). Results, snapshots and the env's
own exceptions travel back unchanged (they are picklable), so a trainer swaps one pool
for the other without touching its episode code.

An actor or its node lost mid-episode (``ray.kill``, the OOM killer, a node that leaves
the cluster) is not the agent's doing: the call raises :class:`EnvActorLostError`, a
``Fault`` of kind ``worker``, which the runner retries with the same seed and keeps out
of every estimate, and the integrations hand no reward for. The lent env is then dead
(every later call raises the same fault); the pool drops it and builds a fresh actor for
the next episode.

Example::

    from agentenvs.core.ray_pool import RayEnvPool

    async def main():
        async with RayEnvPool(
            "agentenvs/FrozenLake-v0", max_envs=8, ray_address="auto", placement="spread"
        ) as pool:
            async with pool.env() as env:
                obs, info = await env.areset(seed=0)
                obs, reward, terminated, truncated, info = await env.astep("right")

Every node needs agentenvs installed (or a ``runtime_env`` in ``init_kwargs``).
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import gymnasium as gym

from agentenvs.core.aio import StepResult, _reset, _score_action, _step
from agentenvs.core.errors import UNKNOWN, Fault, ServiceUnavailable, require
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot

T = TypeVar("T")

PLACEMENTS = ("spread", "pack")
#: Ray's scheduling strategy for each placement: SPREAD puts actors on different nodes
#: (best effort), DEFAULT packs them onto the nodes already busy before it spreads
_STRATEGIES = {"spread": "SPREAD", "pack": "DEFAULT"}
#: where a Ray instance that this process starts listens
LOOPBACK = "127.0.0.1"
#: how many more actors a pool starts when one dies before it is ready
START_RETRIES = 3


class EnvActorLostError(Fault):
    """The Ray actor holding an env (or its node) was lost mid-call.

    A fault of kind ``worker``; what ended the actor (a kill from outside, the OOM
    killer, a node leaving the cluster) is not known here, so its attribution is
    ``unknown``. It is retryable: a fresh actor runs the episode again.
    """

    def __init__(self, message: str, *, evidence: str = "") -> None:
        super().__init__(message, kind="worker", attribution=UNKNOWN, evidence=evidence)


def _build_env(env: str | Callable[..., gym.Env], kwargs: dict[str, Any]) -> gym.Env:
    # a module-level function, so that unpickling it on a node imports agentenvs (which
    # registers every env id) before gym.make runs
    if isinstance(env, str):
        return gym.make(env, **kwargs)
    return env(**kwargs)


def _portable(exc: BaseException) -> BaseException:
    """The exception itself when it survives pickling, else a RuntimeError that says
    what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - anything unpicklable is described instead
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


class _EnvActor:
    """What a Ray actor holds: one env, built on the actor's node; every call answers
    ``(True, result)`` or ``(False, exception)`` so the env's own errors reach the caller
    as they were raised, apart from Ray's errors about the actor itself."""

    def __init__(self, env: str | Callable[..., gym.Env], kwargs: dict[str, Any]) -> None:
        self.env: gym.Env | None = None
        self.error: BaseException | None = None
        try:
            self.env = _build_env(env, kwargs)
        except Exception as exc:  # noqa: BLE001 - reported by ready()
            self.error = _portable(exc)

    def ready(self) -> tuple[bool, Any]:
        if self.error is not None:
            return False, self.error
        import ray

        return True, ray.get_runtime_context().get_node_id()

    def call(self, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> tuple[bool, Any]:
        try:
            return True, fn(self.env, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - re-raised by the caller
            return False, _portable(exc)

    def close(self) -> None:
        if self.env is not None:
            env, self.env = self.env, None
            env.close()


def _lost_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's exceptions that mean the actor or its node is gone (not the env's error)."""
    names = (
        "RayActorError",
        "ActorUnavailableError",
        "WorkerCrashedError",
        "NodeDiedError",
        "ObjectLostError",
        "OwnerDiedError",
        "LocalRayletDiedError",
    )
    return tuple(getattr(ray.exceptions, n) for n in names if hasattr(ray.exceptions, n))


class RayEnv:
    """One env in a Ray actor, driven from asyncio, with the methods of ``AsyncEnv``.

    ``node_id``: the Ray node the actor runs on. The env object itself stays on its node:
    ``call(fn, *args)`` runs ``fn(env, *args)`` there (``fn`` must pickle, e.g. a
    module-level function) and returns its result. If the actor is lost, the call raises
    :class:`EnvActorLostError` and so does every later one; ``closed`` is then True.
    """

    def __init__(
        self, ray: Any, actor: Any, node_id: str, *, step_limit: asyncio.Semaphore | None = None
    ) -> None:
        self._ray = ray
        self._actor = actor
        self.node_id = node_id
        self._step_limit = step_limit
        self._lost: EnvActorLostError | None = None
        self._closed = False

    @property
    def inline(self) -> bool:
        """Always False: the env's calls run in its actor."""
        return False

    @property
    def lost(self) -> EnvActorLostError | None:
        """The fault that ended this env's actor, or None while it lives."""
        return self._lost

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(env, *args, **kwargs)`` in the env's actor."""
        if self._lost is not None:
            raise self._lost
        if self._closed:
            raise RuntimeError("this RayEnv is closed")
        try:
            ok, value = await self._actor.call.remote(fn, args, kwargs)
        except _lost_errors(self._ray) as exc:
            self._lose(exc)
            raise self._lost from exc  # type: ignore[misc]
        if not ok:
            raise value
        return value

    def _lose(self, exc: BaseException) -> None:
        self._lost = EnvActorLostError(
            f"the Ray actor holding this env was lost mid-episode (node {self.node_id}); "
            f"the episode can run again on a fresh one: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}",
            evidence=f"Ray: {type(exc).__name__}",
        )
        self._closed = True
        with contextlib.suppress(Exception):
            self._ray.kill(self._actor, no_restart=True)

    async def _limited(self, fn: Callable[..., T], *args: Any) -> T:
        if self._step_limit is None:
            return await self.call(fn, *args)
        async with self._step_limit:
            return await self.call(fn, *args)

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        return await self._limited(_reset, seed, options)

    async def astep(self, action: str) -> StepResult:
        return await self._limited(_step, action)

    async def asnapshot(self) -> Snapshot:
        return await self.call(take_snapshot)

    async def arestore(self, snapshot: Snapshot) -> None:
        await self.call(restore_snapshot, snapshot)

    async def ascore_action(self, action: str) -> float:
        return await self._limited(_score_action, action)

    async def aclose(self) -> None:
        """Close the env in its actor, then end the actor (idempotent; a lost actor has
        nothing left to close)."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._actor.close.remote()
        except _lost_errors(self._ray):
            pass
        finally:
            with contextlib.suppress(Exception):
                self._ray.kill(self._actor, no_restart=True)

    def close(self) -> None:
        """Synchronous close for code outside the event loop."""
        if self._closed:
            return
        self._closed = True
        try:
            self._ray.get(self._actor.close.remote())
        except _lost_errors(self._ray):
            pass
        finally:
            with contextlib.suppress(Exception):
                self._ray.kill(self._actor, no_restart=True)

    @property
    def closed(self) -> bool:
        return self._closed


class RayEnvPool:
    """At most ``max_envs`` envs of one kind, each in a Ray actor, lent to coroutines one
    episode at a time: ``AsyncEnvPool``'s interface and semantics, on a cluster.

    Arguments:
        env: an env id for ``gym.make`` or a factory returning an env (it must pickle:
            a module-level function or a ``functools.partial`` of one).
        max_envs: how many actors (hence envs) may exist at once; a coroutine asking for
            one more waits until another gives its env back. Actors are started on first
            need and reused afterwards.
        max_concurrent_steps: if set, how many steps/resets of the pool's envs run at
            once; default no bound beyond ``max_envs``.
        ray_address: the cluster to join (``"auto"``, ``"ray://head:10001"``, a GCS
            address) when Ray is not initialized in this process yet; None with no Ray
            running starts a local instance on loopback. A connection the pool opened is
            shut down by ``aclose``.
        placement: ``"spread"`` (actors on different nodes, Ray's SPREAD strategy) or
            ``"pack"`` (Ray's default strategy: onto nodes already in use first).
        num_cpus: CPUs each actor reserves (fractions allowed).
        resources: custom Ray resources each actor reserves (e.g. ``{"sandbox": 1}`` to
            keep envs on nodes that advertise it).
        init_kwargs: passed to ``ray.init`` when the pool connects (``runtime_env``, ...).
        **env_kwargs: passed to ``gym.make`` or to the factory, on the actor's node.

    ``async with pool.env() as env`` lends a :class:`RayEnv`. If the body raises (an
    :class:`EnvActorLostError` included), or the env's actor was lost, that env is closed
    rather than reused and a fresh actor is started the next time one is needed. An
    error building the env (``gym.make``'s) is raised from ``pool.env()`` as it was
    raised on the node. ``await pool.aclose()`` ends every actor the pool started.
    """

    def __init__(
        self,
        env: str | Callable[..., gym.Env],
        *,
        max_envs: int,
        max_concurrent_steps: int | None = None,
        ray_address: str | None = None,
        placement: str = "spread",
        num_cpus: float = 1.0,
        resources: dict[str, float] | None = None,
        init_kwargs: dict[str, Any] | None = None,
        **env_kwargs: Any,
    ) -> None:
        if isinstance(max_envs, bool) or not isinstance(max_envs, int) or max_envs < 1:
            raise ValueError(f"max_envs must be a positive integer, got {max_envs!r}")
        if max_concurrent_steps is not None and (
            isinstance(max_concurrent_steps, bool)
            or not isinstance(max_concurrent_steps, int)
            or max_concurrent_steps < 1
        ):
            raise ValueError(
                f"max_concurrent_steps must be a positive integer or None, got {max_concurrent_steps!r}"
            )
        if placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
        if not isinstance(env, str) and not callable(env):
            raise TypeError(f"env must be an env id or a factory, got {type(env).__name__}")
        if isinstance(env, str):
            gym.spec(env)  # an unknown id fails here, not on a node
        ray = require("ray", "ray")
        self._ray = ray
        self._owns_ray = False
        if not ray.is_initialized():
            kwargs = {"include_dashboard": False, **(init_kwargs or {})}
            if ray_address is None:
                # an instance started here serves this machine only: keep it on loopback
                kwargs.setdefault("_node_ip_address", LOOPBACK)
            try:
                ray.init(address=ray_address, **kwargs)
            except ConnectionError as exc:
                raise ServiceUnavailable(f"cannot reach Ray at {ray_address!r}: {exc}") from exc
            self._owns_ray = True
        self._env = env
        self._env_kwargs = env_kwargs
        self.max_envs = max_envs
        self.max_concurrent_steps = max_concurrent_steps
        self.placement = placement
        self.inline = False
        self._actor_class = ray.remote(
            num_cpus=num_cpus,
            resources=dict(resources or {}),
            max_restarts=0,  # a lost actor's env state is gone: the pool starts a fresh one
            scheduling_strategy=_STRATEGIES[placement],
        )(_EnvActor)
        self._slots: asyncio.Semaphore | None = None
        self._step_limit: asyncio.Semaphore | None = None
        self._idle: list[RayEnv] = []
        self._all: set[RayEnv] = set()
        self._closed = False

    def _ensure_primitives(self) -> None:
        # made lazily so the pool can be built outside a running loop
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_envs)
            if self.max_concurrent_steps is not None:
                self._step_limit = asyncio.Semaphore(self.max_concurrent_steps)

    async def _start(self) -> RayEnv:
        # an actor placed on a node that is leaving dies before it is ready: start another
        # (the cluster learns of the node's death meanwhile), a few times, then a fault
        for attempt in range(1 + START_RETRIES):
            actor = self._actor_class.remote(self._env, self._env_kwargs)
            try:
                ok, value = await actor.ready.remote()
            except _lost_errors(self._ray) as exc:
                with contextlib.suppress(Exception):
                    self._ray.kill(actor, no_restart=True)
                if attempt == START_RETRIES:
                    raise EnvActorLostError(
                        f"no Ray actor for this env came up ({attempt + 1} tries): "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                        evidence=f"Ray: {type(exc).__name__}",
                    ) from exc
                continue
            except BaseException:
                with contextlib.suppress(Exception):
                    self._ray.kill(actor, no_restart=True)
                raise
            if not ok:
                self._ray.kill(actor, no_restart=True)
                raise value
            return RayEnv(self._ray, actor, value, step_limit=self._step_limit)
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def env(self) -> AsyncIterator[RayEnv]:
        """Lend one env for the duration of the ``async with`` body."""
        if self._closed:
            raise RuntimeError("the pool is closed")
        self._ensure_primitives()
        assert self._slots is not None
        async with self._slots:
            lent = self._idle.pop() if self._idle else None
            if lent is None:
                lent = await self._start()
                self._all.add(lent)
            ok = False
            try:
                yield lent
                ok = True
            finally:
                if ok and not self._closed and not lent.closed:
                    self._idle.append(lent)
                else:
                    self._all.discard(lent)
                    await asyncio.shield(lent.aclose())

    @property
    def size(self) -> int:
        """How many envs exist now (lent or idle)."""
        return len(self._all)

    async def aclose(self) -> None:
        """End every actor the pool started, and a Ray connection it opened."""
        self._closed = True
        envs, self._all, self._idle = list(self._all), set(), []
        try:
            results = await asyncio.gather(*(e.aclose() for e in envs), return_exceptions=True)
        finally:
            if self._owns_ray and self._ray.is_initialized():
                self._ray.shutdown()
            self._owns_ray = False
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def __aenter__(self) -> RayEnvPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["EnvActorLostError", "PLACEMENTS", "RayEnv", "RayEnvPool"]
