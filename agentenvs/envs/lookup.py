"""Env ids and env keyword arguments as a user types them, checked before anything is built.

``check_env_id`` accepts what ``gym.make`` accepts for a text env: a registered id
(``agentenvs/FrozenLake-v0``) or ``module:id``, whose module is imported first (a plugin
that registers its envs). ``check_env_kwargs`` holds keyword arguments against the env
constructor's signature. Both raise ``UsageError`` with one line naming the closest
valid choice and every valid one, where Gymnasium's own errors would point at its
namesake envs (``FrozenLake-v0`` is "deprecated, use FrozenLake-v1" there).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

from agentenvs.core.suggest import UsageError, close_match, did_you_mean
from agentenvs.envs import NAMESPACE, registered_ids

#: ``gym.make``'s own keyword arguments, accepted beside the constructor's
MAKE_KWARGS = ("max_episode_steps", "disable_env_checker")


def _bare(env_id: str) -> str:
    return env_id.rpartition("/")[2]


def _import_module_of(env_id: str) -> str:
    module, sep, rest = env_id.partition(":")
    if not sep:
        return env_id
    if not module or not rest:
        raise UsageError(f"env id {env_id!r}: expected MODULE:ID, e.g. my_envs:my/Env-v0")
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(f"env id {env_id!r}: cannot import module {module!r} ({exc})") from None
    return rest


def text_env_ids(namespace: str | None = None) -> list[str]:
    """The project's env ids, and those registered under ``namespace`` (a plugin's)."""
    ids = set(registered_ids())
    if namespace and namespace != NAMESPACE:
        ids.update(i for i, spec in gym.registry.items() if spec.namespace == namespace)
    return sorted(ids)


def suggest_env_id(env_id: str) -> str | None:
    """The valid env id closest to ``env_id`` (compared without the namespace, so that
    ``FrozenLake-v1`` or ``FrozenLak-v0`` finds ``agentenvs/FrozenLake-v0``)."""
    name = _import_module_of(env_id) if ":" in env_id else env_id
    namespace = name.rpartition("/")[0] or None
    candidates = text_env_ids(namespace)
    bare = {}
    for candidate in candidates:  # the project's namespace first where two share a name
        key = _bare(candidate)
        if key not in bare or candidate.startswith(f"{NAMESPACE}/"):
            bare[key] = candidate
    match = close_match(_bare(name), bare)
    return bare[match] if match is not None else close_match(name, candidates)


def entry_point(env_id: str) -> Callable[..., Any]:
    """The class (or function) ``gym.make`` calls for a registered id."""
    from gymnasium.envs.registration import load_env_creator

    target = gym.spec(env_id).entry_point
    if target is None:
        raise UsageError(f"env id {env_id!r} has no entry point")
    return load_env_creator(target) if isinstance(target, str) else target


def check_env_id(env_id: str) -> str:
    """Check that ``env_id`` names a text env ``gym.make`` can build; return the id as
    registered (without a ``module:`` prefix, whose module is imported here).

    Refused with a ``UsageError``: an id nobody registered, and a registered env that is
    not a text env (Gymnasium's ``FrozenLake-v1``: its actions are not text).
    """
    from agentenvs.core.env import TextEnv

    if not isinstance(env_id, str) or not env_id.strip():
        raise UsageError(f"expected an env id such as {NAMESPACE}/FrozenLake-v0, got {env_id!r}")
    name = _import_module_of(env_id.strip())
    namespace = name.rpartition("/")[0] or None
    valid = ", ".join(text_env_ids(namespace))
    if name not in gym.registry:
        hint = _hint(suggest_env_id(name))
        raise UsageError(f"unknown env id {name!r}{hint} (env ids: {valid})")
    creator = entry_point(name)
    if inspect.isclass(creator) and not issubclass(creator, TextEnv):
        raise UsageError(
            f"{name!r} is not a text env ({creator.__module__}.{creator.__qualname__}: its "
            f"actions are not text){_hint(suggest_env_id(name))} (env ids: {valid})"
        )
    return name


def _hint(match: str | None) -> str:
    return f"; did you mean {match!r}?" if match is not None else ""


def env_parameters(env_id: str) -> dict[str, Any] | None:
    """The keyword arguments ``gym.make(env_id, ...)`` accepts, with their defaults
    (``inspect.Parameter.empty``: required), or None where the constructor takes any."""
    try:
        signature = inspect.signature(entry_point(env_id))
    except (TypeError, ValueError):  # a builtin or a callable without a signature
        return None
    params: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if param.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            params[param.name] = param.default
    return params


def check_env_kwargs(env_id: str, kwargs: Mapping[str, Any]) -> None:
    """Refuse keyword arguments the env's constructor does not take, naming the closest
    one and every one with its default. Values are the constructor's to check."""
    if not isinstance(kwargs, Mapping):
        raise UsageError(f"env kwargs must be a JSON object, got {type(kwargs).__name__}")
    name = check_env_id(env_id)
    params = env_parameters(name)
    if params is None:
        return
    spec_kwargs = gym.spec(name).kwargs
    accepted = [*params, *MAKE_KWARGS]
    shown = ", ".join(_describe(k, v) for k, v in params.items())
    for key in kwargs:
        if key not in accepted:
            raise UsageError(
                f"{name} takes no env kwarg {key!r}{did_you_mean(key, accepted)} "
                f"(its kwargs: {shown})"
            )
    missing = [
        k
        for k, v in params.items()
        if v is inspect.Parameter.empty and k not in kwargs and k not in spec_kwargs
    ]
    if missing:
        raise UsageError(f"{name} needs env kwarg(s) {missing} (its kwargs: {shown})")


def _describe(name: str, default: Any) -> str:
    return f"{name} (required)" if default is inspect.Parameter.empty else f"{name}={default!r}"
