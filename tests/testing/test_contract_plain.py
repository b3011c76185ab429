"""The contract checker on envs that are not the suite's full envs: a plain
``gymnasium.Env`` with str spaces gets every check that applies to any env, and each
check that needs a part of the suite's interface says what is missing; a minimal
``TextEnv`` subclass gets everything but what its missing hooks would give."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest
from _plain_envs import (
    BrokenEmptyGuessEnv,
    BrokenGlobalRandomEnv,
    GuessDigitEnv,
    MinimalTextEnv,
    PartialInfoEnv,
)

from agentenvs.testing import CHECKS, ContractError, check_env_contract

#: the checks that apply to any gymnasium.Env
ANY_ENV = {
    "gymnasium_check_env",
    "seed_determinism",
    "cross_process",
    "no_history_leak",
    "bad_actions",
    "close",
}
#: the checks that need snapshots, error_action or score_action
NEED_HOOKS = {
    "snapshot_roundtrip",
    "snapshot_pickle",
    "score_action",
    "error_action",
    "atomic_reset",
    "atomic_restore",
    "fork_equivalence",
    "fork_independence",
    "fork_close",
    "file_modes",
}


def statuses(report) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {r.name: r.status for r in report.results}


def test_a_plain_gymnasium_env_gets_every_check_that_applies() -> None:
    report = check_env_contract(GuessDigitEnv)
    assert report.passed, report.summary()
    got = statuses(report)
    assert list(got) == list(CHECKS)
    assert {n for n, s in got.items() if s == "passed"} == ANY_ENV
    assert {n for n, s in got.items() if s == "not applicable"} == set(CHECKS) - ANY_ENV
    for result in report.not_applicable:
        assert result.passed is None and result.missing and not result.applicable
        assert result.detail.startswith("not applicable: needs "), result.detail
        assert "subclass agentenvs.core.TextEnv" in result.detail
        assert "Traceback" not in result.detail and "Error" not in result.detail
    snapshot = report.result("snapshot_pickle")
    assert snapshot.missing == ("snapshot",)
    assert "needs env.unwrapped.snapshot() and env.unwrapped.restore(snapshot)" in snapshot.detail
    assert report.result("error_action").missing == ("error_action", "turn_state")
    assert "env.unwrapped.error_action(rng)" in report.result("error_action").detail
    assert report.result("info_keys").missing == ("info_keys",)
    assert "max_turns" in report.result("budget_truncation").detail
    assert "no snapshot replay" in report.result("cross_process").detail
    # only the inputs its Text space holds (the empty string) are owed an answer
    assert report.result("bad_actions").detail.startswith("1 input within the action space")
    summary = report.summary()
    assert "all applicable checks passed, 14 not applicable" in summary
    assert "  n/a  snapshot_roundtrip" in summary and "  ok   seed_determinism" in summary


def test_a_plain_env_made_by_id_with_gymnasiums_wrappers() -> None:
    env_id = "agentenvs-test/GuessDigit-v0"
    gym.register(env_id, entry_point=GuessDigitEnv)  # OrderEnforcing, PassiveEnvChecker
    try:
        report = check_env_contract(env_id, check_processes=False)
    finally:
        gym.registry.pop(env_id)
    assert report.passed, report.summary()
    assert {r.name for r in report.results if r.status == "passed"} == ANY_ENV - {"cross_process"}


def test_strict_counts_what_does_not_apply_as_failed() -> None:
    with pytest.raises(ContractError) as caught:
        check_env_contract(GuessDigitEnv, strict=True, check_processes=False)
    failures = caught.value.failures
    assert {r.name for r in failures} == set(CHECKS) - ANY_ENV
    assert all("(strict: counted as a failure)" in r.detail and r.missing for r in failures)
    assert check_env_contract(MinimalTextEnv, strict=False, check_processes=False).passed


def test_a_plain_env_that_breaks_seeding_is_caught() -> None:
    report = check_env_contract(BrokenGlobalRandomEnv, raise_on_failure=False)
    assert set(report.failure_names) == {"seed_determinism", "cross_process", "no_history_leak"}
    assert "two envs, same seed and actions" in report.result("seed_determinism").detail
    assert "Hint: not" in report.result("no_history_leak").detail


def test_a_plain_env_that_crashes_on_an_action_of_its_space_is_caught() -> None:
    report = check_env_contract(BrokenEmptyGuessEnv, raise_on_failure=False, check_processes=False)
    assert "bad_actions" in report.failure_names
    assert "empty string: step raised IndexError" in report.result("bad_actions").detail


def test_a_plain_env_with_some_info_keys_is_held_to_all_of_them() -> None:
    report = check_env_contract(PartialInfoEnv, raise_on_failure=False, check_processes=False)
    assert report.failure_names == ["info_keys"]
    assert "info lacks 'task_id'" in report.result("info_keys").detail
    assert "info lacks 'turn'" not in report.result("info_keys").detail


def test_a_minimal_textenv_subclass_gets_all_but_its_missing_hooks() -> None:
    report = check_env_contract(MinimalTextEnv)
    assert report.passed, report.summary()
    got = statuses(report)
    assert {n for n, s in got.items() if s == "not applicable"} == NEED_HOOKS
    assert {n for n, s in got.items() if s == "passed"} == set(CHECKS) - NEED_HOOKS
    detail = report.result("snapshot_roundtrip").detail
    assert detail == (
        "not applicable: needs MinimalTextEnv to implement _get_state() and _set_state() "
        "(TextEnv builds snapshot() and restore() on them)"
    )
    assert report.result("error_action").missing == ("error_action",)
    assert "MinimalTextEnv to implement error_action(rng)" in report.result("error_action").detail
    assert "score_action(action), or _get_state()" in report.result("score_action").detail
    assert "no snapshot replay" in report.result("cross_process").detail


def test_an_env_defined_in_a_script_skips_only_the_cross_process_check(tmp_path: Path) -> None:
    script = tmp_path / "my_env.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from _plain_envs import GuessDigitEnv
            from agentenvs.testing import check_env_contract

            class ScriptEnv(GuessDigitEnv):
                pass

            report = check_env_contract(ScriptEnv)
            print(report.result("cross_process").status, report.result("cross_process").detail)
            print(report.passed)
            """
        )
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert out.splitlines() == [
        "skipped the env is defined in __main__, which another interpreter cannot import; "
        "define it in a module to check across processes",
        "True",
    ]
