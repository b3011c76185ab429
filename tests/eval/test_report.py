"""Reports: surfaces from run records in both modes, tables, plots and comparisons."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the guess env lives next door
import test_runner as guess  # noqa: E402

from agentenvs.eval.passk import pass_at_k  # noqa: E402
from agentenvs.eval.records import TRAJECTORIES_NAME, read_records  # noqa: E402
from agentenvs.eval.report import (  # noqa: E402
    default_ks,
    load_run,
    run_surface,
    surface_markdown,
    write_report,
)
from agentenvs.eval.runner import run_pass_at_k_t  # noqa: E402


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    out = {
        "derive": root / "derive",
        "derive2": root / "derive2",
        "rerun": root / "rerun",
    }
    run_pass_at_k_t(guess.config(n=8), out["derive"], workers=0, progress=False)
    run_pass_at_k_t(guess.config(n=8, seed=99), out["derive2"], workers=0, progress=False)
    run_pass_at_k_t(guess.config(n=4, mode="rerun"), out["rerun"], workers=0, progress=False)
    return out


def by_hand(records: list[dict], budgets: list[int], ks: list[int], rerun: bool) -> np.ndarray:
    tasks = sorted({r["task_id"] for r in records})
    values = np.zeros((len(ks), len(budgets)))
    for task in tasks:
        mine = [r for r in records if r["task_id"] == task]
        for j, t in enumerate(budgets):
            if rerun:
                group = [r for r in mine if r["budget"] == t]
                c = sum(r["success"] for r in group)
            else:
                group = mine
                c = sum(1 for r in mine if r["first_success_turn"] and r["first_success_turn"] <= t)
            for i, k in enumerate(ks):
                values[i, j] += pass_at_k(len(group), c, k) / len(tasks)
    return values


@pytest.mark.parametrize("mode", ["derive", "rerun"])
def test_surface_matches_records(runs: dict[str, Path], mode: str) -> None:
    data = load_run(runs[mode])
    surface = run_surface(data, n_boot=100)
    records = read_records(runs[mode] / TRAJECTORIES_NAME)
    n = 8 if mode == "derive" else 4
    assert surface.ks.tolist() == default_ks(n)
    assert surface.budgets.tolist() == [1, 2, 4, 6]
    want = by_hand(records, [1, 2, 4, 6], surface.ks.tolist(), rerun=mode == "rerun")
    np.testing.assert_allclose(surface.mean, want, atol=1e-12)
    # more samples or more turns never hurt (derive: exactly monotone in T as well)
    assert np.all(np.diff(surface.mean, axis=0) >= -1e-12)
    if mode == "derive":
        assert np.all(np.diff(surface.mean, axis=1) >= -1e-12)


def test_default_ks() -> None:
    assert default_ks(16) == [1, 2, 4, 8, 16]
    assert default_ks(12) == [1, 2, 4, 8, 12]
    assert default_ks(1) == [1]


def test_incomplete_run_uses_what_it_has(runs: dict[str, Path], tmp_path: Path) -> None:
    # drop the last samples of one task: that task is estimated from fewer samples
    import shutil

    shutil.copytree(runs["derive"], tmp_path / "cut")
    path = tmp_path / "cut" / TRAJECTORIES_NAME
    kept = [
        line for line in path.read_text().splitlines(keepends=True)
        if not ('"task_id":"large"' in line and json.loads(line)["sample"] >= 5)
    ]
    path.write_text("".join(kept) + '{"torn')
    surface = run_surface(load_run(tmp_path / "cut"), n_boot=0)
    assert sorted(set(surface.n_samples)) == [5, 8]
    assert surface.ks.tolist() == [1, 2, 4, 5]


def test_a_run_with_no_task_at_every_budget_gets_a_report_saying_so(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    # a rerun-mode run stopped before any task had a sample at its largest budget
    import shutil

    shutil.copytree(runs["rerun"], tmp_path / "cut")
    path = tmp_path / "cut" / TRAJECTORIES_NAME
    records = [json.loads(line) for line in path.read_text().splitlines()]
    largest = max(r["budget"] for r in records)
    path.write_text("".join(json.dumps(r) + "\n" for r in records if r["budget"] != largest))
    with pytest.raises(ValueError, match="no task has a finished sample at every budget"):
        run_surface(load_run(tmp_path / "cut"), n_boot=0)
    result = write_report(tmp_path / "cut", n_boot=0, plots=False)
    assert result.surface is None
    text = (result.out_dir / "passk.md").read_text()
    assert "No task has a finished sample at every budget yet" in text
    assert "fewer than n =" in text  # the short tasks are named


def test_report_files(runs: dict[str, Path], tmp_path: Path) -> None:
    result = write_report(runs["derive"], out_dir=tmp_path, n_boot=200)
    names = sorted(p.name for p in result.files)
    assert names == ["index.html", "index.md", "passk.csv", "passk.json", "passk.md", "passk.png"]
    assert (tmp_path / "passk.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((tmp_path / "passk.csv").open()))
    assert len(rows) == 4 * 4 and set(rows[0]) == {"k", "t", "pass", "low", "high"}
    for row in rows:
        assert float(row["low"]) - 1e-9 <= float(row["pass"]) <= float(row["high"]) + 1e-9
    blob = json.loads((tmp_path / "passk.json").read_text())
    assert blob["policy"] == "test/guesser" and blob["trajectories"] == 24
    np.testing.assert_allclose(blob["surface"]["mean"], result.surface.mean)
    markdown = (tmp_path / "passk.md").read_text()
    assert "| K \\ T | 1 | 2 | 4 | 6 |" in markdown and "| **8** |" in markdown


def test_comparison_is_paired_difference(runs: dict[str, Path], tmp_path: Path) -> None:
    result = write_report(runs["derive"], out_dir=tmp_path, compare=runs["derive2"], n_boot=200,
                          allow_differences=True)
    first = run_surface(load_run(runs["derive"]), n_boot=0)
    second = run_surface(load_run(runs["derive2"]), n_boot=0)
    assert result.comparison is not None
    np.testing.assert_allclose(result.comparison.mean, second.mean - first.mean, atol=1e-12)
    assert result.comparison.low is not None
    assert np.all(result.comparison.low <= result.comparison.mean + 1e-12)
    names = {p.name for p in result.files}
    assert {"comparison.md", "comparison.csv", "comparison.json", "comparison.png"} <= names
    assert "+" in (tmp_path / "comparison.md").read_text()


def test_compare_rerun_with_derive_uses_shared_grid(runs: dict[str, Path], tmp_path: Path) -> None:
    result = write_report(runs["derive"], out_dir=tmp_path, compare=runs["rerun"], n_boot=50,
                          plots=False, allow_differences=True)
    assert result.comparison is not None
    assert result.comparison.ks.tolist() == [1, 2, 4]  # the rerun run has n=4
    assert not (tmp_path / "comparison.png").exists()


def test_markdown_without_ci() -> None:
    from agentenvs.eval.passk import estimate_surface

    surface = estimate_surface(np.array([[1, 2]]), 2, [1, 2], [3, 5], n_boot=0)
    text = surface_markdown(surface, "t")
    assert "| **1** | 0.500 | 1.000 |" in text and "CI" not in text


def test_compare_refuses_runs_with_other_settings(runs: dict[str, Path], tmp_path: Path) -> None:
    """Two runs of one env id under other env kwargs (or seeds, budgets, ...) differ by more
    than the policy: the comparison is refused, naming what differs, unless allowed."""
    other = tmp_path / "other"
    run_pass_at_k_t(guess.config(n=8, env_kwargs={"delay": 0.0001}), other, workers=0,
                    progress=False)
    with pytest.raises(ValueError, match=r"env_kwargs: \{\} vs \{'delay': 0.0001\}"):
        write_report(runs["derive"], out_dir=tmp_path / "r", compare=other, n_boot=0, plots=False)
    with pytest.raises(ValueError, match="seed: 11 vs 99"):
        write_report(runs["derive"], out_dir=tmp_path / "r", compare=runs["derive2"], n_boot=0,
                     plots=False)
    write_report(runs["derive"], out_dir=tmp_path / "ok", compare=other, n_boot=0, plots=False,
                 allow_differences=True)
    blob = json.loads((tmp_path / "ok" / "comparison.json").read_text())
    assert blob["config_differences"] == {"env_kwargs": [{}, {"delay": 0.0001}]}
    # only the policy differs: compared without a word
    for name, policy in (("a", "test/guesser"), ("b", "test/undeclared")):
        run_pass_at_k_t(guess.config(n=2, mode="rerun", policy=policy), tmp_path / name,
                        workers=0, progress=False)
    result = write_report(tmp_path / "a", out_dir=tmp_path / "ab", compare=tmp_path / "b",
                          n_boot=0, plots=False)
    assert result.comparison is not None


@pytest.fixture(scope="module")
def two_policies(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """FrozenLake: a random and an oracle run of the same settings (3 maps)."""
    from agentenvs.eval.runner import EvalConfig

    root = tmp_path_factory.mktemp("two")
    runs = []
    for policy in ("frozenlake/random", "frozenlake/oracle"):
        config = EvalConfig(env_id="agentenvs/FrozenLake-v0", policy=policy,
                            task_ids=["4x4", "8x8", "random:size=4,p=0.8,seed=0"], n=4,
                            budgets=[8, 16],
                            env_kwargs={"success_rate": 0.9})
        run = root / policy.split("/")[1]
        run_pass_at_k_t(config, run, workers=0, progress=False)
        runs.append(run)
    return runs[0], runs[1]


def test_passk_md_covers_every_compared_policy(two_policies: tuple[Path, Path], tmp_path: Path) -> None:
    first, second = two_policies
    write_report(first, out_dir=tmp_path, compare=second, n_boot=50, plots=False)
    passk = (tmp_path / "passk.md").read_text()
    assert "### frozenlake/random on agentenvs/FrozenLake-v0" in passk
    assert "### frozenlake/oracle on agentenvs/FrozenLake-v0" in passk
    assert str(second) in passk  # the second run's own table names its folder
    # each run's own table, on all of its tasks: the oracle's is its surface
    oracle = run_surface(load_run(second), n_boot=0)
    table = passk.split("### frozenlake/oracle")[1]
    assert f"| **1** | {oracle.mean[0, 0]:.3f}" in table
    assert passk.count("no faults (fault rate 0%") == 2


def test_index_page_links_every_table_and_figure(
    two_policies: tuple[Path, Path], tmp_path: Path
) -> None:
    import re

    first, second = two_policies
    result = write_report(first, out_dir=tmp_path, compare=second, n_boot=50)
    html = (tmp_path / "index.html").read_text()
    md = (tmp_path / "index.md").read_text()
    produced = {p.name for p in result.files} - {"index.html", "index.md"}
    assert produced == {"passk.md", "passk.csv", "passk.json", "passk.png", "comparison.md",
                        "comparison.csv", "comparison.json", "comparison.png"}
    links = set(re.findall(r'href="([^"]+)"', html))
    assert produced <= links, produced - links
    assert set(re.findall(r'<img src="([^"]+)"', html)) == {"passk.png", "comparison.png"}
    assert produced <= set(re.findall(r"\]\(([^)]+)\)", md))
    for link in links | set(re.findall(r"\]\(([^)]+)\)", md)):
        assert (tmp_path / link).is_file(), link
    # what was run and the headline numbers, the verdict withheld on 3 tasks
    for page in (html, md):
        assert "frozenlake/random" in page and "frozenlake/oracle" in page
        assert "agentenvs/FrozenLake-v0" in page and "8, 16" in page
        assert "B - A in pass@1 at T = 16" in page
        assert "too few tasks for a verdict (3 &lt; 50)" in page or "(3 < 50)" in page
    # the notes name the run they are about: only the oracle plans on its turns left
    assert md.count("The policy sees its turn budget") == 1
    assert "- frozenlake/oracle: The policy sees its turn budget" in md
    # a run alone gets one too
    alone = write_report(second, out_dir=tmp_path / "alone", n_boot=0, plots=False)
    assert (tmp_path / "alone" / "index.html") in alone.files
    assert "frozenlake/oracle: Pass@1 " in (tmp_path / "alone" / "index.md").read_text()


def test_report_prints_a_short_summary_with_paths(
    two_policies: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentenvs.cli import main

    first, second = two_policies
    assert main(["report", str(first), "--compare", str(second), "--out", str(tmp_path),
                 "--n-boot", "50", "--no-plots"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) < 20, out
    assert lines[0].startswith("frozenlake/random: Pass@1 ")
    assert lines[1].startswith("frozenlake/oracle: Pass@1 ")
    assert f"index: {tmp_path / 'index.html'}" in lines
    assert "  comparison.md" in lines and "  passk.md" in lines
    assert "| K" not in out and "####" not in out  # no tables on stdout
