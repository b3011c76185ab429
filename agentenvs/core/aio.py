"""The async face of every env: ``await env.areset(...)`` / ``await env.astep(action)``.

Steps that wait (a sandboxed test run, a shell command, a MySQL query) are blocking calls.
``AsyncEnv`` runs each env's calls on a thread of its own, so one event loop can drive
hundreds of episodes while the slow parts overlap; ``AsyncEnvPool`` bounds how many envs
exist at once (each holds a sandbox, a container or a database connection) and, if asked,
how many steps run at once.

An env whose calls are all short computations (FrozenLake, BFCL: the class's
``calls_wait(**kwargs)`` says so) gains nothing from a thread: handing each call to one
and back costs more than the call. ``AsyncEnv.make`` and ``AsyncEnvPool`` given an env id
run such an env *inline*, on the event loop's thread, and let other coroutines run
between calls (``inline=False`` keeps the thread). ``inline=True`` does the same for any
env: InterCode-SQL on SQLite runs faster so, but a statement then holds the whole loop
for as long as it runs (up to its time limit, 5 s by default).

Otherwise each env lives on one dedicated thread for its whole life: it is built, stepped and
closed there. Envs are not thread-safe and some of their resources are bound to the
thread that made them (an SQLite connection refuses any other), so an env's calls never
overlap and never move between threads. Cancelling a coroutine that awaits a call does
not interrupt the call already running on the env's thread; the next call on that env
simply waits for it.

Example::

    from agentenvs.core.aio import AsyncEnvPool

    async def main():
        async with AsyncEnvPool("agentenvs/InterCodeSQL-v0", max_envs=8) as pool:
            async def episode(seed):
                async with pool.env() as env:
                    obs, info = await env.areset(seed=seed)
                    obs, reward, terminated, truncated, info = await env.astep("submit")
                    return reward
            return await asyncio.gather(*(episode(s) for s in range(256)))
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import gymnasium as gym

from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot

T = TypeVar("T")
StepResult = tuple[str, float, bool, bool, dict[str, Any]]

_thread_names = itertools.count()


class AsyncEnv:
    """One env driven from asyncio: every call runs on the env's own thread.

    Build it with ``await AsyncEnv.make(env_id, **kwargs)`` (the env is constructed on its
    thread) or ``await AsyncEnv.create(factory)``. ``step_limit``, an ``asyncio.Semaphore``
    shared by several envs, bounds how many of their steps (and resets) run at once.

    Methods mirror the env's: ``areset``, ``astep``, ``asnapshot``/``arestore`` (with
    wrappers, as ``take_snapshot``/``restore_snapshot``), ``ascore_action``, ``aclose``,
    and ``call(fn, *args)`` for anything else (``fn`` receives the env).
    """

    def __init__(
        self,
        env: gym.Env,
        executor: ThreadPoolExecutor | None,
        *,
        step_limit: asyncio.Semaphore | None = None,
    ) -> None:
        self.env = env
        #: None: the env runs inline, on the event loop's thread
        self._executor = executor
        self._step_limit = step_limit
        self._closed = False

    # ------------------------------------------------------------ construction
    @classmethod
    async def create(
        cls,
        factory: Callable[[], gym.Env],
        *,
        step_limit: asyncio.Semaphore | None = None,
        inline: bool = False,
    ) -> AsyncEnv:
        """Start a thread, build the env there with ``factory()``, and wrap it (``inline``:
        build it here and run its calls on the event loop's thread)."""
        if inline:
            return cls(factory(), None, step_limit=step_limit)
        executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"agentenvs-env-{next(_thread_names)}"
        )
        loop = asyncio.get_running_loop()
        try:
            env = await loop.run_in_executor(executor, factory)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(env, executor, step_limit=step_limit)

    @classmethod
    async def make(
        cls,
        env_id: str,
        *,
        step_limit: asyncio.Semaphore | None = None,
        inline: bool | None = None,
        **kwargs: Any,
    ) -> AsyncEnv:
        """``gym.make(env_id, **kwargs)`` on the env's own thread, or inline when its calls
        never wait (``inline=None``: as ``calls_wait`` says)."""
        if inline is None:
            inline = not calls_wait(env_id, kwargs)
        return await cls.create(
            functools.partial(gym.make, env_id, **kwargs), step_limit=step_limit, inline=inline
        )

    @property
    def inline(self) -> bool:
        """The env's calls run on the event loop's thread."""
        return self._executor is None

    # ------------------------------------------------------------ calls
    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(env, *args, **kwargs)`` on the env's thread."""
        if self._closed:
            raise RuntimeError("this AsyncEnv is closed")
        if self._executor is None:
            try:
                return fn(self.env, *args, **kwargs)
            finally:
                await asyncio.sleep(0)  # other coroutines run between an inline env's calls
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, functools.partial(fn, self.env, *args, **kwargs)
        )

    async def _limited(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._step_limit is None:
            return await self.call(fn, *args, **kwargs)
        async with self._step_limit:
            return await self.call(fn, *args, **kwargs)

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
        """Close the env on its thread, then stop the thread (idempotent)."""
        if self._closed:
            return
        if self._executor is None:
            self._closed = True
            self.env.close()
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self.env.close)
        finally:
            self._closed = True
            self._executor.shutdown(wait=False)

    def close(self) -> None:
        """Synchronous close for code outside the event loop (waits for a running call)."""
        if self._closed:
            return
        if self._executor is None:
            self._closed = True
            self.env.close()
            return
        try:
            self._executor.submit(self.env.close).result()
        finally:
            self._closed = True
            self._executor.shutdown(wait=True)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def unwrapped(self) -> Any:
        return self.env.unwrapped


def calls_wait(env_id: str, kwargs: dict[str, Any] | None = None) -> bool:
    """Whether the env ``gym.make(env_id, **kwargs)`` makes may wait in its calls (on a
    sandbox, a shell, a server): its class's ``calls_wait(**kwargs)``; True when the class
    does not say."""
    from gymnasium.envs.registration import load_env_creator

    spec = gym.spec(env_id)
    creator = spec.entry_point if callable(spec.entry_point) else load_env_creator(spec.entry_point)
    hook = getattr(creator, "calls_wait", None)
    if hook is None:
        return True
    return bool(hook(**{**spec.kwargs, **(kwargs or {})}))


def _reset(env: gym.Env, seed: int | None, options: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    return env.reset(seed=seed, options=options)


def _step(env: gym.Env, action: str) -> StepResult:
    return env.step(action)


def _score_action(env: gym.Env, action: str) -> float:
    return float(env.unwrapped.score_action(action))  # type: ignore[attr-defined]


class AsyncEnvPool:
    """At most ``max_envs`` envs of one kind, lent to coroutines one episode at a time.

    Arguments:
        env: an env id for ``gym.make`` or a factory returning an env.
        max_envs: how many envs may exist at once, hence how many sandboxes, containers
            or database connections; a coroutine asking for one more waits until another
            gives its env back. Envs are built on first need and reused afterwards.
        max_concurrent_steps: if set, how many steps/resets of the pool's envs run at
            once (e.g. the number of cores for CPU-bound sandboxed tests); default no
            bound beyond ``max_envs``.
        inline: run the envs' calls on the event loop's thread (True) or each env on a
            thread of its own (False); default: inline when ``env`` is an id whose class
            says its calls never wait (``calls_wait``), else threads.
        **env_kwargs: passed to ``gym.make`` or to the factory.

    ``async with pool.env() as env`` lends an ``AsyncEnv``. If the body raises, that env
    is closed rather than reused (its state is unknown) and a fresh one is built the
    next time one is needed. ``await pool.aclose()`` (or leaving ``async with pool``)
    closes every env the pool built; nothing is left behind.
    """

    def __init__(
        self,
        env: str | Callable[..., gym.Env],
        *,
        max_envs: int,
        max_concurrent_steps: int | None = None,
        inline: bool | None = None,
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
        if isinstance(env, str):
            self._factory: Callable[[], gym.Env] = functools.partial(gym.make, env, **env_kwargs)
            if inline is None:
                inline = not calls_wait(env, env_kwargs)
        elif callable(env):
            self._factory = functools.partial(env, **env_kwargs)
        else:
            raise TypeError(f"env must be an env id or a factory, got {type(env).__name__}")
        self.max_envs = max_envs
        self.max_concurrent_steps = max_concurrent_steps
        self.inline = bool(inline)
        self._slots: asyncio.Semaphore | None = None
        self._step_limit: asyncio.Semaphore | None = None
        self._idle: list[AsyncEnv] = []
        self._all: set[AsyncEnv] = set()
        self._closed = False

    def _ensure_primitives(self) -> None:
        # made lazily so the pool can be built outside a running loop
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_envs)
            if self.max_concurrent_steps is not None:
                self._step_limit = asyncio.Semaphore(self.max_concurrent_steps)

    @contextlib.asynccontextmanager
    async def env(self) -> AsyncIterator[AsyncEnv]:
        """Lend one env for the duration of the ``async with`` body."""
        if self._closed:
            raise RuntimeError("the pool is closed")
        self._ensure_primitives()
        assert self._slots is not None
        async with self._slots:
            lent = self._idle.pop() if self._idle else None
            if lent is None:
                lent = await AsyncEnv.create(
                    self._factory, step_limit=self._step_limit, inline=self.inline
                )
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
        self._closed = True
        envs, self._all, self._idle = list(self._all), set(), []
        results = await asyncio.gather(*(e.aclose() for e in envs), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def __aenter__(self) -> AsyncEnvPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["AsyncEnv", "AsyncEnvPool", "calls_wait"]
