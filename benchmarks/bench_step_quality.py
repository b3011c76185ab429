"""Speed of the step-quality analysis on FrozenLake, and of scoring one action.

1. States per second of ``run_step_quality`` (two noisy policies, 16 actions each,
   every action scored from a restored snapshot) over the same prepared states, in this
   process (``workers=0``) and with 1 and 2 worker processes (pool start-up included),
   best of two interleaved runs.
   Prints the rates and the 2-worker / 1-worker ratio (with the CPU count and load:
   on a busy or 2-CPU machine, 2 workers cannot beat 1).
2. ``score_action`` through FrozenLake's exact oracle (a Q-table lookup) against the
   base env's generic way (snapshot, step, read the score, restore), over the same
   (state, action) pairs. Prints both rates and their ratio. The generic way gives the
   score after one sampled step (0/1 on FrozenLake), not Q: only its cost is compared.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401  (registers the env and its policies)
from agentenvs.core.env import TextEnv
from agentenvs.envs.frozenlake.env import format_action
from agentenvs.eval.states import read_states
from agentenvs.eval.step_quality import StepQualityConfig, run_step_quality

ENV = "agentenvs/FrozenLake-v0"
ENV_KWARGS = {"success_rate": 0.8}
N_STATES = 3000
SCORINGS = 100_000
REPEATS = 2


def analysis_rates(root: Path) -> dict[int, float]:
    tasks = ["4x4", "8x8"] + [f"random:size=4,p=0.8,seed={s}" for s in (0, 1, 2, 4, 5, 6)]
    config = StepQualityConfig(
        env_id=ENV, env_kwargs=ENV_KWARGS, reference="frozenlake/oracle", task_ids=tasks,
        episodes=64, budget=16, n_states=N_STATES, n_actions=16,
        policy_a="frozenlake/noisy:error_rate=0.25,recover=0.9",
        policy_b="frozenlake/noisy:error_rate=0.25,recover=0.3",
    )
    prepared = root / "prepared"
    run_step_quality(config, prepared, workers=2, progress=False, plots=False, limit=0)
    rates = {0: 0.0, 1: 0.0, 2: 0.0}
    for repeat in range(REPEATS):  # interleaved, best counts: load from elsewhere varies
        for workers in rates:
            out = root / f"w{workers}-{repeat}"
            shutil.copytree(prepared, out)
            start = time.perf_counter()
            result = run_step_quality(
                config, out, workers=workers, progress=False, plots=False, n_boot=0
            )
            rates[workers] = max(rates[workers], result.ran / (time.perf_counter() - start))
    return rates


def scoring_rates(root: Path) -> tuple[float, float]:
    states = read_states(root / "prepared" / "states.jsonl")
    env = gym.make(ENV, **ENV_KWARGS)
    inner = env.unwrapped
    rng = np.random.default_rng(0)
    pairs = [(states[int(rng.integers(len(states)))], format_action(int(rng.integers(4))))
             for _ in range(SCORINGS)]
    best = {"oracle": float("inf"), "snapshot": float("inf")}
    generic = TextEnv.score_action
    for _ in range(3):
        for label in best:
            # restore outside the timed loop: both ways score from the same states
            current = None
            elapsed = 0.0
            for state, action in pairs:
                if state is not current:
                    state.restore_into(env)
                    current = state
                start = time.perf_counter()
                if label == "oracle":
                    inner.score_action(action)
                else:
                    generic(inner, action)
                elapsed += time.perf_counter() - start
            best[label] = min(best[label], elapsed)
    return SCORINGS / best["oracle"], SCORINGS / best["snapshot"]


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="bench_step_quality_"))
    try:
        rates = analysis_rates(root)
        oracle, snapshot = scoring_rates(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    # worker speed-up needs idle cores: say how many there were and how busy
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{cpus} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"step quality on FrozenLake: {N_STATES} states, 16 actions per policy and state")
    for workers, rate in rates.items():
        label = "in process" if workers == 0 else f"{workers} worker{'s' if workers > 1 else ''}"
        print(f"  {label:12s} {rate:10,.0f} states/s")
    print(f"  ratio (2 workers / 1 worker): {rates[2] / rates[1]:.2f}x")
    print(f"score_action, {SCORINGS} (state, action) pairs, best of 3")
    print(f"  exact oracle (Q lookup):        {oracle:12,.0f} /s  ({1e6 / oracle:6.2f} us)")
    print(f"  snapshot + step + restore:      {snapshot:12,.0f} /s  ({1e6 / snapshot:6.2f} us)")
    print(f"  ratio (oracle / snapshot way):  {oracle / snapshot:.1f}x")


if __name__ == "__main__":
    main()
