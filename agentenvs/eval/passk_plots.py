"""Figures of a Pass@(K,T) report: the surface's heatmap and curves, and a comparison.

- ``plot_surface(surface, path, title)``: the heatmap of the surface (each cell printed
  as in the tables, ``agentenvs.eval.printing``) and Pass@K against T for up to five K,
  each with its shaded CI band;
- ``plot_comparison(base, other, diff, ...)``: the difference heatmap (diverging
  colormap; ``*`` where the printed CI excludes 0, ``†`` on zero-width CIs, said in the
  title) next to the curves of both runs (dashed: the first).

Every K keeps one colour (``agentenvs.eval.figures.k_color``), the legend sits outside
the axes, every shaded band is labelled as the CI it is, and run labels are shortened
without becoming equal (``distinct_labels``). What the T axis cannot say is said on the
figure (``agentenvs.eval.report.figure_notes``): ``t_note`` goes into the T axis's label
("no effect here: every episode ended by turn 1", BFCL single-turn), and ``footnote``
under the figure (a policy that plans on its turns left, whose Pass@(K,T) need not grow).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from agentenvs.eval.figures import distinct_labels, k_color, legend_outside, new_figure
from agentenvs.eval.passk import PassSurface
from agentenvs.eval.printing import format_number, significant, table_decimals, zero_width


def _curve_ks(ks: np.ndarray, most: int = 5) -> list[int]:
    """Up to ``most`` K values spread over the grid, always the first and the last."""
    if len(ks) <= most:
        return list(range(len(ks)))
    picks = np.unique(np.round(np.linspace(0, len(ks) - 1, most)).astype(int))
    return [int(i) for i in picks]


def t_axis_label(unit: str = "turns", t_note: str = "") -> str:
    """The T axis's label, with what it cannot say (``t_note``) on a second line."""
    name = "turn budget T" if unit == "turns" else f"budget B ({unit})"
    return f"{name}\n({t_note})" if t_note else name


def _heatmap(
    ax: Any,
    fig: Any,
    surface: PassSurface,
    *,
    diverging: bool = False,
    label: str = "Pass@(K,T)",
    t_note: str = "",
) -> None:
    values = surface.mean
    if diverging:
        # symmetric limits so white is exactly "no difference"
        limit = max(float(np.nanmax(np.abs(values))), 1e-3)
        image = ax.imshow(
            values, cmap="RdBu", vmin=-limit, vmax=limit, origin="lower", aspect="auto"
        )
    else:
        image = ax.imshow(values, cmap="viridis", vmin=0.0, vmax=1.0, origin="lower", aspect="auto")
    ax.set_xticks(range(len(surface.budgets)), [str(t) for t in surface.budgets])
    ax.set_yticks(range(len(surface.ks)), [str(k) for k in surface.ks])
    ax.set_xlabel(t_axis_label(surface.unit, t_note))
    ax.set_ylabel("samples K")
    fig.colorbar(image, ax=ax, label=label, shrink=0.9)
    if values.size <= 200:
        decimals = table_decimals(surface)
        flat = zero_width(surface, decimals)
        stars = significant(surface, decimals) if diverging else np.zeros(values.shape, bool)
        norm = image.norm
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                v = values[i, j]
                text = format_number(v, decimals, signed=diverging)
                text += "*" if stars[i, j] else ""
                text += "†" if flat[i, j] else ""
                shade = norm(v)
                dark = abs(shade - 0.5) > 0.3 if diverging else shade < 0.6
                ax.text(
                    j,
                    i,
                    text,
                    ha="center",
                    va="center",
                    fontsize=7 if decimals <= 3 else 6,
                    color="white" if dark else "black",
                )


def _heatmap_legend(surface: PassSurface, *, diverging: bool) -> str:
    """The marks a heat map shows, in words (for its title)."""
    decimals = table_decimals(surface)
    parts = []
    if diverging and significant(surface, decimals).any():
        parts.append(f"* : printed {surface.confidence:.0%} CI excludes 0")
    if zero_width(surface, decimals).any():
        parts.append("† : zero-width CI")
    return "; ".join(parts)


def _curves(
    ax: Any,
    surface: PassSurface,
    *,
    style: str = "-",
    band: bool = True,
    labels: bool = True,
    run: str = "",
    t_note: str = "",
) -> list[Any]:
    """One line per K (its fixed colour), a shaded CI band under each when ``band``;
    returns the line handles."""
    lines = []
    for i in _curve_ks(surface.ks):
        k = int(surface.ks[i])
        color = k_color(k)
        label = f"K={k}" if labels else f"_K={k}"
        (line,) = ax.plot(
            surface.budgets, surface.mean[i], style, marker="o", ms=3, color=color, label=label
        )
        lines.append(line)
        if band and surface.low is not None and surface.high is not None:
            of = f" of {run}" if run else ""
            ax.fill_between(
                surface.budgets,
                surface.low[i],
                surface.high[i],
                color=color,
                alpha=0.12,
                lw=0,
                label=f"{surface.confidence:.0%} CI{of}, K={k}",
            )
    ax.set_xlabel(t_axis_label(surface.unit, t_note))
    ax.set_ylabel("Pass@(K,T)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    budgets = np.asarray(surface.budgets)
    # geometric budgets (1, 2, 4, 8, ...) read best on a log axis, contiguous ones on a linear one
    if (
        len(budgets) > 2
        and budgets[-1] / max(budgets[0], 1) >= 8
        and len(set(np.diff(budgets))) > 1
    ):
        ax.set_xscale("log", base=2)
    ax.set_xticks(list(surface.budgets), [str(t) for t in surface.budgets])
    ax.minorticks_off()
    return lines


def _band_handle(surface: PassSurface, run: str = "") -> tuple[Any, str]:
    from matplotlib.patches import Patch

    of = f" of {run}" if run else ""
    return Patch(color="0.5", alpha=0.3, lw=0), (
        f"shaded: {surface.confidence:.0%} CI{of}\n(bootstrap over tasks)"
    )


def _footnote(fig: Any, text: str) -> None:
    """``text`` under the axes, wrapped to the figure's width."""
    if text:
        import textwrap

        width = int(fig.get_figwidth() * 15)
        fig.supxlabel("\n".join(textwrap.wrap(text, width)), fontsize=8, ha="center")


def surface_figure(
    surface: PassSurface, title: str, *, t_note: str = "", footnote: str = ""
) -> Any:
    """Heatmap of the surface and Pass@K-vs-T curves, side by side (a Figure); ``t_note``
    and ``footnote`` say what the T axis cannot (module doc)."""
    fig = new_figure(12.5, 4.6 + (0.4 if footnote else 0.0))
    left, right = fig.subplots(1, 2, width_ratios=[1.15, 1])
    _heatmap(left, fig, surface, t_note=t_note)
    marks = _heatmap_legend(surface, diverging=False)
    left.set_title("Pass@(K,T)" + (f"\n({marks})" if marks else ""), fontsize=10)
    lines = _curves(right, surface, t_note=t_note)
    right.set_title("Pass@K against the turn budget", fontsize=10)
    handles, names = lines, [line.get_label() for line in lines]
    if surface.low is not None:
        band, band_name = _band_handle(surface)
        handles, names = [*handles, band], [*names, band_name]
    legend_outside(right, handles, names)
    fig.suptitle(title, fontsize=11)
    _footnote(fig, footnote)
    return fig


def plot_surface(
    surface: PassSurface, path: str | Path, title: str, *, t_note: str = "", footnote: str = ""
) -> Path:
    """``surface_figure`` as a PNG at ``path``."""
    surface_figure(surface, title, t_note=t_note, footnote=footnote).savefig(path, dpi=130)
    return Path(path)


def comparison_figure(
    base: PassSurface,
    other: PassSurface,
    diff: PassSurface,
    base_label: str,
    other_label: str,
    title: str,
    *,
    t_note: str = "",
    footnote: str = "",
) -> Any:
    """Difference heatmap (``other - base``, diverging colormap) and curves of both runs
    (a Figure); ``t_note`` and ``footnote`` say what the T axis cannot (module doc)."""
    fig = new_figure(13.5, 4.8 + (0.4 if footnote else 0.0))
    left, right = fig.subplots(1, 2, width_ratios=[1.1, 1])
    _heatmap(left, fig, diff, diverging=True, label="difference in Pass@(K,T)", t_note=t_note)
    first, second = distinct_labels([_short(base_label), _short(other_label)], 40)
    marks = _heatmap_legend(diff, diverging=True)
    left.set_title(f"{second}\nminus {first}" + (f"\n({marks})" if marks else ""), fontsize=9)
    _curves(right, base, style="--", band=False, labels=False, t_note=t_note)
    lines = _curves(right, other, style="-", run=second, t_note=t_note)
    # one legend entry per K (colour), one per run (line style), one for the band
    handles, names = list(lines), [line.get_label() for line in lines]
    for style, label in (("--", first), ("-", second)):
        (line,) = right.plot([], [], style, color="0.3")
        handles.append(line)
        names.append(label)
    if other.low is not None:
        band, band_name = _band_handle(other, second)
        handles.append(band)
        names.append(band_name)
    right.set_title("Pass@K against the turn budget", fontsize=10)
    legend_outside(right, handles, names)
    fig.suptitle(title, fontsize=11)
    _footnote(fig, footnote)
    return fig


def plot_comparison(
    base: PassSurface,
    other: PassSurface,
    diff: PassSurface,
    path: str | Path,
    base_label: str,
    other_label: str,
    title: str,
    *,
    t_note: str = "",
    footnote: str = "",
) -> Path:
    """``comparison_figure`` as a PNG at ``path``."""
    figure = comparison_figure(
        base, other, diff, base_label, other_label, title, t_note=t_note, footnote=footnote
    )
    figure.savefig(path, dpi=130)
    return Path(path)


def _short(label: str) -> str:
    """A policy spec for a legend: the namespace before a slash goes (never cut: see
    ``distinct_labels``)."""
    return label.split("/", 1)[-1] if "/" in label.split(":", 1)[0] else label
