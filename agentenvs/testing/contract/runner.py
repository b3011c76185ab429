"""``check_env_contract``: runs every check on fresh envs and gathers the report; the
table of checks (``CHECKS``) and of what each needs of the suite's interface (``REQUIRES``)."""

from __future__ import annotations

import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentenvs.testing._trajectory import EnvTarget, target_name
from agentenvs.testing.contract import basic, episode, forks, probes, snapshots
from agentenvs.testing.contract.context import Context, FileProbe, hint
from agentenvs.testing.contract.report import (
    CheckResult,
    ContractError,
    ContractReport,
    Failed,
    Skipped,
)

CHECKS: dict[str, Callable[[Context], Any]] = {
    "gymnasium_check_env": basic.check_gymnasium,
    "info_keys": episode.check_info_keys,
    "seed_determinism": basic.check_seed_determinism,
    "cross_process": basic.check_cross_process,
    "snapshot_roundtrip": snapshots.check_snapshot_roundtrip,
    "snapshot_pickle": snapshots.check_snapshot_pickle,
    "budget_truncation": episode.check_budget_truncation,
    "step_after_end": episode.check_step_after_end,
    "no_history_leak": basic.check_no_history_leak,
    "bad_actions": basic.check_bad_actions,
    "score_action": probes.check_score_action,
    "error_action": probes.check_error_action,
    "task_id_option": episode.check_task_id_option,
    "close": basic.check_close,
    "atomic_reset": episode.check_atomic_reset,
    "atomic_restore": snapshots.check_atomic_restore,
    "file_modes": snapshots.check_file_modes,
    "fork_equivalence": forks.check_fork_equivalence,
    "fork_independence": forks.check_fork_independence,
    "fork_close": forks.check_fork_close,
}

#: the capabilities (``context.PLAIN_NEEDS``) each check needs; the others apply to any env
REQUIRES: dict[str, tuple[str, ...]] = {
    "info_keys": ("info_keys",),
    "snapshot_roundtrip": ("snapshot", "turn_state"),
    "snapshot_pickle": ("snapshot",),
    "budget_truncation": ("info_keys", "budget_option", "turn_rules"),
    "step_after_end": ("budget_option", "turn_rules"),
    "score_action": ("score_action", "turn_state"),
    "error_action": ("error_action", "turn_state"),
    "task_id_option": ("task_id_option",),
    "atomic_reset": ("snapshot", "turn_state", "task_id_option", "budget_option"),
    "atomic_restore": ("snapshot", "turn_state"),
    "file_modes": ("snapshot",),
    "fork_equivalence": ("snapshot", "turn_state", "fork"),
    "fork_independence": ("snapshot", "turn_state", "fork"),
    "fork_close": ("snapshot", "turn_state", "fork"),
}


def _not_applicable(ctx: Context, name: str, strict: bool) -> CheckResult | None:
    needed = REQUIRES.get(name, ())
    lacking = ctx.capabilities.lacking(needed)
    if not lacking:
        return None
    detail = f"not applicable: {ctx.capabilities.needs(needed)}"
    if strict:
        detail += " (strict: counted as a failure)"
    return CheckResult(name, False if strict else None, detail, missing=lacking)


def check_env_contract(
    env: EnvTarget,
    *,
    seed: int = 0,
    steps: int = 30,
    options: Mapping[str, Any] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    check_processes: bool = True,
    skip: Iterable[str] = (),
    raise_on_failure: bool = True,
    process_timeout: float = 120.0,
    file_probe: FileProbe | None = None,
    strict: bool = False,
) -> ContractReport:
    """Check that an env keeps the agentenvs contract; return the report.

    Arguments:
        env: a registered id (made with ``gym.make(env, **env_kwargs)``) or a factory
            called as ``env(**env_kwargs)``; for the cross-process check a factory must
            be picklable (a module-level function or class).
        seed: the seed for resets and for the checker's own action streams.
        steps: actions per trajectory.
        options: reset options used throughout (``task_id`` pins one task).
        check_processes: also replay in a fresh interpreter (about a second).
        skip: names of checks not to run (see ``CHECKS``).
        raise_on_failure: raise ``ContractError`` listing every failed check.
        file_probe: for envs with files, how ``file_modes`` reaches them (``FileProbe``);
            without it that check is skipped.
        strict: count a check that does not apply, because the env lacks a part of the
            suite's interface it needs (``REQUIRES``), as failed rather than skipped.

    Any ``gymnasium.Env`` can be checked. A check that needs what the env lacks (a plain
    env has no ``snapshot()``, ``error_action()``, ``score_action()``, budget option or
    info keys; a ``TextEnv`` subclass may leave ``_get_state``/``_set_state`` or
    ``error_action`` out) is reported as not applicable, saying what is missing
    (``CheckResult.missing``, ``ContractReport.not_applicable``).

    Gymnasium's warnings are collected in ``report.warnings``, not raised.
    """
    skip = set(skip)
    unknown = skip - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown check name(s) {sorted(unknown)}; known: {list(CHECKS)}")
    if not (isinstance(env, str) or callable(env)):
        raise TypeError(f"env must be an env id or a factory, got {env!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    options = dict(options or {})
    if "max_turns" in options:
        raise ValueError("options must not set max_turns: the budget checks set it themselves")
    ctx = Context(
        target=env,
        env_kwargs=dict(env_kwargs or {}),
        seed=int(seed),
        steps=steps,
        options=options,
        check_processes=check_processes,
        process_timeout=process_timeout,
        file_probe=file_probe,
    )
    report = ContractReport(target=target_name(env))
    seen: set[str] = set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ctx.detect_capabilities()
        for name, check in CHECKS.items():
            if name in skip:
                report.results.append(CheckResult(name, None, "skipped by the caller"))
                continue
            not_applicable = _not_applicable(ctx, name, strict)
            if not_applicable is not None:
                report.results.append(not_applicable)
                continue
            start = time.perf_counter()
            try:
                note = check(ctx)
                result = CheckResult(name, True, note or "")
            except Skipped as exc:
                result = CheckResult(name, None, str(exc))
            except Failed as exc:
                result = CheckResult(name, False, "\n".join(exc.problems))
            except Exception as exc:
                tb = "".join(
                    traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3)
                )
                result = CheckResult(
                    name, False, f"raised {type(exc).__name__}: {exc}{hint(tb)}\n{tb.rstrip()}"
                )
            finally:
                ctx.close_all()
            result.seconds = time.perf_counter() - start
            report.results.append(result)
    for w in caught:
        text = f"{w.category.__name__}: {w.message}"
        if text not in seen:
            seen.add(text)
            report.warnings.append(text)
    if raise_on_failure and not report.passed:
        raise ContractError(report)
    return report


def assert_env_contract(env: EnvTarget, **kwargs: Any) -> ContractReport:
    """``check_env_contract`` that always raises on failure (an ``AssertionError``)."""
    kwargs["raise_on_failure"] = True
    return check_env_contract(env, **kwargs)


def contract_test(*envs: EnvTarget, **kwargs: Any) -> Callable[[EnvTarget], None]:
    """A pytest test function parametrized over ``envs``, for a user's own test suite::

    test_my_envs = contract_test("mypkg/MyEnv-v0", make_other_env)
    """
    import pytest  # only needed by callers who build pytest tests

    @pytest.mark.parametrize("env", envs, ids=[target_name(e) for e in envs])
    def test_env_contract(env: EnvTarget) -> None:
        assert_env_contract(env, **kwargs)

    return test_env_contract
