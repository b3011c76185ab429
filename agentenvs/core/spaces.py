"""A free-text space: any ``str`` up to a length limit.

Gymnasium's ``Text`` space has a fixed charset, which an LLM's output does not respect;
this space accepts every string and samples printable text for checkers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Space

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
