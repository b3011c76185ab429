"""``agentenvs/InterCodeSQL-v0``: answer a question by querying a database, then submit."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentenvs.core import info as keys
from agentenvs.core.env import TextEnv, Transition
from agentenvs.core.errors import Fault, SnapshotError, TaskError
from agentenvs.core.info import STEP_REWARD
from agentenvs.envs.intercode_sql.backends.base import (
    Backend,
    Episode,
    Limits,
    QueryResult,
    normalize_rows,
)
from agentenvs.envs.intercode_sql.data import HARDNESS_LEVELS, SqlTask, TaskSet, load_tasks
from agentenvs.envs.intercode_sql.mistakes import SEMANTIC_KINDS, wrong_query
from agentenvs.envs.intercode_sql.reward import RULES, clip_score, intercode_reward

MYSQL_URL_ENV = "AGENTENVS_MYSQL_URL"

_SUBMIT = re.compile(r"^\s*(?:`{1,3}\s*)?submit\s*;?\s*(?:`{1,3})?\s*$", re.I)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n?(.*?)```", re.S)
_SQL_START = re.compile(
    r"^\s*(?:\(|(?:select|with|show|describe|desc|explain|insert|update|delete|replace|create"
    r"|drop|alter|pragma|values|use|set|truncate|begin|commit|rollback|start|attach|detach"
    r"|grant|revoke|analyze|vacuum|reindex|savepoint|release|call|lock|unlock|table|kill"
    r"|flush|load|handler|do|rename|optimize|repair|check|checksum|prepare|execute)\b)",
    re.I,
)
_DIALECT_NAMES = {"sqlite": "SQLite", "mysql": "MySQL"}


def parse_action(action: str) -> tuple[str, str]:
    """Classify an action as ``("submit", "")``, ``("sql", statement)`` or ``("invalid", why)``.

    The statement is the first ```sql block (else the first unlabelled or sql-like
    block), or the whole action when it starts like SQL; trailing semicolons are cut.
    """
    if _SUBMIT.match(action):
        return "submit", ""
    blocks = _FENCE.findall(action)
    if blocks:
        preferred = [b for lang, b in blocks if lang.lower() == "sql"]
        fallback = [b for lang, b in blocks if lang.lower() in ("", "mysql", "sqlite")]
        chosen = (preferred or fallback or [None])[0]
        if chosen is None:
            return "invalid", "Found a code block, but not an SQL one (use ```sql ... ```)."
        text = chosen.strip()
        if _SUBMIT.match(text):
            return "submit", ""
        if not text.rstrip(";").strip():
            return "invalid", "The ```sql block is empty."
    else:
        text = action.strip()
        if not text:
            return "invalid", "The action is empty."
        if not _SQL_START.match(text):
            return "invalid", (
                "Could not find an SQL statement: the action is neither a ```sql block nor "
                f"text that starts like SQL (it starts {text[:40]!r})."
            )
    return "sql", text.rstrip().rstrip(";").rstrip()


def format_result(result: QueryResult, *, max_rows: int, max_chars: int) -> str:
    """A result set as readable text, cut to ``max_rows`` rows and ``max_chars`` characters."""
    if result.error is not None:
        return f"Error executing query: {result.error}"
    if result.rows is None:
        affected = f"; {result.rowcount} row(s) affected" if result.rowcount >= 0 else ""
        return f"Statement executed (no result set{affected})."
    rows = result.rows
    lines = [f"Columns: {', '.join(result.columns)}"] if result.columns else []
    lines.extend(str(row) for row in rows[:max_rows])
    if len(rows) > max_rows:
        lines.append(f"[{len(rows)} rows in total; showing the first {max_rows}]")
    else:
        lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = (
            text[:max_chars]
            + f"\n[output truncated to {max_chars} characters; {len(rows)} rows in total]"
        )
    return text


def _rows_digest(rows: tuple[tuple[Any, ...], ...] | None) -> str:
    if rows is None:
        return "-"
    return hashlib.blake2b(repr(rows).encode(), digest_size=8).hexdigest()


_SQLITE_HEADER = b"SQLite format 3\x00"


def _check_dump(backend: str, dump: Any) -> None:
    """Raise ``SnapshotError`` unless ``dump`` is a database ``backend`` can load whole."""
    if backend == "sqlite":
        if not isinstance(dump, bytes | bytearray) or not bytes(dump[:16]) == _SQLITE_HEADER:
            raise SnapshotError("the snapshot's database is not an SQLite image")
        import sqlite3

        conn = sqlite3.connect(":memory:")
        try:
            conn.deserialize(bytes(dump))
            verdict = conn.execute("PRAGMA quick_check").fetchone()
        except sqlite3.Error as exc:
            raise SnapshotError(f"the snapshot's database is damaged: {exc}") from None
        finally:
            conn.close()
        if verdict != ("ok",):
            raise SnapshotError(f"the snapshot's database is damaged: {verdict!r:.200}")
        return
    if not isinstance(dump, list) or not all(
        isinstance(t, tuple)
        and len(t) == 3
        and isinstance(t[0], str)
        and isinstance(t[1], str)
        and t[1].lstrip().upper().startswith("CREATE TABLE")
        and isinstance(t[2], tuple)
        and all(isinstance(row, tuple) for row in t[2])
        for t in dump
    ):
        raise SnapshotError(
            "the snapshot's database is not a table dump (name, CREATE TABLE, rows)"
        )


def make_backend(
    backend: str, limits: Limits, mysql_url: str | None, *, comparable: bool = False
) -> Backend:
    if backend == "sqlite":
        from agentenvs.envs.intercode_sql.backends.sqlite import SqliteBackend

        return SqliteBackend(limits)
    if backend == "mysql":
        from agentenvs.envs.intercode_sql.backends.mysql import MySQLBackend

        url = mysql_url or os.environ.get(MYSQL_URL_ENV)
        if not url:
            raise ValueError(
                f"backend='mysql' needs mysql_url=... or the {MYSQL_URL_ENV} environment variable "
                "(e.g. mysql://root@localhost/?unix_socket=/run/mysqld/mysqld.sock)"
            )
        return MySQLBackend(url, limits, comparable=comparable)
    raise ValueError(f"backend must be 'sqlite' or 'mysql', got {backend!r}")


class InterCodeSQLEnv(TextEnv):
    """Answer a natural-language question about a database by running SQL, then submit.

    ## Description
    InterCode-SQL (Yang et al., 2023) over Spider-style databases. Each episode is one
    question about one database; the agent explores with SQL statements, sees their
    results, and ends with ``submit``, which grades the result of its last statement
    against the gold query's result, exactly as InterCode computes its reward.
    Every episode runs on its own copy of the database, so writes never leak into
    another episode, the template or the server.

    ## Action Space
    ``FreeText``: one SQL statement, in a ```` ```sql ```` block (the first one counts)
    or as plain text starting like SQL, trailing semicolons allowed; or ``submit``.
    Text with no SQL in it, and anything that is not a ``str`` (bytes included), is an
    invalid action (``action_valid=False``; the turn is spent, nothing changes). Several
    statements in one action, statements refused for safety (decided from the statement's
    tokens, so comments cannot hide them) and statements over the time limit (which no
    statement can lift) are executed as errors.

    ## Observation Space
    ``FreeText``. First: the instructions and the question (with the tables and their
    columns when ``show_schema``, InterCode's "handicap" setting). After a statement: its
    result rows (``Columns: ...`` then one tuple per row), cut to ``max_rows`` rows and
    ``max_observation_chars`` characters with a note saying so; ``Statement executed (no
    result set ...)``; or ``Error executing query: <message>``.

    ## Starting State
    A task drawn with ``self.np_random`` (or ``reset(options={"task_id": ...})``), a
    fresh copy of its database, and no result yet (submitting now scores 0).

    ## Rewards
    InterCode's (``rules="official"``, the default: the number InterCode's
    ``SqlEnv.get_reward`` gives on the same rows): rows are compared as ``str(tuple)`` of the
    driver's values, as multisets; IoU = Σ intersection ÷ Σ element-wise max (two empty
    results: 1); if the intersection is non-empty the IoU is scaled by Kendall's tau-b
    between the agent's and the gold's intersecting rows in their original order,
    ``round(tau * IoU, 2)`` with numpy's rounding (no scaling when tau is NaN, e.g. one
    matching row). The agent's side without a result set (an error, a statement, nothing
    run yet) gives 0; a gold without a result set counts as ``[]``, as does a gold the
    engine refuses: on MySQL the gold runs as written, as InterCode runs it (``FROM SHOW``,
    a reserved word, and ``COUNT (*)`` fail there, so an empty answer scores 1 and the
    right one 0). Reversed order gives a negative reward. ``rules="iou"`` leaves the
    sort-order scaling out (the reward some of InterCode's published trajectories were
    scored with; ``python -m agentenvs.envs.intercode_sql.replay`` tells which).
    ``rules="normalized"`` is the comparable mode: values are made canonical first (``6.0``
    is ``6``, ``Decimal('2.50')`` is ``2.5``), MySQL divides with SQLite's precision, a gold
    the server refuses is read as SQLite and rewritten by sqlglot (`` FROM `SHOW` ``, its
    double-quoted strings kept strings), a gold without a result set scores 0, and only
    the gold's rows in its order score 1 (InterCode's rounding gives 1 to 250 of 251 rows;
    here 0.99); see
    ``docs/intercode_sql.md``, which also lists what each mode leaves open.
    Only ``submit`` is rewarded (0 otherwise), unless ``try_again``: then every statement
    is rewarded as if submitted right after it. The gold query runs on the episode's own
    database while the agent has only read, and on the task's pristine database once any
    statement changed data (InterCode runs it after the agent's statements, so an agent
    that deletes rows could change the answer key); every data-changing statement counts,
    whatever it returns (``DELETE ... RETURNING``).

    ## Episode End
    ``terminated`` on ``submit`` (and, with ``try_again``, on the first statement whose
    reward is 1); ``truncated`` when the turn budget runs out first.

    On MySQL, a failure of the infrastructure (a lost or refused connection, the server
    shut down or restarted, a session or statement killed from outside, the gold
    connection lost, the episode's database dropped by someone else) ends no episode with a
    score: ``reset``, ``step``, ``score_action``, ``snapshot`` and ``restore`` raise
    :class:`~agentenvs.core.errors.Fault` (``kind="database"``), decided from evidence the
    agent cannot forge (``backends.mysql_faults``). The episode's database is then dropped
    (once the server answers again, if it is away) and only a ``reset`` can follow, which
    connects anew. What the agent causes stays its outcome: a statement refused (syntax,
    privileges, the guard) or stopped at its time limit by the env's watchdog is an
    observation. SQLite runs in the process: no infrastructure fault can happen there.

    ## Information
    The standard keys; ``success`` is reward = 1 (with ``try_again``: best so far = 1);
    ``gold_error`` (when graded) holds the engine's message when the gold query itself
    fails there, so such a task is never a silent 0;
    ``score`` is the reward (best so far with ``try_again``) clipped to [0, 1].
    ``state_key`` is equal for equal database contents and last results while the
    database holds at most 4 MB (every task database does); past that it follows the
    writes since the last key (equal keys and equal writes give equal keys), so no step
    reads a large database whole. Also
    ``db``, ``hardness``, ``backend``, and ``schema``: the task database's tables and their
    columns, ``{table: [column, ...]}``, named as the database itself names them (the
    names a query must use), in a fixed order (SQLite: the order the tables were created
    in, columns in table order; MySQL: tables by name, columns in table order). It is read
    once per database and describes the database as the episode began (tables the agent
    creates are not added); each info dict gets its own copy. Steps add ``executed`` (the statement ran
    without error) and ``reward_so_far``-style keys: ``best_reward`` with ``try_again``.
    Every step's ``step_reward`` is InterCode's reward of that step as its ``try_again``
    mode gives it after every statement: the reward of the statement's result were it
    submitted (``reward_of``; the episode's reward stays 0 until ``submit`` without
    ``try_again``), on ``submit`` the reward submitted (with ``try_again`` the best so far),
    0.0 for an invalid action.
    ``info["system_prompt"]`` holds the instructions on reset.

    ## Arguments
    - ``tasks_path``: a folder or file in the bundled, InterCode (``ic_spider_dev.json``,
      or a CSV) or Spider format (see ``agentenvs.envs.intercode_sql.data``), or
      ``"intercode-bench"`` (the installed package's questions and its MySQL dump of the
      Spider dev databases); default: the bundled tasks.
    - ``databases_path``: where InterCode-format tasks find their databases: a folder, or
      a MySQL dump such as InterCode's ``spider_dev.sql`` (imported as it is on MySQL,
      converted with sqlglot on SQLite). Table names work in any letter case on any
      server (``lower_case_table_names`` 0 or 1).
    - ``backend``: ``"sqlite"`` (embedded, default) or ``"mysql"``; ``mysql_url``
      (else ``$AGENTENVS_MYSQL_URL``), e.g.
      ``mysql://root@localhost/?unix_socket=/run/mysqld/mysqld.sock``.
    - ``show_schema`` (default ``False``): append the tables and their columns (the same as
      ``info["schema"]``) to the first observation, one ``- table: col, col`` line each,
      InterCode's "handicap" setting. Off, the agent explores the database itself, as in
      InterCode's standard prompt.
    - ``try_again``: InterCode's "try again" protocol (score every statement, stop at 1,
      report the best).
    - ``rules``: ``"official"`` (default, InterCode's reward exactly), ``"iou"`` (without
      its sort-order scaling) or ``"normalized"`` (canonical values, comparable across
      SQLite and MySQL).
    - ``hardness``: keep only tasks of these levels (easy, medium, hard, extra).
    - ``statement_timeout_s``, ``max_result_rows``: limits on each statement.
    - ``max_db_bytes`` (default 64 MB; the largest task database holds about 100 KB): the
      most the episode's database may hold. A write that would take it past this is refused
      with ``Error executing query: database or disk is full: ...`` and leaves the
      database as it was (the episode goes on). SQLite: ``PRAGMA max_page_count``, which
      no statement can raise. MySQL: the size of the episode's table files on the server,
      watched while a write runs and checked after it; a data change past it is rolled
      back, a new table past it dropped (``docs/intercode_sql.md`` gives the slack). A
      task database larger than this cannot be opened (``TaskError``).
    - ``max_rows``, ``max_observation_chars``: how much of a result is shown (InterCode
      shows 50 rows and 1000 characters).
    - ``max_turns`` (default 10), ``show_budget``, ``render_mode``,
      ``max_action_chars`` (default 100,000): as in ``TextEnv``.

    ## Version History
    - v0: first version. Before any release, the reward became InterCode's exactly
      (``rules="official"``, the default; the earlier value-normalizing reward is
      ``rules="normalized"``), and every data-changing statement counts as a write.
      ``rules="iou"`` (InterCode's reward before its sort-order scaling) was added to
      reproduce InterCode's published trajectories. ``info["schema"]`` (the tables and
      columns, on reset and every step) was added; observations are unchanged. On MySQL,
      named-lock and file functions and table options that place files (``DATA
      DIRECTORY``, tablespaces, engines other than InnoDB) are refused and the gold runs
      outside the agent's session; on both engines a result past
      ``Limits.max_result_bytes`` (64 MB) is refused, SQLite refuses ``fts3_tokenizer``,
      and ``rules="normalized"`` no longer rounds a near answer up to 1. On MySQL the gold
      runs as written under ``rules="official"`` and ``"iou"`` (it was rewritten from
      SQLite's dialect when the server refused it, which scored ``FROM `show` `` 1 where
      InterCode scores it 0); the rewrite, now only in ``rules="normalized"``, keeps
      double-quoted strings strings (it made ``"Asia"`` a column). On MySQL a lost
      connection raises ``Fault`` (it was an ``Error executing query: lost the database
      connection`` observation, and a gold connection or database gone an exception).
      ``max_db_bytes`` (64 MB) caps each episode's database (writes were unbounded); on
      MySQL the guard refuses text it cannot read, or that the server would read
      otherwise, instead of judging it by its first word; past 4 MB the state key follows
      the writes instead of reading the database whole; on SQLite a repeated write is
      seen (a cached statement escaped the authorizer).
    """

    default_max_turns = 10
    snapshot_version = 1
    hidden_info_keys = frozenset({"gold_error", "step_reward"})  # of the gold query

    def __init__(
        self,
        *,
        tasks_path: str | Path | None = None,
        databases_path: str | Path | None = None,
        backend: str = "sqlite",
        mysql_url: str | None = None,
        show_schema: bool = False,
        try_again: bool = False,
        rules: str = "official",
        hardness: str | Sequence[str] | None = None,
        statement_timeout_s: float = 5.0,
        max_result_rows: int = 100_000,
        max_db_bytes: int = 64_000_000,
        max_rows: int = 50,
        max_observation_chars: int = 1000,
        max_turns: int | None = None,
        show_budget: bool = False,
        render_mode: str | None = None,
        max_action_chars: int = 100_000,
    ) -> None:
        super().__init__(
            max_turns=max_turns,
            show_budget=show_budget,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
        )
        if (
            statement_timeout_s <= 0
            or max_result_rows < 1
            or max_rows < 1
            or max_observation_chars < 1
            or max_db_bytes < 1
        ):
            raise ValueError(
                "statement_timeout_s, max_result_rows, max_db_bytes, max_rows and "
                "max_observation_chars must be positive"
            )
        self.task_set: TaskSet = load_tasks(tasks_path, databases_path)
        levels = [hardness] if isinstance(hardness, str) else hardness
        if levels is not None:
            unknown = set(levels) - set(HARDNESS_LEVELS)
            if unknown:
                raise ValueError(
                    f"unknown hardness level(s) {sorted(unknown)}; use {list(HARDNESS_LEVELS)}"
                )
        self._task_ids = [
            t.id for t in self.task_set.tasks.values() if levels is None or t.hardness in levels
        ]
        if not self._task_ids:
            raise TaskError(self.task_set.origin, "hardness", f"no task has hardness in {levels}")
        if rules not in RULES:
            raise ValueError(f"rules must be one of {list(RULES)}, got {rules!r}")
        self.rules = rules
        self.show_schema = bool(show_schema)
        self.try_again = bool(try_again)
        self.max_rows = int(max_rows)
        self.max_observation_chars = int(max_observation_chars)
        self.limits = Limits(
            statement_timeout_s=float(statement_timeout_s),
            max_result_rows=int(max_result_rows),
            max_db_bytes=int(max_db_bytes),
        )
        self.backend: Backend = make_backend(
            backend, self.limits, mysql_url, comparable=rules == "normalized"
        )
        #: this env still counts among the backend's users (``Backend.release`` on close)
        self._holds_backend = True
        self._episode: Episode | None = None
        self._episode_db: str | None = None
        self._gold: dict[str, QueryResult] = {}
        self._schemas: dict[str, Mapping[str, Sequence[str]]] = {}
        # the gold result on this episode's own database, while the agent has not written
        self._episode_gold: QueryResult | None = None
        self._wrote = False
        self._last: QueryResult | None = None
        self._best = 0.0

    # ---------------------------------------------------------------- task and prompts
    @property
    def task_ids(self) -> Sequence[str]:
        return self._task_ids

    def _known_task(self, task_id: Any) -> Mapping[str, SqlTask]:
        return {t: self.task_set.tasks[t] for t in self._task_ids}

    @property
    def task(self) -> SqlTask:
        if self._task_id is None:
            raise RuntimeError("no task yet: call reset() first")
        return self.task_set.tasks[self._task_id]

    @property
    def gold_query(self) -> str:
        """The current task's gold query as the backend runs it.

        On MySQL: as written, as InterCode runs it, except with ``rules="normalized"``,
        where a gold the server refuses is rewritten from SQLite's dialect when the
        rewrite runs. On SQLite: as written, or sqlglot's SQLite version of a MySQL gold
        (InterCode's dialect) that SQLite cannot run as written, in every mode.
        """
        task = self.task
        return self.backend.translate_gold(self.task_set.databases[task.db], task.gold)

    def system_prompt(self) -> str:
        name = _DIALECT_NAMES[self.backend.dialect]
        text = (
            f"You answer questions by querying a {name} database. Each turn, send exactly one "
            "SQL statement, in a ```sql ... ``` block or as plain SQL, and you will see its "
            "result. When the result of your last statement answers the question, reply "
            "`submit` to end the task: the result of your last statement is what gets graded."
        )
        if self.try_again:
            text += " Every statement is graded as you go, and the task ends at a perfect answer."
        return text

    def action_format(self) -> str:
        return "Send one SQL statement (in a ```sql block or as plain SQL), or `submit`."

    def tables_of(self, task: SqlTask) -> Mapping[str, Sequence[str]]:
        """The task database's tables and columns, named as the database itself names them
        (the task file's ``db_tables`` may spell them otherwise, or be absent)."""
        if task.db not in self._schemas:
            self._schemas[task.db] = self.backend.schema(self.task_set.databases[task.db])
        return self._schemas[task.db]

    def _schema_text(self, task: SqlTask) -> str:
        name = _DIALECT_NAMES[self.backend.dialect]
        lines = [f"{name} tables, with their columns:"]
        lines += [f"- {table}: {', '.join(cols)}" for table, cols in self.tables_of(task).items()]
        return "\n".join(lines)

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        task = self.task_set.tasks[task_id]
        self.tables_of(task)  # read once per database, before the live episode is replaced
        self._open_episode(task.db)
        self._last = None
        self._best = 0.0
        self._episode_gold = None
        self._wrote = False
        parts = [self.system_prompt(), f"Question: {task.question}"]
        if self.show_schema:
            parts.append(self._schema_text(task))
        return "\n\n".join(parts)

    def _open_episode(self, db: str) -> Episode:
        # the new database first: if it cannot be opened, the live episode is untouched
        episode = self.backend.open_episode(self.task_set.databases[db])
        if self._episode is not None:
            self._episode.close()
        self._episode = episode
        self._episode_db = db
        return self._episode

    def _reset_info(self) -> dict[str, Any]:
        return {keys.SYSTEM_PROMPT: self.system_prompt()}

    def _extra_info(self) -> dict[str, Any]:
        task = self.task_set.tasks.get(self._task_id) if self._task_id else None
        info: dict[str, Any] = {
            "db": task.db if task else None,
            "hardness": task.hardness if task else None,
            "backend": self.backend.name,
            # a copy (of the schema read once per database): an info dict is the caller's
            "schema": {t: list(cols) for t, cols in self.tables_of(task).items()} if task else {},
        }
        if self.try_again:
            info["best_reward"] = self._best
        return info

    # ---------------------------------------------------------------- reward
    def gold_result(self) -> QueryResult:
        """The gold query's result, as InterCode computes it on the agent's own database.

        While the agent has only read, the gold runs on the episode's database (so rows
        come in the order this copy yields them, as InterCode's shared cursor does; a
        result without ORDER BY can come in another order from another copy). Once the
        agent has run a statement without a result set (a possible write), the gold runs
        on the task's pristine database instead, so deleting rows cannot change the key.
        """
        task = self.task
        if not self._wrote and self._episode is not None:
            if self._episode_gold is None:
                self._episode_gold = self._episode.run_gold(self.gold_query)
            return self._episode_gold
        if task.id not in self._gold:
            source = self.task_set.databases[task.db]
            self._gold[task.id] = self.backend.run_on_template(source, self.gold_query)
        return self._gold[task.id]

    def reward_of(self, result: QueryResult | None) -> float:
        """InterCode's reward for submitting ``result`` on the current task (see ``rules``)."""
        agent_rows = result.rows if result is not None and result.ok else None
        gold = self.gold_result()
        reward = intercode_reward(agent_rows, gold.rows if gold.ok else None, rules=self.rules)
        return float(reward)

    def _gold_problem(self) -> dict[str, str]:
        """``{"gold_error": message}`` when the gold query fails on this engine (the reward
        then treats the gold as ``[]``, as InterCode does), else nothing."""
        gold = self.gold_result()
        return {} if gold.ok else {"gold_error": gold.error or "error"}

    # ---------------------------------------------------------------- actions
    @property
    def episode(self) -> Episode:
        if self._episode is None:
            raise RuntimeError("no episode database: call reset() first")
        return self._episode

    def _apply(self, action: str) -> Transition:
        kind, payload = parse_action(action)
        if kind == "invalid":
            return Transition(
                observation=f"Invalid action: {payload} {self.action_format()}",
                action_valid=False,
                info={STEP_REWARD: 0.0},  # no result set: InterCode's reward is 0
            )
        if kind == "submit":
            if self.try_again:
                return Transition(
                    observation=f"Submitted. Best reward: {self._best}",
                    terminated=True,
                    info={"best_reward": self._best, STEP_REWARD: float(self._best)},
                )
            reward = self.reward_of(self._last)
            return Transition(
                observation=f"Submitted. Reward: {reward}",
                reward=reward,
                terminated=True,
                success=reward == 1,
                score=clip_score(reward),
                info={**self._gold_problem(), STEP_REWARD: reward},
            )
        result = self.episode.execute(payload)
        self._last = result
        if result.wrote:  # whatever it returned (DELETE ... RETURNING returns rows)
            self._wrote = True
            self._episode_gold = None
        observation = format_result(
            self._shown(result), max_rows=self.max_rows, max_chars=self.max_observation_chars
        )
        info: dict[str, Any] = {"executed": result.ok}
        reward = self.reward_of(result)  # InterCode's reward of this result, were it submitted
        info[STEP_REWARD] = reward
        if not self.try_again:
            return Transition(observation=observation, info=info)
        self._best = max(self._best, reward)
        info["best_reward"] = self._best
        info.update(self._gold_problem())
        return Transition(
            observation=f"{observation}\nReward: {reward}",
            reward=reward,
            terminated=reward == 1,
            success=self._best == 1,
            score=clip_score(self._best),
            info=info,
        )

    def _coerce_action(self, action: Any) -> tuple[str, str | None]:
        if not isinstance(action, str):  # bytes are not text to run, whatever they decode to
            return "", (
                f"Invalid action: expected text (str), got {type(action).__name__}. "
                f"{self.action_format()}"
            )
        return super()._coerce_action(action)

    def _shown(self, result: QueryResult) -> QueryResult:
        """The result as the agent sees it: the driver's values, or canonical ones when
        ``rules="normalized"`` (the values that get compared)."""
        if self.rules != "normalized" or result.rows is None:
            return result
        return dataclasses.replace(result, rows=normalize_rows(result.rows))

    def _score_action(self, action: str) -> float:
        kind, payload = parse_action(action) if isinstance(action, str) else ("invalid", "")
        if kind != "sql" or len(action) > self.max_action_chars:
            return self.reward_of(self._last)
        return self.reward_of(self.episode.probe(payload))

    def error_action(self, rng: np.random.Generator) -> str:
        """A plausible wrong statement: a misspelt column or table, a syntax slip, a
        flipped condition, a join without its condition, a wrong sort or column.

        Semantic mistakes that happen to give the gold result are drawn again.
        """
        task = self.task
        for _ in range(8):
            kind, sql = wrong_query(
                task.gold, self.tables_of(task), rng, dialect=self.backend.dialect
            )
            if kind not in SEMANTIC_KINDS or self.reward_of(self.episode.probe(sql)) < 1:
                return sql
        kind, sql = wrong_query(
            task.gold,
            self.tables_of(task),
            rng,
            dialect=self.backend.dialect,
            kinds=("unknown_column", "unknown_table", "syntax"),
        )
        return sql

    # ---------------------------------------------------------------- faults
    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        try:
            return super().step(action)
        except Fault:
            self._abandon()
            raise

    def score_action(self, action: str) -> float:
        """The reward ``action`` would earn from here, without advancing.

        A statement is scored as if submitted right after it (run on a copy when it
        writes); ``submit`` and an invalid action score the current last result. The
        value is InterCode's reward, in [-1, 1]. A fault raises ``Fault`` (see Episode End).
        """
        try:
            return self._score_action(action)
        except Fault:
            self._abandon()
            raise

    def snapshot(self) -> Any:
        try:
            return super().snapshot()
        except Fault:
            self._abandon()
            raise

    def restore(self, snapshot: Any) -> None:
        try:
            super().restore(snapshot)
        except Fault:
            self._abandon()
            raise

    def _abandon(self) -> None:
        """After a fault: the episode's database is dropped, never served again, and only
        a reset can follow."""
        if self._episode is not None:
            self._episode.discard()
            self._episode = None
            self._episode_db = None
        self._episode_gold = None
        self._done = True

    # ---------------------------------------------------------------- state
    def _state_key(self) -> str:
        if self._episode is None:  # abandoned after a fault
            return "no-episode"
        last = self._last.rows if self._last is not None and self._last.ok else None
        key = f"{self.episode.fingerprint()}|{_rows_digest(last)}"
        if self.try_again:
            key += f"|{self._best}"
        return key

    def _get_state(self) -> dict[str, Any]:
        return {
            "backend": self.backend.name,
            "db_name": self._episode_db,
            "db": self.episode.dump(),
            "last": self._last,
            "best": self._best,
            "wrote": self._wrote,
        }

    def _check_state(self, state: Any, base: Mapping[str, Any]) -> None:
        fields = {"backend", "db_name", "db", "last", "best", "wrote"}
        if not isinstance(state, dict) or set(state) != fields:
            raise SnapshotError(f"an InterCode-SQL state is a dict with {sorted(fields)}")
        if state["backend"] != self.backend.name:
            raise SnapshotError(
                f"snapshot of backend {state['backend']!r:.40} cannot be restored into backend "
                f"{self.backend.name!r}"
            )
        task = self.task_set.tasks[base["task_id"]]
        if state["db_name"] != task.db:
            raise SnapshotError(f"the state's database is not task {task.id!r}'s {task.db!r}")
        best = state["best"]
        if isinstance(best, bool) or not isinstance(best, int | float) or not 0.0 <= best <= 1.0:
            raise SnapshotError(f"best must be a number in [0, 1], got {best!r:.40}")
        if not isinstance(state["wrote"], bool):
            raise SnapshotError("wrote must be a bool")
        if state["last"] is not None and not isinstance(state["last"], QueryResult):
            raise SnapshotError("last must be None or a QueryResult")
        _check_dump(self.backend.name, state["db"])

    def _set_state(self, state: Any) -> None:
        if not isinstance(state, dict) or state.get("backend") != self.backend.name:
            found = state.get("backend") if isinstance(state, dict) else type(state).__name__
            raise SnapshotError(
                f"snapshot of backend {found!r} cannot be restored into backend {self.backend.name!r}"
            )
        db = self.task.db
        if self._episode is None or self._episode_db != db:
            self._open_episode(db)
        self.episode.load(state["db"])
        self._last = state["last"]
        self._best = state["best"]
        self._wrote = state.get("wrote", True)
        self._episode_gold = None

    def _fork(self, k: int) -> list[TextEnv]:
        """Copies of this env, each with a copy of the episode's database (SQLite: its
        in-memory image; MySQL: a database of the pool refilled on the server) and the
        backend shared (closed with the last env using it)."""
        if self._episode is None:  # abandoned after a fault: nothing to copy
            return super()._fork(k)
        from agentenvs.core.fork import close_quietly

        children: list[TextEnv] = []
        try:
            for _ in range(k):
                child = self._shallow_child()
                child._detach()
                children.append(child)
        except BaseException:
            close_quietly(children)
            raise
        return children

    def _detach(self) -> None:
        assert self._episode is not None
        self._episode = self._episode.fork()
        self.backend.share()
        self._holds_backend = True

    def held_resources(self) -> frozenset[str]:
        name = getattr(self._episode, "name", None)  # MySQL's episode database
        return frozenset() if name is None else frozenset({f"mysql database {name}"})

    def close(self) -> None:
        if self._episode is not None:
            self._episode.close()
            self._episode = None
        if self._holds_backend:
            self._holds_backend = False
            self.backend.release()
        super().close()
