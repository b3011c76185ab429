"""Run every gold query of a task file as an agent would, on one engine or both, and report.

    python -m agentenvs.envs.intercode_sql.check_gold TASKS [--databases PATH]
        [--backend sqlite|mysql|both] [--mysql-url URL] [--rules official|normalized]

``TASKS`` is anything ``tasks_path`` accepts (InterCode's ``ic_spider_dev.json``, a CSV,
a Spider folder, ``intercode-bench``). For each engine the report gives how many
databases load, how many gold queries score 1.0 when submitted, and every gold query that
the engine rejects, with the engine's reason: such a task is reported, never counted
silently as a 0 for every agent. The exit status is 0 when every gold query scores 1.0
on every engine checked.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentenvs.core.errors import TaskError


@dataclass
class GoldReport:
    """One engine's verdict on every gold query of a task set."""

    engine: str
    tasks: int = 0
    scored_one: int = 0
    databases: int = 0
    #: database → why it did not load
    database_errors: dict[str, str] = field(default_factory=dict)
    #: (task id, gold query, the engine's error)
    invalid: list[tuple[str, str, str]] = field(default_factory=list)
    #: (task id, gold query, reward) of gold queries that ran but did not score 1.0
    below_one: list[tuple[str, str, float]] = field(default_factory=list)

    @property
    def databases_loaded(self) -> int:
        return self.databases - len(self.database_errors)

    @property
    def ok(self) -> bool:
        return self.scored_one == self.tasks and not self.database_errors

    def summary(self) -> str:
        return (
            f"{self.engine}: {self.databases_loaded}/{self.databases} databases load; "
            f"{self.scored_one}/{self.tasks} gold queries score 1.0"
        )

    def text(self) -> str:
        lines = [self.summary()]
        for db, why in sorted(self.database_errors.items()):
            lines.append(f"  database {db} does not load: {why}")
        if self.invalid:
            lines.append(f"  {len(self.invalid)} gold quer(y/ies) invalid on {self.engine}:")
            for task_id, gold, why in self.invalid:
                lines.append(f"  - {task_id}: {why}\n      {gold}")
        if self.below_one:
            lines.append(f"  {len(self.below_one)} gold quer(y/ies) ran but scored below 1.0:")
            for task_id, gold, reward in self.below_one:
                lines.append(f"  - {task_id}: reward {reward}\n      {gold}")
        return "\n".join(lines)


def check_gold(
    tasks_path: str | Path,
    *,
    backend: str = "sqlite",
    databases_path: str | Path | None = None,
    mysql_url: str | None = None,
    rules: str = "official",
    statement_timeout_s: float = 30.0,
) -> GoldReport:
    """Submit every task's gold query on ``backend`` and collect the outcome."""
    from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv

    env = InterCodeSQLEnv(
        tasks_path=tasks_path,
        databases_path=databases_path,
        backend=backend,
        mysql_url=mysql_url,
        rules=rules,
        statement_timeout_s=statement_timeout_s,
        max_turns=2,
    )
    report = GoldReport(engine=backend, databases=len(env.task_set.databases))
    try:
        for task_id in env.task_ids:
            report.tasks += 1
            db = env.task_set.tasks[task_id].db
            if db in report.database_errors:
                continue
            try:
                env.reset(options={"task_id": task_id})
                gold = env.gold_query
            except TaskError as exc:
                report.database_errors[db] = str(exc)
                continue
            # exactly what an agent does: the gold as its statement, then submit
            obs, _, _, _, info = env.step(f"```sql\n{gold}\n```")
            if not info.get("executed"):
                why = obs.removeprefix("Error executing query: ").strip()
                report.invalid.append((task_id, gold, why))
                continue
            reward = env.step("submit")[1]
            if reward == 1:
                report.scored_one += 1
            else:
                report.below_one.append((task_id, gold, reward))
    finally:
        env.close()
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentenvs.envs.intercode_sql.check_gold",
        description="Run every gold query of an InterCode-SQL task file and report per engine.",
    )
    parser.add_argument("tasks", help="task file or folder, or 'intercode-bench'")
    parser.add_argument("--databases", help="a folder or a MySQL dump holding the databases")
    parser.add_argument("--backend", choices=["sqlite", "mysql", "both"], default="both")
    parser.add_argument("--mysql-url", help="default: $AGENTENVS_MYSQL_URL")
    parser.add_argument("--rules", choices=["official", "iou", "normalized"], default="official")
    parser.add_argument("--statement-timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    engines = ["sqlite", "mysql"] if args.backend == "both" else [args.backend]
    reports = []
    for engine in engines:
        try:
            report = check_gold(
                args.tasks,
                backend=engine,
                databases_path=args.databases,
                mysql_url=args.mysql_url,
                rules=args.rules,
                statement_timeout_s=args.statement_timeout,
            )
        except (TaskError, ValueError, ImportError) as exc:
            print(f"{engine}: cannot run: {exc}", file=sys.stderr)
            return 2
        reports.append(report)
        print(report.text(), flush=True)
    print("\n".join(r.summary() for r in reports))
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
