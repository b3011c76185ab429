"""Runner throughput: FrozenLake episodes per second with 1 and with 2 worker processes.

The same work both times (the oracle on every bundled map, derive mode at a budget of
32 turns), written to a fresh run directory each time; the wall time includes starting
the workers, sending chunks and appending every trajectory to the JSONL file. Each
setting runs twice, interleaved, and its best time counts (other processes on a small
machine add noise). Both settings must give identical trajectories.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from agentenvs.eval.records import TRAJECTORIES_NAME
from agentenvs.eval.runner import EvalConfig, resolve_tasks, run_pass_at_k_t

ENV_ID = "agentenvs/FrozenLake-v0"
N = 400  # samples per task: ~15,000 episodes in all


REPEATS = 2


def timed_run(
    config: EvalConfig, root: Path, workers: int, repeat: int
) -> tuple[float, list[str]]:
    run_dir = root / f"workers{workers}-{repeat}"
    start = time.perf_counter()
    summary = run_pass_at_k_t(config, run_dir, workers=workers, progress=False)
    seconds = time.perf_counter() - start
    assert summary.ran == summary.total
    return seconds, sorted((run_dir / TRAJECTORIES_NAME).read_text().splitlines())


def main() -> None:
    tasks = resolve_tasks(ENV_ID, "all")
    config = EvalConfig(
        env_id=ENV_ID, policy="frozenlake/oracle", task_ids=tasks, n=N, budgets=[32], mode="rerun"
    )
    episodes = len(tasks) * N
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # warm the file cache and imports so neither timed run pays for them
        run_pass_at_k_t(
            EvalConfig(**{**config.to_dict(), "n": 2}), root / "warm", workers=0, progress=False
        )
        times: dict[int, list[float]] = {0: [], 1: [], 2: []}
        results: dict[int, list[str]] = {}
        for repeat in range(REPEATS):
            for workers in (0, 1, 2):
                seconds, results[workers] = timed_run(config, root, workers, repeat)
                times[workers].append(seconds)
        assert results[1] == results[2] == results[0], "worker counts changed the trajectories"
        in_process, one, two = (min(times[w]) for w in (0, 1, 2))
    print(
        f"{episodes} FrozenLake episodes (oracle, {len(tasks)} maps x n={N}, budget 32), "
        f"best of {REPEATS}"
    )
    print(f"in this process (reference): {episodes / in_process:8.0f} episodes/s")
    print(f"1 worker process:            {episodes / one:8.0f} episodes/s  ({one:.2f} s)")
    print(f"2 worker processes:          {episodes / two:8.0f} episodes/s  ({two:.2f} s)")
    print(f"speed-up 2 vs 1 workers: {one / two:.2f}x")


if __name__ == "__main__":
    main()
