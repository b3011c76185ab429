"""Reports of a run: the K×T Pass@(K,T) surface as tables (Markdown, CSV, JSON) and plots.

``write_report(run_dir)`` reads ``trajectories.jsonl`` and writes, under
``run_dir/report`` by default:

- ``passk.md``, ``passk.csv``, ``passk.json``: the surface of this run alone, on all of
  its tasks and budgets, with bootstrap CIs;
- ``passk.png``: a heatmap of the surface and curves of Pass@K against T for several K;
- ``index.md`` and ``index.html``: one page for the folder: what was run (env, policies,
  mode, budgets, samples, tasks), the headline numbers (Pass@1 and Pass@n at the
  largest budget; with a comparison, their differences and verdicts) and a link to every
  table and figure. ``report_summary(result)`` is the few lines ``agentenvs report``
  prints: the headline and the paths; the tables themselves stay in the files.

With ``compare=OTHER_RUN_DIR`` it also writes ``comparison.*``: the surface of the other
run minus this one (a paired bootstrap over the tasks both runs share), followed in
``comparison.md`` by each run's own table on that shared grid (tasks, budgets, K), and
drawn as a heatmap with a diverging colormap next to the curves of both runs; ``passk.md``
then holds both runs' own tables, each on all of its tasks and budgets. The two
runs' configs must agree on everything but the policy (env id and env kwargs, tasks,
samples, budgets, mode, seed): a comparison across env settings would credit the policy
with the env's difference. ``allow_differences=True`` (``--allow-differences``) compares
anyway and records the differences in ``comparison.json``; the env id must always match.

How numbers are printed, in every table and heat map: a point and its interval have the
same decimals, 3 or more (up to 4) so that every nonzero value and interval width of the
table shows as nonzero (``table_decimals``); ``†`` marks every interval of zero width
(its bounds print equal) and, in a difference, ``*`` every interval that excludes 0 as
printed; the legend under each table says what the marks mean, and the JSON lists the
marked cells (``marks``).

Bootstrap intervals are percentile intervals over tasks. They are approximate: with
few tasks they cover less than their nominal level, and a cell where every task sits
at 0 or at 1 has an interval of zero width whatever the true uncertainty (``†``;
``ci_unreliable`` in the JSON; see ``agentenvs.eval.passk.ci_reliability``).

What the T axis cannot say is written under the table (``budget_notes``; ``notes`` in
the JSON): when every trajectory ended by a turn t0 below the largest budget, the
columns from t0 on repeat (BFCL's single turn swept over T = 1, 2, 3); and in rerun
mode, when the policy sees its budget (the env's ``show_budget``, or a policy that
plans on the turns left), each T is another behaviour, so Pass@(K,T) need not grow
with T. The figures say both where they are drawn (``figure_notes``): the T axis's label
reads "no effect" when no budget bound, and a footnote says when each T is a run of a
policy that plans on its turns left.

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
figures are drawn on the Agg canvas without touching pyplot's global state
(``agentenvs.eval.figures``): each K has one colour in every figure, legends sit outside
the data, shaded bands are labelled as the CIs they are, and run labels are never cut.
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
from agentenvs.eval.paired import (
    PairedComparison,
    budget_label,
    paired_comparison,
    paired_markdown,
)
from agentenvs.eval.passk import (
    MIN_TASKS_FOR_CI,
    PassSurface,
    ci_reliability,
    difference_surface,
    estimate_surface,
)
from agentenvs.eval.passk_plots import plot_comparison, plot_surface
from agentenvs.eval.printing import (
    STAR_NOTE,
    ZERO_WIDTH_NOTE,
    format_number,
    grid_cells,
    significant,
    table_decimals,
    zero_width,
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
    #: budget -> the most turns a trajectory of that budget took
    longest: dict[int, int] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        return str(self.config["mode"])

    @property
    def budgets(self) -> list[int]:
        return [int(b) for b in self.config["budgets"]]

    @property
    def label(self) -> str:
        return str(self.config["policy"])

    @property
    def unit(self) -> str:
        """What the budgets count: turns, tokens or seconds."""
        return str(self.config.get("budget_unit", "turns"))

    def task_ids(self) -> list[str]:
        """Tasks with data, in the config's order."""
        return [t for t in self.config["task_ids"] if self.outcomes.get(t)]


def load_run(run_dir: str | Path) -> RunData:
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    data = RunData(run_dir=run_dir, config=manifest["config"])
    derive = data.mode == "derive"
    # a cost budget: success within B is read off the cumulative cost at first success
    first = "first_success_turn" if data.unit == "turns" else "first_success_cost"
    records = read_trajectories(run_dir / TRAJECTORIES_NAME)
    data.faults = read_fault_summary(records, run_dir)
    for record in records:
        per_task = data.outcomes.setdefault(str(record["task_id"]), {})
        if derive:
            per_task[int(record["sample"])] = float(record.get(first) or 0)
        else:
            per_task[(int(record["sample"]), int(record["budget"]))] = bool(record["success"])
        if data.unit == "turns":
            budget = int(record["budget"])
            longest = max(data.longest.get(budget, 0), int(record.get("turns") or 0))
            data.longest[budget] = longest
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
            # the turn (or cumulative cost) of first success; 0: never succeeded
            first = np.fromiter(outcome.values(), dtype=np.float64, count=len(outcome))
            n[i] = len(first)
            counts[i] = ((first[:, None] > 0) & (first[:, None] <= budgets_arr[None, :])).sum(0)
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


def _budget_visible(data: RunData) -> str | None:
    """Why the run's policy sees its budget, or None: the env shows it (``show_budget``),
    the cost budget is shown, or the policy plans on the turns left (``conditions_on_budget``)."""
    if data.unit != "turns":
        return f"it is shown its {data.unit} left (show_budget)" if data.config.get("show_budget") else None
    if data.config.get("env_kwargs", {}).get("show_budget"):
        return "the env shows it (show_budget=True)"
    try:
        from agentenvs.policy.base import conditions_on_budget
        from agentenvs.policy.registry import policy_factory

        plans = conditions_on_budget(policy_factory(str(data.config["policy"])))
    except Exception:  # a policy of a module this process has not imported
        return None
    return "it plans on the turns left (conditions_on_budget)" if plans else None


def budget_notes(data: RunData, budgets: Sequence[int] | None = None) -> list[str]:
    """What the T axis of the run's surface over ``budgets`` cannot say, as sentences.

    - Every trajectory (of the largest budget's runs, in rerun mode) ended by turn
      t0 < max T: no budget from t0 on ever bound, so those columns repeat (derive:
      exactly; rerun: up to sampling, each being its own run).
    - Rerun mode with a policy that sees its budget: every T is another behaviour,
      not a cut of one longer episode, so Pass@(K,T) need not grow with T.
    """
    budgets = sorted(int(b) for b in (budgets if budgets is not None else data.budgets))
    notes = []
    t0 = data.longest.get(budgets[-1])
    if t0 is not None and t0 < budgets[-1]:
        unbound = [t for t in budgets if t >= t0]
        columns = ", ".join(map(str, unbound))
        how = (
            "repeat one another exactly"
            if data.mode == "derive"
            else "differ only by sampling (each is its own run)"
        )
        where = "" if data.mode == "derive" else f" of the largest budget (T = {budgets[-1]})"
        sentence = (
            f"Every trajectory{where} ended by turn {t0} (the longest took {t0} turn"
            f"{'s' if t0 != 1 else ''}), so no budget from T = {unbound[0]} on ever bound: "
            f"the columns T = {columns} {how}"
        )
        if len(unbound) == len(budgets):
            sentence += "; the T axis carries no information here"
        notes.append(sentence + ".")
    visible = _budget_visible(data) if data.mode == "rerun" else None
    if visible:
        notes.append(
            f"The policy sees its turn budget: {visible}. Each T is a run of its own with "
            "behaviour that depends on T, not a cut of one longer episode, so Pass@(K,T) "
            "need not grow with T (with more turns a policy can take a riskier path, or err "
            "more often before it ends)."
        )
    return notes


@dataclass
class FigureNotes:
    """What a figure of the surface says about its T axis (``figure_notes``)."""

    #: appended to the T axis's label where no budget bound ("" otherwise)
    t_axis: str = ""
    #: a footnote under the figure ("" for none)
    footnote: str = ""


def figure_notes(runs: Sequence[RunData], budgets: Sequence[int] | None = None) -> FigureNotes:
    """The notes of ``budget_notes`` that a figure of these runs over ``budgets`` must carry:
    T with no effect at all (every trajectory of every run ended by the smallest budget),
    and a policy that sees its budget in rerun mode (Pass@(K,T) need not grow with T)."""
    notes = FigureNotes()
    ends = []
    for run in runs:
        chosen = sorted(int(b) for b in (budgets if budgets is not None else run.budgets))
        ends.append((run.longest.get(chosen[-1]), chosen))
    if ends and all(t0 is not None and t0 <= chosen[0] for t0, chosen in ends):
        t0 = max(t0 for t0, _ in ends if t0 is not None)
        notes.t_axis = f"no effect here: every episode ended by turn {t0}"
    seen = [run.label for run in runs if run.mode == "rerun" and _budget_visible(run)]
    if seen:
        who = "the policy sees" if len(runs) == 1 else (
            "both policies see" if len(seen) == len(runs) else f"{seen[0]} sees"
        )
        notes.footnote = (
            f"Each T is a run of its own and {who} its budget (plans on the turns left), so "
            "Pass@(K,T) need not grow with T: with more turns a policy may take a longer, "
            "safer route and err more often on the way (see the report's notes)."
        )
    return notes


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
        raise ValueError(
            f"{data.run_dir}: no task has a finished sample at every budget yet: nothing to "
            "report on (resume the run to finish it)"
        )
    counts, n = counts[keep], n[keep]
    ks = list(ks) if ks is not None else default_ks(int(n.min()))
    return estimate_surface(
        counts,
        n,
        ks,
        budgets,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
        keep_boot=keep_boot,
        unit=data.unit,
    )


# ---------------------------------------------------------------- tables
def _cell(surface: PassSurface, i: int, j: int, decimals: int, signed: bool = False) -> str:
    text = format_number(surface.mean[i, j], decimals, signed)
    if surface.low is not None and surface.high is not None:
        low = format_number(surface.low[i, j], decimals, signed)
        high = format_number(surface.high[i, j], decimals, signed)
        text += f" [{low}, {high}]"
        if zero_width(surface, decimals)[i, j]:
            text += " †"
        if signed and significant(surface, decimals)[i, j]:
            text += " *"
    return text


def surface_markdown(
    surface: PassSurface, title: str, *, signed: bool = False, description: str = ""
) -> str:
    """A Markdown table: one row per K, one column per T, mean [CI] in each cell.

    Points and intervals share one number of decimals (``table_decimals``); ``†`` marks
    every zero-width interval and, in a difference (``signed``), ``*`` every interval
    that excludes 0 as printed; the legend under the table says so.
    """
    decimals = table_decimals(surface)
    ci = (
        f", {surface.confidence:.0%} bootstrap CI over tasks in brackets"
        if surface.low is not None
        else ""
    )
    lines = [f"### {title}", ""]
    if description:
        lines += [description, ""]
    lines += [
        f"{surface.n_tasks} tasks, n = {', '.join(map(str, sorted(set(surface.n_samples))))} "
        f"samples per task{ci}.",
        "",
        f"| K \\ {budget_label(surface.unit)} | " + " | ".join(str(t) for t in surface.budgets) + " |",
        "|---|" + "---|" * len(surface.budgets),
    ]
    for i, k in enumerate(surface.ks):
        cells = [_cell(surface, i, j, decimals, signed) for j in range(len(surface.budgets))]
        lines.append(f"| **{k}** | " + " | ".join(cells) + " |")
    if surface.low is not None:
        reliability = ci_reliability(surface)
        if reliability["few_tasks"]:
            lines += ["", f"Intervals are approximate: {reliability['notes'][0]}."]
        if zero_width(surface, decimals).any():
            lines += ["", ZERO_WIDTH_NOTE]
        if signed and significant(surface, decimals).any():
            lines += ["", STAR_NOTE]
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


def surface_marks(surface: PassSurface, *, signed: bool = False) -> dict[str, Any]:
    """What the tables print and mark, for the JSON: decimals, the [K, T] cells of
    zero-width intervals and, for a difference, those whose printed interval excludes 0."""
    decimals = table_decimals(surface)
    marks: dict[str, Any] = {
        "decimals": decimals,
        "zero_width_cells": grid_cells(surface, zero_width(surface, decimals)),
    }
    if signed:
        marks["excludes_zero_cells"] = grid_cells(surface, significant(surface, decimals))
    return marks


def _write_tables(
    surface: PassSurface,
    out_dir: Path,
    stem: str,
    title: str,
    meta: dict[str, Any],
    *,
    signed: bool = False,
    notes: str = "",
    description: str = "",
    extra: str = "",
) -> list[Path]:
    paths = [out_dir / f"{stem}.md", out_dir / f"{stem}.csv", out_dir / f"{stem}.json"]
    table = surface_markdown(surface, title, signed=signed, description=description)
    paths[0].write_text(table + (f"\n{extra}" if extra else "") + (f"\n{notes}" if notes else ""))
    paths[1].write_text(surface_csv(surface))
    blob = {**meta, "surface": surface.to_dict(), "marks": surface_marks(surface, signed=signed)}
    paths[2].write_text(json.dumps(blob, indent=2) + "\n")
    return paths


# ---------------------------------------------------------------- the report
@dataclass
class ReportResult:
    out_dir: Path
    #: None for a run with no task sampled at every budget yet (passk.md says so)
    surface: PassSurface | None
    files: list[Path]
    comparison: PassSurface | None = None
    #: pass@k and pass^k of both runs, task by task, with verdicts (``agentenvs.eval.paired``)
    paired: PairedComparison | None = None
    #: the runs reported (one, or the first and the second)
    runs: list[RunData] = field(default_factory=list)
    #: each run's own surface, on all of its tasks and budgets
    surfaces: list[PassSurface] = field(default_factory=list)
    #: tasks both runs share (0 without a comparison)
    shared_tasks: int = 0
    #: the headline numbers, one sentence each (``index.md``, ``report_summary``)
    headline: list[str] = field(default_factory=list)


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
    unit = "" if data.unit == "turns" else f", budgets in {data.unit}"
    title = f"{data.label} on {data.config['env_id']} ({data.mode} mode{unit})"
    if compare is None and not success_count_matrix(data, data.task_ids(), data.budgets)[1].any():
        # a run stopped before any task had a sample at every budget (a fault, a kill):
        # nothing to estimate, but its faults and short tasks are worth reading
        path = out / "passk.md"
        path.write_text(
            f"# {title}\n\nNo task has a finished sample at every budget yet, so there is "
            "nothing to estimate: resume the run (`agentenvs eval` with the same arguments) "
            f"to finish it.\n\n{faults_markdown(data)}"
        )
        empty = ReportResult(out_dir=out, surface=None, files=[path], runs=[data])
        _write_index(empty)
        return empty
    surface = run_surface(data, ks=ks, n_boot=n_boot, seed=seed, confidence=confidence)
    notes = budget_notes(data)
    files = _write_tables(
        surface,
        out,
        "passk",
        title,
        {**_meta(data), "notes": notes},
        description=f"This run alone, on all of its tasks and budgets ({data.run_dir}).",
        extra="".join(f"{note}\n\n" for note in notes),
        notes=faults_markdown(data),
    )
    if plots:
        own = figure_notes([data])
        files.append(
            plot_surface(surface, out / "passk.png", title, t_note=own.t_axis, footnote=own.footnote)
        )
    result = ReportResult(out_dir=out, surface=surface, files=files, runs=[data], surfaces=[surface])
    if compare is None:
        _write_index(result)
        return result

    other = load_run(compare)
    if other.config["env_id"] != data.config["env_id"]:
        raise ValueError(
            f"cannot compare runs on different envs: {data.config['env_id']} vs {other.config['env_id']}"
        )
    if other.unit != data.unit:
        raise ValueError(
            f"cannot compare budgets of {data.unit} ({run_dir}) with budgets of {other.unit} "
            f"({compare}): they count different things"
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
    common = dict(
        ks=grid_ks,
        budgets=budgets,
        task_ids=tasks,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
        keep_boot=True,
    )
    base = run_surface(data, **common)
    second = run_surface(other, **common)
    diff = difference_surface(base, second)
    counts_a, n_a = success_count_matrix(data, tasks, budgets)
    counts_b, n_b = success_count_matrix(other, tasks, budgets)
    paired = (
        paired_comparison(counts_a, n_a, counts_b, n_b, grid_ks, budgets, n_boot=n_boot,
                          seed=seed, confidence=confidence, unit=data.unit)
        if n_boot > 0
        else None
    )
    diff_title = f"{other.label} minus {data.label} on {data.config['env_id']}"
    run_notes = {"first": budget_notes(data, budgets), "second": budget_notes(other, budgets)}
    meta = {
        "first": _meta(data),
        "second": _meta(other),
        "tasks": len(tasks),
        "config_differences": {k: list(v) for k, v in differences.items()},
        "notes": run_notes,
        "paired": None if paired is None else paired.to_dict(),
    }
    # each run on the grid of the difference: passk.md has the first run on all its tasks
    runs_text = "".join(
        "\n"
        + surface_markdown(
            surf,
            f"{which} run: {run.label}",
            description=f"{run.run_dir}, on the {len(tasks)} tasks and the budgets both runs share.",
        )
        + "".join(f"\n{note}\n" for note in run_notes[which.lower()])
        for which, surf, run in (("First", base, data), ("Second", second, other))
    )
    notes = "".join(
        f"{run.label}: {fault_line(run.faults)}.\n\n" for run in (data, other)
    ) + "".join(
        f"{run.label}: {len(short)} task(s) short of n samples: {', '.join(list(short)[:10])}.\n\n"
        for run in (data, other)
        if (short := short_tasks(run))
    )
    files += _write_tables(
        diff,
        out,
        "comparison",
        diff_title,
        meta,
        signed=True,
        description=(
            "The second run minus the first, task by task (a paired bootstrap over the "
            "tasks both runs have); each run's own table on the same grid follows."
        ),
        extra=(paired_markdown(paired, data.label, other.label) if paired else "") + runs_text,
        notes="### Faults\n\n" + notes,
    )
    # passk.md covers every run the report compares: the second run's own table, on all
    # of its tasks and budgets, follows the first's
    _, n_other = success_count_matrix(other, other.task_ids(), other.budgets)
    other_ks = [k for k in ks if k <= int(n_other[n_other > 0].min())] if ks else None
    own_second = run_surface(other, ks=other_ks or None, n_boot=n_boot, seed=seed,
                             confidence=confidence)
    second_notes = budget_notes(other)
    passk_md = out / "passk.md"
    passk_md.write_text(
        passk_md.read_text()
        + "\n"
        + surface_markdown(
            own_second,
            f"{other.label} on {other.config['env_id']} ({other.mode} mode{unit})",
            description=f"The second run alone, on all of its tasks and budgets ({other.run_dir}).",
        )
        + "".join(f"\n{note}\n" for note in second_notes)
        + "\n"
        + faults_markdown(other)
    )
    result.surfaces = [surface, own_second]
    if plots:
        both = figure_notes([data, other], budgets)
        files.append(
            plot_comparison(
                base,
                second,
                diff,
                out / "comparison.png",
                data.label,
                other.label,
                f"Pass@(K,T) on {data.config['env_id']}: {other.label} vs {data.label}",
                t_note=both.t_axis,
                footnote=both.footnote,
            )
        )
    result.comparison = diff
    result.paired = paired
    result.runs = [data, other]
    result.shared_tasks = len(tasks)
    _write_index(result)
    return result


# ---------------------------------------------------------------- index page and summary
def _headline(result: ReportResult) -> list[str]:
    """The headline numbers, one sentence each: Pass@1 and Pass@n at the largest budget
    of each run (with its interval) and, for a comparison, the paired differences there
    and their verdicts."""
    lines = []
    for run, surface in zip(result.runs, result.surfaces, strict=False):
        decimals = table_decimals(surface)
        j = len(surface.budgets) - 1
        column = budget_label(surface.unit)
        parts = []
        for i in sorted({0, len(surface.ks) - 1}):
            text = format_number(surface.mean[i, j], decimals)
            if surface.low is not None and surface.high is not None:
                low = format_number(surface.low[i, j], decimals)
                high = format_number(surface.high[i, j], decimals)
                text += f" [{low}, {high}]" + (" †" if low == high else "")
            parts.append(f"Pass@{int(surface.ks[i])} {text}")
        lines.append(
            f"{run.label}: {', '.join(parts)} at {column} = {int(surface.budgets[j])} "
            f"({surface.n_tasks} tasks, n = {min(surface.n_samples)})."
        )
    paired = result.paired
    if paired is not None:
        j = len(paired.budgets) - 1
        column = budget_label(paired.unit)
        for metric in ("pass@k",):
            m = paired.metrics[metric]
            verdicts = paired.verdicts(metric)
            decimals = m.decimals
            for i in sorted({0, len(paired.ks) - 1}):
                low = format_number(m.low[i, j], decimals, signed=True)
                high = format_number(m.high[i, j], decimals, signed=True)
                lines.append(
                    f"B - A in pass@{int(paired.ks[i])} at {column} = {int(paired.budgets[j])}: "
                    f"{format_number(m.diff[i, j], decimals, signed=True)} [{low}, {high}]"
                    f"{' †' if low == high else ''} on {paired.n_tasks} shared tasks: "
                    f"{verdicts[i, j]}."
                )
    elif result.comparison is not None:
        lines.append("No paired verdicts: the report ran without bootstrap (--n-boot 0).")
    return lines


#: what each file of a report folder holds, for the index page
_FILE_NOTES = {
    "passk.md": "each run's own Pass@(K,T) table, on all of its tasks and budgets",
    "passk.csv": "the first run's surface, one row per (K, T)",
    "passk.json": "the first run's surface, marks, notes and faults",
    "passk.png": "the first run's heat map and Pass@K curves",
    "comparison.md": "the difference, the paired pass@k / pass^k tables with verdicts, "
    "and both runs on the shared grid",
    "comparison.csv": "the difference, one row per (K, T)",
    "comparison.json": "the difference, the paired cells and verdicts, both runs' settings",
    "comparison.png": "the difference heat map and both runs' curves",
}


def _what_was_run(result: ReportResult) -> list[tuple[str, str]]:
    rows = []
    for which, run in zip(("A (first)", "B (second)"), result.runs, strict=False):
        label = "run" if len(result.runs) == 1 else f"run {which}"
        rows.append((label, f"{run.label} in {run.run_dir}"))
    cfg = result.runs[0].config
    unit = result.runs[0].unit
    rows += [
        ("env", f"{cfg['env_id']} {json.dumps(cfg.get('env_kwargs') or {})}"),
        ("mode", str(cfg["mode"])),
        (f"budgets ({unit})", ", ".join(str(b) for b in cfg["budgets"])),
        ("samples per task", str(cfg["n"])),
        ("tasks", str(len(cfg["task_ids"]))
         + (f" ({result.shared_tasks} shared by both runs)" if result.shared_tasks else "")),
        ("trajectories", ", ".join(str(run.n_records) for run in result.runs)),
    ]
    return rows


def _write_index(result: ReportResult) -> None:
    """``index.md`` and ``index.html`` of the report folder (see the module doc)."""
    import html

    out = result.out_dir
    headline = _headline(result)
    title = " vs ".join(run.label for run in result.runs) + f" on {result.runs[0].config['env_id']}"
    per_run = [budget_notes(run) for run in result.runs]
    notes = []
    for i, run in enumerate(result.runs):
        for note in per_run[i]:
            if len(result.runs) == 1:
                notes.append(note)
            elif all(note in other for other in per_run):
                if i == 0:  # the same note for every run: said once
                    notes.append(f"Both runs: {note}")
            else:
                notes.append(f"{run.label}: {note}")
    if result.paired is not None and result.paired.verdict_withheld:
        notes.append(
            f"No verdicts: {result.paired.n_tasks} shared tasks, fewer than "
            f"{MIN_TASKS_FOR_CI}, where paired intervals are known to cover less than "
            "their level (docs/comparisons.md)."
        )
    files = [p for p in result.files if p.parent == out]
    md = [f"# Report: {title}", "", "## What was run", "", "| | |", "|---|---|"]
    md += [f"| {key} | {value} |" for key, value in _what_was_run(result)]
    md += ["", "## Headline", ""] + [f"- {line}" for line in headline]
    if notes:
        md += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    md += ["", "## Files", ""]
    md += [f"- [{p.name}]({p.name}): {_FILE_NOTES.get(p.name, '')}" for p in files]
    md += [f"\n![{p.name}]({p.name})" for p in files if p.suffix == ".png"]
    index_md = out / "index.md"
    index_md.write_text("\n".join(md) + "\n")

    e = html.escape
    body = [f"<h1>Report: {e(title)}</h1>", "<h2>What was run</h2>", "<table>"]
    body += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _what_was_run(result)]
    body += ["</table>", "<h2>Headline</h2>", "<ul>"]
    body += [f"<li>{e(line)}</li>" for line in headline] + ["</ul>"]
    if notes:
        body += ["<h2>Notes</h2>", "<ul>"] + [f"<li>{e(n)}</li>" for n in notes] + ["</ul>"]
    body += ["<h2>Files</h2>", "<ul>"]
    body += [
        f'<li><a href="{e(p.name)}">{e(p.name)}</a>: {e(_FILE_NOTES.get(p.name, ""))}</li>'
        for p in files
    ]
    body += ["</ul>"]
    body += [
        f'<figure><a href="{e(p.name)}"><img src="{e(p.name)}" alt="{e(p.name)}" '
        f'style="max-width:100%"></a><figcaption>{e(_FILE_NOTES.get(p.name, ""))}'
        "</figcaption></figure>"
        for p in files
        if p.suffix == ".png"
    ]
    index_html = out / "index.html"
    index_html.write_text(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{e(title)}</title><style>body{{font-family:sans-serif;max-width:70em;"
        "margin:2em auto;padding:0 1em}table{border-collapse:collapse}th,td{border:1px "
        "solid #ccc;padding:.2em .6em;text-align:left}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
    result.headline = headline
    result.files += [index_html, index_md]


def report_summary(result: ReportResult) -> str:
    """What ``agentenvs report`` prints: the headline numbers and where the files are
    (the full tables are in the files, starting with ``index.html``)."""
    lines = list(result.headline)
    if result.surface is None:
        lines.append("No task has a finished sample at every budget yet: nothing to estimate.")
    index = result.out_dir / "index.html"
    if index.exists():
        lines.append(f"index: {index}")
    lines.append(f"files in {result.out_dir}/:")
    lines += [f"  {p.name}" for p in result.files if p.name not in ("index.html",)]
    return "\n".join(lines) + "\n"
