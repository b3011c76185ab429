"""BFCL checker speed on the bundled single-turn set.

Prints, from one run:
- checker throughput (entries/s) on already-decoded gold and near-miss calls;
- decode + check throughput from reply text (what a grader of stored replies pays);
- the same replies graded through the env (reset with the task, then step), the obvious
  alternative for a trainer, and its ratio to the checker alone.

Usage: python benchmarks/bench_bfcl.py [--tasks PATH] [--repeat N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from agentenvs.envs.bfcl.ast_checker import check_calls, check_relevance, check_reply
from agentenvs.envs.bfcl.decode import decode_calls
from agentenvs.envs.bfcl.env import BFCLEnv


def rate(fn, items: list, repeat: int) -> float:
    """Items per second of ``fn(item)`` over ``repeat`` passes (after one warm-up pass)."""
    for item in items:
        fn(item)
    start = time.perf_counter()
    for _ in range(repeat):
        for item in items:
            fn(item)
    return repeat * len(items) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks", default=None, help="a folder in BFCL's layout (default: bundled)"
    )
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    env = BFCLEnv(tasks_path=args.tasks)
    rng = np.random.default_rng(0)
    replies = []  # (task, reply text): the gold reply and one near miss per task
    for task_id in env.task_ids:
        env.reset(options={"task_id": task_id})
        replies.append((env.task, env.gold_reply()))
        replies.append((env.task, env.error_action(rng)))
    decoded = []
    for task, text in replies:
        try:
            decoded.append((task, decode_calls(text, language=task.language)))
        except ValueError:
            decoded.append((task, None))

    def check_only(item) -> None:  # type: ignore[no-untyped-def]
        task, calls = item
        if task.ground_truth is None:
            check_relevance(calls, task.category)
        else:
            check_calls(task.functions, calls or [], task.ground_truth, task.category)

    def decode_and_check(item) -> None:  # type: ignore[no-untyped-def]
        task, text = item
        check_reply(text, task.functions, task.ground_truth, task.category)

    def through_env(item) -> None:  # type: ignore[no-untyped-def]
        task, text = item
        env.reset(options={"task_id": task.id})
        env.step(text)

    n_tasks = len(env.task_ids)
    print(f"BFCL single-turn: {n_tasks} bundled entries, {len(replies)} replies (gold + near miss)")
    r_check = rate(check_only, decoded, args.repeat)
    r_decode = rate(decode_and_check, replies, args.repeat)
    r_env = rate(through_env, replies, max(1, args.repeat // 4))
    print(f"  checker on decoded calls   {r_check:10.0f} entries/s")
    print(
        f"  decode + check from text   {r_decode:10.0f} entries/s   ({r_check / r_decode:.1f}x slower than checking alone)"
    )
    print(
        f"  env reset + step           {r_env:10.0f} entries/s   ({r_decode / r_env:.1f}x slower than decode + check)"
    )
    print(f"  ratio checker / env        {r_check / r_env:10.1f}x")


if __name__ == "__main__":
    main()
