"""The contract checker passes a good env and names the rule each broken env breaks."""

from __future__ import annotations

import functools

import gymnasium as gym
import pytest
from _toy_env import (
    BrokenAcrossProcessesEnv,
    BrokenAtomicResetEnv,
    BrokenAtomicRestoreEnv,
    BrokenEmptyActionEnv,
    BrokenErrorActionEnv,
    BrokenFileModesEnv,
    BrokenHistoryLeakEnv,
    BrokenInfoEnv,
    BrokenScoreActionEnv,
    BrokenSnapshotRngEnv,
    BrokenTerminatesOnBudgetEnv,
    FilesEnv,
    LineWalkEnv,
)

from agentenvs.testing import (
    CHECKS,
    ContractError,
    ContractReport,
    FileProbe,
    assert_env_contract,
    check_env_contract,
    contract_test,
)
from agentenvs.wrappers import BudgetMix, InjectError


def failures_of(factory: object, **kwargs: object) -> dict[str, str]:
    with pytest.raises(ContractError) as caught:
        check_env_contract(factory, **kwargs)  # type: ignore[arg-type]
    assert isinstance(caught.value, AssertionError)  # pytest shows it as a failed assert
    return {r.name: r.detail for r in caught.value.failures}


def test_good_env_passes_every_check() -> None:
    report = check_env_contract(LineWalkEnv)
    assert isinstance(report, ContractReport) and report.passed
    assert [r.name for r in report.results] == list(CHECKS)
    assert all(r.passed is True for r in report.results if r.name != "file_modes"), report.summary()
    assert report.result("file_modes").passed is None  # no files, no probe
    assert "all checks passed" in report.summary()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_good_env_passes_with_other_seeds_and_options(seed: int) -> None:
    check_env_contract(
        LineWalkEnv, seed=seed, steps=60, options={"task_id": "line-5"}, check_processes=False
    )


def test_snapshot_that_forgets_the_rng_is_caught() -> None:
    failures = failures_of(BrokenSnapshotRngEnv)
    assert "snapshot_roundtrip" in failures and "snapshot_pickle" in failures
    assert "did not put back np_random" in failures["snapshot_roundtrip"]
    assert "the same actions gave other results" in failures["snapshot_pickle"]


def test_raising_on_an_empty_action_is_caught() -> None:
    failures = failures_of(BrokenEmptyActionEnv, check_processes=False)
    assert "bad_actions" in failures
    assert "empty string: step raised ValueError" in failures["bad_actions"]
    # the other bad inputs are still reported as fine: only the empty one is named
    assert "1 MB string" not in failures["bad_actions"]


def test_history_leaking_across_resets_is_caught() -> None:
    failures = failures_of(BrokenHistoryLeakEnv, check_processes=False)
    assert set(failures) == {"no_history_leak", "seed_determinism"}
    assert "differs from a fresh env's" in failures["no_history_leak"]
    assert "Episode 1." in failures["no_history_leak"]


def test_terminating_instead_of_truncating_is_caught() -> None:
    failures = failures_of(BrokenTerminatesOnBudgetEnv, check_processes=False)
    assert set(failures) == {"budget_truncation"}
    assert "must truncate, not terminate" in failures["budget_truncation"]


def test_nondeterminism_across_processes_is_caught() -> None:
    failures = failures_of(BrokenAcrossProcessesEnv)
    assert set(failures) == {"cross_process"}
    assert "differs in another process from record 0 (reset)" in failures["cross_process"]


def test_error_action_ignoring_its_rng_is_caught() -> None:
    failures = failures_of(BrokenErrorActionEnv, check_processes=False)
    assert "error_action" in failures
    assert "equally seeded generators gave" in failures["error_action"]


def test_score_action_that_advances_is_caught() -> None:
    failures = failures_of(BrokenScoreActionEnv, check_processes=False)
    assert set(failures) == {"score_action"}
    assert "turn/state_key changed" in failures["score_action"]


def test_wrong_info_types_are_caught() -> None:
    failures = failures_of(BrokenInfoEnv, check_processes=False)
    assert set(failures) == {"info_keys"}
    assert "info['score'] = '0.5', expected a float" in failures["info_keys"]
    assert "info['success'] = 0, expected a bool" in failures["info_keys"]


def test_report_without_raising_and_skips() -> None:
    report = check_env_contract(
        BrokenTerminatesOnBudgetEnv, raise_on_failure=False, skip=["cross_process"]
    )
    assert not report.passed and report.failure_names == ["budget_truncation"]
    assert report.result("cross_process").passed is None
    assert "FAIL budget_truncation" in report.summary()


def test_unpicklable_factory_skips_the_cross_process_check() -> None:
    report = check_env_contract(lambda: LineWalkEnv())
    skipped = report.result("cross_process")
    assert skipped.passed is None and "cannot be pickled" in skipped.detail


def test_wrapped_env_from_a_factory_passes() -> None:
    # wrappers that take part in snapshots keep a wrapped env within the contract
    def make(**kwargs: object) -> gym.Env:
        return InjectError(BudgetMix(LineWalkEnv(**kwargs), [4, 6, 9], seed=1), probability=0.0)

    check_env_contract(make, check_processes=False)


def test_registered_id_and_env_kwargs() -> None:
    env_id = "agentenvs-test/LineWalk-v0"
    # registered as agentenvs registers its ids: gym.make's order and passive checkers
    # would refuse a step on a fresh env restored from a snapshot without a reset
    gym.register(env_id, entry_point=LineWalkEnv, order_enforce=False, disable_env_checker=True)
    try:
        report = check_env_contract(env_id, env_kwargs={"max_turns": 4, "show_budget": True})
        assert report.target == env_id and report.passed
        assert report.result("gymnasium_check_env").detail == ""  # render modes checked too
    finally:
        gym.registry.pop(env_id)


def test_make_wrappers_that_refuse_restored_envs_are_diagnosed() -> None:
    env_id = "agentenvs-test/LineWalkChecked-v0"
    gym.register(env_id, entry_point=LineWalkEnv)  # gymnasium's defaults: both checkers on
    try:
        failures = failures_of(env_id, check_processes=False)
    finally:
        gym.registry.pop(env_id)
    # every check that restores into a never-reset env meets the same wrapper
    assert set(failures) == {"snapshot_pickle", "atomic_reset", "atomic_restore"}
    assert all("order_enforce=False" in detail for detail in failures.values())


def test_argument_checks() -> None:
    with pytest.raises(ValueError, match="unknown check"):
        check_env_contract(LineWalkEnv, skip=["nope"])
    with pytest.raises(ValueError, match="max_turns"):
        check_env_contract(LineWalkEnv, options={"max_turns": 3})
    with pytest.raises(ValueError, match="steps"):
        check_env_contract(LineWalkEnv, steps=0)
    with pytest.raises(TypeError):
        check_env_contract(42)  # type: ignore[arg-type]


def test_assert_helper_and_pytest_factory() -> None:
    assert assert_env_contract(LineWalkEnv, check_processes=False).passed
    with pytest.raises(AssertionError, match="budget_truncation"):
        assert_env_contract(BrokenTerminatesOnBudgetEnv, check_processes=False)
    test_fn = contract_test(LineWalkEnv, functools.partial(LineWalkEnv), check_processes=False)
    marks = [m for m in test_fn.pytestmark if m.name == "parametrize"]
    assert marks and len(marks[0].args[1]) == 2
    test_fn(LineWalkEnv)


FILE_PROBE = FileProbe(
    options={"task_id": "files"},
    setup=("touch run.sh", "chmod 777 run.sh", "chmod 666 readme", "mkdir empty", "chmod 1777 empty"),
    disturb=("chmod 755 run.sh", "chmod 644 readme", "chmod 755 empty"),
    listing="ls",
)


def test_a_failed_reset_that_changes_the_episode_is_caught() -> None:
    failures = failures_of(BrokenAtomicResetEnv, check_processes=False)
    assert list(failures) == ["atomic_reset"]
    assert "raised but changed the live episode" in failures["atomic_reset"]


def test_a_restore_that_is_not_all_or_nothing_is_caught() -> None:
    failures = failures_of(BrokenAtomicRestoreEnv, check_processes=False)
    assert list(failures) == ["atomic_restore"]
    assert "restore raised but changed the env" in failures["atomic_restore"]


def test_file_modes_survive_a_restore_with_a_probe() -> None:
    report = check_env_contract(FilesEnv, file_probe=FILE_PROBE, check_processes=False)
    assert report.result("file_modes").passed is True, report.summary()
    assert report.result("atomic_restore").passed is True


def test_a_restore_that_loses_file_modes_is_caught() -> None:
    failures = failures_of(BrokenFileModesEnv, file_probe=FILE_PROBE, check_processes=False)
    assert "file_modes" in failures
    assert "after a restore the files differ" in failures["file_modes"]
    assert "run.sh file 777" in failures["file_modes"]


def test_a_probe_that_disturbs_nothing_is_reported() -> None:
    idle = FileProbe(options={}, setup=("touch a",), disturb=("ls",), listing="ls")
    failures = failures_of(FilesEnv, file_probe=idle, check_processes=False)
    assert "changed nothing" in failures["file_modes"]
