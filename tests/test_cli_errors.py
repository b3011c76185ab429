"""Every user error of the ``agentenvs`` command is one line naming what is valid and the
closest match, exit status 2, found before any work starts: no run directory, no worker,
nothing left behind. Also: every option's help shows its default, ``list`` shows policy
parameters, ``eval --import``, and a resumed run's summary counts the whole run."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentenvs.cli import build_parser, main

FROZENLAKE = "agentenvs/FrozenLake-v0"


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``argv``; assert exit status 2 (returned, or a parser's SystemExit) and one
    line on stderr; return it."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    assert code == 2, argv
    return _one_line(capsys.readouterr().err)


def _eval(
    out: Path, *extra: str, env: str = FROZENLAKE, policy: str = "frozenlake/oracle"
) -> list[str]:
    return [
        "eval",
        "--env",
        env,
        "--policy",
        policy,
        "--tasks",
        "first:2",
        "--n",
        "2",
        "--budgets",
        "4",
        "--workers",
        "2",
        "--no-progress",
        "--out",
        str(out),
        *extra,
    ]


# ---------------------------------------------------------------- env ids
@pytest.mark.parametrize(
    "env_id",
    [
        "FrozenLak-v0",
        "FrozenLake-v0",
        "FrozenLake-v1",
        "agentenvs/FrozenLake-v1",
        "agentenvs/frozenlake-v0",
    ],
)
def test_a_wrong_env_id_names_the_close_match(
    env_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refused(_eval(tmp_path / "run", env=env_id), capsys)
    assert line.startswith("agentenvs eval: error: ")
    assert "did you mean 'agentenvs/FrozenLake-v0'?" in line
    assert "agentenvs/DeepCoderMT-v0" in line  # the valid ids
    assert "deprecated" not in line  # Gymnasium's own advice points at its FrozenLake-v1
    assert list(tmp_path.iterdir()) == []


def test_a_wrong_env_id_is_one_line_without_traceback_from_the_shell(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agentenvs.cli", *_eval(tmp_path / "run", env="FrozenLak-v0")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 2
    assert "did you mean 'agentenvs/FrozenLake-v0'?" in _one_line(out.stderr)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--env", "FrozenLak-v0"],
        [
            "step-quality",
            "--env",
            "FrozenLak-v0",
            "--reference",
            "frozenlake/oracle",
            "--a",
            "frozenlake/oracle",
            "--b",
            "frozenlake/random",
        ],
        [
            "error-states",
            "--env",
            "FrozenLak-v0",
            "--reference",
            "frozenlake/oracle",
            "--a",
            "frozenlake/oracle",
            "--b",
            "frozenlake/random",
        ],
    ],
    ids=["serve", "step-quality", "error-states"],
)
def test_every_command_checks_its_env_id(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if argv[0] != "serve":
        argv = [*argv, "--out", str(tmp_path / "out")]
    line = _refused(argv, capsys)
    assert line.startswith(f"agentenvs {argv[0]}: error: unknown env id 'FrozenLak-v0'")
    assert "did you mean 'agentenvs/FrozenLake-v0'?" in line
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- env kwargs
@pytest.mark.parametrize(
    ("typo", "meant"), [("sucess_rate", "success_rate"), ("map_nam", "map_name")]
)
def test_an_env_kwarg_typo_names_the_kwarg(
    typo: str, meant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kwargs = json.dumps({typo: 0.8 if "rate" in typo else "4x4"})
    line = _refused(_eval(tmp_path / "run", "--env-kwargs", kwargs), capsys)
    assert f"takes no env kwarg '{typo}'; did you mean '{meant}'?" in line
    assert "success_rate=0.333" in line and "map_name=None" in line  # the valid ones
    assert list(tmp_path.iterdir()) == []
    line = _refused(["serve", "--env", FROZENLAKE, "--env-kwargs", kwargs], capsys)
    assert f"did you mean '{meant}'?" in line


# ---------------------------------------------------------------- policies
def test_a_policy_parameter_typo_names_the_parameter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refused(_eval(tmp_path / "run", policy="frozenlake/noisy:eror_rate=0.2"), capsys)
    assert "no parameter 'eror_rate'; did you mean 'error_rate'?" in line
    assert "error_rate=0.2, recover=0.5" in line
    line = _refused(_eval(tmp_path / "run", policy="frozenlake/orcle"), capsys)
    assert "unknown policy 'frozenlake/orcle'; did you mean 'frozenlake/oracle'?" in line
    line = _refused(_eval(tmp_path / "run", policy="frozenlake/noisy:error_rate=2"), capsys)
    assert "error_rate must be a probability in [0, 1], got 2" in line
    assert list(tmp_path.iterdir()) == []


def test_a_policy_for_another_env_is_refused_before_the_run_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # before, the run dir was made and the workers failed inside the pool
    line = _refused(_eval(tmp_path / "run", policy="bfcl/gold"), capsys)
    assert "bfcl/gold reads a BFCLEnv's state and cannot play agentenvs/FrozenLake-v0" in line
    assert "frozenlake/oracle" in line  # what does play it
    assert list(tmp_path.iterdir()) == []
    line = _refused(
        [
            "step-quality",
            "--env",
            FROZENLAKE,
            "--reference",
            "frozenlake/oracle",
            "--a",
            "frozenlake/oracle",
            "--b",
            "terminal/solution",
            "--out",
            str(tmp_path / "sq"),
        ],
        capsys,
    )
    assert line.startswith("agentenvs step-quality: error: --b: policy terminal/solution")
    assert list(tmp_path.iterdir()) == []


def test_model_specs_are_checked_without_loading_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refused(["serve-model", "--model", "hf:model=x,devise=cpu"], capsys)
    assert "no parameter 'devise'; did you mean 'device'?" in line
    line = _refused(["serve-model", "--model", "hf"], capsys)
    assert "policy hf needs model" in line
    run = tmp_path / "run"
    assert main(_eval(run, "--workers", "0", policy="frozenlake/random")) == 0
    capsys.readouterr()
    line = _refused(
        ["likelihood", str(run), "--model-a", "frozenlake/random", "--out", str(tmp_path / "lk")],
        capsys,
    )
    assert "frozenlake/random cannot score actions" in line and "hf" in line
    assert not (tmp_path / "lk").exists()


# ---------------------------------------------------------------- paths, names, numbers
def test_a_missing_run_directory_names_the_close_sibling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "manifest.json").write_text("{}")
    missing = str(tmp_path / "bse")
    for argv in (
        ["report", missing],
        ["report", str(tmp_path / "base"), "--compare", missing],
        ["likelihood", missing, "--model-a", "hf:model=x", "--out", str(tmp_path / "o")],
        [
            "step-quality",
            "--run",
            missing,
            "--a",
            "frozenlake/oracle",
            "--b",
            "frozenlake/random",
            "--out",
            str(tmp_path / "o"),
        ],
    ):
        line = _refused(argv, capsys)
        assert f"{missing} does not exist" in line
        assert f"did you mean '{tmp_path / 'base'}'?" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--budgets", "1,x"], "argument --budgets: expected comma-separated integers"),
        (["--budgets", "0,2"], "argument --budgets: expected positive integers"),
        (["--n", "0"], "argument --n: expected an integer >= 1, got '0'"),
        (["--tasks", "first:x"], "expected first:N with N >= 1 (e.g. first:10), got 'first:x'"),
        (["--mode", "deriv"], "invalid choice: 'deriv'; did you mean 'derive'?"),
        (["--seeed", "3"], "unrecognized arguments: --seeed 3; did you mean '--seed'?"),
        (["--env-kwargs", "{"], "argument --env-kwargs: not valid JSON"),
    ],
)
def test_options_that_do_not_parse_are_one_line(
    argv: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refused(_eval(tmp_path / "run", *argv), capsys)
    assert line.startswith("agentenvs eval: error: ") and expected in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["evl"], "invalid choice: 'evl'; did you mean 'eval'?"),
        (["report", "x", "--ks", "1,,y"], "argument --ks: expected comma-separated integers"),
        (
            ["demo", "--envs", "frozenlake,bfc"],
            "--envs names no demo env 'bfc'; did you mean 'bfcl'?",
        ),
        (
            ["data", "info", "deepcoder-previw"],
            "unknown dataset 'deepcoder-previw'; did you mean 'deepcoder-preview'?",
        ),
        (["sandbox", "provison"], "invalid choice: 'provison'; did you mean 'provision'?"),
        (["serve", "--env", FROZENLAKE, "--port", "99999"], "argument --port: expected a port"),
        (
            ["serve", "--env", FROZENLAKE, "--max-sessions", "0"],
            "--max-sessions: expected an integer >= 1",
        ),
        (["list", "--x"], "unrecognized arguments: --x"),
        (["demo", "--tasks", "4x4"], "unknown task id(s) ['4x4'] for agentenvs/InterCodeSQL-v0"),
    ],
    ids=["command", "ks", "demo", "data", "sandbox", "port", "sessions", "list", "demo-tasks"],
)
def test_every_command_reports_one_line(
    argv: list[str],
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    line = _refused(argv, capsys)
    assert expected in line, line
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- help and list
def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.extend(_subparsers(sub))
    return found


def _help_blocks(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each option's text in ``--help`` (its line and the indented ones after it), by
    each of its option strings."""
    blocks: dict[str, str] = {}
    names: list[str] = []
    for line in parser.format_help().splitlines():
        if line.startswith("  -"):
            names = re.findall(r"(?:^|, )(--?[\w-]+)", line.strip())
            text = line
        elif names and line.startswith("    "):
            text += " " + line
        else:
            names = []
        for option in names:
            blocks[option] = " ".join(text.split())
    return blocks


def test_every_option_has_help_with_its_default() -> None:
    for parser in _subparsers(build_parser()):
        blocks = _help_blocks(parser)
        for action in parser._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue
            option = action.option_strings[-1]
            assert action.help, f"{parser.prog} {option} has no help"
            if action.default in (None, argparse.SUPPRESS) or isinstance(action.default, bool):
                continue
            assert "default" in blocks[option].lower(), f"{parser.prog}: {blocks[option]}"
    (eval_parser,) = [p for p in _subparsers(build_parser()) if p.prog == "agentenvs eval"]
    blocks = _help_blocks(eval_parser)
    assert blocks["--n"].endswith("samples per task (>= the largest K) (default: 16)")
    assert blocks["--budgets"].endswith("(default: 1,2,4,8)")


def test_list_shows_policy_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  frozenlake/noisy +error_rate=0\.2, recover=0\.5$", out, re.M)
    assert re.search(r"^  hf +model \(required\), tokenizer=None, device='auto'", out, re.M)
    assert re.search(r"^  frozenlake/oracle +none$", out, re.M)


PLUGIN = textwrap.dedent(
    """
    from agentenvs.envs.frozenlake.env import format_action
    from agentenvs.policy.base import ScriptedPolicy
    from agentenvs.policy.registry import register_policy


    class AlwaysDown(ScriptedPolicy):
        name = "plugin/always-down"
        conditions_on_budget = False

        def act(self, conversation, rng):
            return format_action(1)


    register_policy("plugin/always-down", f"{__name__}:AlwaysDown")
    """
)


def test_eval_imports_a_plugin_in_every_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cli_plugin_policies.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned workers inherit sys.path
    run = tmp_path / "run"
    argv = _eval(run, "--workers", "1", policy="plugin/always-down")
    line = _refused(argv, capsys)  # without the import, nobody registered it
    assert "unknown policy 'plugin/always-down'" in line and not run.exists()
    assert main([*argv, "--import", "cli_plugin_policies"]) == 0
    records = (run / "trajectories.jsonl").read_text().splitlines()
    assert len(records) == 4
    assert all(
        s["action"] == "<answer>Down</answer>" for r in records for s in json.loads(r)["steps"]
    )


# ---------------------------------------------------------------- resume summary
def test_a_resumed_run_summary_counts_the_whole_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    argv = [
        "eval",
        "--env",
        FROZENLAKE,
        "--policy",
        "frozenlake/oracle",
        "--env-kwargs",
        '{"success_rate": 0.8}',
        "--tasks",
        "first:3",
        "--n",
        "6",
        "--budgets",
        "16",
        "--workers",
        "0",
        "--no-progress",
        "--out",
        str(run),
    ]
    assert main(argv) == 0
    capsys.readouterr()
    path = run / "trajectories.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    records = [json.loads(line) for line in lines]
    # keep the successes and drop some failures: the resumed part alone has no success
    kept = [line for line, r in zip(lines, records, strict=True) if r["success"]]
    dropped = [r for r in records if not r["success"]][:4]
    assert kept and dropped, "the seeded walks have both outcomes"
    kept += [
        line
        for line, r in zip(lines, records, strict=True)
        if not r["success"] and r not in dropped
    ]
    path.write_text("".join(kept))
    assert main(argv) == 0
    out = capsys.readouterr().out
    whole = sum(r["success"] for r in records) / len(records)
    assert f"{len(records) - 4} already done, 4 run" in out
    assert f"{whole:.0%} of all {len(records)} successful" in out, out
