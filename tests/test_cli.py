"""The ``agentenvs`` command line: list, eval, report, demo, and its error messages."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentenvs.cli import main

EVAL_DIR = Path(__file__).resolve().parent / "eval"
GUESS = "test_runner:agentenvs_test/Guess-v0"  # the tiny env of tests/eval/test_runner.py
HAS_FROZENLAKE_POLICIES = importlib.util.find_spec("agentenvs.envs.frozenlake.policies") is not None
needs_frozenlake = pytest.mark.skipif(
    not HAS_FROZENLAKE_POLICIES, reason="FrozenLake scripted policies are not available"
)


@pytest.fixture
def guess_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.syspath_prepend(str(EVAL_DIR))  # spawned workers inherit sys.path
    return GUESS


def test_cli_import_is_light() -> None:
    code = (
        "import sys, agentenvs.cli; "
        "print([m for m in ('matplotlib', 'tqdm', 'multiprocessing.pool') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "agentenvs/FrozenLake-v0" in out and "frozenlake/oracle" in out


def test_eval_then_report(guess_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    args = ["eval", "--env", guess_env, "--policy", "test/guesser", "--tasks", "first:2",
            "--n", "4", "--budgets", "1,3,5", "--mode", "derive", "--workers", "1", "--seed", "3",
            "--out", str(run), "--no-progress"]
    assert main(args) == 0
    assert "8 trajectories" in capsys.readouterr().out
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["task_ids"] == ["small", "medium"]
    assert manifest["config"]["budgets"] == [1, 3, 5] and manifest["config"]["seed"] == 3
    # the same command again resumes: nothing left to run
    assert main(args) == 0
    assert "8 already done, 0 run" in capsys.readouterr().out

    assert main(["report", str(run), "--no-plots", "--n-boot", "50"]) == 0
    out = capsys.readouterr().out
    # a short summary and the paths; the table is in the files
    assert "test/guesser: Pass@1 " in out and f"index: {run / 'report' / 'index.html'}" in out
    assert "| K \\ T |" not in out and len(out.splitlines()) < 20
    assert "| K \\ T | 1 | 3 | 5 |" in (run / "report" / "passk.md").read_text()
    assert (run / "report" / "passk.csv").exists() and not (run / "report" / "passk.png").exists()


def test_report_compare_writes_plots(guess_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, seed in (("a", "1"), ("b", "2")):
        assert main(["eval", "--env", guess_env, "--policy", "test/guesser", "--n", "4",
                     "--budgets", "2,4", "--workers", "0", "--seed", seed,
                     "--out", str(tmp_path / name), "--no-progress"]) == 0
    out_dir = tmp_path / "cmp"
    # the runs differ in their seed, not only in the policy: refused unless allowed
    assert main(["report", str(tmp_path / "a"), "--compare", str(tmp_path / "b"),
                 "--out", str(out_dir), "--n-boot", "50"]) == 2
    assert "seed: 1 vs 2" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "a"), "--compare", str(tmp_path / "b"),
                 "--out", str(out_dir), "--n-boot", "50", "--allow-differences"]) == 0
    assert "B - A in pass@1 at T = 4" in capsys.readouterr().out
    assert (out_dir / "comparison.png").stat().st_size > 10_000
    assert (out_dir / "passk.png").exists()


def test_errors_are_reported_not_raised(
    guess_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["eval", "--env", guess_env, "--policy", "test/guesser", "--n", "2",
            "--workers", "0", "--out", str(tmp_path / "r"), "--no-progress"]
    assert main([*base, "--mode", "derive", "--env-kwargs", '{"show_budget": true}']) == 2
    assert "use mode='rerun'" in capsys.readouterr().err
    assert main(base) == 0
    assert main([*base[:-3], "--seed", "9", *base[-3:]]) == 2
    assert "another config" in capsys.readouterr().err
    assert main(["eval", "--env", guess_env, "--policy", "nobody", "--out",
                 str(tmp_path / "x"), "--workers", "0"]) == 2
    assert "unknown policy" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "no manifest.json" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "--env", guess_env, "--policy", "p", "--budgets", "0,2", "--out", "x"])


@needs_frozenlake
def test_eval_frozenlake_oracle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "oracle"
    assert main(["eval", "--env", "agentenvs/FrozenLake-v0", "--policy", "frozenlake/oracle",
                 "--tasks", "first:3", "--n", "4", "--budgets", "4,8,16,32", "--workers", "2",
                 "--out", str(run), "--no-progress"]) == 0
    records = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    assert len(records) == 3 * 4 * 4  # rerun by default: one run per budget
    assert main(["report", str(run), "--no-plots", "--n-boot", "0"]) == 0
    surface = json.loads((run / "report" / "passk.json").read_text())["surface"]
    assert surface["budgets"] == [4, 8, 16, 32]
    capsys.readouterr()
    # the oracle plans on the turns left: derive mode is refused, saying why
    assert main(["eval", "--env", "agentenvs/FrozenLake-v0", "--policy", "frozenlake/oracle",
                 "--tasks", "first:3", "--n", "4", "--budgets", "4,8", "--mode", "derive",
                 "--workers", "0", "--out", str(tmp_path / "derive"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "conditions on the turn budget" in err and "rerun" in err


@needs_frozenlake
def test_demo_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--tasks", "first:3", "--n", "4", "--workers", "2",
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "demo finished" in printed
    from agentenvs.cli import DEMO_SUITES

    for suite in DEMO_SUITES:
        root = out / suite.name
        for name in ("passk.md", "passk.png", "comparison.md", "comparison.csv",
                     "comparison.json", "comparison.png"):
            assert (root / "report" / name).exists(), (suite.name, name)
        # the reports show the fault rate, 0 here, of both runs
        comparison = (root / "report" / "comparison.md").read_text()
        assert comparison.count("no faults (fault rate 0%") == 2, suite.name
        assert "no faults (fault rate 0%" in (root / "report" / "passk.md").read_text()
        # the run folders are named after the scripted policies they hold
        from agentenvs.cli import demo_run_name

        names = {demo_run_name(suite.first), demo_run_name(suite.second)}
        assert len(names) == 2 and not names & {"base", "rl"}, suite.name
        for policy in (suite.first, suite.second):
            manifest = json.loads((root / demo_run_name(policy) / "manifest.json").read_text())
            assert manifest["config"]["policy"] == policy, suite.name
        assert not (root / "base").exists() and not (root / "rl").exists()
        # passk.md is the first run alone; comparison.md the difference, then both runs
        assert not (root / "report" / "comparison_first.md").exists()
        assert f"### First run: {suite.first}" in comparison
        assert f"### Second run: {suite.second}" in comparison


def test_demo_rejects_unknown_env(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path), "--envs", "nope"]) == 2
    assert "names no demo env" in capsys.readouterr().err
