"""Several runs on one kept pool vs a pool per run (what ``agentenvs demo`` does now vs before).

A run on a per-run pool starts its worker processes (a fresh interpreter each, importing
the package, NumPy and Gymnasium) and stops them at its end; ``LocalPoolExecutor(
keep_workers=True)`` starts them once for all runs, and gives each worker back the tasks
it ran before (the runner's affinity), so what it cached for a task serves later runs.
The same runs both ways, in alternating order, 2 workers:

- light: FrozenLake and BFCL with two scripted policies each (the demo's light suites,
  at a quarter of their samples): the cost of starting workers;
- DeepCoder-MT: the demo's two policies on 12 tasks (``--deepcoder``; the local sandbox
  needed): the second run finds each task's verified buggy programs and test results
  in the worker that ran the task in the first.

Prints wall and CPU time (this process and its workers) and the ratios; both ways must
give the same trajectories (light runs; DeepCoder's buggy-program search has timeouts
that a loaded machine can change).

Usage: python benchmarks/bench_kept_workers.py [--rounds R] [--deepcoder]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from agentenvs.eval.executors import LocalPoolExecutor
from agentenvs.eval.records import TRAJECTORIES_NAME
from agentenvs.eval.runner import EvalConfig, resolve_tasks, run_pass_at_k_t

WORKERS = 2
DEEPCODER = [
    ("agentenvs/DeepCoderMT-v0", {}, f"deepcoder/buggy-then-fix:fix_rate={rate}", (1, 2, 3, 4), "derive")
    for rate in (0.3, 0.8)
]
RUNS = [
    ("agentenvs/FrozenLake-v0", {"success_rate": 0.8}, "frozenlake/noisy:error_rate=0.25,recover=0.3",
     (2, 4, 8, 16), "rerun"),
    ("agentenvs/FrozenLake-v0", {"success_rate": 0.8}, "frozenlake/noisy:error_rate=0.25,recover=0.9",
     (2, 4, 8, 16), "rerun"),
    ("agentenvs/BFCL-v0", {}, "bfcl/noisy:error_rate=0.5", (1, 2, 3), "derive"),
    ("agentenvs/BFCL-v0", {}, "bfcl/noisy:error_rate=0.2", (1, 2, 3), "derive"),
]


def cpu_seconds() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def all_runs(root: Path, kept: bool, runs: list, tasks: str, n: int) -> tuple[float, float, list[list[str]]]:
    wall, cpu = time.perf_counter(), cpu_seconds()
    executor = LocalPoolExecutor(WORKERS, keep_workers=True) if kept else None
    out = []
    try:
        for i, (env_id, kwargs, policy, budgets, mode) in enumerate(runs):
            config = EvalConfig(env_id=env_id, policy=policy, task_ids=resolve_tasks(env_id, tasks, kwargs),
                                n=n, budgets=budgets, mode=mode, env_kwargs=kwargs)
            run_pass_at_k_t(config, root / str(i), workers=WORKERS, progress=False, executor=executor)
            out.append(sorted((root / str(i) / TRAJECTORIES_NAME).read_text().splitlines()))
    finally:
        if executor is not None:
            executor.close()  # its workers are waited for: their CPU time counts
    return time.perf_counter() - wall, cpu_seconds() - cpu, out


def compare(name: str, runs: list, tasks: str, n: int, rounds: int, same: bool) -> None:
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-kept-workers-") as tmp:
        for r in range(rounds):
            for kept in (False, True) if r % 2 == 0 else (True, False):
                wall, cpu, results[kept] = all_runs(Path(tmp) / f"{r}-{kept}", kept, runs, tasks, n)
                times[kept].append((wall, cpu))
    if same:
        assert results[False] == results[True], "the kept pool changed the trajectories"
    print(f"{name}: {len(runs)} runs on {WORKERS} workers (best of {rounds}):")
    (old_wall, old_cpu), (new_wall, new_cpu) = min(times[False]), min(times[True])
    print(f"  a pool per run (old)  wall {old_wall:6.2f} s  cpu {old_cpu:6.2f} s")
    print(f"  one kept pool         wall {new_wall:6.2f} s  cpu {new_cpu:6.2f} s")
    print(f"ratio old/new: wall {old_wall / new_wall:.2f}x, cpu {old_cpu / new_cpu:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--deepcoder", action="store_true", help="also the DeepCoder-MT pair")
    args = parser.parse_args()
    compare("light", RUNS, "all", 4, args.rounds, same=True)
    if args.deepcoder:
        from agentenvs.sandbox.local import local_available

        ok, why = local_available()
        if not ok:
            print(f"note: the local sandbox is unavailable here ({why}); DeepCoder skipped")
            return
        compare("DeepCoder-MT", DEEPCODER, "first:12", 8, 1, same=False)


if __name__ == "__main__":
    main()
