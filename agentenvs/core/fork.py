"""Forking: ``k`` independent envs at the current state of one.

``env.unwrapped.fork(k)`` (``TextEnv.fork``) returns ``k`` envs of the same class, each at
exactly the env's state: turn, budget, RNG, task, attempts, database, files. Each child
then lives on its own: stepping, restoring or closing one changes neither the others
nor the parent, and the parent may be closed first. A child behaves as a fresh env of
the same spec into which ``restore(snapshot())`` was loaded would; only the cost differs:

- the generic path *is* that: one snapshot, ``k`` envs built with the parent's
  constructor arguments, each restored (concurrently for envs whose restore waits);
- in-process envs (FrozenLake, BFCL, BFCL multi-turn, DeepCoder-MT) copy their state;
- InterCode-SQL copies the episode's database (SQLite: its in-memory image; MySQL: a
  pristine database of the pool, refilled from the parent's on the server);
- Terminal-Bench reads the work dir once and fills ``k`` new sandboxes or containers
  from it concurrently.

``fork_env(env, k)`` forks a wrapped env: the env itself is forked, then every wrapper
of the chain is re-created around each child (``fork_wrapper``), innermost first.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np

from agentenvs.core.errors import SnapshotError
from agentenvs.core.snapshot import SnapshotParticipant
from agentenvs.core.spaces import FreeText

T = TypeVar("T")
R = TypeVar("R")

#: the most children one fork makes (a typo such as fork(10**6) fails here, not in a sandbox)
MAX_FORK = 4096

#: attribute values a wrapper copy gets its own copy of (state); other objects are shared
_STATE_TYPES = (list, dict, set, deque, bytearray, np.ndarray, np.random.Generator)


def run_concurrently(
    fn: Callable[[T], R], items: Sequence[T], concurrency: int, *, pool: str = "fork"
) -> list[R]:
    """``[fn(item) for item in items]``, at most ``concurrency`` at once, in order.

    The calls run on long-lived threads (one pool per name), so no thread is started
    per call. (Sandboxes do not depend on it: every local sandbox is forked from one
    thread that lives as long as the process, ``sandbox._launcher``.) The first error is
    raised once every call has ended.
    """
    items = list(items)
    if concurrency <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    executor = _executor(pool)
    results: list[Any] = [None] * len(items)
    errors: list[BaseException] = []
    lock = threading.Lock()
    todo = iter(range(len(items)))

    def worker() -> None:
        while True:
            with lock:
                i = next(todo, None)
                if i is None or errors:
                    return
            try:
                results[i] = fn(items[i])
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                return

    futures = [executor.submit(worker) for _ in range(min(concurrency, len(items)))]
    for future in futures:
        future.result()
    if errors:
        raise errors[0]
    return results


_EXECUTORS: dict[str, ThreadPoolExecutor] = {}
_EXECUTORS_LOCK = threading.Lock()
#: threads of each pool (a bound above every concurrency asked of it)
_POOL_THREADS = 32


def _executor(name: str) -> ThreadPoolExecutor:
    with _EXECUTORS_LOCK:
        executor = _EXECUTORS.get(name)
        if executor is None:
            executor = _EXECUTORS[name] = ThreadPoolExecutor(
                _POOL_THREADS, thread_name_prefix=f"agentenvs-{name}"
            )
        return executor


#: the seed sequence a copied RNG's bit generator is built from; its state is set right
#: after, so the seeds never show. Building from it skips the OS entropy that a bit
#: generator built without a seed draws (the most costly part of a child's copy).
_COPY_SEED = np.random.SeedSequence(0)


def copy_rng(rng: np.random.Generator) -> np.random.Generator:
    """A generator of its own in ``rng``'s state: the same draws, sharing nothing."""
    source = rng.bit_generator
    bit_generator = type(source)(_COPY_SEED)
    bit_generator.state = source.state
    return np.random.Generator(bit_generator)


def copy_space(space: gym.Space[Any]) -> gym.Space[Any]:
    """A copy of ``space`` sharing nothing mutable with it: a ``FreeText`` (a size limit
    and a lazily made RNG) is copied by its attributes, any other space deep."""
    if type(space) is not FreeText:
        return copy.deepcopy(space)
    made = object.__new__(FreeText)
    made.__dict__.update(space.__dict__)
    if space._np_random is not None:  # sampled (or seeded) already: its own generator
        made._np_random = copy_rng(space._np_random)
    return made


def check_fork_count(k: Any) -> int:
    """``k`` as an int in [1, MAX_FORK], else ``ValueError`` naming it."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= MAX_FORK:
        raise ValueError(f"fork(k) needs an integer k in [1, {MAX_FORK}], got {k!r:.40}")
    return int(k)


def close_quietly(envs: Iterable[Any]) -> None:
    """Close every env of ``envs``, each even when another's close raised."""
    for env in envs:
        with contextlib.suppress(Exception):
            env.close()


def _chain(env: gym.Env) -> list[gym.Wrapper]:
    """The wrappers around ``env.unwrapped``, outermost first."""
    found = []
    while isinstance(env, gym.Wrapper):
        found.append(env)
        env = env.env
    return found


def fork_wrapper(wrapper: gym.Wrapper, env: gym.Env, layers: dict[int, Any]) -> gym.Wrapper:
    """A copy of ``wrapper`` around ``env`` (a fork of the env it wraps), in its state.

    A wrapper that defines ``fork_wrapper(env)`` makes its own copy (or refuses, raising).
    Otherwise: a shallow copy whose ``env`` is ``env``; attributes that are containers or
    generators (its state) are copied deep, other objects (callables, tokenizers, policies)
    are shared; a reference to a layer of the parent's chain points to the child's layer
    (``layers``: id of the parent's layer -> the child's); and a ``SnapshotParticipant``
    gets a copy of its ``wrapper_state()`` restored on top.
    """
    own = getattr(wrapper, "fork_wrapper", None)
    if callable(own):
        made = own(env)
        if not isinstance(made, gym.Wrapper) or made.env is not env:
            raise SnapshotError(
                f"{type(wrapper).__name__}.fork_wrapper(env) must return a wrapper around env"
            )
        return made
    child = copy.copy(wrapper)
    memo = dict(layers)
    for name, value in vars(wrapper).items():
        if name == "env":
            continue
        if id(value) in layers:
            setattr(child, name, layers[id(value)])
        elif isinstance(value, _STATE_TYPES):
            try:
                setattr(child, name, copy.deepcopy(value, memo))
            except Exception as exc:
                raise SnapshotError(
                    f"wrapper {type(wrapper).__name__} cannot be forked: its attribute {name!r} "
                    f"cannot be copied ({type(exc).__name__}: {exc}); give it fork_wrapper(env)"
                ) from exc
    child.env = env
    if isinstance(wrapper, SnapshotParticipant):
        child.restore_wrapper_state(copy.deepcopy(wrapper.wrapper_state()))
    return child


def fork_env(env: gym.Env, k: int) -> list[gym.Env]:
    """``k`` independent copies of ``env`` (wrappers too) at its current state.

    The unwrapped env is forked with its ``fork(k)``; each wrapper of the chain is then
    re-created around each child, innermost first (see ``fork_wrapper``). On any error
    every child made so far is closed and the error raised; ``env`` is left as it was.
    """
    k = check_fork_count(k)
    inner = env.unwrapped
    fork = getattr(inner, "fork", None)
    if not callable(fork):
        raise SnapshotError(f"{type(inner).__name__} cannot be forked (it has no fork(k))")
    chain = _chain(env)
    children = fork(k)
    out: list[gym.Env] = []
    try:
        for child in children:
            layers: dict[int, Any] = {id(inner): child}
            wrapped: gym.Env = child
            for wrapper in reversed(chain):
                wrapped = fork_wrapper(wrapper, wrapped, layers)
                layers[id(wrapper)] = wrapped
            out.append(wrapped)
    except BaseException:
        close_quietly(children)
        raise
    return out
