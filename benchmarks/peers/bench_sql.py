"""Text-to-SQL side by side: SkyRL-gym's ``SQLEnv`` vs ``agentenvs/InterCodeSQL-v0`` on SQLite.

The same databases (the bundled task databases, written as SQLite files in Spider's
layout ``spider/database/<db>/<db>.sqlite`` that SkyRL's env reads) and the same
episodes: for every bundled task, a reset, the gold query as one step, then the answer
(SkyRL, in the format its reward requires: ``<think>..</think><sql>gold</sql>``, then
``<think>..</think><solution>gold</solution>``, which runs both queries and compares;
ours: the gold, then ``submit``, which compares the last result with the gold's).
SkyRL's reset costs less because it gives an episode no database of its own: each of
its queries runs in a rolled-back transaction on the shared file (a write an agent
commits some other way, or a schema change, reaches every later episode); ours copies
the template in memory per episode. SkyRL's env is built per
episode, as its generator does (``init`` is its reset). Prints per-episode reset, query
step and answer step times of both sides and the ratios.

SkyRL-gym comes from the ``integrations`` extra; when it is missing the script says so.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from agentenvs.envs.intercode_sql.backends.sqlite import template_bytes
from agentenvs.envs.intercode_sql.data import load_tasks
from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv

REPEATS = int(os.environ.get("BENCH_REPEATS", 5))


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


def main() -> None:
    try:
        from skyrl_gym.envs.sql.env import SQLEnv, Text2SQLEnvConfig
    except ImportError as exc:
        print(f"SkyRL-gym: skipped ({exc}; pip install 'agentenvs[integrations]')")
        return
    tasks = load_tasks(None)
    root = Path(tempfile.mkdtemp(prefix="agentenvs-bench-sql-"))
    try:
        for name, source in tasks.databases.items():
            folder = root / "spider" / "database" / name
            folder.mkdir(parents=True)
            (folder / f"{name}.sqlite").write_bytes(template_bytes(source))
        config = Text2SQLEnvConfig(db_path=str(root))
        ours = InterCodeSQLEnv()
        theirs_t: dict[str, list[float]] = {"reset": [], "query": [], "answer": []}
        ours_t: dict[str, list[float]] = {"reset": [], "query": [], "answer": []}
        agree = 0
        for _ in range(REPEATS):
            for task in tasks.tasks.values():
                t0 = time.perf_counter()
                env = SQLEnv(
                    config,
                    extras={
                        "db_id": task.db,
                        "reward_spec": {"ground_truth": task.gold},
                        "data": "spider",
                        "max_turns": 5,
                    },
                )
                env.init([{"role": "user", "content": task.question}])
                t1 = time.perf_counter()
                env.step(f"<think>run the query</think>\n<sql>{task.gold}</sql>")
                t2 = time.perf_counter()
                theirs_reward = env.step(
                    f"<think>it answers</think>\n<solution>{task.gold}</solution>"
                )["reward"]
                t3 = time.perf_counter()
                env.close()
                theirs_t["reset"].append(t1 - t0)
                theirs_t["query"].append(t2 - t1)
                theirs_t["answer"].append(t3 - t2)

                t0 = time.perf_counter()
                ours.reset(seed=0, options={"task_id": task.id})
                t1 = time.perf_counter()
                ours.step(task.gold)
                t2 = time.perf_counter()
                ours_reward = ours.step("submit")[1]
                t3 = time.perf_counter()
                ours_t["reset"].append(t1 - t0)
                ours_t["query"].append(t2 - t1)
                ours_t["answer"].append(t3 - t2)
                agree += theirs_reward == ours_reward == 1.0
        ours.close()
    finally:
        shutil.rmtree(root)  # the folder this run made
    n = len(theirs_t["reset"])
    print(f"{len(tasks.tasks)} bundled tasks x {REPEATS}: gold query, then the answer")
    print(f"both rewarded the gold 1.0 in {agree}/{n} episodes")
    print(f"{'ms per episode (median)':26} {'reset':>8} {'query':>8} {'answer':>8} {'total':>8}")
    totals = {}
    for name, t in (("SkyRL-gym SQLEnv", theirs_t), ("agentenvs InterCodeSQL-v0", ours_t)):
        total = [sum(x) for x in zip(t["reset"], t["query"], t["answer"], strict=True)]
        totals[name] = statistics.median(total)
        print(
            f"{name:26} {median_ms(t['reset']):8.3f} {median_ms(t['query']):8.3f} "
            f"{median_ms(t['answer']):8.3f} {median_ms(total):8.3f}"
        )
    ratios = [
        statistics.median(theirs_t[k]) / statistics.median(ours_t[k])
        for k in ("reset", "query", "answer")
    ]
    print(
        "ratio (SkyRL / ours): reset {:.1f}x, query {:.1f}x, answer {:.1f}x, episode {:.1f}x".format(
            *ratios, totals["SkyRL-gym SQLEnv"] / totals["agentenvs InterCodeSQL-v0"]
        )
    )


if __name__ == "__main__":
    main()
