"""DeepCoder-MT speed: scripted episodes per second, and scoring 16 candidates from one state.

Prints, from one run:
- episodes per second of ``deepcoder/reference`` and ``deepcoder/buggy-then-fix`` through
  the Pass@(K,T) runner with 1 and 2 worker processes (each worker opens its own
  sandbox; results per process are cached, as in a real run);
- the time to score 16 distinct candidate programs from one state (``score_actions``),
  one at a time vs concurrently, cold (nothing cached) and warm (all cached), and the
  cost of one step.

Usage: python benchmarks/bench_deepcoder.py [--tasks N] [--samples N] [--sandbox local]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import agentenvs  # noqa: F401 - registers the ids and policies
from agentenvs.envs.deepcoder import env as dc_env
from agentenvs.envs.deepcoder.env import DeepCoderMTEnv
from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t

ENV_ID = "agentenvs/DeepCoderMT-v0"
POLICIES = ("deepcoder/reference", "deepcoder/buggy-then-fix:fix_rate=0.7")


def bench_episodes(n_tasks: int, samples: int, sandbox: str) -> None:
    probe = DeepCoderMTEnv(sandbox=sandbox)
    task_ids = list(probe.task_ids)[:n_tasks]
    probe.close()
    print(f"Episodes per second ({len(task_ids)} tasks x {samples} samples, budget 4, derive):")
    for policy in POLICIES:
        rates = {}
        for workers in (1, 2):
            config = EvalConfig(
                env_id=ENV_ID,
                policy=policy,
                task_ids=task_ids,
                n=samples,
                budgets=[4],
                mode="derive",
                seed=0,
                env_kwargs={"sandbox": sandbox},
            )
            with tempfile.TemporaryDirectory() as run_dir:
                summary = run_pass_at_k_t(config, run_dir, workers=workers, progress=False)
            rates[workers] = summary.ran / summary.seconds
            print(
                f"  {policy:40s} workers={workers}  {summary.ran:4d} episodes in "
                f"{summary.seconds:6.2f} s  = {rates[workers]:6.2f} ep/s  "
                f"(success {summary.successes}/{summary.ran})"
            )
        print(f"  {'':40s} 2 workers / 1 worker = {rates[2] / rates[1]:.2f}x")


def bench_scoring(sandbox: str, task_id: str) -> None:
    env = DeepCoderMTEnv(sandbox=sandbox)
    env.reset(seed=0, options={"task_id": task_id})
    env.step(env.error_action(np.random.default_rng(0)))  # an error state
    reference = env.reference or ""
    pool = env.error_pool()

    def candidates(tag: str) -> list[str]:
        # 16 distinct programs: the known mutants and variants of the reference
        programs = [*pool, reference]
        i = 0
        while len(programs) < 16:
            programs.append(f"{reference}\n# {tag} variant {i}\n")
            i += 1
        return [f"```python\n{p}\n```" for p in programs[:16]]

    env.sandbox()  # opened outside the timings
    print(f"Scoring 16 candidates from one state (task {task_id}, {len(env.task.tests)} tests):")
    timings = {}
    for label, parallel in (("one at a time", 1), (f"{env.parallel} at once", env.parallel)):
        dc_env._OUTCOMES.data.clear()  # cold: nothing cached
        env.parallel = parallel
        batch = candidates(label)
        start = time.perf_counter()
        scores = env.score_actions(batch)
        timings[label] = time.perf_counter() - start
        print(
            f"  cold, {label:14s} {timings[label] * 1e3:8.1f} ms  "
            f"({timings[label] / 16 * 1e3:.1f} ms per candidate; mean score {np.mean(scores):.2f})"
        )
    start = time.perf_counter()
    env.score_actions(batch)
    warm = time.perf_counter() - start
    first, second = timings.values()
    print(f"  warm (all cached)        {warm * 1e3:8.3f} ms")
    print(
        f"  concurrent / one at a time = {first / second:.2f}x faster;  cold / warm = "
        f"{second / max(warm, 1e-9):.0f}x"
    )
    dc_env._OUTCOMES.data.clear()
    snap = env.snapshot()
    start = time.perf_counter()
    env.step(f"```python\n{reference}\n```")
    step = time.perf_counter() - start
    env.restore(snap)
    print(f"  one step (reference, uncached): {step * 1e3:.1f} ms")
    env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--sandbox", default="local")
    parser.add_argument("--score-task", default="dc-014")
    args = parser.parse_args()
    print(f"CPUs: {os.cpu_count()}")
    bench_scoring(args.sandbox, args.score_task)
    bench_episodes(args.tasks, args.samples, args.sandbox)


if __name__ == "__main__":
    main()
