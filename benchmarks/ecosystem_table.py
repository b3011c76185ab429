"""The ecosystem table of ``docs/ecosystem.md``: for each adapted foreign env, whether it
replays, its certificate, Pass@(1,T) of ``foreign/random`` at two budgets, and the cost
of one step-quality state with Monte-Carlo action values.

For each env (a ``SOURCE:NAME`` id, with its kwargs):

- ``replayable``: ``ReplayTextEnv.check_replayable`` on task 0;
- ``certify``: ``agentenvs.testing.certify.certify`` (``--fuzz-episodes``,
  ``--probe-tasks``), its verdict and its counts (holds / fails / n/a / findings);
- Pass@(1,T): ``run_pass_at_k_t`` of ``foreign/random`` on the first ``--tasks`` tasks,
  ``--n`` samples each, at the two budgets, in this process;
- step quality: ``run_step_quality`` of ``foreign/random`` against itself from
  ``--states`` states of that run, 4 actions each side, each scored by
  ``--rollouts`` Monte-Carlo rollouts; seconds per state.

A package that is not installed is a row saying so. Prints a Markdown table.

Usage: python benchmarks/ecosystem_table.py [--tasks 5] [--n 8] [--states 4]
       [--rollouts 8] [--fuzz-episodes 10] [--probe-tasks 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.envs.foreign.ids import resolve_foreign

#: (id, extra kwargs, budgets)
ENVS: list[tuple[str, dict[str, Any], tuple[int, int]]] = [
    ("gymnasium:FrozenLake-v1", {}, (10, 30)),
    ("gymnasium:Taxi-v4", {}, (20, 60)),
    ("gymnasium:CliffWalking-v1", {}, (20, 60)),
    ("gymnasium:Blackjack-v1", {}, (2, 5)),
    ("textarena:GuessTheNumber-v0", {}, (5, 20)),
    ("textarena:TowerOfHanoi-v0", {}, (10, 30)),
    ("textarena:Minesweeper-v0-small", {}, (5, 20)),
    ("textarena:Mastermind-v0", {}, (5, 20)),
    ("textarena:TicTacToe-v0", {"opponent": "random"}, (3, 9)),
    ("reasoning_gym:leg_counting", {"size": 20}, (1, 4)),
    ("reasoning_gym:basic_arithmetic", {"size": 20}, (1, 4)),
    ("reasoning_gym:chain_sum", {"size": 20}, (1, 4)),
    ("reasoning_gym:gcd", {"size": 20}, (1, 4)),
    ("reasoning_gym:spell_backward", {"size": 20}, (1, 4)),
    ("gem:game:GuessTheNumber-v0-easy", {}, (5, 20)),
    ("gem:game:Mastermind-v0-easy", {}, (5, 20)),
]


def row(name: str, extra: dict[str, Any], budgets: tuple[int, int], args: argparse.Namespace) -> str:
    from agentenvs.eval.report import load_run
    from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t
    from agentenvs.eval.step_quality import StepQualityConfig, run_step_quality
    from agentenvs.testing.certify import certify

    env_id, kwargs = resolve_foreign(name, extra)
    try:
        probe = gym.make(env_id, **kwargs).unwrapped
    except Exception as exc:  # noqa: BLE001 - a package that is not here is a row
        return f"| `{name}` | not run: {type(exc).__name__}: {str(exc)[:80]} | | | | |"
    tasks = list(probe.task_ids)[: args.tasks]
    check = getattr(probe, "check_replayable", None)
    if check is None:
        replayable = "own snapshots"
    else:
        try:
            check(tasks[0])
            replayable = "yes"
        except Exception as exc:  # noqa: BLE001
            replayable = f"no ({type(exc).__name__})"
    probe.close()
    cert = certify(
        env_id, env_kwargs=kwargs, fuzz_episodes=args.fuzz_episodes, probe_tasks=args.probe_tasks
    )
    c = cert.counts()
    verdict = (
        f"{'holds' if cert.holds else 'fails'} ({c['holds']}/{c['fails']}/"
        f"{c['not applicable']}/{c['finding']})"
    )
    # the run's env is the analysis' (its states must replay there): the value policy
    # only changes score_action, which the run never calls
    from agentenvs.envs.foreign.replay import ReplayTextEnv

    mc = isinstance(gym.make(env_id, **kwargs).unwrapped, ReplayTextEnv)
    if mc:  # no oracle: Monte-Carlo values (reasoning-gym grades an answer exactly)
        kwargs = {**kwargs, "value_policy": "foreign/random", "value_rollouts": args.rollouts}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        config = EvalConfig(
            env_id=env_id, policy="foreign/random", task_ids=tasks, n=args.n,
            budgets=list(budgets), env_kwargs=kwargs, mode="rerun",
        )
        run_pass_at_k_t(config, run_dir, workers=0, progress=False)
        data = load_run(run_dir)
        rates = []
        for t in budgets:
            wins = [data.outcomes[task].get((s, t), 0) for task in tasks for s in range(args.n)]
            rates.append(sum(bool(w) for w in wins) / len(wins))
        sq = StepQualityConfig(
            env_id=env_id, policy_a="foreign/random", policy_b="foreign/random",
            env_kwargs=kwargs, run_dir=str(run_dir), n_states=args.states, n_actions=4,
        )
        start = time.perf_counter()
        result = run_step_quality(
            sq, Path(tmp) / "sq", workers=0, progress=False, plots=False, n_boot=100
        )
        per_state = (time.perf_counter() - start) / max(result.n_states, 1)
    pass_k = ", ".join(f"T={t}: {r:.2f}" for t, r in zip(budgets, rates, strict=True))
    return (
        f"| `{name}` | {replayable} | {verdict} | {pass_k} | {per_state * 1e3:.0f} ms "
        + (f"({args.rollouts} rollouts an action) |" if mc else "(exact grades) |")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--states", type=int, default=4)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--fuzz-episodes", type=int, default=10)
    parser.add_argument("--probe-tasks", type=int, default=5)
    parser.add_argument("--only", default=None, help="comma list of ids to run")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    print(
        "| env | replayable | certify (holds/fails/n/a/findings) | Pass@(1,T) of foreign/random "
        "| step quality, per state |"
    )
    print("|---|---|---|---|---|")
    for name, extra, budgets in ENVS:
        if only is None or name in only:
            print(row(name, extra, budgets, args), flush=True)


if __name__ == "__main__":
    main()
