"""Reports that cannot be misread: one precision for a point and its interval, marks
that mean what their legend says, notes on what the T axis cannot say, verdicts backed by
a printed interval, and figures whose legends, bands, colours and labels hide nothing."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the guess env lives next door
import test_runner as guess  # noqa: E402

from agentenvs.eval.analysis_report import likelihood_figure, step_quality_figure  # noqa: E402
from agentenvs.eval.passk import difference_surface, estimate_surface  # noqa: E402
from agentenvs.eval.passk_plots import comparison_figure, surface_figure  # noqa: E402
from agentenvs.eval.report import surface_markdown, write_report  # noqa: E402
from agentenvs.eval.runner import EvalConfig, resolve_tasks, run_pass_at_k_t  # noqa: E402

pytest.importorskip("matplotlib")

NUMBER = r"[+-]?(?:<)?\d+\.\d+"
CELL = re.compile(rf"({NUMBER}) \[({NUMBER}), ({NUMBER})\]( †)?( \*)?")


def cells(markdown: str) -> list[re.Match[str]]:
    found = [m for line in markdown.splitlines() if line.startswith("| **") for m in CELL.finditer(line)]
    assert found, markdown
    return found


def decimals(text: str) -> int:
    return len(text.split(".")[1])


def value(text: str) -> float:
    return 0.0 if "<" in text else float(text)


def paired(a_counts: np.ndarray, b_counts: np.ndarray, n: int, ks: list[int], budgets: list[int]):
    a = estimate_surface(a_counts, n, ks, budgets, n_boot=400, seed=0, keep_boot=True)
    b = estimate_surface(b_counts, n, ks, budgets, n_boot=400, seed=0, keep_boot=True)
    return a, b, difference_surface(a, b)


@pytest.fixture(scope="module")
def small_gain() -> tuple[Any, Any, Any]:
    """Two runs over 200 tasks that differ by one success on a few tasks: differences of
    a few thousandths, the cells that used to read ``+0.003 [0.00, 0.00]``."""
    rng = np.random.default_rng(3)
    a = rng.binomial(8, rng.uniform(0.2, 0.8, size=(200, 1)), size=(200, 2))
    b = a.copy()
    b[:6, 1] = np.minimum(b[:6, 1] + 1, 8)
    return paired(a, b, 8, [1, 2, 4, 8], [2, 4])


def test_a_point_and_its_interval_share_their_decimals(small_gain: tuple[Any, Any, Any]) -> None:
    _, _, diff = small_gain
    text = surface_markdown(diff, "difference", signed=True)
    found = cells(text)
    widths = {decimals(part) for m in found for part in m.groups()[:3]}
    assert len(widths) == 1, text  # one precision for the whole table
    # the T=4 column moved by about 6/200/8: visible, and so is its interval
    moved = [m for m in found if value(m.group(1)) != 0.0]
    assert moved, text
    for m in moved:
        assert value(m.group(3)) > 0.0, m.group(0)  # never "+0.003 [0.00, 0.00]"
    assert len(found) == diff.mean.size
    for m, raw in zip(found, diff.mean.ravel(), strict=True):
        if abs(raw) > 1e-12:  # a nonzero difference never prints as 0
            assert m.group(1).lstrip("+-") != "0." + "0" * decimals(m.group(1)), m.group(0)


def test_a_star_only_where_the_printed_interval_excludes_zero(
    small_gain: tuple[Any, Any, Any],
) -> None:
    base, other, diff = small_gain
    for m in cells(surface_markdown(diff, "difference", signed=True)):
        low, high = value(m.group(2)), value(m.group(3))
        assert bool(m.group(5)) == (low > 0 or high < 0), m.group(0)
    fig = comparison_figure(base, other, diff, "a", "b", "t")
    heat = fig.axes[0]
    texts = [t.get_text() for t in heat.texts]
    assert texts
    for text in texts:
        if "*" in text:  # no "+0.00*": a starred cell shows a nonzero difference
            assert value(text.rstrip("*†")) != 0.0, text
    assert "excludes 0" in heat.get_title()


def test_every_zero_width_interval_is_marked(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """A run compared with itself: every paired difference is 0 on every task, so every
    interval has zero width, not only where both runs sit at a bound."""
    write_report(runs["derive"], out_dir=tmp_path, compare=runs["derive"], n_boot=200)
    text = (tmp_path / "comparison.md").read_text()
    difference = text.split("### First run")[0]
    found = cells(difference)
    assert all(m.group(4) for m in found), difference
    assert "† an interval of zero width" in difference
    blob = json.loads((tmp_path / "comparison.json").read_text())
    assert len(blob["marks"]["zero_width_cells"]) == len(found)
    assert blob["marks"]["excludes_zero_cells"] == []


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    out = {"derive": root / "derive", "other": root / "other"}
    run_pass_at_k_t(guess.config(n=8), out["derive"], workers=0, progress=False)
    run_pass_at_k_t(guess.config(n=8, seed=99), out["other"], workers=0, progress=False)
    return out


def test_one_table_for_the_first_run_and_the_comparison_says_which_is_which(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    result = write_report(runs["derive"], out_dir=tmp_path, compare=runs["other"], n_boot=100,
                          plots=False, allow_differences=True)
    names = {p.name for p in result.files}
    assert not {"comparison_first.md", "comparison_second.md"} & names
    assert not (tmp_path / "comparison_first.md").exists()
    passk = (tmp_path / "passk.md").read_text()
    assert "This run alone, on all of its tasks and budgets" in passk
    comparison = (tmp_path / "comparison.md").read_text()
    assert comparison.index("minus") < comparison.index("### First run: test/guesser")
    assert comparison.index("### First run") < comparison.index("### Second run: test/guesser")
    assert str(runs["other"]) in comparison.split("### Second run")[1]


def test_bfcl_single_turn_says_the_t_axis_carries_no_information(tmp_path: Path) -> None:
    env_id = "agentenvs/BFCL-v0"
    config = EvalConfig(env_id=env_id, policy="bfcl/noisy:error_rate=0.5",
                        task_ids=resolve_tasks(env_id, "first:4", {}), n=2, budgets=[1, 2, 3],
                        mode="derive")
    run_pass_at_k_t(config, tmp_path / "run", workers=0, progress=False)
    write_report(tmp_path / "run", n_boot=50, plots=False)
    text = (tmp_path / "run" / "report" / "passk.md").read_text()
    assert "Every trajectory ended by turn 1" in text
    assert "the columns T = 1, 2, 3 repeat one another exactly" in text
    assert "the T axis carries no information" in text
    notes = json.loads((tmp_path / "run" / "report" / "passk.json").read_text())["notes"]
    assert len(notes) == 1 and "turn 1" in notes[0]


def test_a_budget_that_binds_gets_no_such_note(runs: dict[str, Path], tmp_path: Path) -> None:
    write_report(runs["derive"], out_dir=tmp_path, n_boot=0, plots=False)
    blob = json.loads((tmp_path / "passk.json").read_text())
    longest = max(json.loads(line)["turns"]
                  for line in (runs["derive"] / "trajectories.jsonl").read_text().splitlines())
    assert longest == 6  # some trajectory ran to the largest budget
    assert blob["notes"] == []


@pytest.mark.parametrize(
    ("policy", "env_kwargs", "seen"),
    [("test/guesser", {"show_budget": True}, "show_budget=True"),
     ("test/guesser", {}, None)],
)
def test_rerun_with_a_visible_budget_says_pass_need_not_grow(
    tmp_path: Path, policy: str, env_kwargs: dict[str, Any], seen: str | None
) -> None:
    run_pass_at_k_t(guess.config(n=2, mode="rerun", policy=policy, env_kwargs=env_kwargs),
                    tmp_path / "run", workers=0, progress=False)
    write_report(tmp_path / "run", n_boot=0, plots=False)
    text = (tmp_path / "run" / "report" / "passk.md").read_text()
    if seen is None:
        assert "sees its turn budget" not in text
    else:
        assert f"The policy sees its turn budget: the env shows it ({seen})" in text
        assert "need not grow with T" in text


def test_a_budget_conditioned_policy_is_noted_on_frozenlake(tmp_path: Path) -> None:
    config = EvalConfig(env_id="agentenvs/FrozenLake-v0", policy="frozenlake/noisy",
                        task_ids=["4x4"], n=2, budgets=[4, 8], env_kwargs={"success_rate": 0.8})
    run_pass_at_k_t(config, tmp_path / "run", workers=0, progress=False)
    write_report(tmp_path / "run", n_boot=0, plots=False)
    text = (tmp_path / "run" / "report" / "passk.md").read_text()
    assert "it plans on the turns left (conditions_on_budget)" in text
    assert "need not grow with T" in text


# ---------------------------------------------------------------- figures
def _legends_outside(fig: Any) -> None:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert legends
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None:
            box = legend.get_window_extent(renderer)
            assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_title()


def test_curve_legends_sit_outside_the_data_and_bands_are_labelled(
    small_gain: tuple[Any, Any, Any],
) -> None:
    base, other, diff = small_gain
    for fig in (surface_figure(base, "t"), comparison_figure(base, other, diff, "a", "b", "t")):
        _legends_outside(fig)
        curves = fig.axes[1]
        bands = [c for c in curves.collections if type(c).__name__ in ("PolyCollection", "FillBetweenPolyCollection")]
        assert bands
        for band in bands:
            assert "95% CI" in band.get_label(), band.get_label()
        legend = [t.get_text() for t in curves.get_legend().get_texts()]
        assert any(t.startswith("shaded: 95% CI") for t in legend), legend


def test_each_k_keeps_its_colour_across_figures() -> None:
    counts = np.array([[1, 3], [2, 5], [0, 4]])
    first = estimate_surface(counts, 16, [1, 2, 4, 8, 16], [2, 4], n_boot=50)
    second = estimate_surface(counts, 16, [1, 4, 8, 12], [2, 4], n_boot=50)

    def colours(fig: Any) -> dict[str, Any]:
        return {line.get_label(): line.get_color() for line in fig.axes[1].get_lines()
                if line.get_label().startswith("K=")}

    a, b = colours(surface_figure(first, "a")), colours(surface_figure(second, "b"))
    shared = set(a) & set(b)
    assert shared == {"K=1", "K=4", "K=8"}
    for k in shared:
        assert a[k] == b[k], k
    assert len(set(b.values())) == len(b)


def test_labels_are_never_cut_into_equal_ones(small_gain: tuple[Any, Any, Any]) -> None:
    base, other, diff = small_gain
    long_a = "frozenlake/noisy:error_rate=0.25,recover=0.3,temperature=1.0,top_p=0.95,seed=1"
    long_b = "frozenlake/noisy:error_rate=0.25,recover=0.3,temperature=1.0,top_p=0.95,seed=2"
    fig = comparison_figure(base, other, diff, long_a, long_b, "t")
    legend = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    runs = [t for t in legend if "seed=" in t and not t.startswith("shaded")]
    assert len(runs) == 2 and "seed=1" in runs[0] and "seed=2" in runs[1], legend
    # the likelihood figure's run groups: two runs that share a long prefix stay apart
    results = [
        {"run_label": label, "success": ok, "mean_nll_a": 0.5 + i, "mean_nll_b": 0.4,
         "llr_cumulative": [0.1, 0.2 * i]}
        for i, (label, ok) in enumerate(
            [(run, ok) for run in ("runs/frozenlake/noisy:error_rate=0.25,recover=0.3",
                                   "runs/frozenlake/noisy:error_rate=0.25,recover=0.9")
             for ok in (True, False) for _ in range(2)]
        )
    ]
    fig = likelihood_figure(results, {"model_a": "m/a", "model_b": "m/b"})
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert len(ticks) == 4 and len(set(ticks)) == 4, ticks
    assert all("(n=2)" in t for t in ticks), ticks
    assert "nats per token" in fig.axes[0].get_ylabel()
    _legends_outside(fig)


def _group(a: float, b: float, n_tasks: int = 8) -> dict[str, Any]:
    metric = {"mean": a, "low": a - 0.05, "high": a + 0.05}
    other = {"mean": b, "low": b - 0.05, "high": b + 0.05}
    return {
        "n_states": 20, "n_tasks": n_tasks, "a_better": metric, "b_better": other,
        "ties": {"mean": 1 - a - b, "low": 0.5, "high": 0.7}, "mean_score_a": metric,
        "mean_score_b": other, "a_share_of_decided": {"mean": 0.5, "low": 0.4, "high": 0.6},
        "a_minus_b": {"mean": a - b, "low": a - b - 0.02, "high": a - b + 0.02},
        "verdict": "no clear difference",
    }


def test_one_name_for_each_kind_of_state_in_the_figure() -> None:
    summary = {"policy_a": "a", "policy_b": "b",
               "kinds": {k: {"all": _group(0.2, 0.1)} for k in ("ordinary", "self_error", "error")}}
    fig = step_quality_figure(summary)
    ticks = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels()]
    assert not any("self_error" in t or t.endswith(" states") for t in ticks), ticks
    assert sum("self-made error" in t for t in ticks) == 2, ticks
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "B better" not in legend  # the bars are shares of pairs, not a verdict
    _legends_outside(fig)


def test_the_verdict_rests_on_the_printed_interval_of_a_minus_b(tmp_path: Path) -> None:
    from agentenvs.eval.step_quality import summarize_group, summary_markdown

    # one task ahead by a hair on every state, the rest tied: a difference too small to show
    results = [
        {"state_id": f"s{t}-{i}", "task_id": f"t{t}", "a_better": 0.25 + (2e-5 if t else 0),
         "b_better": 0.25, "ties": 0.5, "mean_score_a": 0.5, "mean_score_b": 0.5}
        for t in range(8) for i in range(3)
    ]
    group = summarize_group(results, n_boot=200)
    assert group["a_minus_b"]["low"] > 0  # the raw interval excludes 0 ...
    assert group["verdict"] == "no clear difference"  # ... but not as printed
    text = summary_markdown({"kinds": {"ordinary": {"all": group}}})
    header, _, row = text.splitlines()[2:5]
    assert "P(A better) − P(B better)" in header
    assert "+<0.001 [+<0.001, +<0.001]" in row and "no clear difference" in row


def test_error_states_table_prints_the_interval_behind_each_verdict(tmp_path: Path) -> None:
    from agentenvs.cli import main

    out = tmp_path / "es"
    assert main([
        "error-states", "--env", "agentenvs/FrozenLake-v0", "--env-kwargs", '{"success_rate": 0.8}',
        "--reference", "frozenlake/oracle", "--tasks", "first:6", "--episodes", "2",
        "--budget", "10", "--a", "frozenlake/noisy:error_rate=0.25,recover=0.9",
        "--b", "frozenlake/noisy:error_rate=0.25,recover=0.3", "--states", "20",
        "--actions", "4", "--continuations", "2", "--workers", "0", "--out", str(out),
        "--no-progress", "--no-plots", "--n-boot", "200",
    ]) == 0
    summary = json.loads((out / "summary.json").read_text())
    from agentenvs.eval.step_quality import summary_markdown

    rows = [line for line in summary_markdown(summary).splitlines()
            if line.startswith("| ordinary") or line.startswith("| injected")]
    assert rows
    for row in rows:
        parts = [p.strip() for p in row.strip("|").split("|")]
        low, high = map(value, CELL.match(parts[-2]).groups()[1:3])
        verdict = parts[-1]
        assert (verdict != "no clear difference") == (low > 0 or high < 0), row


def test_the_likelihood_table_gives_units_and_a_small_sample_caveat() -> None:
    from agentenvs.eval.likelihood import summarize_likelihood, summary_markdown

    results = [
        {"id": f"r{i}", "run_label": "runs/x", "success": i % 2 == 0, "mean_nll_a": 0.5 + i / 10,
         "mean_nll_b": 0.4, "llr_cumulative": [0.1 * i]}
        for i in range(6)
    ]
    text = summary_markdown(summarize_likelihood(results, n_boot=100))
    assert "mean NLL under A (nats/token)" in text and "nats) |" in text
    assert "Small groups: runs/x success (3), runs/x failure (3), runs/x all (6)" in text
    assert "cover less than their nominal level" in text
