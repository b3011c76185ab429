"""The ``agentenvs`` command: list envs and policies, run Pass@(K,T) evaluations, report, demo.

    agentenvs list
    agentenvs eval --env agentenvs/FrozenLake-v0 --policy frozenlake/oracle --out runs/oracle
    agentenvs report runs/base --compare runs/rl
    agentenvs demo --out out/demo

Subcommands import what they need when they run, so ``agentenvs --help`` stays quick.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: the demo's two scripted FrozenLake policies: both err as often; the RL-like one
#: recovers from its errors far more often (see ``cmd_demo`` below)
DEMO_ENV = "agentenvs/FrozenLake-v0"
#: ice that slips 20% of the time: at Gymnasium's 2/3 almost nothing finishes in 16 turns
DEMO_ENV_KWARGS: dict[str, Any] = {"success_rate": 0.8}
DEMO_BASE = "frozenlake/noisy:error_rate=0.25,recover=0.3"
DEMO_RL = "frozenlake/noisy:error_rate=0.25,recover=0.9"
DEMO_BUDGETS = (2, 4, 6, 8, 10, 12, 14, 16)
DEMO_N = 16


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object, e.g. '{\"show_budget\": true}'")
    return value


def _default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentenvs",
        description="Text environments for multi-turn RL of LLM agents, and Pass@(K,T) evaluation.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("list", help="list the env ids and the registered policies")

    ev = sub.add_parser("eval", help="run (or resume) a Pass@(K,T) evaluation into a run directory")
    ev.add_argument("--env", required=True, help="env id, e.g. agentenvs/FrozenLake-v0")
    ev.add_argument("--policy", required=True, help="policy spec, e.g. frozenlake/noisy:error_rate=0.3")
    ev.add_argument("--tasks", default="all", help="'all', 'first:N' or a comma list of task ids")
    ev.add_argument("--n", type=int, default=16, help="samples per task (>= the largest K)")
    ev.add_argument("--budgets", type=_int_list, default=[1, 2, 4, 8], help="turn budgets, e.g. 1,2,4,8")
    ev.add_argument("--mode", choices=("derive", "rerun"), default="derive",
                    help="derive: one run at the largest budget; rerun: one run per budget")
    ev.add_argument("--workers", type=int, default=_default_workers(),
                    help="worker processes (0 runs in this process)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--out", required=True, type=Path, help="run directory (resumed if it exists)")
    ev.add_argument("--env-kwargs", type=_json_object, default={}, help="JSON object for gym.make")
    ev.add_argument("--chunk-size", type=int, default=None, help="trajectories per work chunk")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")

    rp = sub.add_parser("report", help="tables and plots of a run, optionally compared with another")
    rp.add_argument("run_dir", type=Path)
    rp.add_argument("--compare", type=Path, default=None, help="a second run: report it minus the first")
    rp.add_argument("--out", type=Path, default=None, help="output folder (default RUN_DIR/report)")
    rp.add_argument("--ks", type=_int_list, default=None, help="K values (default powers of two up to n)")
    rp.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (0: no CIs)")
    rp.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    rp.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")

    demo = sub.add_parser("demo", help="evaluate a base-like and an RL-like FrozenLake policy and compare them")
    demo.add_argument("--out", type=Path, default=Path("out/demo"))
    demo.add_argument("--workers", type=int, default=_default_workers())
    demo.add_argument("--tasks", default="all", help="'all', 'first:N' or a comma list of task ids")
    demo.add_argument("--n", type=int, default=DEMO_N)
    demo.add_argument("--no-progress", action="store_true")
    return parser


def cmd_list(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import agentenvs
    from agentenvs.policy.registry import policy_names

    ids = sorted(set(agentenvs.registered_ids()) | {i for i in gym.registry if i.startswith("agentenvs/")})
    print("envs:")
    for env_id in ids:
        print(f"  {env_id}")
    print("policies:")
    for name in policy_names():
        print(f"  {name}")
    return 0


def _run(
    env_id: str, policy: str, tasks: str, n: int, budgets: Sequence[int], mode: str, seed: int,
    out: Path, env_kwargs: dict[str, Any], workers: int, progress: bool, chunk_size: int | None = None,
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
    )
    summary = run_pass_at_k_t(config, out, workers=workers, chunk_size=chunk_size, progress=progress)
    rate = summary.successes / summary.ran if summary.ran else float("nan")
    print(
        f"{policy}: {summary.total} trajectories in {out} "
        f"({summary.already_done} already done, {summary.ran} run in {summary.seconds:.1f} s"
        + (f", {rate:.0%} successful)" if summary.ran else ")")
    )
    return summary


def cmd_eval(args: argparse.Namespace) -> int:
    _run(
        args.env, args.policy, args.tasks, args.n, args.budgets, args.mode, args.seed, args.out,
        args.env_kwargs, args.workers, not args.no_progress, args.chunk_size,
    )
    print(f"report: agentenvs report {args.out}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from agentenvs.eval.report import surface_markdown, write_report

    result = write_report(
        args.run_dir, out_dir=args.out, compare=args.compare, ks=args.ks, n_boot=args.n_boot,
        seed=args.seed, plots=not args.no_plots,
    )
    print((result.out_dir / "passk.md").read_text())
    if result.comparison is not None:
        print(surface_markdown(result.comparison, "second run minus first", signed=True))
    print("files:")
    for path in result.files:
        print(f"  {path}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Base-like vs RL-like scripted policy on FrozenLake, then the comparison report.

    Both policies take a wrong (lowest-Q) move 25% of the time in ordinary states.
    Right after a mistake the base-like one plays optimally only 30% of the time (it
    errs again otherwise), the RL-like one 90%: the gain the paper attributes to RL is
    error recovery, which pays off when there are turns left to recover in. So the
    RL-like policy wins at every K and passes the base's Pass@16 ceiling at large T,
    while at tight budgets (T near the shortest path) the gain shrinks to nothing.

    The scripted policies plan with the env's exact Q for the turns they have left, so
    their play depends on the budget: the demo runs in ``rerun`` mode (one run per T).
    The ice slips 20% of the time (``success_rate=0.8``) rather than Gymnasium's 2/3,
    so that 16 turns are enough to finish most maps.
    """
    from agentenvs.eval.report import write_report

    started = time.perf_counter()
    out: Path = args.out
    runs = {"base": DEMO_BASE, "rl": DEMO_RL}
    for name, policy in runs.items():
        _run(
            DEMO_ENV, policy, args.tasks, args.n, DEMO_BUDGETS, "rerun", 0, out / name,
            DEMO_ENV_KWARGS, args.workers, not args.no_progress,
        )
    result = write_report(out / "base", out_dir=out / "report", compare=out / "rl")
    diff = result.comparison
    assert diff is not None
    print((out / "report" / "comparison.md").read_text())
    print(f"demo finished in {time.perf_counter() - started:.1f} s")
    print(f"trajectories: {out / 'base' / 'trajectories.jsonl'}, {out / 'rl' / 'trajectories.jsonl'}")
    print(f"report:       {result.out_dir}/")
    for path in result.files:
        print(f"  {path.name}")
    return 0


COMMANDS = {"list": cmd_list, "eval": cmd_eval, "report": cmd_report, "demo": cmd_demo}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from agentenvs.core.errors import AgentEnvsError

    try:
        return COMMANDS[args.command](args)
    except (AgentEnvsError, ValueError, KeyError, OSError, ImportError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"agentenvs {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"agentenvs {args.command}: interrupted; run the same command again to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
