"""Figures of the step-quality, error-state and likelihood analyses.

- ``plot_step_quality(summary, path)``: grouped bars of P(A better), P(B better) and
  P(tie) per state kind (ordinary and error side by side, as in the paper's bar charts)
  with bootstrap intervals, the mean action score of each policy, and, when there were
  continuation rollouts, each policy's success rate when continuing.
- ``plot_likelihood(results, summary, path)``: the per-trajectory mean NLL under each
  model for successful and failed trajectories of each run (violins), the final
  cumulative log-likelihood ratio (histograms) and its mean curve along the steps.

matplotlib is imported only here and only when drawing (``agentenvs[plot]``); figures
use the Agg canvas without touching pyplot's global state.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

COLORS = {"a": "#c0392b", "b": "#2c7fb8", "tie": "#999999"}


def _figure(width: float, height: float) -> Any:
    from agentenvs.core.errors import require

    require("matplotlib", "plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _bar(ax: Any, x: float, metric: dict[str, float], width: float, color: str, label: str | None) -> None:
    mean = metric["mean"]
    err = None
    if "low" in metric:
        err = [[max(mean - metric["low"], 0.0)], [max(metric["high"] - mean, 0.0)]]
    ax.bar(x, mean, width, color=color, label=label, yerr=err, capsize=3)
    ax.text(x, mean + 0.01, f"{mean:.0%}", ha="center", va="bottom", fontsize=7)


def _short(spec: str, most: int = 40) -> str:
    return spec if len(spec) <= most else spec[: most - 1] + "…"


def plot_step_quality(summary: dict[str, Any], path: str | Path) -> Path:
    """Bars per state kind, with CIs; a second row for continuation success if any."""
    path = Path(path)
    kinds = list(summary["kinds"])
    a_name = _short(str(summary.get("policy_a", "A")), 90)
    b_name = _short(str(summary.get("policy_b", "B")), 90)
    groups = {k: summary["kinds"][k]["all"] for k in kinds}
    has_cont = any("continuation" in g for g in groups.values())
    panels = 3 if has_cont else 2
    fig = _figure(4.2 * panels, 3.8)
    axes = fig.subplots(1, panels)
    ax = axes[0]
    width = 0.26
    for i, kind in enumerate(kinds):
        g = groups[kind]
        first = i == 0
        _bar(ax, i - width, g["a_better"], width, COLORS["a"], "A better" if first else None)
        _bar(ax, i, g["b_better"], width, COLORS["b"], "B better" if first else None)
        _bar(ax, i + width, g["ties"], width, COLORS["tie"], "tie" if first else None)
    labels = {"self_error": "self-made error", "error": "injected error"}
    ax.set_xticks(
        range(len(kinds)),
        [f"{labels.get(k, k)}\n(n={groups[k]['n_states']}, {groups[k].get('n_tasks', '?')} tasks)"
         for k in kinds],
    )
    ax.set_xlim(-0.6, len(kinds) - 0.4)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share of action pairs")
    ax.set_title("Which policy's action scores higher")
    ax.legend(fontsize=7, loc="upper left")

    ax = axes[1]
    for i, kind in enumerate(kinds):
        g = groups[kind]
        _bar(ax, i - width / 2, g["mean_score_a"], width, COLORS["a"], "A" if i == 0 else None)
        _bar(ax, i + width / 2, g["mean_score_b"], width, COLORS["b"], "B" if i == 0 else None)
    ax.set_xticks(range(len(kinds)), [f"{k} states" for k in kinds])
    ax.set_xlim(-0.6, len(kinds) - 0.4)
    ax.axhline(0, color="black", lw=0.5)  # scores may be negative (InterCode's reward)
    ax.set_ylabel("mean score_action of sampled actions")
    ax.set_title("Mean action score")
    ax.legend(fontsize=7, loc="upper left")

    if has_cont:
        ax = axes[2]
        cont_kinds = [k for k in kinds if "continuation" in groups[k]]
        for i, kind in enumerate(cont_kinds):
            c = groups[kind]["continuation"]
            _bar(ax, i - width / 2, c["success_a"], width, COLORS["a"], "A" if i == 0 else None)
            _bar(ax, i + width / 2, c["success_b"], width, COLORS["b"], "B" if i == 0 else None)
        ax.set_xticks(range(len(cont_kinds)), [f"from {k} states" for k in cont_kinds])
        ax.set_xlim(-0.6, len(cont_kinds) - 0.4)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("success rate of continuations")
        rollouts = groups[cont_kinds[0]]["continuation"]["rollouts_per_state"]
        ax.set_title(f"Continuing to the end ({rollouts} rollouts/state)")
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"A = {a_name}\nB = {b_name}", fontsize=9)
    fig.savefig(path, dpi=120)
    return path


def _violin(ax: Any, data: Sequence[np.ndarray], labels: Sequence[str], ylabel: str) -> None:
    shown = [(d, lab) for d, lab in zip(data, labels, strict=True) if len(d)]
    if not shown:
        ax.text(0.5, 0.5, "no data", ha="center", transform=ax.transAxes)
        return
    values = [d for d, _ in shown]
    if all(len(d) > 1 for d in values):
        ax.violinplot(values, showmeans=True)
    else:
        ax.boxplot(values)
    ax.set_xticks(range(1, len(shown) + 1), [lab for _, lab in shown], fontsize=7)
    ax.set_ylabel(ylabel)


def plot_likelihood(
    results: Sequence[dict[str, Any]], summary: dict[str, Any], path: str | Path
) -> Path:
    """NLL distributions, final LLR histograms and mean cumulative LLR curves per group."""
    path = Path(path)
    has_b = any(r.get("llr_cumulative") for r in results)
    runs = list(dict.fromkeys(r["run_label"] for r in results))
    groups = [(run, ok) for run in runs for ok in (True, False)]
    labels = [f"{_short(run, 24)}\n{'success' if ok else 'failure'}" for run, ok in groups]

    def members(run: str, ok: bool) -> list[dict[str, Any]]:
        return [r for r in results if r["run_label"] == run and bool(r["success"]) == ok]

    # 2x2 leaves room for one tick label per (run, outcome) group
    fig = _figure(11.0, 8.0) if has_b else _figure(6.0, 4.0)
    axes = np.atleast_1d(fig.subplots(2, 2) if has_b else fig.subplots(1, 1)).ravel()
    model_a = _short(str(summary.get("model_a", "A")))
    _violin(
        axes[0],
        [np.array([r["mean_nll_a"] for r in members(*g)]) for g in groups],
        labels,
        "mean NLL per token, averaged over actions",
    )
    axes[0].set_title(f"NLL under A = {model_a}", fontsize=9)
    if has_b:
        model_b = _short(str(summary.get("model_b", "B")))
        _violin(
            axes[1],
            [np.array([r["mean_nll_b"] for r in members(*g)]) for g in groups],
            labels,
            "mean NLL per token, averaged over actions",
        )
        axes[1].set_title(f"NLL under B = {model_b}", fontsize=9)
        ax = axes[2]
        finals = [np.array([r["llr_cumulative"][-1] for r in members(*g)]) for g in groups]
        every = np.concatenate([f for f in finals if len(f)]) if any(len(f) for f in finals) else np.zeros(1)
        bins = np.histogram_bin_edges(every, bins=min(30, max(5, len(every) // 4)))
        for f, lab in zip(finals, labels, strict=True):
            if len(f):
                ax.hist(f, bins=bins, alpha=0.5, label=lab.replace("\n", " "))
        ax.set_xlabel("Σ_t log p_A(a_t|h_t) − log p_B(a_t|h_t)")
        ax.set_ylabel("trajectories")
        ax.set_title("Final cumulative log-likelihood ratio", fontsize=9)
        ax.legend(fontsize=6)
        ax = axes[3]
        for (run, ok), lab in zip(groups, labels, strict=True):
            curves = [r["llr_cumulative"] for r in members(run, ok)]
            if not curves:
                continue
            longest = max(len(c) for c in curves)
            # mean over the trajectories still running at each step
            sums, counts = np.zeros(longest), np.zeros(longest)
            for c in curves:
                sums[: len(c)] += c
                counts[: len(c)] += 1
            ax.plot(np.arange(1, longest + 1), sums / counts, marker=".", label=lab.replace("\n", " "))
        ax.axhline(0, color="black", lw=0.5)
        ax.set_xlabel("step t")
        ax.set_ylabel("mean cumulative LLR up to t")
        ax.set_title("Cumulative LLR along trajectories", fontsize=9)
        ax.legend(fontsize=6)
    fig.savefig(path, dpi=120)
    return path
