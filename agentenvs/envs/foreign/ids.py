"""Foreign envs named on the command line: ``SOURCE:NAME`` as an adapter's id and kwargs.

``gymnasium:Taxi-v4`` is ``agentenvs/GymnasiumText-v0`` with ``env_id="Taxi-v4"``;
``textarena:Wordle-v0`` is ``agentenvs/TextArena-v0`` with ``game="Wordle-v0"``;
``reasoning_gym:leg_counting`` is ``agentenvs/ReasoningGym-v0`` with
``dataset="leg_counting"``; ``openenv:my_pkg.envs:MyEnvironment`` is
``agentenvs/OpenEnv-v0`` with ``env_class=...``, ``verifiers:my_taskset`` is
``agentenvs/Verifiers-v0`` with ``taskset=...``, ``gem:game:Sudoku-v0-easy`` is
``agentenvs/GEM-v0`` with ``env_id=...``. Every command that takes ``--env`` takes
these, and the adapter's other kwargs come from ``--env-kwargs`` as for any env (given
ones win).

These prefixes are read before the ``MODULE:ID`` form (a plugin module imported, then its
registered id): ``gymnasium:Taxi-v4`` in that form would name Gymnasium's own env, whose
observations are not text, which no command here could run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: prefix -> (the adapter's registered id, the kwarg that takes the name)
FOREIGN_PREFIXES: dict[str, tuple[str, str]] = {
    "gymnasium": ("agentenvs/GymnasiumText-v0", "env_id"),
    "textarena": ("agentenvs/TextArena-v0", "game"),
    "reasoning_gym": ("agentenvs/ReasoningGym-v0", "dataset"),
    "openenv": ("agentenvs/OpenEnv-v0", "env_class"),
    "verifiers": ("agentenvs/Verifiers-v0", "taskset"),
    "gem": ("agentenvs/GEM-v0", "env_id"),
}


def resolve_foreign(
    env: str, env_kwargs: Mapping[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """``(env id, kwargs)`` for ``env``: a ``SOURCE:NAME`` of :data:`FOREIGN_PREFIXES`
    becomes its adapter's id with the name in the adapter's kwarg (``env_kwargs`` given
    win over it); any other id is returned as it is."""
    kwargs = dict(env_kwargs or {})
    prefix, sep, name = env.partition(":")
    if not sep or prefix not in FOREIGN_PREFIXES:
        return env, kwargs
    adapter, key = FOREIGN_PREFIXES[prefix]
    if not name:
        raise ValueError(f"env {env!r}: expected {prefix}:NAME")
    return adapter, {key: name, **kwargs}
