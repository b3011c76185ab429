"""How reports print numbers: one precision rule and the marks, for every table and heat map.

- A point and its interval are printed with the same decimals: at least
  ``MIN_DECIMALS``, more (up to ``MAX_DECIMALS``) until every nonzero value of the table
  prints as nonzero and every interval of nonzero width shows two different bounds
  (``decimals_for``, ``table_decimals``). A value still too small to show reads
  ``<0.0001``, never ``0``.
- An interval "excludes 0" only as printed (``printed_excludes_zero``): a verdict, or a
  ``*`` in a difference, never rests on digits the reader cannot see.
- ``†`` marks every interval of zero width as printed: bounds equal, or closer than the
  last digit shows (``zero_width``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentenvs.eval.passk import PassSurface

#: one name for each kind of state, in every table and figure
KIND_LABELS = {"ordinary": "ordinary", "self_error": "self-made error", "error": "injected error"}

#: the fewest and the most decimals a table or heat map prints (``decimals_for``)
MIN_DECIMALS, MAX_DECIMALS = 3, 4
#: below this a value (a float sum's remainder) counts as 0
_ZERO = 1e-12


def decimals_for(values: Any, widths: Any = ()) -> int:
    """The fewest decimals, from ``MIN_DECIMALS`` to ``MAX_DECIMALS``, at which every
    nonzero number of ``values`` prints as nonzero and every interval width of ``widths``
    as two different bounds. Numbers too small to show even at ``MAX_DECIMALS`` ask for
    nothing: they print as ``<0.0001`` (values) or as equal bounds (widths, marked ``†``)."""

    def magnitudes(numbers: Any) -> np.ndarray:
        flat = np.abs(np.asarray(numbers, dtype=np.float64).ravel())
        return flat[np.isfinite(flat) & (flat >= 10.0**-MAX_DECIMALS)]

    smallest_value, smallest_width = magnitudes(values), magnitudes(widths)
    for decimals in range(MIN_DECIMALS, MAX_DECIMALS):
        unit = 10.0**-decimals
        if (not smallest_value.size or smallest_value.min() >= 0.5 * unit) and (
            not smallest_width.size or smallest_width.min() >= unit
        ):
            return decimals
    return MAX_DECIMALS


def table_decimals(surface: PassSurface) -> int:
    """The decimals of ``surface``'s table and heat map: its points and bounds show when
    nonzero, its intervals' widths as different bounds (``decimals_for``)."""
    if surface.low is None or surface.high is None:
        return decimals_for(surface.mean)
    return decimals_for([surface.mean, surface.low, surface.high], surface.high - surface.low)


def format_number(value: float, decimals: int, signed: bool = False) -> str:
    """``value`` at ``decimals`` (with its sign when ``signed``); a nonzero value that
    would print as 0 reads ``<0.0001`` (``+<0.0001``, ``-<0.0001``) instead."""
    value = float(value)
    if abs(value) <= _ZERO:
        value = 0.0
    text = f"{value:+.{decimals}f}" if signed else f"{value:.{decimals}f}"
    if value != 0.0 and float(text) == 0.0:
        sign = "+" if signed and value > 0 else "-" if value < 0 else ""
        return f"{sign}<{10.0**-decimals:.{decimals}f}"
    return text


def _shown_value(text: str) -> float:
    """The number a cell shows (0 for ``<0.0001``: it does not show on which side it is)."""
    return 0.0 if "<" in text else float(text)


def printed_excludes_zero(low: float, high: float, decimals: int) -> bool:
    """Whether the interval, as printed at ``decimals``, lies wholly on one side of 0."""
    return (
        _shown_value(format_number(low, decimals)) > 0
        or _shown_value(format_number(high, decimals)) < 0
    )


def zero_width(surface: PassSurface, decimals: int | None = None) -> np.ndarray:
    """``[k_index, t_index]`` True where the interval is degenerate: its bounds are equal,
    or print equal at ``decimals``. False everywhere without intervals."""
    if surface.low is None or surface.high is None:
        return np.zeros(surface.mean.shape, dtype=bool)
    flat = np.abs(surface.high - surface.low) <= _ZERO
    if decimals is None:
        return flat
    shown = np.vectorize(lambda lo, hi: format_number(lo, decimals) == format_number(hi, decimals))
    return flat | shown(surface.low, surface.high).astype(bool)


def significant(surface: PassSurface, decimals: int) -> np.ndarray:
    """``[k_index, t_index]`` True where the printed interval excludes 0 (what ``*`` marks)."""
    if surface.low is None or surface.high is None:
        return np.zeros(surface.mean.shape, dtype=bool)
    test = np.vectorize(lambda lo, hi: printed_excludes_zero(lo, hi, decimals))
    return test(surface.low, surface.high).astype(bool)


def grid_cells(surface: PassSurface, mask: np.ndarray) -> list[list[int]]:
    """The ``[K, T]`` of every cell where ``mask`` is True."""
    return [
        [int(surface.ks[i]), int(surface.budgets[j])]
        for i, j in zip(*np.nonzero(mask), strict=True)
    ]


#: the marks of tables and heat maps, and what they mean
ZERO_WIDTH_NOTE = (
    "† an interval of zero width as printed: the bootstrap resamples gave one value, or "
    "values closer than the last digit (one run: every task at 0 or every task at 1, or "
    "nearly; a difference: the same difference on every task, as when both runs sit at a "
    "bound), so it says nothing about the uncertainty."
)
STAR_NOTE = "* the interval, as printed, excludes 0."
