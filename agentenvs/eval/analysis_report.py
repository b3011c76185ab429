"""Figures of the step-quality, error-state and likelihood analyses.

- ``plot_step_quality(summary, path)``: grouped bars of P(A's action scores higher),
  P(B's) and P(tie) per kind of state (named as in the tables: ordinary, self-made
  error, injected error; side by side, as in the paper's bar charts) with bootstrap
  intervals, the mean action score of each policy, and, when there were continuation
  rollouts, each policy's success rate when continuing. The bars are shares of pairs;
  the verdict is the table's (``summary_markdown``), from the interval of A - B. The
  tables' rules hold on the bars: each value label sits above its interval's upper end
  (never on the error bar) and has the table's decimals (``decimals_for``), ``†`` marks
  an interval of zero width as printed (said under the figure), each panel's value axis
  ends just above its highest interval rather than at 1 (a 0.035 bar stays visible), and
  axes say what they measure in words (the env's action score, named per env).
- ``plot_likelihood(results, summary, path)``: the per-trajectory mean NLL under each
  model (nats per token) for successful and failed trajectories of each run (violins,
  each labelled with its n), the final cumulative log-likelihood ratio (nats;
  histograms) and its mean curve along the steps.

matplotlib is imported only here and only when drawing (``agentenvs[plot]``); figures
use the Agg canvas without touching pyplot's global state (``agentenvs.eval.figures``):
legends sit outside the axes, and run and model labels are shortened without two
becoming equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentenvs.eval.figures import distinct_labels, legend_outside, new_figure
from agentenvs.eval.printing import ZERO_WIDTH_NOTE, decimals_for, format_number

COLORS = {"a": "#c0392b", "b": "#2c7fb8", "tie": "#999999"}
#: the units of the likelihood figures and table (log-probabilities are natural logarithms)
NLL_UNITS = "nats per token"
LLR_UNITS = "nats"


#: what ``score_action`` measures on each env, for the mean-score axis
SCORE_MEANING = {
    "agentenvs/FrozenLake": "chance of reaching the goal (exact Q)",
    "agentenvs/DeepCoderMT": "share of unit tests passed",
    "agentenvs/InterCodeSQL": "the env's reward (IoU × Kendall tau)",
    "agentenvs/BFCL": "1 if the checker accepts the call, else 0",
    "agentenvs/TerminalBench": "share of the task's tests passed",
}


def score_axis_label(env_ids: Sequence[str]) -> str:
    """The mean-score axis's label: what an action's score is, in words, where one env
    (or several with one meaning) was analysed."""
    meanings = {
        next((m for prefix, m in SCORE_MEANING.items() if str(e).startswith(prefix)), "")
        for e in env_ids
    }
    meaning = meanings.pop() if len(meanings) == 1 else ""
    return "mean score of the sampled actions" + (f"\n({meaning})" if meaning else "")


def _metrics_decimals(metrics: Sequence[dict[str, float]]) -> int:
    """The decimals of a panel's value labels: the tables' rule over its points and bounds."""
    values = [[m["mean"], m.get("low", m["mean"]), m.get("high", m["mean"])] for m in metrics]
    widths = [m["high"] - m["low"] for m in metrics if "low" in m]
    return decimals_for(values, widths)


def _bar(
    ax: Any,
    x: float,
    metric: dict[str, float],
    width: float,
    color: str,
    label: str | None,
    decimals: int = 3,
) -> bool:
    """One bar with its interval and its value label above the interval's upper end;
    returns whether the interval is of zero width as printed (the label then ends in †)."""
    mean = metric["mean"]
    err = None
    flat = False
    top = mean
    if "low" in metric:
        err = [[max(mean - metric["low"], 0.0)], [max(metric["high"] - mean, 0.0)]]
        flat = format_number(metric["low"], decimals) == format_number(metric["high"], decimals)
        top = max(mean, metric["high"])
    ax.bar(x, mean, width, color=color, label=label, yerr=err, capsize=3)
    text = format_number(mean, decimals) + ("†" if flat else "")
    # offset in points from the interval's top, so no label sits on an error bar's cap
    ax.annotate(text, (x, max(top, 0.0)), xytext=(0, 3), textcoords="offset points",
                ha="center", va="bottom", fontsize=6.5)
    return flat


def _fit_value_axis(ax: Any, metrics: Sequence[dict[str, float]], floor: float | None = 0.0) -> None:
    """The value axis from ``floor`` (or the lowest bound) to a little above the highest
    bound, with room for the labels: small shares stay readable."""
    highs = [max(m["mean"], m.get("high", m["mean"])) for m in metrics]
    lows = [min(m["mean"], m.get("low", m["mean"])) for m in metrics]
    top = max([*highs, 1e-3])
    bottom = min(0.0, *lows) if floor is None else floor
    ax.set_ylim(bottom, top + 0.18 * (top - bottom))


def _kind_label(kind: str) -> str:
    """The name of a kind of state, the one the tables use."""
    from agentenvs.eval.printing import KIND_LABELS

    return KIND_LABELS.get(kind, kind)


def step_quality_figure(summary: dict[str, Any]) -> Any:
    """Bars per state kind, with CIs; a panel for continuation success if any (a Figure)."""
    order = ("ordinary", "self_error", "error")  # as the tables list them
    kinds = sorted(summary["kinds"], key=lambda k: order.index(k) if k in order else len(order))
    a_name, b_name = distinct_labels(
        [str(summary.get("policy_a", "A")), str(summary.get("policy_b", "B"))], 90
    )
    groups = {k: summary["kinds"][k]["all"] for k in kinds}
    has_cont = any("continuation" in g for g in groups.values())
    panels = 3 if has_cont else 2
    fig = new_figure(5.2 * panels, 4.3)
    axes = fig.subplots(1, panels)
    ax = axes[0]
    width = 0.26
    flat = False
    shares = [groups[k][m] for k in kinds for m in ("a_better", "b_better", "ties")]
    decimals = _metrics_decimals(shares)
    for i, kind in enumerate(kinds):
        g = groups[kind]
        first = i == 0
        # shares of pairs, not verdicts: the table gives those
        for dx, key, color, name in (
            (-width, "a_better", COLORS["a"], "P(A's action scores higher)"),
            (0.0, "b_better", COLORS["b"], "P(B's action scores higher)"),
            (width, "ties", COLORS["tie"], "P(tie)"),
        ):
            flat |= _bar(ax, i + dx, g[key], width, color, name if first else None, decimals)
    ax.set_xticks(
        range(len(kinds)),
        [
            f"{_kind_label(k)}\n(n={groups[k]['n_states']}, {groups[k].get('n_tasks', '?')} tasks)"
            for k in kinds
        ],
    )
    ax.set_xlim(-0.6, len(kinds) - 0.4)
    _fit_value_axis(ax, shares)
    ax.set_ylabel("share of action pairs (0 to 1)")
    ax.set_title("Which policy's action scores higher", fontsize=10)
    legend_outside(ax)

    ax = axes[1]
    scores = [groups[k][m] for k in kinds for m in ("mean_score_a", "mean_score_b")]
    decimals = _metrics_decimals(scores)
    for i, kind in enumerate(kinds):
        g = groups[kind]
        flat |= _bar(ax, i - width / 2, g["mean_score_a"], width, COLORS["a"],
                     "A" if i == 0 else None, decimals)
        flat |= _bar(ax, i + width / 2, g["mean_score_b"], width, COLORS["b"],
                     "B" if i == 0 else None, decimals)
    ax.set_xticks(range(len(kinds)), [_kind_label(k) for k in kinds])
    ax.set_xlim(-0.6, len(kinds) - 0.4)
    _fit_value_axis(ax, scores, floor=None)  # scores may be negative (InterCode's reward)
    ax.axhline(0, color="black", lw=0.5)
    env_ids = [summary.get("config", {}).get("env_id", "")] if "config" in summary else []
    for entry in summary["kinds"].values():
        env_ids += list(entry.get("by_env", {}))
    ax.set_ylabel(score_axis_label([e for e in env_ids if e]))
    ax.set_title("Mean score of the sampled actions", fontsize=10)
    legend_outside(ax)

    if has_cont:
        ax = axes[2]
        cont_kinds = [k for k in kinds if "continuation" in groups[k]]
        rates = [groups[k]["continuation"][m] for k in cont_kinds for m in ("success_a", "success_b")]
        decimals = _metrics_decimals(rates)
        for i, kind in enumerate(cont_kinds):
            c = groups[kind]["continuation"]
            flat |= _bar(ax, i - width / 2, c["success_a"], width, COLORS["a"],
                         "A" if i == 0 else None, decimals)
            flat |= _bar(ax, i + width / 2, c["success_b"], width, COLORS["b"],
                         "B" if i == 0 else None, decimals)
        ax.set_xticks(
            range(len(cont_kinds)),
            [
                f"from {_kind_label(k)}\n(n={groups[k]['continuation']['n_states']}, "
                f"{groups[k]['continuation'].get('n_tasks', '?')} tasks)"
                for k in cont_kinds
            ],
        )
        ax.set_xlim(-0.6, len(cont_kinds) - 0.4)
        _fit_value_axis(ax, rates)
        ax.set_ylabel("share of continuations that succeed (0 to 1)")
        rollouts = groups[cont_kinds[0]]["continuation"]["rollouts_per_state"]
        ax.set_title(f"Continuing to the end ({rollouts} rollouts per state)", fontsize=10)
        legend_outside(ax)
    fig.suptitle(f"A = {a_name}\nB = {b_name}", fontsize=9)
    interval = "; ".join(
        sorted({str(g.get("interval", "bootstrap over tasks")) for g in groups.values()})
    )
    level = max(float(g.get("confidence", 0.95)) for g in groups.values())
    note = f"Bars: means over states; whiskers: {level:.0%} intervals ({interval})."
    if flat:
        note += " " + ZERO_WIDTH_NOTE
    import textwrap

    fig.supxlabel("\n".join(textwrap.wrap(note, int(5.2 * panels * 15))), fontsize=7.5)
    return fig


def plot_step_quality(summary: dict[str, Any], path: str | Path) -> Path:
    """``step_quality_figure`` as a PNG at ``path``."""
    path = Path(path)
    step_quality_figure(summary).savefig(path, dpi=120)
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


def likelihood_figure(results: Sequence[dict[str, Any]], summary: dict[str, Any]) -> Any:
    """NLL distributions, final LLR histograms and mean cumulative LLR curves per group
    (a Figure)."""
    has_b = any(r.get("llr_cumulative") for r in results)
    runs = list(dict.fromkeys(r["run_label"] for r in results))
    groups = [(run, ok) for run in runs for ok in (True, False)]

    def members(run: str, ok: bool) -> list[dict[str, Any]]:
        return [r for r in results if r["run_label"] == run and bool(r["success"]) == ok]

    names = dict(zip(runs, distinct_labels(runs, 24), strict=True))
    labels = [
        f"{names[run]}\n{'success' if ok else 'failure'} (n={len(members(run, ok))})"
        for run, ok in groups
    ]

    # 2x2 leaves room for one tick label per (run, outcome) group
    fig = new_figure(11.0, 8.0) if has_b else new_figure(6.0, 4.0)
    axes = np.atleast_1d(fig.subplots(2, 2) if has_b else fig.subplots(1, 1)).ravel()
    model_a, model_b = distinct_labels(
        [str(summary.get("model_a", "A")), str(summary.get("model_b", "B"))]
    )
    _violin(
        axes[0],
        [np.array([r["mean_nll_a"] for r in members(*g)]) for g in groups],
        labels,
        f"mean NLL ({NLL_UNITS}), averaged over actions",
    )
    axes[0].set_title(f"NLL under A = {model_a}", fontsize=9)
    if has_b:
        _violin(
            axes[1],
            [np.array([r["mean_nll_b"] for r in members(*g)]) for g in groups],
            labels,
            f"mean NLL ({NLL_UNITS}), averaged over actions",
        )
        axes[1].set_title(f"NLL under B = {model_b}", fontsize=9)
        ax = axes[2]
        finals = [np.array([r["llr_cumulative"][-1] for r in members(*g)]) for g in groups]
        every = (
            np.concatenate([f for f in finals if len(f)])
            if any(len(f) for f in finals)
            else np.zeros(1)
        )
        bins = np.histogram_bin_edges(every, bins=min(30, max(5, len(every) // 4)))
        for f, lab in zip(finals, labels, strict=True):
            if len(f):
                ax.hist(f, bins=bins, alpha=0.5, label=lab)
        ax.set_xlabel(f"Σ_t log p_A(a_t|h_t) − log p_B(a_t|h_t) ({LLR_UNITS})")
        ax.set_ylabel("trajectories")
        ax.set_title("Final cumulative log-likelihood ratio", fontsize=9)
        legend_outside(ax, fontsize=6)
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
            ax.plot(np.arange(1, longest + 1), sums / counts, marker=".", label=lab)
        ax.axhline(0, color="black", lw=0.5)
        ax.set_xlabel("step t")
        ax.set_ylabel(f"mean cumulative LLR up to t ({LLR_UNITS})")
        ax.set_title("Cumulative LLR along trajectories", fontsize=9)
        legend_outside(ax, fontsize=6)
    return fig


def plot_likelihood(
    results: Sequence[dict[str, Any]], summary: dict[str, Any], path: str | Path
) -> Path:
    """``likelihood_figure`` as a PNG at ``path``."""
    path = Path(path)
    likelihood_figure(results, summary).savefig(path, dpi=120)
    return path
