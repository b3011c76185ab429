"""Riding out faults: N episodes per env with faults injected at rate p, against a fault-free run.

For FrozenLake and BFCL, whose infrastructure cannot be broken from outside, faults come
from ``InjectFaults`` at the env boundary (``agentenvs.wrappers.inject_faults``): an
attempt faults with chance p, at its reset or one of its steps, before the env sees the
call. Each env is run twice with the same seeds and workers: fault-free, then with the
faults; the benchmark checks that both give the same trajectories (every record field but
the run's name, the env id and the ``faults`` list) and the same Pass@(K,T) table, and
prints the faults counted, the time of each run and their ratio (the recovery overhead,
measured in this one run; the retries' backoff is set to 0, so the ratio is the cost of
the work done again, not of waiting). Local sandboxes need bubblewrap: where it is
missing the real-kill part is skipped, saying so.

    python benchmarks/bench_faults.py [--episodes 400] [--rate 0.1] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from agentenvs.eval.records import TRAJECTORIES_NAME, read_records
from agentenvs.eval.report import write_report
from agentenvs.eval.runner import EvalConfig, resolve_tasks, run_pass_at_k_t
from agentenvs.wrappers.inject_faults import INJECT_FAULTS_SPEC

#: (name, env id, env kwargs, policy, budgets, tasks)
SUITES: tuple[tuple[str, str, dict[str, Any], str, list[int], str], ...] = (
    ("FrozenLake", "agentenvs/FrozenLake-v0", {"success_rate": 0.8},
     "frozenlake/noisy:error_rate=0.25,recover=0.5", [4, 8, 16], "first:8"),
    ("BFCL", "agentenvs/BFCL-v0", {}, "bfcl/noisy:error_rate=0.3", [1, 2, 3], "first:20"),
)
#: record fields that name the run rather than the trajectory
RUN_FIELDS = ("run", "env_id", "faults")


def trajectories(run_dir: Path) -> list[str]:
    records = read_records(run_dir / TRAJECTORIES_NAME)
    for record in records:
        for name in RUN_FIELDS:
            record.pop(name, None)
    return sorted(json.dumps(r, sort_keys=True) for r in records)


def run(config: EvalConfig, run_dir: Path, workers: int) -> tuple[float, Any]:
    started = time.perf_counter()
    summary = run_pass_at_k_t(
        config, run_dir, workers=workers, progress=False, fault_backoff=0,
        max_fault_retries=10,
    )
    return time.perf_counter() - started, summary


def bench_suite(
    suite: tuple[str, str, dict[str, Any], str, list[int], str],
    root: Path, episodes: int, rate: float, workers: int,
) -> bool:
    name, env_id, env_kwargs, policy, budgets, tasks = suite
    task_ids = resolve_tasks(env_id, tasks, env_kwargs)
    n = max(2, episodes // (len(task_ids) * len(budgets)))
    common = dict(policy=policy, task_ids=task_ids, n=n, budgets=budgets, mode="rerun", seed=0)
    clean = EvalConfig(env_id=env_id, env_kwargs=env_kwargs, **common)
    faulty = EvalConfig(
        env_id=INJECT_FAULTS_SPEC,
        env_kwargs={"env_id": env_id, "rate": rate, "seed": 1, "env_kwargs": env_kwargs},
        **common,
    )
    # warm imports and caches so that neither timed run pays for them
    run(EvalConfig(**{**clean.to_dict(), "n": 1}), root / f"{name}-warm", workers)
    clean_s, _ = run(clean, root / f"{name}-clean", workers)
    faulty_s, summary = run(faulty, root / f"{name}-faulty", workers)
    same = trajectories(root / f"{name}-clean") == trajectories(root / f"{name}-faulty")
    tables = [
        (write_report(root / f"{name}-{kind}", n_boot=0, plots=False).out_dir / "passk.csv")
        .read_text()
        for kind in ("clean", "faulty")
    ]
    faults = summary.faults
    print(
        f"{name}: {summary.total} episodes, {workers} workers, p = {rate}: "
        f"{faults['faults']} faults in {faults['attempts']} attempts "
        f"({faults['rate']:.1%}), {faults['with_faults']} trajectories retried; "
        f"records equal the fault-free run: {same}; Pass@(K,T) table equal: "
        f"{tables[0] == tables[1]}; {clean_s:.2f} s fault-free, {faulty_s:.2f} s with "
        f"faults: overhead x{faulty_s / clean_s:.2f}"
    )
    return same and tables[0] == tables[1] and faults["faults"] > 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=400, help="episodes per env (about)")
    parser.add_argument("--rate", type=float, default=0.1, help="share of attempts that fault")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    try:
        ok = [bench_suite(s, root, args.episodes, args.rate, args.workers) for s in SUITES]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if shutil.which("bwrap") is None:
        print(
            "DeepCoder-MT / Terminal-Bench in the local sandbox with a real kill: skipped "
            "(no bubblewrap on this machine)"
        )
    if not all(ok):
        raise SystemExit("a run with faults did not equal its fault-free run")


if __name__ == "__main__":
    main()
