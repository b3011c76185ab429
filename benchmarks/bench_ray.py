"""Runner backends: FrozenLake episodes per second on a local process pool vs Ray actors.

The same work on both (the noisy oracle on every bundled map, derive mode at a budget of
32 turns), 2 workers each (pool processes or actors, on a 2-CPU local Ray instance
started once beforehand and timed apart). Each wall time includes starting the workers,
sending chunks and appending every trajectory to the JSONL file. Each backend also runs
a small job (one chunk per worker), so that a run's time splits into a fixed start cost
and a cost per episode: the difference of the per-episode costs is what Ray adds to each
episode. Each setting runs twice, interleaved, and its best time counts. Both backends
must give identical trajectories.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from agentenvs.eval.records import TRAJECTORIES_NAME
from agentenvs.eval.runner import EvalConfig, resolve_tasks, run_pass_at_k_t

# this machine only: Ray registers its node on loopback (read when ray is imported below)
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

ENV_ID = "agentenvs/FrozenLake-v0"
POLICY = "frozenlake/noisy:error_rate=0.2"
N_BIG = 200  # samples per task: several thousand episodes in all
N_SMALL = 4
WORKERS = 2
REPEATS = 2


def timed_run(config: EvalConfig, run_dir: Path, backend: str) -> tuple[float, list[str]]:
    start = time.perf_counter()
    summary = run_pass_at_k_t(config, run_dir, workers=WORKERS, backend=backend, progress=False)
    seconds = time.perf_counter() - start
    assert summary.ran == summary.total
    return seconds, sorted((run_dir / TRAJECTORIES_NAME).read_text().splitlines())


def main() -> None:
    import ray

    tasks = resolve_tasks(ENV_ID, "all")
    configs = {
        n: EvalConfig(env_id=ENV_ID, policy=POLICY, task_ids=tasks, n=n, budgets=[32], mode="rerun")
        for n in (N_SMALL, N_BIG)
    }
    episodes = {n: len(tasks) * n for n in configs}
    started = time.perf_counter()
    ray.init(
        num_cpus=WORKERS, include_dashboard=False, log_to_driver=False,
        _node_ip_address="127.0.0.1",  # this machine only: stay on loopback
    )
    ray_start = time.perf_counter() - started
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            # warm the file cache, imports and Ray's worker processes
            for backend in ("local", "ray"):
                timed_run(configs[N_SMALL], root / f"warm-{backend}", backend)
            best: dict[tuple[str, int], float] = {}
            lines: dict[str, list[str]] = {}
            for repeat in range(REPEATS):
                for n in (N_SMALL, N_BIG):
                    for backend in ("local", "ray"):
                        seconds, lines[backend] = timed_run(
                            configs[n], root / f"{backend}-{n}-{repeat}", backend
                        )
                        best[backend, n] = min(best.get((backend, n), seconds), seconds)
                assert lines["local"] == lines["ray"], "the backends gave different trajectories"
    finally:
        ray.shutdown()

    big, small = episodes[N_BIG], episodes[N_SMALL]
    print(
        f"FrozenLake, {POLICY}, {len(tasks)} maps, budget 32, {WORKERS} workers each, "
        f"{os.cpu_count()} CPUs, best of {REPEATS}"
    )
    print(f"Ray start-up (ray.init, 2 CPUs, not in the runs below): {ray_start:.2f} s")
    per_episode = {}
    for backend in ("local", "ray"):
        t_big, t_small = best[backend, N_BIG], best[backend, N_SMALL]
        per_episode[backend] = (t_big - t_small) / (big - small)
        fixed = t_small - per_episode[backend] * small
        print(
            f"{backend:5}: {big / t_big:7.0f} episodes/s ({big} in {t_big:.2f} s); "
            f"{small} episodes in {t_small:.2f} s; start cost {fixed:.2f} s, "
            f"{per_episode[backend] * 1e3:.3f} ms per episode"
        )
    print(f"episodes/s, ray / local: {best['local', N_BIG] / best['ray', N_BIG]:.2f}x")
    added = (per_episode["ray"] - per_episode["local"]) * 1e6
    print(f"per-episode time Ray adds over the local pool: {added:+.0f} us")


if __name__ == "__main__":
    main()
