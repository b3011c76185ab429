"""A free-text space: any ``str`` up to a length limit.

Gymnasium's ``Text`` space has a fixed charset, which an LLM's output does not respect;
this space accepts every string and samples printable text for checkers.

Vector envs: ``FreeText`` batches as Gymnasium batches ``Text``, as a ``Tuple`` of ``n``
independently seeded copies whose values are tuples of ``str``, so ``SyncVectorEnv`` and
``AsyncVectorEnv`` work on every env. ``AsyncVectorEnv`` needs ``shared_memory=False``:
strings have no fixed-size array form (Gymnasium's own shared memory for ``Text`` is
read once at construction), so none is registered and ``shared_memory=True`` fails
with Gymnasium's error that says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium.spaces import Space, Tuple
from gymnasium.vector.utils import (
    batch_differing_spaces,
    batch_space,
    concatenate,
    create_empty_array,
)

_SAMPLE_ALPHABET = np.array(
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?()[]{}<>=+-*/_'\"\n")
)


class FreeText(Space[str]):
    """Any Python ``str`` whose length is at most ``max_length`` characters."""

    def __init__(self, max_length: int = 1 << 20, seed: int | np.random.Generator | None = None):
        if max_length <= 0:
            raise ValueError(f"max_length must be positive, got {max_length}")
        self.max_length = int(max_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            raise NotImplementedError("FreeText.sample takes no mask or probability")
        length = int(self.np_random.integers(0, min(self.max_length, 64) + 1))
        return "".join(self.np_random.choice(_SAMPLE_ALPHABET, size=length))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"FreeText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FreeText) and other.max_length == self.max_length

    def to_jsonable(self, sample_n: Any) -> list[str]:
        return list(sample_n)

    def from_jsonable(self, sample_n: list[str]) -> list[str]:
        return list(sample_n)


# ---------------------------------------------------------------- vector envs
# ``import gymnasium`` has loaded these singledispatch functions already, so this costs
# nothing; the bodies mirror Gymnasium's for ``Text``.
@batch_space.register(FreeText)
def _batch_free_text(space: FreeText, n: int = 1) -> Tuple:
    batched = Tuple(tuple(deepcopy(space) for _ in range(n)), seed=deepcopy(space.np_random))
    # each copy its own seed, drawn from a copy of the space's RNG (as for Text)
    seeds = deepcopy(space.np_random).integers(0, int(1e8), n)
    batched.seed([int(s) for s in seeds])
    return batched


@batch_differing_spaces.register(FreeText)
def _batch_differing_free_text(spaces: Sequence[FreeText]) -> Tuple:
    return Tuple([deepcopy(space) for space in spaces], seed=deepcopy(spaces[0].np_random))


@concatenate.register(FreeText)
def _concatenate_free_text(space: FreeText, items: Iterable[str], out: Any) -> tuple[str, ...]:
    return tuple(items)


@create_empty_array.register(FreeText)
def _empty_free_text(space: FreeText, n: int = 1, fn: Callable[..., Any] = np.zeros) -> tuple[str, ...]:
    return ("",) * n
