"""BFCL grading side by side: bfcl-eval's decoder + AST checker vs BFCL-v0's grader and env.

The same replies on every side: 300 entries drawn (seeded) from bfcl-eval's own
single-turn data, each with the replies ``agentenvs.envs.bfcl.agreement`` writes for it
(the gold calls as text and its near misses), graded by
- bfcl-eval: its decoder and AST checker, as its own evaluation runs them
  (``agentenvs.envs.bfcl.reference.official_single_turn``, after its imports);
- ours, the grader alone (``check_reply``: the same work as bfcl-eval's);
- ours through the env: ``reset(options={"task_id": ...})`` then ``step(reply)``,
  steady (an env that has met every task) and on first sight (a fresh env a round, made
  before the clock: each task's tool schemas checked and its prompt rendered once).
Each round grades every reply on every side, the side going first turning each round.
Prints, medians over rounds, replies/s (wall) and CPU time a reply (this process and its
children, ``resource.getrusage``), the median of the rounds' paired ratios to bfcl-eval
and the totals; and that every side's verdict on every reply is the same as bfcl-eval's.

Needs the ``bfcl`` extra (bfcl-eval and its data); skips with the reason without it.
Usage: python benchmarks/peers/bench_bfcl.py   (BENCH_ROUNDS, default 5)
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable

import numpy as np

ROUNDS = int(os.environ.get("BENCH_ROUNDS", 5))
ENTRIES = 300


def cpu() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    try:
        from agentenvs.envs.bfcl.agreement import single_turn_replies
        from agentenvs.envs.bfcl.ast_checker import check_reply
        from agentenvs.envs.bfcl.data import SINGLE_TURN_CATEGORIES
        from agentenvs.envs.bfcl.env import BFCLEnv
        from agentenvs.envs.bfcl.reference import official_single_turn

        def make() -> BFCLEnv:
            return BFCLEnv(
                tasks_path="bfcl-eval",
                categories=list(SINGLE_TURN_CATEGORIES),
                max_turns=1,
                rules="official",
            )

        env = make()
    except Exception as exc:  # noqa: BLE001 - the reason it cannot run here
        print(f"bfcl-eval: skipped ({type(exc).__name__}: {exc}; pip install 'agentenvs[bfcl]')")
        return
    import importlib.metadata

    version = importlib.metadata.version("bfcl-eval")
    rng = np.random.default_rng(0)
    tasks = list(env.tasks.values())
    picks = rng.choice(len(tasks), size=min(ENTRIES, len(tasks)), replace=False)
    cases = [
        (t, r) for t in (tasks[int(i)] for i in picks) for _, r in single_turn_replies(env, t, rng)
    ]
    verdicts: dict[str, list[bool]] = {}

    def theirs() -> list[bool]:
        return [
            official_single_turn(r, t.functions, t.ground_truth, t.category).valid for t, r in cases
        ]

    def grader() -> list[bool]:
        return [check_reply(r, t.functions, t.ground_truth, t.category).valid for t, r in cases]

    steady_env = make()

    def through(e: BFCLEnv) -> list[bool]:
        out = []
        for t, r in cases:
            e.reset(options={"task_id": t.id})
            out.append(e.step(r)[1] == 1.0)
        return out

    fresh = iter([make() for _ in range(ROUNDS)])  # made before the clock: one a round
    sides: dict[str, Callable[[], list[bool]]] = {
        "bfcl-eval decoder + checker": theirs,
        "ours: grader alone (check_reply)": grader,
        "ours: env reset + step, steady": lambda: through(steady_env),
        "ours: env reset + step, first sight": lambda: through(next(fresh)),
    }
    theirs()  # bfcl-eval's imports, outside the timing
    through(steady_env)  # the steady env meets every task once
    rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    names = list(sides)
    for k in range(ROUNDS):
        for name in names[k % len(names) :] + names[: k % len(names)]:
            c0, t0 = cpu(), time.perf_counter()
            got = sides[name]()
            rounds[name].append((time.perf_counter() - t0, cpu() - c0))
            verdicts.setdefault(name, got)
    base = "bfcl-eval decoder + checker"
    n = len(cases)
    print(
        f"bfcl-eval {version}: {n} replies of {len(picks)} entries, {ROUNDS} rounds, the side "
        f"going first turning each round; medians over rounds; load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(f"  {'':38} {'replies/s':>10} {'CPU/reply':>10} {'total s':>8} {'vs bfcl-eval':>13}")
    for name in names:
        rate = statistics.median(n / wall for wall, _ in rounds[name])
        used = statistics.median(c for _, c in rounds[name]) / n
        total = sum(wall for wall, _ in rounds[name])
        ratio = statistics.median(
            b[0] / a[0] for a, b in zip(rounds[name], rounds[base], strict=True)
        )
        print(
            f"  {name:38} {rate:10,.0f} {used * 1e6:8.1f}µs {total:8.2f} "
            f"{'' if name == base else f'{ratio:12.2f}x'}"
        )
    for name in names[1:]:
        same = sum(a == b for a, b in zip(verdicts[name], verdicts[base], strict=True))
        print(f"verdicts equal to bfcl-eval's, {name}: {same}/{n}")


if __name__ == "__main__":
    main()
