"""The gold query as InterCode runs it: reserved words, and the rewrite of a refused gold.

InterCode runs each gold query as written on its MySQL server, and its ``SqlEnv.get_reward``
counts a gold the server refuses as ``[]`` (mysql-connector leaves no result after the
error): the right answer then scores 0.0 and an empty one 1. Under ``rules="official"``
(and ``"iou"``) the env must give exactly that; only ``rules="normalized"`` rewrites a
refused gold (read as SQLite, Spider's dialect), and the rewrite keeps double-quoted
strings strings. The expected rewards come from InterCode's own ``get_reward``, run on the
engine's own outcome: mysql-connector on the episode's database on MySQL, an sqlite3
cursor behind mysql-connector's interface on SQLite.

The gold queries here are written for these tests with the features of InterCode's failing
ones: a table named ``show`` (``SHOW`` is reserved in MySQL; orchestra-010/032), a space in
``COUNT (*)`` (world_1-064/076) and a derived table without an alias (world_1-022/028),
each with double-quoted strings.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _services import require_mysql

from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv
from agentenvs.envs.intercode_sql.statements import sqlite_gold_for_mysql

sql_env = pytest.importorskip("intercode.envs.sql.sql_env")
mysql_errors = pytest.importorskip("mysql.connector.errors")

# scipy warns when InterCode hands kendalltau a single pair (its NaN case)
pytestmark = pytest.mark.filterwarnings("ignore:One or more sample arguments is too small")

#: a word MySQL reserves as the table's name (orchestra's ``show``)
RESERVED = "SELECT avg(Attendance) FROM SHOW"
#: a space between COUNT and its parenthesis, and a double-quoted string
SPACED = 'SELECT COUNT (*) FROM country WHERE Continent = "Asia"'
#: a derived table without an alias, and double-quoted strings
UNALIASED = (
    'SELECT count(*) FROM (SELECT Code FROM country WHERE Continent = "Europe" '
    'INTERSECT SELECT CountryCode FROM countrylanguage WHERE Language = "Dutch")'
)
#: task id -> (gold, database, the right answer written for MySQL, an empty answer)
TASKS = {
    "orchestra-001": (
        RESERVED,
        "orchestra",
        "SELECT avg(Attendance) FROM `show`",
        "SELECT Attendance FROM `show` WHERE Attendance < 0",
    ),
    "world_1-001": (
        SPACED,
        "world_1",
        "SELECT COUNT(*) FROM country WHERE Continent = 'Asia'",
        "SELECT Code FROM country WHERE Continent = 'Atlantis'",
    ),
    "world_1-002": (
        UNALIASED,
        "world_1",
        "SELECT count(*) FROM (SELECT Code FROM country WHERE Continent = 'Europe' INTERSECT "
        "SELECT CountryCode FROM countrylanguage WHERE Language = 'Dutch') AS answer",
        "SELECT Code FROM country WHERE Continent = 'Atlantis'",
    ),
}
#: a table named with a word SQLite reserves too (MySQL as well)
ORDER_DUMP = (
    "CREATE DATABASE shop;\nUSE shop;\n"
    "CREATE TABLE `order` (`id` int NOT NULL, `total` int, PRIMARY KEY (`id`));\n"
    "INSERT INTO `order` VALUES (1,10),(2,32);\n"
)
ORDER_GOLD = "SELECT sum(total) FROM order"
ORDER_RIGHT = 'SELECT sum(total) FROM "order"'
ORDER_EMPTY = 'SELECT id FROM "order" WHERE total < 0'


def _package_dump() -> Path:
    from agentenvs.envs.intercode_sql.data import intercode_package_files

    return intercode_package_files()[1]


def _questions(tmp_path: Path) -> Path:
    lines = ["query,gold,db"]
    for gold, db, _, _ in TASKS.values():
        lines.append(f'"q","{gold.replace(chr(34), chr(34) * 2)}",{db}')
    path = tmp_path / "q.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _intercode(cursor: Any, gold: str, agent_sql: str) -> Any:
    """InterCode's own verdict: its ``exec_action`` on the agent's query, then its
    ``get_reward`` with ``gold`` run as written, both on ``cursor``."""
    env = sql_env.SqlEnv.__new__(sql_env.SqlEnv)  # no container: the cursor is the engine
    env.logger = logging.getLogger("intercode-official")
    env.logger.disabled = True
    env.cur, env.info, env.gold = cursor, {}, gold
    env.exec_action(agent_sql)
    reward, _ = env.get_reward()
    return reward


class SqliteCursor:
    """An sqlite3 connection behind the part of mysql-connector's cursor InterCode uses:
    each ``execute`` starts with no result (``description`` None, as mysql-connector
    resets it), and an engine error is raised as mysql-connector's ``ProgrammingError``
    (the error a syntax error or an unknown name raises there)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.description: Any = None
        self.rows: list[tuple] = []

    def execute(self, sql: str) -> None:
        self.description, self.rows = None, []
        try:
            cur = self.conn.execute(sql)
        except sqlite3.Error as exc:
            raise mysql_errors.ProgrammingError(msg=str(exc)) from None
        self.description = cur.description
        self.rows = cur.fetchall() if cur.description is not None else []

    def fetchall(self) -> list[tuple]:
        return list(self.rows)


def _submit(env: InterCodeSQLEnv, task_id: str, sql: str) -> tuple[float, dict]:
    env.reset(seed=0, options={"task_id": task_id})
    scored = env.score_action(f"```sql\n{sql}\n```")
    env.step(f"```sql\n{sql}\n```")
    _, reward, terminated, _, info = env.step("submit")
    assert terminated and scored == reward, (task_id, sql, scored, reward)
    return reward, info


# ---------------------------------------------------------------------- MySQL
@pytest.mark.mysql
@pytest.mark.parametrize("rules", ["official", "iou"])
def test_a_gold_the_server_refuses_scores_as_intercode_scores_it(tmp_path, rules) -> None:
    """The gold runs as written: ``FROM SHOW`` and ``COUNT (*)`` fail on MySQL, so the right
    answer scores 0.0 and an empty one 1, as InterCode's ``get_reward`` gives them on the
    same database through its own driver (before, the env rewrote the gold, scoring the
    right answer 1.0 and the empty one 0.0)."""
    connector = pytest.importorskip("mysql.connector")
    from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url
    from agentenvs.envs.intercode_sql.statements import match_table_case

    url = require_mysql()
    env = InterCodeSQLEnv(
        tasks_path=_questions(tmp_path),
        databases_path=_package_dump(),
        backend="mysql",
        mysql_url=url,
        rules=rules,
        statement_timeout_s=300,  # no query comes near it, however loaded the machine
    )
    cnx = connector.connect(**parse_mysql_url(url), autocommit=True, use_pure=True)
    cur = cnx.cursor(buffered=True)
    try:
        assert list(env.task_ids) == list(TASKS)
        for task_id, (gold, _, right, empty) in TASKS.items():
            env.reset(seed=0, options={"task_id": task_id})
            assert env.gold_query == gold  # as written, not rewritten
            case = env.backend.table_case(env.episode.name)
            for sql, official in ((right, 0.0), (empty, 1), (gold, 0.0)):
                ours, info = _submit(env, task_id, sql)
                cur.execute(f"USE `{env.episode.name}`")
                # InterCode's server folds table-name case; this one may not
                theirs = _intercode(cur, match_table_case(gold, case), match_table_case(sql, case))
                assert ours == theirs == official, (rules, task_id, sql, ours, theirs)
                assert "syntax" in info["gold_error"], info  # the engine's reason, named
    finally:
        cur.close()
        cnx.close()
        env.close()


@pytest.mark.mysql
def test_the_comparable_mode_rewrites_a_refused_gold_keeping_its_strings(tmp_path) -> None:
    """``rules="normalized"`` alone rewrites a gold the server refuses: `` FROM `SHOW` `` and
    ``COUNT(*)`` run, ``"Asia"`` stays the string ``'Asia'`` (before: the column
    `` `Asia` ``, so the rewrite failed and the empty answer scored), the right answer
    scores 1.0 and an empty one 0.0. A gold the rewrite cannot mend (a derived table
    without an alias) stays as written and scores 0.0 whatever the answer."""
    env = InterCodeSQLEnv(
        tasks_path=_questions(tmp_path),
        databases_path=_package_dump(),
        backend="mysql",
        mysql_url=require_mysql(),
        rules="normalized",
        statement_timeout_s=300,
    )
    try:
        env.reset(seed=0, options={"task_id": "orchestra-001"})
        assert env.gold_query.upper().endswith("FROM `SHOW`"), env.gold_query
        env.reset(seed=0, options={"task_id": "world_1-001"})
        assert "'Asia'" in env.gold_query and "`Asia`" not in env.gold_query, env.gold_query
        assert "COUNT(*)" in env.gold_query
        for task_id in ("orchestra-001", "world_1-001"):
            _, _, right, empty = TASKS[task_id]
            assert _submit(env, task_id, right)[0] == 1.0, task_id
            reward, info = _submit(env, task_id, empty)
            assert reward == 0.0 and "gold_error" not in info, (task_id, reward, info)
        env.reset(seed=0, options={"task_id": "world_1-002"})
        assert env.gold_query == UNALIASED
        for sql in TASKS["world_1-002"][2:]:
            reward, info = _submit(env, "world_1-002", sql)
            assert reward == 0.0 and "syntax" in info["gold_error"], (sql, reward, info)
    finally:
        env.close()


# ---------------------------------------------------------------------- SQLite
@pytest.mark.parametrize("rules", ["official", "iou"])
def test_on_sqlite_the_gold_runs_as_sqlite_runs_it(tmp_path, rules) -> None:
    """On SQLite the gold runs as written too, and InterCode's rule holds for the gold
    SQLite itself refuses (``FROM order``): the right answer 0.0, an empty one 1. SQLite
    reserves neither ``SHOW`` nor needs ``COUNT(`` unspaced, so those golds run and their
    right answers score 1.0 here (on MySQL, InterCode's engine, they do not). Every
    verdict equals InterCode's ``get_reward`` on SQLite's outcome of the same queries."""
    from agentenvs.envs.intercode_sql.data import DatabaseSource

    dump = tmp_path / "dbs.sql"
    dump.write_text(_package_dump().read_text(encoding="utf-8") + "\n" + ORDER_DUMP)
    questions = _questions(tmp_path)
    questions.write_text(questions.read_text() + f'"q","{ORDER_GOLD}",shop\n')
    env = InterCodeSQLEnv(tasks_path=questions, databases_path=dump, rules=rules)
    tasks = {
        **{t: (gold, db, right, empty) for t, (gold, db, right, empty) in TASKS.items()},
        "shop-001": (ORDER_GOLD, "shop", ORDER_RIGHT, ORDER_EMPTY),
    }
    expected = {
        "orchestra-001": (1.0, 0.0),
        "world_1-001": (1.0, 0.0),
        "world_1-002": (1.0, 0.0),
        "shop-001": (0.0, 1),  # SQLite refuses the gold: it counts as []
    }
    try:
        for task_id, (gold, db, right, empty) in tasks.items():
            env.reset(seed=0, options={"task_id": task_id})
            assert env.gold_query == gold
            conn = sqlite3.connect(":memory:")
            DatabaseSource(db, dump, dump_db=db).build_sqlite(conn)
            try:
                for sql, official in zip((right, empty), expected[task_id], strict=True):
                    ours, info = _submit(env, task_id, sql)
                    theirs = _intercode(SqliteCursor(conn), gold, sql)
                    assert ours == theirs == official, (rules, task_id, sql, ours, theirs)
                    assert ("gold_error" in info) == (task_id == "shop-001"), info
            finally:
                conn.close()
    finally:
        env.close()
    # the comparable mode gives nothing against a gold that fails
    env = InterCodeSQLEnv(tasks_path=questions, databases_path=dump, rules="normalized")
    try:
        for sql in (ORDER_RIGHT, ORDER_EMPTY):
            assert _submit(env, "shop-001", sql)[0] == 0.0, sql
    finally:
        env.close()


def test_the_rewrite_for_mysql_keeps_double_quoted_strings_strings() -> None:
    """SQLite reads ``"Asia"`` as a string where it names nothing: the MySQL rewrite says
    ``'Asia'`` (sqlglot alone says `` `Asia` ``, a column), and keeps as names what SQLite
    reads as names: columns and tables in any case, aliases, qualified names. Run on SQLite,
    each rewrite gives the rows of the query as written."""
    from agentenvs.envs.intercode_sql.data import DatabaseSource

    source = DatabaseSource("world_1", _package_dump(), dump_db="world_1")
    conn = sqlite3.connect(":memory:")
    source.build_sqlite(conn)
    names = [
        name
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        for name in (table, *(r[1] for r in conn.execute(f"PRAGMA table_info({table})")))
    ]
    cases = {
        SPACED: ["'Asia'", "COUNT(*)"],
        UNALIASED: ["'Europe'", "'Dutch'"],
        'SELECT "name" AS "n", "C"."Code" FROM "COUNTRY" AS "C" WHERE "Name" <> "it\'s" '
        'ORDER BY "n" LIMIT 3': ["`name` AS `n`", "`C`.`Code`", "`COUNTRY`", "'it''s'"],
        'SELECT Name FROM country WHERE Name = "Name" OR Region = "a""b"': [
            "Name = `Name`",
            "'a\"b'",
        ],
    }
    try:
        for sql, wanted in cases.items():
            rewritten = sqlite_gold_for_mysql(sql, names)
            for text in wanted:
                assert text in rewritten, (sql, rewritten)
            assert not any(f"`{s}`" in rewritten for s in ("Asia", "Europe", "Dutch", "it's"))
            assert conn.execute(rewritten).fetchall() == conn.execute(sql).fetchall(), rewritten
    finally:
        conn.close()
