"""What every figure of the reports shares: the canvas, a fixed colour per K, legends
that hide no data, and labels that stay distinct.

- ``new_figure(width, height)``: a Figure on the Agg canvas (pyplot's global state is
  never touched); matplotlib is imported here, only when a figure is drawn
  (``agentenvs[plot]``).
- ``k_color(k)``: the colour of the Pass@K curve of K, the same in every figure and for
  every env (powers of two take the ten qualitative colours in order; any other K one
  of another palette), so K=8 is one colour wherever it appears.
- ``legend_outside(ax, ...)``: the legend to the right of the axes, outside the data.
- ``distinct_labels(labels, most)``: labels short enough for a legend or a tick that
  never become equal: a prefix common to all of them is shortened to ``…``, and what is
  still too long is wrapped onto more lines, never cut.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

#: one colour per power of two K = 1, 2, 4, ..., 512 (matplotlib's "tab10", in order)
_POWER_COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
#: for a K that is no power of two (the n of a run, e.g. 12): darker shades ("tab20b")
_OTHER_COLORS = (
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
    "#5254a3",
    "#8ca252",
    "#bd9e39",
    "#ad494a",
    "#a55194",
)


def new_figure(width: float, height: float) -> Any:
    """A constrained-layout Figure of ``width`` x ``height`` inches on the Agg canvas."""
    from agentenvs.core.errors import require

    require("matplotlib", "plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def k_color(k: int) -> str:
    """The fixed colour of K (a hex string), the same in every figure."""
    k = int(k)
    if k < 1:
        raise ValueError(f"K must be >= 1, got {k}")
    if k & (k - 1) == 0:
        return _POWER_COLORS[(k.bit_length() - 1) % len(_POWER_COLORS)]
    return _OTHER_COLORS[k % len(_OTHER_COLORS)]


def legend_outside(
    ax: Any,
    handles: Sequence[Any] | None = None,
    labels: Sequence[str] | None = None,
    **kwargs: Any,
) -> Any:
    """A legend to the right of ``ax``, outside its data area (constrained layout makes
    room for it)."""
    options = dict(
        loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=7, frameon=False
    )
    options.update(kwargs)
    if handles is None:
        return ax.legend(**options)
    return ax.legend(list(handles), list(labels or []), **options)


def _common_prefix(labels: Sequence[str]) -> str:
    first, last = min(labels), max(labels)
    size = 0
    while size < min(len(first), len(last)) and first[size] == last[size]:
        size += 1
    return first[:size]


def distinct_labels(labels: Sequence[str], most: int = 40) -> list[str]:
    """``labels`` made to fit lines of ``most`` characters without two becoming equal.

    A prefix common to every label (two or more of them) goes when some label is too
    long, up to a separator (``/ : ,``) so each differing ``key=value`` is kept whole, and is
    written as ``…``; then each label longer than ``most`` is wrapped onto more lines.
    Nothing is cut, so distinct labels stay distinct.
    """
    labels = [str(label) for label in labels]
    if all(len(label) <= most for label in labels):
        return labels
    if len(set(labels)) > 1:
        prefix = _common_prefix(labels)
        # end the shortened prefix just after a separator, so no word is split
        cut = max(prefix.rfind(sep) for sep in "/:,") + 1
        if cut > 1:
            labels = ["…" + label[cut:] for label in labels]
    return [
        "\n".join(textwrap.wrap(label, most, break_on_hyphens=False)) or label for label in labels
    ]
