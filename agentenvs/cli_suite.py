"""``agentenvs eval --envs all|NAME,...``: one policy on every env, then one summary page.

    agentenvs eval --policy hf:model=PATH --envs all --out runs/ckpt
    agentenvs eval --policy scripted/reference --envs frozenlake,sql --out runs/check
    agentenvs report runs/ckpt            # the summary page again (and each env's report)

The library side is ``agentenvs.eval.suite`` (plans and runs) and
``agentenvs.eval.summary_page`` (the page); this module turns the command's options
into them and prints what will run before it runs.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from agentenvs.core.suggest import UsageError, one_line


def _per_env_kwargs(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``--env-kwargs`` with ``--envs``: a JSON object of env name -> gym.make kwargs."""
    from agentenvs.eval.suite import SuiteError, select_envs

    given = args.env_kwargs or {}
    out: dict[str, dict[str, Any]] = {}
    for name, kwargs in given.items():
        try:
            (env,) = select_envs(name)
        except (SuiteError, ValueError) as exc:
            raise UsageError(
                "--env-kwargs with --envs maps an env name to its kwargs, e.g. "
                f"'{{\"terminal\": {{\"runtime\": \"docker\"}}}}': {one_line(exc)}"
            ) from None
        if not isinstance(kwargs, dict):
            raise UsageError(f"--env-kwargs: the kwargs of {name!r} must be a JSON object")
        out[env.name] = dict(kwargs)
    return out


def check_suite_args(args: argparse.Namespace) -> None:
    """The checks of ``eval --envs`` that need no work (``agentenvs.cli_args``)."""
    from agentenvs.cli_args import check_env, check_policy
    from agentenvs.eval.suite import SCRIPTED_FAMILIES, SuiteError, policy_for, select_envs

    if args.env is not None:
        raise UsageError("give --env ENV_ID (one env) or --envs all|NAME,... (several), not both")
    if args.budget_unit != "turns" or args.max_turns is not None:
        raise UsageError("--envs runs turn budgets; evaluate a token or seconds budget with --env")
    if args.show_budget and args.mode == "derive":
        raise UsageError("--show-budget tells the agent its turns left: use --mode rerun")
    try:
        envs = select_envs(args.envs)
    except SuiteError as exc:
        raise UsageError(str(exc)) from None
    kwargs = _per_env_kwargs(args)
    for env in envs:
        check_env(env.env_id, kwargs.get(env.name))
        spec = policy_for(args.policy, env)
        option = "--policy" if args.policy not in SCRIPTED_FAMILIES else f"--policy ({env.name}: {spec})"
        try:
            check_policy(spec, option, env.env_id)
        except UsageError as exc:
            if args.policy in SCRIPTED_FAMILIES:
                raise
            raise UsageError(
                f"{exc}; with --envs give a model policy (hf:, vllm:, openai:) or "
                f"{' or '.join(SCRIPTED_FAMILIES)} (each env's own scripted policy)"
            ) from None


def cmd_eval_suite(args: argparse.Namespace) -> int:
    """Plan every env (printing it), run each, then write the reports and the summary page."""
    from agentenvs.cli import _default_workers, _fault_kwargs, _ImportingExecutor
    from agentenvs.eval.executors import make_executor
    from agentenvs.eval.suite import (
        SuiteError,
        plan_lines,
        plan_suite,
        run_suite,
        select_envs,
        write_suite_record,
    )
    from agentenvs.eval.summary_page import write_summary
    from agentenvs.policy.registry import is_model_policy

    started = time.perf_counter()
    envs = select_envs(args.envs)
    if is_model_policy(args.policy):  # a model that cannot load: one line, no folder
        from agentenvs.policy.preflight import check_model_policy

        check_model_policy(args.policy, "--policy")
    try:
        plans = plan_suite(
            args.policy, envs, args.out, tasks=args.tasks, n=args.n, budgets=args.budgets,
            mode=args.mode, seed=args.seed, env_kwargs=_per_env_kwargs(args),
            show_budget=args.show_budget, data=args.data, record_tokens=args.record_tokens,
        )
    except SuiteError as exc:
        raise UsageError(str(exc)) from None
    for line in plan_lines(plans, args.policy):
        print(line, flush=True)
    if all(plan.config is None for plan in plans):
        write_suite_record(args.out, args.policy, [_skipped(p) for p in plans])
        raise UsageError("no env can run here (each line above says why)")
    # a model policy: one worker (each would load its own copy of the model)
    workers = args.workers if args.workers is not None else (
        1 if is_model_policy(args.policy) else _default_workers()
    )
    executor: Any = make_executor(
        args.backend, workers, address=args.address,
        **({"keep_workers": True} if args.backend == "local" else {}),
    )
    if args.imports:
        executor = _ImportingExecutor(executor, args.imports)
    with executor:
        outcomes = run_suite(
            plans, executor=executor, progress=not args.no_progress,
            chunk_size=args.chunk_size, faults=_fault_kwargs(args),
        )
    seconds = time.perf_counter() - started
    write_suite_record(args.out, args.policy, outcomes, seconds)
    paths = write_summary(args.out)
    failed = [o for o in outcomes if o.status == "failed"]
    print(f"every-env evaluation finished in {seconds:.1f} s; summary: {paths[0]}")
    print(paths[1].read_text())
    return 1 if failed else 0


def _skipped(plan: Any) -> Any:
    from agentenvs.eval.suite import EnvOutcome

    return EnvOutcome(plan, "skipped", plan.skip)


def cmd_report_suite(args: argparse.Namespace) -> int:
    """``agentenvs report DIR`` on an every-env folder: each env's report and the page again."""
    from agentenvs.eval.summary_page import write_summary

    if args.compare is not None or args.out is not None or args.ks is not None:
        raise UsageError(
            f"{args.run_dir} holds an every-env evaluation: report it as it is, or one env's "
            f"run with --compare/--out/--ks (agentenvs report {args.run_dir}/<env>)"
        )
    paths = write_summary(args.run_dir, n_boot=args.n_boot, seed=args.seed, plots=not args.no_plots)
    print(paths[1].read_text())
    print("files:")
    for path in paths:
        print(f"  {path}")
    return 0
