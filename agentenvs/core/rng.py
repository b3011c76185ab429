"""Seeded random streams and their plain-data states, shared by envs and wrappers."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.random.bit_generator import ISpawnableSeedSequence


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


class _Seeds(ISpawnableSeedSequence):
    """``SeedSequence(seed)`` as a PCG64 built by ``seeded_rng`` holds it: the first
    ``generate_state`` (the bit generator's own, at construction) answers from the words
    worked out once per seed; anything else goes to the ``SeedSequence`` itself, made
    when first needed (spawning, ``entropy``, pickling, a repr), so it reads and
    behaves as the one Gymnasium's seeding would hold."""

    __slots__ = ("_seed", "_words", "_sequence")

    def __init__(self, seed: int, words: np.ndarray) -> None:
        self._seed = seed
        self._words: np.ndarray | None = words
        self._sequence: np.random.SeedSequence | None = None

    def _real(self) -> np.random.SeedSequence:
        if self._sequence is None:
            self._sequence = np.random.SeedSequence(self._seed)
        return self._sequence

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        words = self._words
        if words is not None and n_words == 4 and dtype is np.uint64:
            self._words = None  # once: the constructor's call
            return words
        return self._real().generate_state(n_words, dtype)

    def spawn(self, n_children: int) -> list[np.random.SeedSequence]:
        return self._real().spawn(n_children)

    def __getattr__(self, name: str) -> Any:  # entropy, pool, n_children_spawned...
        return getattr(self._real(), name)

    def __repr__(self) -> str:
        return repr(self._real())

    def __reduce__(self) -> Any:  # pickled (and copied) as the SeedSequence it stands for
        return self._real().__reduce__()


#: seed -> the PCG64 words ``SeedSequence(seed).generate_state(4, uint64)``, read-only
_SEED_WORDS: dict[int, np.ndarray] = {}
_SEED_WORDS_MAX = 1 << 12


def seeded_rng(seed: int) -> tuple[np.random.Generator, int]:
    """``gymnasium.utils.seeding.np_random(seed)``: the same generator (PCG64 seeded from
    ``SeedSequence(seed)``, the same draws, its ``seed_seq`` reading as that sequence)
    and the same returned seed, built for less. A seed's words are worked out once (a
    bounded memo: an env is often reset with the same seeds again); anything but a
    non-negative ``int`` goes to Gymnasium, which raises the same errors."""
    if type(seed) is not int or seed < 0:
        from gymnasium.utils import seeding

        return seeding.np_random(seed)
    words = _SEED_WORDS.get(seed)
    if words is None:
        words = np.random.SeedSequence(seed).generate_state(4, np.uint64)
        words.flags.writeable = False
        if len(_SEED_WORDS) >= _SEED_WORDS_MAX:
            _SEED_WORDS.clear()
        _SEED_WORDS[seed] = words
    return np.random.Generator(np.random.PCG64(_Seeds(seed, words))), seed
