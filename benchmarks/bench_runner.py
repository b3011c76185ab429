"""Runner overhead: the Pass@(K,T) runner against a plain env + policy loop, per step.

The same FrozenLake trajectories (the oracle on every bundled map, budget 32, ``--n``
samples a map) four ways, in alternating order each round, into a fresh run directory
each time:

- plain: ``env.reset`` / ``policy.sample`` / ``env.step`` in this process, a
  ``Conversation`` kept, the runner's seed a sample, nothing recorded (the reference);
- runner in process (``workers=0``): the same loop with its records, each trajectory's
  JSONL line, the run directory's manifest and its fault counts;
- runner on the default workers (one per usable core: ``default_workers``), and on
  four times as many (``allow_oversubscribe``), wall time against the plain loop's.

Prints per step the CPU time (this process and its workers: on a loaded machine CPU
time moves less than wall time) and the wall time, the median of the rounds, and the
ratios to the plain loop; and the Python calls a step of each in process, which the
machine's load does not change. All runs must give the same trajectories.

Usage: python benchmarks/bench_runner.py [--n 60] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agentenvs.eval.executors import default_workers
from agentenvs.eval.records import TRAJECTORIES_NAME, read_trajectories, stable_seed
from agentenvs.eval.runner import EvalConfig, make_env, resolve_tasks, run_pass_at_k_t
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import make_policy

ENV_ID = "agentenvs/FrozenLake-v0"


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have been waited for."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def plain_loop(config: EvalConfig) -> tuple[int, list[tuple[str, int, int, int]]]:
    """Steps taken, and (task, sample, turns, success) of each trajectory."""
    env, policy = make_env(config), make_policy(config.policy)
    steps, outcomes = 0, []
    for item in config.work():
        observation, info = env.reset(
            seed=item.seed, options={"task_id": item.task_id, "max_turns": item.budget}
        )
        conversation = Conversation.start(observation, info, env=env.unwrapped)
        done, turn = False, 0
        while not done:
            turn += 1
            seed = stable_seed(item.seed, "turn", turn)  # the runner's seeds: the same moves
            action = policy.sample([conversation], 1, seed=seed)[0][0]
            observation, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            conversation.add_turn(action, observation)
        steps += turn
        outcomes.append((item.task_id, item.sample, turn, int(bool(info.get("success")))))
    env.close()
    return steps, sorted(outcomes)


def python_calls(run: Callable[[], object]) -> int:
    """Python function calls ``run`` makes in this process (``sys.setprofile``): a count
    the machine's load does not change."""
    calls = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=60, help="samples per map")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    tasks = resolve_tasks(ENV_ID, "all")
    config = EvalConfig(
        env_id=ENV_ID, policy="frozenlake/oracle", task_ids=tasks, n=args.n, budgets=[32],
        mode="rerun",
    )
    cores = default_workers()
    arms = {
        "plain loop": None,
        "runner, in process": 0,
        f"runner, {cores} workers (default)": cores,
        f"runner, {4 * cores} workers": 4 * cores,
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        steps, _ = plain_loop(config)  # warm the imports and caches
        for r in range(args.rounds):
            order = list(arms.items()) if r % 2 == 0 else list(arms.items())[::-1]
            for name, workers in order:
                wall, cpu = time.perf_counter(), cpu_seconds()
                if workers is None:
                    took, outcomes = plain_loop(config)
                    times[name].append((time.perf_counter() - wall, cpu_seconds() - cpu))
                    assert took == steps
                else:
                    run_dir = Path(tmp) / f"{r}-{workers}"
                    run_pass_at_k_t(
                        config, run_dir, workers=workers, progress=False,
                        allow_oversubscribe=True,
                    )
                    times[name].append((time.perf_counter() - wall, cpu_seconds() - cpu))
                    records = read_trajectories(run_dir / TRAJECTORIES_NAME)
                    assert sum(rec["turns"] for rec in records) == steps
                    outcomes = sorted(
                        (rec["task_id"], rec["sample"], rec["turns"], int(rec["success"]))
                        for rec in records
                    )
                if r == 0 and name == "plain loop":
                    reference = outcomes
                assert r == 0 and name == "plain loop" or outcomes == reference, name
    with tempfile.TemporaryDirectory(prefix="bench-runner-calls-") as tmp:
        plain_calls = python_calls(lambda: plain_loop(config))
        runner_calls = python_calls(
            lambda: run_pass_at_k_t(config, Path(tmp) / "run", workers=0, progress=False)
        )
    load = os.getloadavg()[0]
    print(
        f"{steps} FrozenLake steps a run ({len(tasks)} maps x n={args.n}, oracle, budget 32), "
        f"median of {args.rounds} rounds; {os.cpu_count()} CPUs, {cores} usable, load {load:.1f}"
    )
    plain_wall = statistics.median(w for w, _ in times["plain loop"])
    plain_cpu = statistics.median(c for _, c in times["plain loop"])
    for name, runs in times.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(
            f"  {name:28s} cpu {cpu / steps * 1e6:6.1f} µs/step ({cpu / plain_cpu:.2f}x plain)  "
            f"wall {wall / steps * 1e6:6.1f} µs/step ({wall / plain_wall:.2f}x plain)"
        )
    print(
        f"  Python calls a step, in process: plain {plain_calls / steps:.1f}, runner "
        f"{runner_calls / steps:.1f} ({runner_calls / plain_calls:.2f}x; the load does not "
        "change these)"
    )


if __name__ == "__main__":
    main()
