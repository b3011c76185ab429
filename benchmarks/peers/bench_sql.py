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
episode, as its generator does (``init`` is its reset). Rounds of every task, the side
that goes first turning each round. Prints per-episode reset, query step and answer step
times of both sides (medians, and the totals), the CPU time of an episode (this process
and its children, ``resource.getrusage``) and the ratios.

SkyRL-gym comes from the ``integrations`` extra; when it is missing the script says so.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from agentenvs.envs.intercode_sql.backends.sqlite import template_bytes
from agentenvs.envs.intercode_sql.data import load_tasks
from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv

REPEATS = int(os.environ.get("BENCH_REPEATS", 5))


def cpu() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


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
        keys = ("reset", "query", "answer", "cpu")
        theirs_t: dict[str, list[float]] = {k: [] for k in keys}
        ours_t: dict[str, list[float]] = {k: [] for k in keys}
        agree = 0

        def theirs_episode(task) -> float:
            c0, t0 = cpu(), time.perf_counter()
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
            reward = env.step(f"<think>it answers</think>\n<solution>{task.gold}</solution>")[
                "reward"
            ]
            t3 = time.perf_counter()
            env.close()
            theirs_t["cpu"].append(cpu() - c0)
            theirs_t["reset"].append(t1 - t0)
            theirs_t["query"].append(t2 - t1)
            theirs_t["answer"].append(t3 - t2)
            return reward

        def ours_episode(task) -> float:
            c0, t0 = cpu(), time.perf_counter()
            ours.reset(seed=0, options={"task_id": task.id})
            t1 = time.perf_counter()
            ours.step(task.gold)
            t2 = time.perf_counter()
            reward = ours.step("submit")[1]
            t3 = time.perf_counter()
            ours_t["cpu"].append(cpu() - c0)
            ours_t["reset"].append(t1 - t0)
            ours_t["query"].append(t2 - t1)
            ours_t["answer"].append(t3 - t2)
            return reward

        for k in range(REPEATS):
            for task in tasks.tasks.values():
                if k % 2 == 0:
                    theirs_reward, ours_reward = theirs_episode(task), ours_episode(task)
                else:
                    ours_reward, theirs_reward = ours_episode(task), theirs_episode(task)
                agree += theirs_reward == ours_reward == 1.0
        ours.close()
    finally:
        shutil.rmtree(root)  # the folder this run made
    n = len(theirs_t["reset"])
    print(
        f"{len(tasks.tasks)} bundled tasks x {REPEATS} rounds (the side going first turning "
        f"each round): gold query, then the answer; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"both rewarded the gold 1.0 in {agree}/{n} episodes")
    print(
        f"{'ms per episode (median)':26} {'reset':>8} {'query':>8} {'answer':>8} {'total':>8} "
        f"{'CPU':>8} {'sum (s)':>8} {'CPU sum':>8}"
    )
    totals = {}
    for name, t in (("SkyRL-gym SQLEnv", theirs_t), ("agentenvs InterCodeSQL-v0", ours_t)):
        total = [sum(x) for x in zip(t["reset"], t["query"], t["answer"], strict=True)]
        totals[name] = (statistics.median(total), sum(total), statistics.median(t["cpu"]))
        print(
            f"{name:26} {median_ms(t['reset']):8.3f} {median_ms(t['query']):8.3f} "
            f"{median_ms(t['answer']):8.3f} {median_ms(total):8.3f} {median_ms(t['cpu']):8.3f} "
            f"{sum(total):8.2f} {sum(t['cpu']):8.2f}"
        )
    ratios = [
        statistics.median(theirs_t[k]) / statistics.median(ours_t[k])
        for k in ("reset", "query", "answer")
    ]
    (m_t, s_t, c_t), (m_o, s_o, c_o) = totals.values()
    print(
        "ratio (SkyRL / ours), medians: reset {:.1f}x, query {:.1f}x, answer {:.1f}x, "
        "episode {:.1f}x; totals {:.1f}x; CPU an episode {:.1f}x".format(
            *ratios, m_t / m_o, s_t / s_o, c_t / c_o
        )
    )


if __name__ == "__main__":
    main()
