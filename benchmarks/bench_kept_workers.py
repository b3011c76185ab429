"""Several runs on one kept pool vs a pool per run (what ``agentenvs demo`` does now vs before).

A run on a per-run pool starts its worker processes (a fresh interpreter each, importing
the package, NumPy and Gymnasium) and stops them at its end; ``LocalPoolExecutor(
keep_workers=True)`` starts them once for all runs. The same runs both ways, in
alternating order: FrozenLake and BFCL with two scripted policies each (the demo's
light suites, at a quarter of their samples), 2 workers. Prints wall and CPU time (this
process and its workers) and the ratios; both ways must give the same trajectories.

Usage: python benchmarks/bench_kept_workers.py [--rounds R]
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


def all_runs(root: Path, kept: bool) -> tuple[float, float, list[list[str]]]:
    wall, cpu = time.perf_counter(), cpu_seconds()
    executor = LocalPoolExecutor(WORKERS, keep_workers=True) if kept else None
    out = []
    try:
        for i, (env_id, kwargs, policy, budgets, mode) in enumerate(RUNS):
            config = EvalConfig(env_id=env_id, policy=policy, task_ids=resolve_tasks(env_id, "all", kwargs),
                                n=4, budgets=budgets, mode=mode, env_kwargs=kwargs)
            run_pass_at_k_t(config, root / str(i), workers=WORKERS, progress=False, executor=executor)
            out.append(sorted((root / str(i) / TRAJECTORIES_NAME).read_text().splitlines()))
    finally:
        if executor is not None:
            executor.close()  # its workers are waited for: their CPU time counts
    return time.perf_counter() - wall, cpu_seconds() - cpu, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-kept-workers-") as tmp:
        for r in range(args.rounds):
            for kept in (False, True) if r % 2 == 0 else (True, False):
                wall, cpu, results[kept] = all_runs(Path(tmp) / f"{r}-{kept}", kept)
                times[kept].append((wall, cpu))
    assert results[False] == results[True], "the kept pool changed the trajectories"
    print(f"{len(RUNS)} runs on {WORKERS} workers (best of {args.rounds}):")
    (old_wall, old_cpu), (new_wall, new_cpu) = min(times[False]), min(times[True])
    print(f"  a pool per run (old)  wall {old_wall:6.2f} s  cpu {old_cpu:6.2f} s")
    print(f"  one kept pool         wall {new_wall:6.2f} s  cpu {new_cpu:6.2f} s")
    print(f"ratio old/new: wall {old_wall / new_wall:.2f}x, cpu {old_cpu / new_cpu:.2f}x")


if __name__ == "__main__":
    main()
