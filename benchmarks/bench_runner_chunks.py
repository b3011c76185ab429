"""Runner chunks: whole tasks per chunk vs the old fixed size, on DeepCoder-MT with 2 workers.

DeepCoder-MT keeps per-task work in its process: test results per program, and the
verified buggy programs its ``error_action`` draws from, whose search costs many sandbox
runs. With the old default chunk size (about 16 chunks per worker: 3 trajectories here)
a task's samples are spread over both workers, and each of them searches; with whole
tasks per chunk (the default now, ``task_chunk_size``) one worker does. The same run
(``deepcoder/buggy-then-fix`` on 12 tasks, n = 8, budget 4, the demo's) both ways, in
alternating order, each into a fresh run directory; prints wall and CPU time (this
process and its workers, sandboxes included) and the ratios.

Usage: python benchmarks/bench_runner_chunks.py [--rounds R]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from agentenvs.eval.executors import default_chunk_size
from agentenvs.eval.runner import EvalConfig, resolve_tasks, run_pass_at_k_t, task_chunk_size
from agentenvs.sandbox.local import local_available

ENV_ID = "agentenvs/DeepCoderMT-v0"
WORKERS = 2


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have been waited for."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(config: EvalConfig, run_dir: Path, chunk_size: int | None) -> tuple[float, float, int]:
    wall, cpu = time.perf_counter(), cpu_seconds()
    summary = run_pass_at_k_t(config, run_dir, workers=WORKERS, chunk_size=chunk_size, progress=False)
    assert summary.ran == summary.total
    return time.perf_counter() - wall, cpu_seconds() - cpu, summary.successes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    ok, why = local_available()
    if not ok:
        print(f"note: the local sandbox is unavailable here ({why}); skipped")
        return
    config = EvalConfig(
        env_id=ENV_ID,
        policy="deepcoder/buggy-then-fix:fix_rate=0.3",
        task_ids=resolve_tasks(ENV_ID, "first:12"),
        n=8,
        budgets=(4,),
        mode="derive",
    )
    jobs = len(config.work())
    old_size = default_chunk_size(jobs, WORKERS)
    new_size = task_chunk_size(config.work(), WORKERS)
    settings = {f"fixed chunks of {old_size} (old)": old_size, f"whole tasks ({new_size})": None}
    results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in settings}
    with tempfile.TemporaryDirectory(prefix="bench-runner-chunks-") as tmp:
        for r in range(args.rounds):
            order = list(settings.items())
            for name, size in order if r % 2 == 0 else order[::-1]:
                results[name].append(timed(config, Path(tmp) / f"{r}-{size}", size))
    print(f"{jobs} DeepCoder-MT trajectories on {WORKERS} workers (best of {args.rounds}):")
    best = {}
    for name, runs in results.items():
        wall, cpu, successes = min(runs)
        best[name] = (wall, cpu)
        print(f"  {name:26s} wall {wall:6.1f} s  cpu {cpu:6.1f} s  ({successes} successes)")
    (old_wall, old_cpu), (new_wall, new_cpu) = best.values()
    print(f"ratio old/new: wall {old_wall / new_wall:.2f}x, cpu {old_cpu / new_cpu:.2f}x")


if __name__ == "__main__":
    main()
