"""The ``agentenvs`` command: list envs and policies, run Pass@(K,T) evaluations, report, demo.

    agentenvs list
    agentenvs eval --env agentenvs/FrozenLake-v0 --policy frozenlake/oracle --out runs/oracle
    agentenvs eval --envs all --policy hf:model=PATH --out runs/ckpt   # every env, one page
    agentenvs report runs/base --compare runs/rl
    agentenvs demo --out out/demo
    agentenvs sandbox provision      # the local sandbox's Python (numpy, pandas), once
    agentenvs step-quality --run runs/base --a rl-policy --b base-policy --out out/sq
    agentenvs error-states --env agentenvs/FrozenLake-v0 --reference frozenlake/oracle \\
        --a frozenlake/noisy:recover=0.9 --b frozenlake/noisy:recover=0.3 --out out/es
    agentenvs likelihood runs/base runs/rl --model-a rl-model --model-b base-model --out out/lk
    agentenvs serve-model --model hf:model=PATH --port 8000

Subcommands import what they need when they run, so ``agentenvs --help`` stays quick.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenvs.cli_args import (
    TASKS_HELP,
    CommandParser,
    add_analysis_parsers,
    add_certify_parser,
    add_check_tasks_parser,
    add_fault_args,
    add_plan_parser,
    check_args,
    int_list,
    json_object,
    non_negative_int,
    positive_int,
    tasks_spec,
)
from agentenvs.cli_demo import DEMO_SUITES, DemoSuite  # noqa: F401 - DemoSuite: the public name


def _default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand: one-line errors naming the closest valid choice,
    every option's default in its help (``agentenvs.cli_checks.CommandParser``)."""
    parser = CommandParser(
        prog="agentenvs",
        description="Text environments for multi-turn RL of LLM agents, and Pass@(K,T) evaluation.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("list", help="list the env ids and the registered policies with their parameters")

    ev = sub.add_parser("eval", help="run (or resume) a Pass@(K,T) evaluation into a run directory")
    ev.add_argument("--env", default=None,
                    help="env id, e.g. agentenvs/FrozenLake-v0 (or --envs for several)")
    ev.add_argument("--envs", default=None,
                    help="'all' or a comma list of env names or ids (frozenlake,sql,...): each "
                    "env's run in OUT/<name>/, then OUT/index.html; --tasks, --n, --budgets "
                    "and --mode left out take each env's own")
    ev.add_argument("--data", choices=("auto", "bundled"), default="auto",
                    help="with --envs: auto runs full data where `agentenvs data fetch` cached "
                    "it, else the bundled tasks; bundled: always the bundled tasks")
    ev.add_argument("--policy", required=True, help="policy spec, e.g. frozenlake/noisy:error_rate=0.3")
    ev.add_argument("--tasks", type=tasks_spec, default=None,
                    help=f"{TASKS_HELP} (default: all)")
    ev.add_argument("--n", type=positive_int, default=None,
                    help="samples per task (>= the largest K) (default: 16)")
    ev.add_argument("--budgets", type=int_list, default=None,
                    help="budgets in --budget-unit, e.g. 1,2,4,8 turns or 256,512,1024 tokens "
                    "(default: 1,2,4,8)")
    ev.add_argument("--budget-unit", choices=("turns", "tokens", "seconds"), default="turns",
                    help="what the budgets count: turns, completion tokens over the trajectory "
                    "(a scripted policy: 1 per 4 characters of its actions) or wall-clock "
                    "seconds (machine-dependent); see docs/comparisons.md")
    ev.add_argument("--max-turns", type=positive_int, default=None,
                    help="turn cap of a token or seconds budget (default: the env's own)")
    ev.add_argument("--show-budget", action="store_true",
                    help="tell the agent its budget left (turns: the env's show_budget; tokens, "
                    "seconds: '[N tokens left]'); rerun mode only")
    ev.add_argument("--mode", choices=("rerun", "derive"), default=None,
                    help="rerun (default, always valid): one run per budget; derive: one run "
                    "at the largest budget, refused where the policy or env depends on it "
                    "(with --envs the default is derive where it is valid, else rerun)")
    ev.add_argument("--workers", type=non_negative_int, default=None,
                    help="worker processes (0 runs in this process; default: one per CPU, "
                    "or 1 for a model policy: each worker loads its own copy of the model)")
    ev.add_argument("--seed", type=int, default=0,
                    help="run seed: every trajectory's seed derives from it, the task and the sample")
    ev.add_argument("--out", required=True, type=Path, help="run directory (resumed if it exists)")
    ev.add_argument("--env-kwargs", type=json_object, default={},
                    help="JSON object of keyword arguments for gym.make (checked against the env's)")
    ev.add_argument("--chunk-size", type=positive_int, default=None,
                    help="trajectories per work chunk (default: whole tasks where that balances "
                    "the load, else about 16 chunks per worker)")
    ev.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                    help="import MODULE first in every process (registers plugin envs and policies)")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    ev.add_argument("--backend", choices=("local", "ray"), default="local",
                    help="local: a process pool on this machine; ray: Ray actors "
                    "(--workers of them; 0: one per cluster CPU)")
    ev.add_argument("--address", default=None,
                    help="Ray address with --backend ray ('auto', 'ray://host:10001'); "
                    "default: the RAY_ADDRESS cluster, else a new local one")
    ev.add_argument("--record-tokens", action="store_true",
                    help="keep each model step's prompt and sampled token ids and their "
                    "log-probs in the records (docs/tokens.md)")
    add_fault_args(ev, "trajectory")

    rp = sub.add_parser("report", help="tables and plots of a run, optionally compared with another")
    rp.add_argument("run_dir", type=Path)
    rp.add_argument("--compare", type=Path, default=None, help="a second run: report it minus the first")
    rp.add_argument("--allow-differences", action="store_true",
                    help="compare runs whose configs differ in more than the policy "
                    "(env kwargs, tasks, n, budgets, mode, seed); refused by default")
    rp.add_argument("--out", type=Path, default=None, help="output folder (default RUN_DIR/report)")
    rp.add_argument("--ks", type=int_list, default=None, help="K values (default powers of two up to n)")
    rp.add_argument("--n-boot", type=non_negative_int, default=1000, help="bootstrap resamples (0: no CIs)")
    rp.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    rp.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")
    add_plan_parser(sub)
    add_check_tasks_parser(sub)

    sb = sub.add_parser("sandbox", help="the local sandbox's Python runtime: provision it, show it")
    sb.add_argument("action", choices=("provision", "info"),
                    help="provision: build the interpreter copy and install numpy/pandas at their "
                    "pinned versions (once per machine; make does it); info: paths and versions")

    demo = sub.add_parser("demo", help="compare a weaker and a stronger scripted policy on each env")
    demo.add_argument("--out", type=Path, default=Path("out/demo"),
                      help="output folder: a run pair and a comparison report per env")
    demo.add_argument("--workers", type=non_negative_int, default=_default_workers(),
                      help="worker processes shared by every run (one per CPU here; 0: this process)")
    demo.add_argument("--envs", default=None,
                      help="comma list of demo envs (default all: "
                      + ",".join(s.name for s in DEMO_SUITES) + ")")
    demo.add_argument("--tasks", type=tasks_spec, default=None,
                      help=f"{TASKS_HELP} (default: each env's own)")
    demo.add_argument("--n", type=positive_int, default=None,
                      help="samples per task (default: each env's own)")
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_analysis_parsers(sub)
    add_certify_parser(sub)
    return parser


def cmd_serve(args: argparse.Namespace) -> int:
    from agentenvs.core.errors import require

    for dep in ("fastapi", "uvicorn", "mcp" if args.protocol == "mcp" else "websockets"):
        require(dep, "server")
    if args.protocol == "ors":
        from agentenvs.server.ors import require_ors

        require_ors()
    from agentenvs.server.access import is_loopback, resolve_token
    from agentenvs.server.app import ServerConfig, serve

    stdio = args.protocol == "mcp" and args.transport == "stdio"
    token, source = (None, "") if args.no_auth or stdio else resolve_token(args.token)
    config = ServerConfig(
        args.env, args.env_kwargs, max_sessions=args.max_sessions,
        session_timeout=args.session_timeout, max_message_bytes=args.max_message_bytes,
        share_snapshots=args.share_snapshots, max_snapshots=args.max_snapshots,
        snapshot_bytes=args.snapshot_memory, snapshot_ttl=args.snapshot_ttl or None,
        request_timeout=args.request_timeout or None, stall_timeout=args.stall_timeout or None,
        token=token, allow_hosts=tuple(args.allow_host), allow_origins=tuple(args.allow_origin),
        max_turns_cap=args.max_turns_cap, max_connections=args.max_connections,
    )
    if stdio:  # stdout is the protocol's: nothing else is written there
        from agentenvs.server.mcp import serve_stdio

        serve_stdio(config)
        return 0

    def announce(line: str) -> None:
        print(line, flush=True)

    def on_bound(port: int) -> Any:
        if not is_loopback(args.host):
            print(
                f"agentenvs serve: warning: listening on {args.host}, beyond this machine; "
                "every request needs the token (Host checked: loopback names and "
                "--allow-host)",
                file=sys.stderr, flush=True,
            )
        if token is None:
            announce("agentenvs serve: no token (--no-auth): any local process can act here")
            return None
        if source != "made":
            announce(f"agentenvs serve: token from {source} (Authorization: Bearer TOKEN)")
            return None
        from agentenvs.server.access import remove_token_file, write_token_file

        path = write_token_file(token, port)
        announce(
            f"agentenvs serve: token {token} (also in {path}, readable by you only; send "
            "Authorization: Bearer TOKEN, or ?token=TOKEN on the WebSocket)"
        )
        return lambda: remove_token_file(path)

    if args.protocol == "mcp":
        from agentenvs.server.mcp import serve_mcp_http

        serve_mcp_http(
            config, host=args.host, port=args.port, announce=announce, on_bound=on_bound
        )
        return 0
    if args.protocol == "ors":
        from agentenvs.server.ors import serve_ors

        serve_ors(config, host=args.host, port=args.port, announce=announce, on_bound=on_bound)
        return 0
    serve(config, host=args.host, port=args.port, announce=announce, on_bound=on_bound)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import agentenvs
    from agentenvs.policy.registry import describe_parameters, policy_names, policy_parameters

    ids = sorted(set(agentenvs.registered_ids()) | {i for i in gym.registry if i.startswith("agentenvs/")})
    print("envs:")
    for env_id in ids:
        print(f"  {env_id}")
    print("policies (name: parameters with their defaults; spec: name:key=value,key=value):")
    names = policy_names()
    width = max(map(len, names), default=0)
    for name in names:
        print(f"  {name:<{width}}  {describe_parameters(policy_parameters(name))}")
    return 0


def _fault_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "max_fault_retries": args.max_fault_retries,
        "fault_backoff": args.fault_backoff,
        "max_fault_rate": args.max_fault_rate,
    }


def _run(
    env_id: str, policy: str, tasks: str, n: int, budgets: Sequence[int], mode: str, seed: int,
    out: Path, env_kwargs: dict[str, Any], workers: int, progress: bool, chunk_size: int | None = None,
    backend: str = "local", address: str | None = None, executor: Any = None,
    faults: dict[str, Any] | None = None, record_tokens: bool = False,
    budget: dict[str, Any] | None = None,
) -> Any:
    from agentenvs.eval.runner import EvalConfig, resolve_tasks, run_pass_at_k_t

    config = EvalConfig(
        env_id=env_id,
        policy=policy,
        task_ids=resolve_tasks(env_id, tasks, env_kwargs),
        n=n,
        budgets=budgets,
        mode=mode,
        seed=seed,
        env_kwargs=env_kwargs,
        record_tokens=record_tokens,
        **(budget or {}),
    )
    from agentenvs.eval.faults import fault_line

    summary = run_pass_at_k_t(
        config, out, workers=workers, chunk_size=chunk_size, progress=progress, backend=backend,
        address=address, executor=executor, **(faults or {}),
    )
    # the whole run's rate, the resumed part included
    done = summary.run_successes
    records = summary.already_done + summary.ran
    from agentenvs.policy.credentials import redact_spec

    print(
        f"{redact_spec(policy)}: {summary.total} trajectories in {out} "
        f"({summary.already_done} already done, {summary.ran} run in {summary.seconds:.1f} s"
        + (f"; {done / records:.0%} of all {records} successful)" if records else ")")
    )
    print(f"  {env_id}: {fault_line(summary.faults)}")
    drift = summary.tokens
    if drift.get("checked"):
        print(
            f"  token-built prompts: {drift['checked']}, the chat template would have "
            f"rewritten {drift['drifted']} ({drift['rate']:.1%})"
        )
    by_task = [(t, e) for t, e in summary.faults["by_task"].items() if e["faults"]]
    if by_task:
        shown = ", ".join(
            f"{t} {e['rate']:.0%} ({e['faults']}/{e['attempts']})" for t, e in by_task[:8]
        )
        more = f" and {len(by_task) - 8} more" if len(by_task) > 8 else ""
        print(f"  fault rate by task: {shown}{more}")
    return summary


def _workers_for(requested: int | None, *policies: str) -> int:
    """``--workers`` as given, else one per CPU, or 1 where a model policy runs: every
    worker loads its own copy of the model (two vLLM engines at their default memory
    share would not even fit on one GPU)."""
    if requested is not None:
        return requested
    from agentenvs.policy.registry import is_model_policy

    return 1 if any(is_model_policy(p) for p in policies if p) else _default_workers()


class _ImportingExecutor:
    """An executor whose workers import ``imports`` before building their state (``eval
    --import``: a plugin's envs and policies exist in every worker)."""

    def __init__(self, inner: Any, imports: Sequence[str]) -> None:
        self.inner = inner
        self.imports = tuple(imports)
        self.workers = inner.workers

    def run(self, setup: Any, jobs: Any, **kwargs: Any) -> Any:
        import functools

        return self.inner.run(functools.partial(_import_then, self.imports, setup), jobs, **kwargs)

    def __enter__(self) -> _ImportingExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.close()


def _import_then(imports: Sequence[str], setup: Any) -> Any:
    from agentenvs.eval.states import import_modules

    import_modules(imports)
    return setup()


def _check_models(*given: tuple[str | None, str]) -> None:
    """Each model policy's model, tokenizer, extra or endpoint, as (spec, option), checked
    before a worker starts or a folder is written (``agentenvs.policy.preflight``)."""
    from agentenvs.policy.preflight import check_model_policy

    for spec, option in given:
        if spec:
            check_model_policy(spec, option)


def single_env_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Fill in the defaults of a one-env ``eval`` that ``--envs`` leaves to each env."""
    args.tasks = "all" if args.tasks is None else args.tasks
    args.n = 16 if args.n is None else args.n
    args.budgets = [1, 2, 4, 8] if args.budgets is None else args.budgets
    args.mode = "rerun" if args.mode is None else args.mode
    return args


def cmd_eval(args: argparse.Namespace) -> int:
    _check_models((args.policy, "--policy"))
    if args.envs is not None:
        from agentenvs.cli_suite import cmd_eval_suite

        return cmd_eval_suite(args)
    single_env_defaults(args)
    if args.imports:  # imported here by the checks; each worker imports them first too
        from agentenvs.eval.executors import make_executor

        workers = _workers_for(args.workers, args.policy)
        inner = make_executor(args.backend, workers, address=args.address)
        with _ImportingExecutor(inner, args.imports) as executor:
            return _eval(args, executor)
    return _eval(args, None)


def _eval(args: argparse.Namespace, executor: Any) -> int:
    env_kwargs, budget = dict(args.env_kwargs), {}
    if args.budget_unit == "turns" and args.show_budget:
        env_kwargs["show_budget"] = True  # the env shows its own turn budget
    elif args.budget_unit != "turns":
        budget = {"budget_unit": args.budget_unit, "max_turns": args.max_turns,
                  "show_budget": args.show_budget}
    _run(
        args.env, args.policy, args.tasks, args.n, args.budgets, args.mode, args.seed, args.out,
        env_kwargs, _workers_for(args.workers, args.policy), not args.no_progress,
        args.chunk_size, args.backend,
        args.address, faults=_fault_kwargs(args), record_tokens=args.record_tokens,
        executor=executor, budget=budget,
    )
    print(f"report: agentenvs report {args.out}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from agentenvs.eval.suite import is_suite_dir

    if is_suite_dir(args.run_dir) and not (args.run_dir / "manifest.json").exists():
        from agentenvs.cli_suite import cmd_report_suite

        return cmd_report_suite(args)
    from agentenvs.eval.report import report_summary, write_report

    result = write_report(
        args.run_dir, out_dir=args.out, compare=args.compare, ks=args.ks, n_boot=args.n_boot,
        seed=args.seed, plots=not args.no_plots, allow_differences=args.allow_differences,
    )
    # the headline and the paths; the tables are in the files (index.html links them)
    print(report_summary(result), end="")
    return 0


def demo_run_name(policy: str) -> str:
    """The demo's folder for a run of ``policy``: the spec without its env namespace, its
    ``:`` and ``,`` as ``-`` (``frozenlake/noisy:error_rate=0.25,recover=0.3`` is
    ``noisy-error_rate=0.25-recover=0.3``)."""
    name, _, args = policy.partition(":")
    return "-".join([name.rsplit("/", 1)[-1], *filter(None, args.split(","))])


def cmd_demo(args: argparse.Namespace) -> int:
    """For each env of ``DEMO_SUITES``: Pass@(K,T) of two scripted policies, then the
    comparison report (the second policy minus the first)."""
    from agentenvs.eval.executors import make_executor
    from agentenvs.eval.report import report_summary, write_report

    started = time.perf_counter()
    out: Path = args.out
    chosen = set(args.envs.split(",")) if args.envs else None
    suites = [s for s in DEMO_SUITES if chosen is None or s.name in chosen]
    if not suites:
        raise ValueError(f"--envs {args.envs!r} names no demo env; choose from "
                         f"{[s.name for s in DEMO_SUITES]}")
    from concurrent.futures import Future, ThreadPoolExecutor

    reports: list[Future[Any]] = []
    shown = 0

    def show_finished_reports(wait: bool = False) -> None:
        nonlocal shown
        while shown < len(reports) and (wait or reports[shown].done()):
            print(report_summary(reports[shown].result()))
            shown += 1

    # one set of workers for every run: each run skips starting interpreters, and what a
    # worker caches for a task (DeepCoder's test results) serves the second policy too;
    # a suite's report is drawn in this process while the workers run the next suite
    with (
        make_executor("local", args.workers, keep_workers=True) as executor,
        ThreadPoolExecutor(1, thread_name_prefix="agentenvs-demo-report") as reporting,
    ):
        for suite in suites:
            show_finished_reports()
            print(f"== {suite.name}: {suite.first} vs {suite.second} ({suite.note})")
            # run folders named after the scripted policies they hold
            first, second = (out / suite.name / demo_run_name(p) for p in (suite.first, suite.second))
            tasks = args.tasks or suite.tasks
            for policy, run_dir in ((suite.first, first), (suite.second, second)):
                _run(
                    suite.env_id, policy, tasks, args.n or suite.n, suite.budgets, suite.mode, 0,
                    run_dir, suite.env_kwargs, args.workers, not args.no_progress,
                    executor=executor,
                )
            reports.append(
                reporting.submit(write_report, first, out_dir=out / suite.name / "report", compare=second)
            )
        show_finished_reports(wait=True)
    print(f"demo finished in {time.perf_counter() - started:.1f} s")
    for suite, report in zip(suites, reports, strict=True):
        result = report.result()
        print(f"{suite.name}: runs in {out / suite.name}/{demo_run_name(suite.first)} and "
              f"/{demo_run_name(suite.second)}; report: {result.out_dir / 'index.html'}")
    return 0


def _state_analysis_config(args: argparse.Namespace, **extra: Any) -> Any:
    from agentenvs.eval.records import read_manifest
    from agentenvs.eval.runner import resolve_tasks
    from agentenvs.eval.states import import_modules
    from agentenvs.eval.step_quality import StepQualityConfig

    import_modules(args.imports)
    if (args.run is None) == (args.reference is None):
        raise ValueError("give one source of states: --run RUN_DIR or --reference POLICY")
    if args.run is not None:
        run_config = read_manifest(args.run)["config"]
        if args.env is not None and args.env != run_config["env_id"]:
            raise ValueError(f"--env {args.env} but {args.run} ran {run_config['env_id']}")
        env_id, env_kwargs = run_config["env_id"], run_config.get("env_kwargs", {})
        source: dict[str, Any] = {"run_dir": args.run}
    else:
        if args.env is None:
            raise ValueError("--reference needs --env")
        env_id, env_kwargs = args.env, args.env_kwargs or {}
        source = {
            "reference": args.reference,
            "task_ids": resolve_tasks(env_id, args.tasks, env_kwargs),
            "episodes": args.episodes,
            "budget": args.budget,
        }
    return StepQualityConfig(
        env_id=env_id, policy_a=args.policy_a, policy_b=args.policy_b, env_kwargs=env_kwargs,
        n_states=args.states, n_actions=args.actions, seed=args.seed, imports=args.imports,
        **source, **extra,
    )


def _finish_state_analysis(config: Any, args: argparse.Namespace) -> int:
    from agentenvs.eval.step_quality import run_step_quality, summary_markdown

    _check_models((config.policy_a, "--a"), (config.policy_b, "--b"),
                  (config.reference, "--reference"))

    result = run_step_quality(
        config, args.out,
        workers=_workers_for(args.workers, config.policy_a, config.policy_b, config.reference or ""),
        backend=args.backend, address=args.address,
        progress=not args.no_progress,
        plots=not args.no_plots, n_boot=args.n_boot, **_fault_kwargs(args),
    )
    print(summary_markdown(result.summary))
    print(f"{result.n_states} states ({result.ran} analysed now) in {result.seconds:.1f} s")
    print("files:")
    for path in result.files:
        print(f"  {path}")
    return 0


def cmd_step_quality(args: argparse.Namespace) -> int:
    return _finish_state_analysis(_state_analysis_config(args), args)


def cmd_error_states(args: argparse.Namespace) -> int:
    kinds = ("ordinary", "error")
    config = _state_analysis_config(
        args, kinds=kinds, continuations=args.continuations,
        continue_kinds=kinds if args.continue_ordinary else ("error",),
    )
    return _finish_state_analysis(config, args)


def cmd_likelihood(args: argparse.Namespace) -> int:
    from agentenvs.eval.likelihood import LikelihoodConfig, run_likelihood, summary_markdown
    from agentenvs.eval.states import import_modules

    import_modules(args.imports)
    _check_models((args.model_a, "--model-a"), (args.model_b, "--model-b"))
    config = LikelihoodConfig(
        run_dirs=[str(d) for d in args.run_dirs], model_a=args.model_a, model_b=args.model_b,
        history=args.history, imports=args.imports,
    )
    result = run_likelihood(
        config, args.out, workers=args.workers, backend=args.backend, address=args.address,
        progress=not args.no_progress,
        plots=not args.no_plots, n_boot=args.n_boot, **_fault_kwargs(args),
    )
    print(summary_markdown(result.summary))
    print(f"{result.n_trajectories} trajectories ({result.ran} scored now) in {result.seconds:.1f} s")
    print("files:")
    for path in result.files:
        print(f"  {path}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    """Tasks x samples per task that a paired comparison needs (``agentenvs.eval.plan``)."""
    import json

    from agentenvs.eval.plan import make_plan, pilot_from_rates, pilot_from_run, plan_markdown

    pilot = pilot_from_run(args.pilot, args.budgets) if args.pilot else pilot_from_rates(args.rates)
    samples = args.samples or [pilot.n or 16]
    plan = make_plan(pilot, delta=args.delta, ks=args.ks, samples=samples, alpha=args.alpha,
                     power=args.power, metric=args.metric, sims=args.sims, seed=args.seed)
    print(plan_markdown(plan))
    if args.json is not None:
        args.json.write_text(json.dumps(plan.to_dict(), indent=2) + "\n")
        print(f"plan: {args.json}")
    return 0


def cmd_check_tasks(args: argparse.Namespace) -> int:
    """Survey Terminal-Bench dataset folders: accepted, stood in, refused (with the need)."""
    import json

    from agentenvs.envs.terminal.survey import survey, survey_markdown

    kwargs: dict[str, Any] = {}
    if args.runtime == "docker":
        kwargs["offline"] = {"auto": None, "yes": True, "no": False}[args.offline]
        kwargs["force_build"] = args.force_build
    found = survey(list(args.paths), runtime=args.runtime, build=args.build, **kwargs)
    print(survey_markdown(found, build=args.build))
    if args.json is not None:
        args.json.write_text(json.dumps([d.to_dict() for d in found], indent=2) + "\n")
        print(f"check-tasks: {args.json}")
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from agentenvs.data.cli import run

    return run(args)


def cmd_serve_model(args: argparse.Namespace) -> int:
    """Serve a model policy until SIGINT (Ctrl-C) or SIGTERM; prints the base URL for
    ``openai:`` specs and where the key is. Both signals are handled here, so the server
    stops on them even where it was started with SIGINT ignored (a background job of a
    shell).

    The key: ``--api-key-file``, ``--api-key``, else ``$AGENTENVS_MODEL_API_KEY``, else a
    new random one, written to a ``0600`` file of this user's (removed at the end) and
    shown once where stdout is a terminal (a log gets only the file's path)."""
    import os
    import signal
    import threading

    from agentenvs.core.errors import Fault
    from agentenvs.policy.credentials import KEY_ENV, read_key_file, remember_secret, write_key_file
    from agentenvs.policy.registry import make_policy, parse_policy_spec
    from agentenvs.policy.serve import serve
    from agentenvs.policy.serve_http import ServeLimits

    if parse_policy_spec(args.model)[0] != "hf":
        raise ValueError(f"--model must be an hf:model=PATH spec (the server runs it), got {args.model!r}")
    limits = ServeLimits(
        max_n=args.max_n, max_sequences=args.max_sequences, max_tokens=args.max_tokens,
        max_prompt_tokens=args.max_prompt_tokens, max_prompt_bytes=args.max_prompt_bytes,
        max_body_bytes=args.max_body_bytes, max_queue=args.max_queue,
        request_timeout=args.request_timeout, read_timeout=args.read_timeout,
        max_connections=args.max_connections,
    )
    key: str | None = None
    source = "made here"
    if args.api_key_file is not None:
        key, source = read_key_file(args.api_key_file), f"from {args.api_key_file}"
    elif args.api_key is not None:
        remember_secret(args.api_key)
        key, source = args.api_key, "from --api-key"
    elif os.environ.get(KEY_ENV):
        key, source = os.environ[KEY_ENV], f"from ${KEY_ENV}"
    _check_models((args.model, "--model"))
    try:
        policy = make_policy(args.model)
    except (KeyboardInterrupt, Fault):
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the loader raised, in one line
        from agentenvs.eval.runner import PolicyLoadError

        raise PolicyLoadError.of(args.model, exc) from exc
    name = args.name or args.model
    server = serve(
        policy, args.host, args.port, model_name=name, api_key=key, auth=not args.no_auth,
        allowed_hosts=args.allow_host, limits=limits,
    )
    key_file = None
    try:
        if server.api_key is not None and key is None:
            key_file = write_key_file(server.api_key, f"serve-model-{server.port}.key")
        print(f"serving {args.model} at {server.url}", flush=True)
        if server.api_key is None:
            print(f"use it as: openai:base_url={server.url},model={name}", flush=True)
            print("no key: any local user may use this server (--no-auth)", flush=True)
        elif key_file is not None:
            print(f"use it as: openai:base_url={server.url},model={name},"
                  f"api_key_file={key_file}", flush=True)
            shown = server.api_key if sys.stdout.isatty() else "(not shown: not a terminal)"
            print(f"api key (made here, kept in {key_file}, mode 0600): {shown}", flush=True)
        else:
            where = f"api_key_file={args.api_key_file}" if args.api_key_file else (
                f"api_key_env={KEY_ENV}")
            print(f"use it as: openai:base_url={server.url},model={name},{where}", flush=True)
            print(f"api key: {source}", flush=True)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        while not stop.wait(0.5):
            pass
        print("stopped", flush=True)
    finally:
        server.close()
        if key_file is not None:
            key_file.unlink(missing_ok=True)
    return 0


def cmd_sandbox(args: argparse.Namespace) -> int:
    """Build (``provision``) or show (``info``) the Python the local sandbox runs."""
    import json

    from agentenvs.sandbox import runtime

    if args.action == "provision":
        rt = runtime.provision(install=True)
        runtime.forget()
    else:
        rt = runtime.provision(install=False)
    print(json.dumps(rt.info(), indent=1))
    if args.action == "provision" and rt.missing_reason:
        print(f"agentenvs sandbox: error: {rt.missing_reason}", file=sys.stderr)
        return 1
    return 0


def cmd_certify(args: argparse.Namespace) -> int:
    from agentenvs.testing.certify import certify

    cert = certify(
        args.env,
        env_kwargs=args.env_kwargs,
        seed=args.seed,
        fuzz_episodes=args.fuzz_episodes,
        probe_tasks=args.probe_tasks,
        call_limit_s=args.call_limit,
    )
    if args.out is not None:
        js, md = cert.write(args.out)
        print(f"certificate: {md} (and {js.name})")
    print(cert.markdown(), end="")
    return 0 if cert.holds else 1


COMMANDS = {
    "list": cmd_list,
    "eval": cmd_eval,
    "report": cmd_report,
    "plan": cmd_plan,
    "demo": cmd_demo,
    "step-quality": cmd_step_quality,
    "error-states": cmd_error_states,
    "likelihood": cmd_likelihood,
    "serve-model": cmd_serve_model,
    "serve": cmd_serve,
    "data": cmd_data,
    "check-tasks": cmd_check_tasks,
    "sandbox": cmd_sandbox,
    "certify": cmd_certify,
}


#: set (not 0) to see a user error's traceback instead of its one line
DEBUG_ENV = "AGENTENVS_DEBUG"


def _foreign_env(args: argparse.Namespace) -> None:
    """``--env SOURCE:NAME`` (``gymnasium:Taxi-v4``...) as its adapter's id and kwargs."""
    env = getattr(args, "env", None)
    if isinstance(env, str) and ":" in env:
        from agentenvs.envs.foreign.ids import resolve_foreign

        args.env, kwargs = resolve_foreign(env, getattr(args, "env_kwargs", None))
        if kwargs or hasattr(args, "env_kwargs"):
            args.env_kwargs = kwargs


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; a user error is one line on stderr and exit status 2 (a parse
    error exits through ``SystemExit(2)``), raised by the checks before any work starts
    (``agentenvs.cli_args``) or by the library while it works; ``AGENTENVS_DEBUG=1``
    shows its traceback instead."""
    args = build_parser().parse_args(argv)
    from agentenvs.core.errors import AgentEnvsError
    from agentenvs.core.suggest import one_line
    from agentenvs.policy.credentials import hide_argv, redact

    if argv is None:
        hide_argv()  # a key given inline: out of sys.argv and the process title

    try:
        _foreign_env(args)
        check_args(args)
        return COMMANDS[args.command](args)
    except (AgentEnvsError, ValueError, KeyError, OSError, ImportError) as exc:
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            raise  # the traceback, a worker's included where it sent one
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"agentenvs {args.command}: error: {redact(one_line(message))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"agentenvs {args.command}: interrupted; run the same command again to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
