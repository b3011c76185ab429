"""Replay InterCode's recorded SQL trajectories and compare every turn's reward.

    python -m agentenvs.envs.intercode_sql.replay RESULTS.json [RESULTS.json ...]
        --tasks ic_spider_dev.json --databases ic_spider_dbs.sql
        [--backend mysql|sqlite] [--mysql-url URL] [--show N]

InterCode's multi-turn experiments write one record per task: the task's index in the
question file (``task_id``), its question (``query``), and a ``turn_history`` of
``actions``, ``observations``, ``rewards`` and ``valid_action``, where each turn's reward is
that of submitting right after its action (the experiment steps the action, then
``submit``, and stops at a reward of 1). A turn whose reply held no code never reached the
env: its observation is the policy's retry message and its reward 0.

This replays every action through ``InterCodeSQLEnv(try_again=True)`` (the same protocol:
every statement graded as if submitted, the episode over at 1) with the default
``rules="official"``, and reports how many turns and episodes (their best reward) agree
with the recorded rewards, and each disagreement with the action, both rewards and our
observation. The published files were not all scored by one version of InterCode's
reward: some match ``rules="official"`` (the released ``get_reward``), others ``"iou"``
(the same before its sort-order scaling); ``--rules`` picks the one to replay with. InterCode ran all tasks on one shared server whose databases kept what
earlier tasks wrote; here each episode starts from pristine data, so a trajectory that
follows another task's writes can differ: such turns are listed, not hidden.

The exit status is 0 when every turn agrees.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.core.errors import TaskError

RETRY_PREFIX = "No SQL code was found in your last response."


@dataclass
class Disagreement:
    results: str
    index: int
    turn: int
    action: str
    recorded: float
    ours: float
    observation: str


@dataclass
class ReplayReport:
    episodes: int = 0
    episodes_agree: int = 0
    turns: int = 0
    turns_agree: int = 0
    #: turns without code (the retry message): recorded 0, never sent to the env
    no_code_turns: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.turns == self.turns_agree and self.episodes == self.episodes_agree

    def summary(self) -> str:
        return (
            f"{self.turns_agree}/{self.turns} turns and {self.episodes_agree}/{self.episodes} "
            f"episodes (best reward) agree with the recorded rewards "
            f"({self.no_code_turns} turns without code)"
        )


def _records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TaskError(str(path), "file", f"cannot read InterCode results: {exc}") from exc
    items = data.items() if isinstance(data, dict) else enumerate(data)
    out = []
    for key, record in items:
        where = f"record {key}"
        if not isinstance(record, dict):
            raise TaskError(str(path), where, "expected an object")
        history = record.get("turn_history")
        if not isinstance(history, dict):
            raise TaskError(str(path), f"{where}.turn_history", "expected an object")
        for name in ("actions", "observations", "rewards"):
            if not isinstance(history.get(name), list):
                raise TaskError(str(path), f"{where}.turn_history.{name}", "expected a list")
        if not isinstance(record.get("task_id"), int):
            raise TaskError(str(path), f"{where}.task_id", "expected the task's index (an integer)")
        out.append((record["task_id"], record))
    return out


def replay(
    results: Sequence[str | Path],
    tasks: str | Path,
    databases: str | Path | None = None,
    *,
    backend: str = "mysql",
    mysql_url: str | None = None,
    rules: str = "official",
) -> ReplayReport:
    from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv

    turns_needed = 1
    loaded = [(Path(p), _records(Path(p))) for p in results]
    for _, records in loaded:
        for _, record in records:
            turns_needed = max(turns_needed, len(record["turn_history"]["actions"]) + 1)
    env = InterCodeSQLEnv(
        tasks_path=tasks,
        databases_path=databases,
        backend=backend,
        mysql_url=mysql_url,
        try_again=True,
        max_turns=turns_needed,
        rules=rules,
    )
    report = ReplayReport()
    try:
        ids = list(env.task_set.tasks)
        for path, records in loaded:
            for index, record in records:
                if not 0 <= index < len(ids):
                    raise TaskError(
                        str(path), f"record {index}.task_id", f"no task {index} in {tasks}"
                    )
                task = env.task_set.tasks[ids[index]]
                if record.get("query") is not None and record["query"] != task.question:
                    raise TaskError(
                        str(path),
                        f"record {index}.query",
                        f"is not task {index}'s question in {tasks}: is this the question file "
                        "the trajectories were recorded on?",
                    )
                _replay_one(env, path, index, ids[index], record, report)
    finally:
        env.close()
    return report


def _replay_one(
    env: Any, path: Path, index: int, task_id: str, record: dict, report: ReplayReport
) -> None:
    history = record["turn_history"]
    env.reset(seed=0, options={"task_id": task_id})
    best_recorded, best_ours, ended = 0.0, 0.0, False
    for turn, (action, observation, recorded) in enumerate(
        zip(history["actions"], history["observations"], history["rewards"], strict=False)
    ):
        recorded = float(recorded or 0)
        best_recorded = max(best_recorded, recorded)
        report.turns += 1
        if str(observation).startswith(RETRY_PREFIX) or action == "blocked":
            report.no_code_turns += 1
            ours, shown = 0.0, str(observation)
        elif ended:
            ours, shown = 0.0, "(our episode had already ended at a reward of 1)"
        else:
            shown, reward, terminated, truncated, _ = env.step(f"```sql\n{action}\n```")
            ours = float(reward)
            ended = terminated or truncated
        best_ours = max(best_ours, ours)
        if ours == recorded:
            report.turns_agree += 1
        else:
            report.disagreements.append(
                Disagreement(path.name, index, turn, action, recorded, ours, shown)
            )
    report.episodes += 1
    report.episodes_agree += best_ours == best_recorded


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentenvs.envs.intercode_sql.replay",
        description="Replay InterCode's recorded SQL trajectories and compare every turn's reward.",
    )
    parser.add_argument(
        "results", nargs="+", help="InterCode results files (ic_sql_multiturn_*.json)"
    )
    parser.add_argument("--tasks", required=True, help="the question file (ic_spider_dev.json)")
    parser.add_argument("--databases", default=None, help="the databases (ic_spider_dbs.sql)")
    parser.add_argument("--backend", choices=["mysql", "sqlite"], default="mysql")
    parser.add_argument("--mysql-url", default=None)
    parser.add_argument(
        "--rules",
        choices=["official", "iou", "normalized"],
        default="official",
        help="the env's reward rules (InterCode's trajectories were scored by 'official' or, "
        "before its sort-order scaling, 'iou')",
    )
    parser.add_argument("--show", type=int, default=20, help="disagreements to list (default 20)")
    args = parser.parse_args(argv)
    try:
        report = replay(
            args.results,
            args.tasks,
            args.databases,
            backend=args.backend,
            mysql_url=args.mysql_url,
            rules=args.rules,
        )
    except TaskError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.summary())
    for d in report.disagreements[: args.show]:
        print(
            f"- {d.results} task {d.index} turn {d.turn}: recorded {d.recorded}, ours {d.ours}\n"
            f"    action: {d.action[:300]}\n    ours saw: {d.observation[:300]}"
        )
    if len(report.disagreements) > args.show:
        print(f"... and {len(report.disagreements) - args.show} more")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
