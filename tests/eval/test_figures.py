"""Figures read like the tables: value labels above the whiskers at the tables' precision,
† on zero-width intervals, value axes that fit small bars, words rather than code names on
axes, and a T axis that says when it carries no information (inspected on the Figure
objects, not on pixels)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentenvs.eval.analysis_report import step_quality_figure
from agentenvs.eval.passk import difference_surface, estimate_surface
from agentenvs.eval.passk_plots import comparison_figure, surface_figure
from agentenvs.eval.report import figure_notes, load_run, write_report
from agentenvs.eval.runner import EvalConfig, resolve_tasks, run_pass_at_k_t

pytest.importorskip("matplotlib")


def _metric(mean: float, low: float, high: float) -> dict[str, float]:
    return {"mean": mean, "low": low, "high": high}


def _summary() -> dict[str, Any]:
    """Error-state numbers with a tie share whose interval has zero width and a
    continuation success of 0.035 (the bar that vanished on a 0-1 axis)."""
    group = {
        "n_states": 40, "n_tasks": 12, "confidence": 0.95, "interval": "bootstrap over tasks",
        "a_better": _metric(0.031, 0.02, 0.045), "b_better": _metric(0.012, 0.004, 0.02),
        "ties": _metric(0.957, 0.957, 0.957), "mean_score_a": _metric(0.42, 0.3, 0.55),
        "mean_score_b": _metric(0.4, 0.28, 0.52),
        "continuation": {"n_states": 40, "n_tasks": 12, "rollouts_per_state": 8,
                         "success_a": _metric(0.035, 0.021, 0.05),
                         "success_b": _metric(0.018, 0.01, 0.03)},
    }
    return {"policy_a": "frozenlake/noisy:recover=0.9", "policy_b": "frozenlake/noisy:recover=0.3",
            "config": {"env_id": "agentenvs/FrozenLake-v0"},
            "kinds": {"error": {"all": group, "by_env": {"agentenvs/FrozenLake-v0": group}}}}


def _labels(ax: Any) -> list[Any]:
    return [t for t in ax.texts if t.get_text()]


def test_value_labels_sit_above_the_whiskers_at_the_tables_precision() -> None:
    fig = step_quality_figure(_summary())
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        labels = _labels(ax)
        assert labels, ax.get_title()
        whiskers = [c for c in ax.collections if type(c).__name__ == "LineCollection"]
        tops = [seg[:, 1].max() for c in whiskers for seg in c.get_segments()]
        for label in labels:
            text = label.get_text().rstrip("†")
            assert len(text.split(".")[1]) == 3, text  # 0.031, never "3%"
            x, y = label.xy
            # anchored at the top of its bar's whisker (or the bar), drawn above it
            assert any(abs(y - top) < 1e-9 for top in tops) or y >= max(tops, default=0), text
            box = label.get_window_extent(renderer)
            for c in whiskers:
                for seg in c.get_segments():
                    points = ax.transData.transform(seg)
                    inside = [box.contains(px, py) for px, py in points]
                    assert not any(inside), (text, seg)


def test_zero_width_intervals_are_marked_and_explained() -> None:
    fig = step_quality_figure(_summary())
    marked = [t.get_text() for t in _labels(fig.axes[0]) if t.get_text().endswith("†")]
    assert marked == ["0.957†"]  # the tie share's interval is one value
    assert "† an interval of zero width" in fig._supxlabel.get_text().replace("\n", " ")


def test_small_bars_are_not_drawn_on_a_zero_to_one_axis() -> None:
    fig = step_quality_figure(_summary())
    continuation = fig.axes[2]
    low, high = continuation.get_ylim()
    assert low == 0 and 0.05 < high < 0.1  # 0.035 fills a third of the panel, not 3%
    shares = fig.axes[0]
    assert shares.get_ylim()[1] > 0.957  # the tie share's bar and label fit


def test_axes_speak_words_with_units_not_code_names() -> None:
    fig = step_quality_figure(_summary())
    labels = [ax.get_ylabel() for ax in fig.axes] + [
        t.get_text() for ax in fig.axes for t in ax.get_xticklabels()
    ]
    assert not any("score_action" in text or "_" in text for text in labels), labels
    assert "(0 to 1)" in fig.axes[0].get_ylabel()
    assert "chance of reaching the goal" in fig.axes[1].get_ylabel()
    assert "(0 to 1)" in fig.axes[2].get_ylabel()


def test_a_t_axis_with_no_effect_says_so(tmp_path: Path) -> None:
    """BFCL single-turn: every episode ends at turn 1, so T = 1, 2, 3 are one column; the
    report's figures say so on their T axes."""
    env_id = "agentenvs/BFCL-v0"
    runs = []
    for rate in ("0.5", "0.2"):
        config = EvalConfig(env_id=env_id, policy=f"bfcl/noisy:error_rate={rate}",
                            task_ids=resolve_tasks(env_id, "first:4", {}), n=2,
                            budgets=[1, 2, 3], mode="derive")
        run_pass_at_k_t(config, tmp_path / rate, workers=0, progress=False)
        runs.append(load_run(tmp_path / rate))
    notes = figure_notes(runs)
    assert notes.t_axis == "no effect here: every episode ended by turn 1"
    assert notes.footnote == ""
    counts = np.array([[1, 1, 1], [2, 2, 2]])
    a = estimate_surface(counts, 2, [1, 2], [1, 2, 3], n_boot=50, keep_boot=True)
    b = estimate_surface(counts[::-1], 2, [1, 2], [1, 2, 3], n_boot=50, keep_boot=True)
    for fig in (surface_figure(a, "t", t_note=notes.t_axis),
                comparison_figure(a, b, difference_surface(a, b), "a", "b", "t",
                                  t_note=notes.t_axis)):
        for ax in fig.axes[:2]:
            if ax.get_xlabel():
                assert ax.get_xlabel() == "turn budget T\n(no effect here: every episode ended by turn 1)"
    # and a report of such runs draws it (the Figure is rebuilt from the same notes)
    result = write_report(tmp_path / "0.5", compare=tmp_path / "0.2", n_boot=50)
    assert (result.out_dir / "comparison.png").exists()


def test_a_budget_aware_policy_gets_a_footnote(tmp_path: Path) -> None:
    """FrozenLake's noisy policies plan on the turns left: each T is its own run and
    Pass@(K,T) may fall as T grows; the figure says why under its axes."""
    runs = []
    for recover in ("0.3", "0.9"):
        config = EvalConfig(env_id="agentenvs/FrozenLake-v0",
                            policy=f"frozenlake/noisy:error_rate=0.25,recover={recover}",
                            task_ids=["4x4"], n=2, budgets=[4, 8],
                            env_kwargs={"success_rate": 0.8})
        run_pass_at_k_t(config, tmp_path / recover, workers=0, progress=False)
        runs.append(load_run(tmp_path / recover))
    notes = figure_notes(runs)
    assert notes.t_axis == ""
    assert "both policies see its budget" in notes.footnote
    assert "need not grow with T" in notes.footnote
    counts = np.array([[0, 1], [1, 2]])
    surface = estimate_surface(counts, 2, [1, 2], [4, 8], n_boot=20)
    fig = surface_figure(surface, "t", footnote=notes.footnote)
    assert "need not grow with T" in fig._supxlabel.get_text().replace("\n", " ")
    assert surface_figure(surface, "t")._supxlabel is None
