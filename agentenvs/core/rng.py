"""Seeded random streams and their plain-data states, shared by envs and wrappers."""

from __future__ import annotations

from typing import Any

import numpy as np


def stream_rng(stream: int, *seeds: int | None) -> np.random.Generator:
    """A generator for one named stream, seeded from ``seeds`` (``None`` entries skipped).

    With no seed at all it draws fresh entropy, like ``np.random.default_rng()``.
    """
    given = [int(s) for s in seeds if s is not None]
    if not given:
        return np.random.default_rng()
    return np.random.default_rng(np.random.SeedSequence([stream, *given]))


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """The plain-data state of a generator (a dict of ints and strings)."""
    return rng.bit_generator.state


def rng_from_state(
    state: dict[str, Any], reuse: np.random.Generator | None = None
) -> np.random.Generator:
    """A generator in ``state``: ``reuse`` set in place when its bit generator matches.

    Setting the state in place skips building a fresh bit generator, which draws OS
    entropy first and costs more than the rest of a restore.
    """
    if reuse is not None and type(reuse.bit_generator).__name__ == state["bit_generator"]:
        reuse.bit_generator.state = state
        return reuse
    bit_generator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


#: the bit generators a state may name (numpy's own)
BIT_GENERATORS = frozenset({"PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"})
#: one generator per kind, to check states without drawing OS entropy each time
_PROBES: dict[str, np.random.Generator] = {}


def check_rng_state(state: Any) -> None:
    """Raise ``ValueError`` unless ``state`` is a numpy bit generator's state."""
    try:
        name = state["bit_generator"]
        if name not in BIT_GENERATORS:
            raise ValueError(f"unknown bit generator {name!r:.60}")
        probe = _PROBES.get(name)
        if probe is None:
            probe = _PROBES[name] = np.random.Generator(getattr(np.random, name)())
        probe.bit_generator.state = state  # the setter checks every field
    except Exception as exc:
        raise ValueError(f"not a generator state: {type(exc).__name__}: {exc}"[:300]) from None
