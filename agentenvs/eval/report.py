"""Reports of a run: the K×T Pass@(K,T) surface as tables (Markdown, CSV, JSON) and plots.

``write_report(run_dir)`` reads ``trajectories.jsonl`` and writes, under
``run_dir/report`` by default:

- ``passk.md``, ``passk.csv``, ``passk.json``: the surface with bootstrap CIs;
- ``passk.png``: a heatmap of the surface and curves of Pass@K against T for several K.

With ``compare=OTHER_RUN_DIR`` it also writes ``comparison.*``: the surface of the other
run minus this one (a paired bootstrap over the tasks both runs share), drawn as a
heatmap with a diverging colormap next to the curves of both runs. The two runs' configs
must agree on everything but the policy (env id and env kwargs, tasks, samples,
budgets, mode, seed): a comparison across env settings would credit the policy with
the env's difference. ``allow_differences=True`` (``--allow-differences``) compares
anyway and records the differences in ``comparison.json``; the env id must always match.

Bootstrap intervals are percentile intervals over tasks. They are approximate: with
few tasks they cover less than their nominal level, and a cell where every task sits
at 0 or at 1 has an interval of zero width whatever the true uncertainty. Such cells
are flagged (``†`` in the tables, ``ci_unreliable`` in the JSON); see
``agentenvs.eval.passk.ci_reliability``.

How counts come from records: in ``derive`` mode c_T counts the samples whose first
success came within T turns; in ``rerun`` mode, the samples of the budget-T runs that
ended in success. An incomplete run is reported on what it has: each task uses the
samples it has (for ``rerun``, the first m sample indices present at every budget).

Faults (``agentenvs.eval.faults``) are reported beside the surface: the fault rate of the
run's env and of each task that saw one (``### Faults`` in ``passk.md``, ``faults`` in
``passk.json``), and every task left with fewer samples than the config's n (a run that
stopped on faults, or was interrupted): its estimate rests on the samples it has, and the
tables say so (``short_tasks``) rather than estimate it silently; resuming the run fills
it. No fault is ever a sample.

matplotlib is imported only when a plot is drawn (``pip install 'agentenvs[plot]'``);
figures are drawn on the Agg canvas without touching pyplot's global state.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agentenvs.eval.faults import fault_line, fault_markdown, read_fault_summary
from agentenvs.eval.passk import (
    PassSurface,
    ci_reliability,
    difference_surface,
    estimate_surface,
)
from agentenvs.eval.records import TRAJECTORIES_NAME, read_manifest, read_trajectories


@dataclass
class RunData:
    """What a report needs from a run: its config and per-task success data."""

    run_dir: Path
    config: dict[str, Any]
    #: derive: task -> {sample: first_success_turn or 0}; rerun: task -> {(sample, budget): success}
    outcomes: dict[str, dict[Any, Any]] = field(default_factory=dict)
    n_records: int = 0
    #: the run's fault summary (``agentenvs.eval.faults.fault_summary``)
    faults: dict[str, Any] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        return str(self.config["mode"])

    @property
    def budgets(self) -> list[int]:
        return [int(b) for b in self.config["budgets"]]

    @property
    def label(self) -> str:
        return str(self.config["policy"])

    def task_ids(self) -> list[str]:
        """Tasks with data, in the config's order."""
        return [t for t in self.config["task_ids"] if self.outcomes.get(t)]


def load_run(run_dir: str | Path) -> RunData:
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    data = RunData(run_dir=run_dir, config=manifest["config"])
    derive = data.mode == "derive"
    records = read_trajectories(run_dir / TRAJECTORIES_NAME)
    data.faults = read_fault_summary(records, run_dir)
    for record in records:
        per_task = data.outcomes.setdefault(str(record["task_id"]), {})
        if derive:
            per_task[int(record["sample"])] = int(record["first_success_turn"] or 0)
        else:
            per_task[(int(record["sample"]), int(record["budget"]))] = bool(record["success"])
        data.n_records += 1
    return data


def success_count_matrix(
    data: RunData, task_ids: Sequence[str], budgets: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """``(counts[task, budget], n[task])`` for the given tasks and budgets."""
    counts = np.zeros((len(task_ids), len(budgets)), dtype=np.int64)
    n = np.zeros(len(task_ids), dtype=np.int64)
    budgets_arr = np.asarray(budgets)
    for i, task in enumerate(task_ids):
        outcome = data.outcomes.get(task, {})
        if data.mode == "derive":
            first = np.fromiter(outcome.values(), dtype=np.int64, count=len(outcome))
            n[i] = len(first)
            counts[i] = ((first[:, None] >= 1) & (first[:, None] <= budgets_arr[None, :])).sum(0)
        else:
            by_budget: dict[int, set[int]] = defaultdict(set)
            for sample, budget in outcome:
                by_budget[budget].add(sample)
            # samples present at every budget, so n is one number per task
            common = set.intersection(*(by_budget.get(b, set()) for b in budgets))
            n[i] = len(common)
            for j, budget in enumerate(budgets):
                counts[i, j] = sum(outcome[(s, budget)] for s in common)
    return counts, n


def short_tasks(data: RunData) -> dict[str, int]:
    """Tasks of the config with fewer samples than its ``n`` (every budget counted as
    ``success_count_matrix`` does): task -> samples it has."""
    tasks = [str(t) for t in data.config["task_ids"]]
    _, n = success_count_matrix(data, tasks, data.budgets)
    wanted = int(data.config["n"])
    return {task: int(have) for task, have in zip(tasks, n, strict=True) if have < wanted}


def faults_markdown(data: RunData) -> str:
    """The run's faults and the tasks short of samples, as Markdown (for ``passk.md``)."""
    text = fault_markdown(data.faults, str(data.config["env_id"]))
    short = short_tasks(data)
    if short:
        wanted = int(data.config["n"])
        listed = ", ".join(f"{t} ({have} of {wanted})" for t, have in list(short.items())[:20])
        more = f" and {len(short) - 20} more" if len(short) > 20 else ""
        text += (
            f"\n{len(short)} task(s) have fewer than n = {wanted} samples (the run stopped "
            f"on faults or was interrupted; tasks with none are left out): {listed}{more}. "
            "Their estimates rest on the samples they have; resume the run to fill them.\n"
        )
    return text


def default_ks(n_min: int) -> list[int]:
    """Powers of two up to n, and n itself."""
    ks = [1 << i for i in range(n_min.bit_length()) if (1 << i) <= n_min]
    if ks[-1] != n_min:
        ks.append(n_min)
    return ks


def run_surface(
    data: RunData,
    *,
    ks: Sequence[int] | None = None,
    budgets: Sequence[int] | None = None,
    task_ids: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    keep_boot: bool = False,
) -> PassSurface:
    """The Pass@(K,T) surface of a run (over its config's budgets unless given)."""
    task_ids = list(task_ids if task_ids is not None else data.task_ids())
    budgets = list(budgets if budgets is not None else data.budgets)
    counts, n = success_count_matrix(data, task_ids, budgets)
    keep = n > 0
    if not keep.any():
        raise ValueError(f"{data.run_dir}: no finished trajectories to report on")
    counts, n = counts[keep], n[keep]
    ks = list(ks) if ks is not None else default_ks(int(n.min()))
    return estimate_surface(
        counts, n, ks, budgets, n_boot=n_boot, seed=seed, confidence=confidence,
        keep_boot=keep_boot,
    )


# ---------------------------------------------------------------- tables
def _cell(surface: PassSurface, i: int, j: int, signed: bool = False) -> str:
    fmt = "{:+.3f}" if signed else "{:.3f}"
    text = fmt.format(surface.mean[i, j])
    if surface.low is not None and surface.high is not None:
        text += f" [{surface.low[i, j]:.2f}, {surface.high[i, j]:.2f}]"
        if surface.at_bound is not None and surface.at_bound[i, j]:
            text += " †"
    return text


def surface_markdown(surface: PassSurface, title: str, *, signed: bool = False) -> str:
    """A Markdown table: one row per K, one column per T, mean [CI] in each cell."""
    ci = (
        f", {surface.confidence:.0%} bootstrap CI over tasks in brackets"
        if surface.low is not None
        else ""
    )
    lines = [
        f"### {title}",
        "",
        f"{surface.n_tasks} tasks, n = {', '.join(map(str, sorted(set(surface.n_samples))))} "
        f"samples per task{ci}.",
        "",
        "| K \\ T | " + " | ".join(str(t) for t in surface.budgets) + " |",
        "|---|" + "---|" * len(surface.budgets),
    ]
    for i, k in enumerate(surface.ks):
        cells = [_cell(surface, i, j, signed) for j in range(len(surface.budgets))]
        lines.append(f"| **{k}** | " + " | ".join(cells) + " |")
    if surface.low is not None:
        reliability = ci_reliability(surface)
        if reliability["few_tasks"]:
            lines += ["", f"Intervals are approximate: {reliability['notes'][0]}."]
        if reliability["cells_at_bound"]:
            lines += ["", "† every task at 0 or every task at 1: a zero-width interval that "
                      "says nothing about the uncertainty."]
    return "\n".join(lines) + "\n"


def surface_csv(surface: PassSurface) -> str:
    """Long format: one row per (K, T)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["k", "t", "pass", "low", "high"])
    for i, k in enumerate(surface.ks):
        for j, t in enumerate(surface.budgets):
            low = "" if surface.low is None else f"{surface.low[i, j]:.6f}"
            high = "" if surface.high is None else f"{surface.high[i, j]:.6f}"
            writer.writerow([int(k), int(t), f"{surface.mean[i, j]:.6f}", low, high])
    return buf.getvalue()


def _write_tables(
    surface: PassSurface, out_dir: Path, stem: str, title: str, meta: dict[str, Any],
    *, signed: bool = False, notes: str = "",
) -> list[Path]:
    paths = [out_dir / f"{stem}.md", out_dir / f"{stem}.csv", out_dir / f"{stem}.json"]
    table = surface_markdown(surface, title, signed=signed)
    paths[0].write_text(table + (f"\n{notes}" if notes else ""))
    paths[1].write_text(surface_csv(surface))
    paths[2].write_text(json.dumps({**meta, "surface": surface.to_dict()}, indent=2) + "\n")
    return paths


# ---------------------------------------------------------------- plots
def _figure(width: float, height: float) -> Any:
    from agentenvs.core.errors import require

    require("matplotlib", "plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _curve_ks(ks: np.ndarray, most: int = 5) -> list[int]:
    """Up to ``most`` K values spread over the grid, always the first and the last."""
    if len(ks) <= most:
        return list(range(len(ks)))
    picks = np.unique(np.round(np.linspace(0, len(ks) - 1, most)).astype(int))
    return [int(i) for i in picks]


def _heatmap(
    ax: Any, fig: Any, surface: PassSurface, *, diverging: bool = False, label: str = "Pass@(K,T)"
) -> None:
    values = surface.mean
    if diverging:
        # symmetric limits so white is exactly "no difference"
        limit = max(float(np.nanmax(np.abs(values))), 1e-3)
        image = ax.imshow(values, cmap="RdBu", vmin=-limit, vmax=limit, origin="lower", aspect="auto")
    else:
        image = ax.imshow(values, cmap="viridis", vmin=0.0, vmax=1.0, origin="lower", aspect="auto")
    ax.set_xticks(range(len(surface.budgets)), [str(t) for t in surface.budgets])
    ax.set_yticks(range(len(surface.ks)), [str(k) for k in surface.ks])
    ax.set_xlabel("turn budget T")
    ax.set_ylabel("samples K")
    fig.colorbar(image, ax=ax, label=label, shrink=0.9)
    if values.size <= 200:
        norm = image.norm
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                v = values[i, j]
                text = f"{v:+.2f}" if diverging else f"{v:.2f}"
                significant = (
                    surface.low is not None
                    and surface.high is not None
                    and (surface.low[i, j] > 0 or surface.high[i, j] < 0)
                )
                if diverging and significant:
                    text += "*"
                shade = norm(v)
                dark = abs(shade - 0.5) > 0.3 if diverging else shade < 0.6
                ax.text(
                    j, i, text, ha="center", va="center", fontsize=7,
                    color="white" if dark else "black",
                )


def _curves(
    ax: Any, surface: PassSurface, *, style: str = "-", colors: Any = None, band: bool = True,
    labels: bool = True,
) -> None:
    for n_color, i in enumerate(_curve_ks(surface.ks)):
        color = None if colors is None else colors[n_color % len(colors)]
        label = f"K={surface.ks[i]}" if labels else None
        ax.plot(surface.budgets, surface.mean[i], style, marker="o", ms=3, color=color, label=label)
        if band and surface.low is not None and surface.high is not None:
            ax.fill_between(surface.budgets, surface.low[i], surface.high[i], color=color, alpha=0.12, lw=0)
    ax.set_xlabel("turn budget T")
    ax.set_ylabel("Pass@(K,T)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    budgets = np.asarray(surface.budgets)
    # geometric budgets (1, 2, 4, 8, ...) read best on a log axis, contiguous ones on a linear one
    if len(budgets) > 2 and budgets[-1] / max(budgets[0], 1) >= 8 and len(set(np.diff(budgets))) > 1:
        ax.set_xscale("log", base=2)
    ax.set_xticks(list(surface.budgets), [str(t) for t in surface.budgets])
    ax.minorticks_off()


def plot_surface(surface: PassSurface, path: str | Path, title: str) -> Path:
    """Heatmap of the surface and Pass@K-vs-T curves, side by side, as a PNG."""
    fig = _figure(12, 4.6)
    left, right = fig.subplots(1, 2, width_ratios=[1.15, 1])
    _heatmap(left, fig, surface)
    left.set_title("Pass@(K,T)")
    _curves(right, surface, colors=_palette(len(_curve_ks(surface.ks))))
    right.set_title("Pass@K against the turn budget")
    right.legend(fontsize=8, loc="upper left")
    fig.suptitle(title, fontsize=11)
    fig.savefig(path, dpi=130)
    return Path(path)


def _palette(count: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["plasma"]
    return [cmap(x) for x in np.linspace(0.0, 0.85, max(count, 1))]


def plot_comparison(
    base: PassSurface, other: PassSurface, diff: PassSurface, path: str | Path,
    base_label: str, other_label: str, title: str,
) -> Path:
    """Difference heatmap (``other - base``, diverging colormap) and curves of both runs."""
    fig = _figure(13, 4.8)
    left, right = fig.subplots(1, 2, width_ratios=[1.1, 1])
    _heatmap(left, fig, diff, diverging=True, label="difference in Pass@(K,T)")
    left.set_title(f"{_short(other_label)} minus {_short(base_label)}\n(* : CI excludes 0)", fontsize=9)
    colors = _palette(len(_curve_ks(base.ks)))
    _curves(right, base, style="--", colors=colors, band=False, labels=False)
    _curves(right, other, style="-", colors=colors)
    # one legend entry per K (colour) plus one per run (line style)
    handles, names = right.get_legend_handles_labels()
    for style, label in (("--", base_label), ("-", other_label)):
        (line,) = right.plot([], [], style, color="0.3")
        handles.append(line)
        names.append(_short(label))
    right.set_title("Pass@K against the turn budget", fontsize=10)
    right.legend(handles, names, fontsize=7, loc="upper left")
    fig.suptitle(title, fontsize=11)
    fig.savefig(path, dpi=130)
    return Path(path)


def _short(label: str, most: int = 40) -> str:
    """A policy spec short enough for a legend: drop the namespace before a slash."""
    text = label.split("/", 1)[-1] if "/" in label.split(":", 1)[0] else label
    return text if len(text) <= most else text[: most - 1] + "…"


# ---------------------------------------------------------------- the report
@dataclass
class ReportResult:
    out_dir: Path
    surface: PassSurface
    files: list[Path]
    comparison: PassSurface | None = None


def _meta(data: RunData) -> dict[str, Any]:
    cfg = data.config
    return {
        "run_dir": str(data.run_dir),
        "env_id": cfg["env_id"],
        "policy": cfg["policy"],
        "mode": cfg["mode"],
        "seed": cfg["seed"],
        "trajectories": data.n_records,
        "faults": data.faults,
        "short_tasks": short_tasks(data),
    }


#: config keys that may differ between two runs that are compared (what is compared)
COMPARED_KEYS = ("policy", "info_keys")


def config_differences(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Config entries (other than the policy) in which two runs differ: key -> (a, b)."""
    keys = sorted((set(first) | set(second)) - set(COMPARED_KEYS))
    return {k: (first.get(k), second.get(k)) for k in keys if first.get(k) != second.get(k)}


def write_report(
    run_dir: str | Path,
    *,
    out_dir: str | Path | None = None,
    compare: str | Path | None = None,
    allow_differences: bool = False,
    ks: Sequence[int] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    plots: bool = True,
) -> ReportResult:
    """Tables and plots of ``run_dir`` (and of ``compare`` minus it, when given)."""
    data = load_run(run_dir)
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    title = f"{data.label} on {data.config['env_id']} ({data.mode} mode)"
    surface = run_surface(data, ks=ks, n_boot=n_boot, seed=seed, confidence=confidence)
    files = _write_tables(surface, out, "passk", title, _meta(data), notes=faults_markdown(data))
    if plots:
        files.append(plot_surface(surface, out / "passk.png", title))
    result = ReportResult(out_dir=out, surface=surface, files=files)
    if compare is None:
        return result

    other = load_run(compare)
    if other.config["env_id"] != data.config["env_id"]:
        raise ValueError(
            f"cannot compare runs on different envs: {data.config['env_id']} vs {other.config['env_id']}"
        )
    differences = config_differences(data.config, other.config)
    if differences and not allow_differences:
        detail = "; ".join(f"{k}: {a!r} vs {b!r}" for k, (a, b) in differences.items())
        raise ValueError(
            f"{run_dir} and {compare} differ in more than the policy ({detail}); the "
            "difference would mix the policies with these settings. Compare runs made with "
            "the same settings, or pass --allow-differences (allow_differences=True)"
        )
    other_tasks = set(other.task_ids())
    tasks = [t for t in data.task_ids() if t in other_tasks]
    budgets = sorted(set(data.budgets) & set(other.budgets))
    if not tasks or not budgets:
        raise ValueError("the two runs share no tasks or no budgets")
    _, n_a = success_count_matrix(data, tasks, budgets)
    _, n_b = success_count_matrix(other, tasks, budgets)
    tasks = [t for t, a, b in zip(tasks, n_a, n_b, strict=True) if a > 0 and b > 0]
    n_min = int(min(n_a[n_a > 0].min(), n_b[n_b > 0].min()))
    grid_ks = [k for k in (ks or default_ks(n_min)) if k <= n_min]
    # same seed and task list: the resamples pair up task by task
    common = dict(ks=grid_ks, budgets=budgets, task_ids=tasks, n_boot=n_boot, seed=seed,
                  confidence=confidence, keep_boot=True)
    base = run_surface(data, **common)
    second = run_surface(other, **common)
    diff = difference_surface(base, second)
    diff_title = f"{other.label} minus {data.label} on {data.config['env_id']}"
    meta = {"first": _meta(data), "second": _meta(other), "tasks": len(tasks),
            "config_differences": {k: list(v) for k, v in differences.items()}}
    notes = "".join(
        f"{run.label}: {fault_line(run.faults)}.\n\n" for run in (data, other)
    ) + "".join(
        f"{run.label}: {len(short)} task(s) short of n samples: "
        f"{', '.join(list(short)[:10])}.\n\n"
        for run in (data, other)
        if (short := short_tasks(run))
    )
    files += _write_tables(
        diff, out, "comparison", diff_title, meta, signed=True, notes="### Faults\n\n" + notes
    )
    for name, surf, run in (("first", base, data), ("second", second, other)):
        (out / f"comparison_{name}.md").write_text(
            surface_markdown(surf, f"{run.label} (shared tasks and budgets)")
        )
        files.append(out / f"comparison_{name}.md")
    if plots:
        files.append(
            plot_comparison(
                base, second, diff, out / "comparison.png", data.label, other.label,
                f"Pass@(K,T) on {data.config['env_id']}: {other.label} vs {data.label}",
            )
        )
    result.comparison = diff
    return result
