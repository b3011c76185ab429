"""The project's reward against InterCode's own ``SqlEnv.get_reward`` (package ``intercode-bench``).

The official method is called as it is, on an ``SqlEnv`` built without its Docker
container: its cursor is a stand-in that hands it the gold side's outcome (rows, no result
set, or a gold that fails with mysql-connector's own error class), and its
``observation`` is the agent's side, as ``SqlEnv.exec_action`` leaves it. These tests
need the ``intercode`` extra; outside CI they skip when it is missing.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from decimal import Decimal
from typing import Any

import pytest
from _services import require_mysql

from agentenvs.envs.intercode_sql.container import DEFAULT_MARIADB_IMAGE
from agentenvs.envs.intercode_sql.reward import intercode_reward

sql_env = pytest.importorskip("intercode.envs.sql.sql_env")
mysql_errors = pytest.importorskip("mysql.connector.errors")

# scipy warns when InterCode hands kendalltau a single pair (its NaN case)
pytestmark = pytest.mark.filterwarnings("ignore:One or more sample arguments is too small")

NO_RESULT = object()  # a statement without a result set
FAILS = object()  # a gold query the server rejects


class GoldCursor:
    """What InterCode's cursor does when it runs the gold query, for one known outcome."""

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome
        self.description: Any = None

    def execute(self, sql: str) -> None:
        self.description = None
        if self.outcome is FAILS:
            raise mysql_errors.ProgrammingError(msg="Table 'x.y' doesn't exist", errno=1146)
        if self.outcome is not NO_RESULT:
            self.description = [("c",)]

    def fetchall(self) -> list:
        return list(self.outcome)


def official_reward(agent_obs: Any, gold: Any) -> Any:
    env = sql_env.SqlEnv.__new__(sql_env.SqlEnv)  # no container, no server
    env.logger = logging.getLogger("intercode-official")
    env.logger.disabled = True
    env.cur = GoldCursor(gold)
    env.gold = "SELECT ..."
    env.observation = agent_obs
    reward, _ = env.get_reward()
    return reward


def ours(agent_obs: Any, gold: Any, rules: str = "official") -> Any:
    agent_rows = agent_obs if isinstance(agent_obs, list) else None
    gold_rows = None if gold is NO_RESULT or gold is FAILS else gold
    return intercode_reward(agent_rows, gold_rows, rules=rules)


def same(a: Any, b: Any) -> bool:
    """Equal values, and the int 1 only where the other is the int 1 too."""
    return a == b and (type(a) is int) == (type(b) is int)


# ---------------------------------------------------------------------- seeded pairs
VALUES = [
    0,
    1,
    6,
    -3,
    377,
    6.0,
    377.0,
    -0.0,
    0.1,
    2.5,
    1e16,
    Decimal("6"),
    Decimal("2.50"),
    Decimal("3.0000"),
    "6",
    "Kyle",
    "kyle",
    "",
    "O'Brien",
    None,
    dt.date(2020, 1, 2),
    dt.timedelta(seconds=61),
]


def _row(rng: random.Random, width: int) -> tuple:
    return tuple(rng.choice(VALUES) for _ in range(width))


def _retype(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Decimal):
        return float(value)
    return value


def seeded_pair(rng: random.Random) -> tuple[Any, Any]:
    width = rng.randint(1, 3)
    gold: Any = [_row(rng, width) for _ in range(rng.choice([0, 1, 2, 3, 5, 8, 13, 40]))]
    if gold and rng.random() < 0.3:  # repeated rows
        gold += [rng.choice(gold) for _ in range(rng.randint(1, 4))]
    how = rng.choice(
        ["same", "shuffle", "reverse", "swap", "subset", "extra", "retype", "empty", "disjoint"]
    )
    agent: Any = list(gold)
    if how == "shuffle":
        rng.shuffle(agent)
    elif how == "reverse":
        agent.reverse()
    elif how == "swap" and len(agent) > 1:
        i, j = rng.sample(range(len(agent)), 2)
        agent[i], agent[j] = agent[j], agent[i]
    elif how == "subset":
        agent = [r for r in agent if rng.random() < 0.7]
    elif how == "extra":
        for _ in range(rng.randint(1, 3)):
            agent.insert(rng.randint(0, len(agent)), _row(rng, width))
    elif how == "retype":
        agent = [tuple(_retype(v) for v in r) for r in agent]
    elif how == "empty":
        agent = []
    elif how == "disjoint":
        agent = [_row(rng, width) for _ in range(rng.randint(0, 4))]
    roll = rng.random()
    if roll < 0.05:
        agent = None  # the last statement had no result set
    elif roll < 0.1:
        agent = "Error executing query: Unknown column 'x' in 'field list'"
    roll = rng.random()
    if roll < 0.04:
        gold = NO_RESULT
    elif roll < 0.08:
        gold = FAILS
    return agent, gold


def test_official_rules_agree_with_intercode_on_3000_seeded_pairs() -> None:
    rng = random.Random(11)
    pairs = [seeded_pair(rng) for _ in range(3000)]
    results = [
        (agent, gold, official_reward(agent, gold), ours(agent, gold)) for agent, gold in pairs
    ]
    disagree = [r for r in results if not same(r[2], r[3])]
    assert not disagree, f"{len(disagree)}/3000 differ, e.g. {disagree[:3]}"
    # the seeds reach every quirk below, not only the easy cases
    reached = {
        "gold without rows, agent []": any(
            (g is NO_RESULT or g is FAILS) and a == [] for a, g, _, _ in results
        ),
        "negative": any(off < 0 for _, _, off, _ in results),
        "int 1": any(type(off) is int for _, _, off, _ in results),
        "6.0 vs 6": any(
            ours(a, g) != ours(a, g, "normalized") for a, g, _, _ in results if isinstance(a, list)
        ),
        "partial credit": any(0 < off < 1 for _, _, off, _ in results),
    }
    assert all(reached.values()), reached


# ---------------------------------------------------------------------- the four known differences
def test_gold_without_rows_counts_as_empty() -> None:
    for gold in (NO_RESULT, FAILS):
        assert official_reward([], gold) == 1 == ours([], gold)
        assert official_reward([(1,)], gold) == 0.0 == ours([(1,)], gold)
        assert official_reward(None, gold) == 0.0 == ours(None, gold)
        # the comparable mode refuses to score against a gold without rows
        assert ours([], gold, "normalized") == 0.0


def test_rounding_is_numpys() -> None:
    gold = [(i,) for i in range(40)]
    agent = gold[:39]  # IoU 39/40 = 0.975, tau 1
    assert official_reward(agent, gold) == 0.98 == ours(agent, gold)
    assert ours(agent, gold, "normalized") == 0.98
    assert round(39 / 40, 2) == 0.97  # what Python's own round gives


def test_both_empty_is_the_int_one() -> None:
    official = official_reward([], [])
    assert official == 1 and type(official) is int
    assert type(ours([], [])) is int
    assert ours([], [], "normalized") == 1.0 and type(ours([], [], "normalized")) is float


def test_values_compare_as_the_driver_gives_them() -> None:
    agent, gold = [(6.0, 377.0)], [(6, 377)]
    assert official_reward(agent, gold) == 0.0 == ours(agent, gold)
    assert ours(agent, gold, "normalized") == 1.0
    agent, gold = [(Decimal("2.50"),)], [(2.5,)]
    assert official_reward(agent, gold) == 0.0 == ours(agent, gold)
    assert ours(agent, gold, "normalized") == 1.0


# ---------------------------------------------------------------------- the package's own data
def package_dump():
    from agentenvs.envs.intercode_sql.data import intercode_package_files
    from agentenvs.envs.intercode_sql.mysql_dump import read_dump

    return read_dump(intercode_package_files()[1])


def test_the_dump_holds_twenty_databases_and_no_account_statement_runs() -> None:
    dump = package_dump()
    assert len(dump.databases) == 20
    assert any(s.upper().startswith("CREATE USER") for s in dump.skipped)
    assert any(s.upper().startswith("GRANT") for s in dump.skipped)
    statements = [s for db in dump.databases.values() for s in db.statements()]
    assert not any(s.upper().startswith(("CREATE USER", "GRANT", "FLUSH")) for s in statements)


def _sqlite_tables(source) -> dict[str, tuple[list[str], list[tuple], list[str], list[str]]]:
    """table → (columns, rows, primary key columns, NOT NULL columns)."""
    import sqlite3

    conn = sqlite3.connect(":memory:")
    source.build_sqlite(conn)
    out = {}
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall():
        info = conn.execute("SELECT * FROM pragma_table_info(?)", (name,)).fetchall()
        rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
        pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
        out[name] = ([r[1] for r in info], rows, pk, [r[1] for r in info if r[3]])
    conn.close()
    return out


def test_every_dump_database_loads_on_sqlite_with_its_rows_and_keys() -> None:
    from agentenvs.envs.intercode_sql.data import DatabaseSource
    from agentenvs.envs.intercode_sql.mysql_dump import insert_rows

    dump = package_dump()
    for name, db in dump.databases.items():
        tables = _sqlite_tables(DatabaseSource(name, dump.path, dump_db=name))
        assert sorted(tables) == sorted(t.name for t in db.tables), name
        for table in db.tables:
            columns, rows, pk, not_null = tables[table.name]
            written = [row for insert in table.inserts for row in insert_rows(insert)[1]]
            assert len(rows) == len(written), (name, table.name)
            # text exactly as written (escapes included), NULLs as NULLs
            for got, want in zip(rows, written, strict=True):
                for g, w in zip(got, want, strict=True):
                    assert (g is None) == (w is None), (name, table.name, got, want)
                    if isinstance(w, str):
                        assert g == w, (name, table.name, got, want)
            assert "PRIMARY KEY" not in table.create or pk, (name, table.name)
            for column in not_null:
                assert f"`{column}`" in table.create, (name, table.name, column)
    # a string the dump escapes (\') comes back exactly
    assert any(
        "Do They Know It's Christmas" in str(r)
        for r in _sqlite_tables(DatabaseSource("singer", dump.path, dump_db="singer"))["song"][1]
    )


@pytest.mark.mysql
def test_every_dump_database_loads_the_same_on_mysql_and_sqlite() -> None:
    """20/20: the MySQL import (the dump's own statements) and the SQLite conversion hold
    the same tables, columns, primary keys and rows (values compared canonically)."""
    from agentenvs.envs.intercode_sql.backends.base import Limits, normalize_rows
    from agentenvs.envs.intercode_sql.backends.mysql import MySQLBackend
    from agentenvs.envs.intercode_sql.data import DatabaseSource

    backend = MySQLBackend(require_mysql(), Limits())
    dump = package_dump()
    try:
        for name in dump.databases:
            source = DatabaseSource(name, dump.path, dump_db=name)
            lite = _sqlite_tables(source)
            template, _ = backend.template(source)
            assert sorted(backend.schema(source)) == sorted(lite), name
            for table, (columns, rows, pk, _) in lite.items():
                assert backend.schema(source)[table] == columns, (name, table)
                got = backend.server.run(f"SELECT * FROM `{template}`.`{table}`")
                assert sorted(map(repr, normalize_rows(got))) == sorted(
                    map(repr, normalize_rows(rows))
                ), (name, table)
                keys = backend.server.run(
                    "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE "
                    "TABLE_SCHEMA = %s AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' "
                    "ORDER BY ORDINAL_POSITION",
                    (template, table),
                )
                assert [k[0] for k in keys] == pk, (name, table)
    finally:
        backend.close()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def test_every_gold_query_of_the_package_scores_one(backend) -> None:
    from agentenvs.envs.intercode_sql.check_gold import check_gold

    url = require_mysql() if backend == "mysql" else None
    report = check_gold("intercode-bench", backend=backend, mysql_url=url)
    assert report.tasks == 23 and report.ok, report.text()
    assert report.scored_one == report.tasks and not report.invalid


def _agent_queries(env) -> list[str]:
    """Right, wrong, partial, reordered and failing answers for the current task, each with
    one right result (no ties left to the engine's choice: a query like ``... ORDER BY x
    LIMIT 1`` with tied x may return either row, on any driver)."""
    tables = env.tables_of(env.task)
    table, columns = next(iter(tables.items()))
    first, last = columns[0], columns[-1]
    gold = env.gold_query.rstrip().rstrip(";")
    key = env.gold_result()
    every_column = ", ".join(f"{i} DESC" for i in range(1, len(key.columns) + 1)) or "1"
    half = max(1, len(key.rows or ()) // 2)
    return [
        gold,
        f"SELECT * FROM ({gold}) AS answer ORDER BY {every_column}",  # the rows, reordered
        f"SELECT * FROM ({gold}) AS answer ORDER BY {every_column} LIMIT {half}",  # some
        f"SELECT * FROM {table.upper()}",
        f"SELECT count(*) FROM {table}",
        f"SELECT avg({first}), sum({last}) FROM {table}",  # Decimal and float values
        f"SELECT {first}, {first} + 0.5 FROM {table} ORDER BY {first}, 2",
        f"SELECT {first} FROM {table} ORDER BY {first} DESC",
        f"SELECT {first} FROM {table} WHERE 1 = 0",  # empty
        "SELECT 1 FROM nowhere_at_all",  # an error
    ]


@pytest.mark.mysql
def test_mysql_rewards_equal_intercodes_on_rows_from_its_own_driver() -> None:
    """On MySQL, ``rules="official"`` gives the reward InterCode's ``get_reward`` gives when
    its own driver (mysql-connector) runs the same queries on the same database."""
    connector = pytest.importorskip("mysql.connector")
    from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url
    from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv
    from agentenvs.envs.intercode_sql.statements import match_table_case

    url = require_mysql()
    # a time limit no query reaches, however loaded the machine: outcomes never depend on speed
    env = InterCodeSQLEnv(
        tasks_path="intercode-bench", backend="mysql", mysql_url=url, statement_timeout_s=300
    )
    cnx = connector.connect(**parse_mysql_url(url), autocommit=True, use_pure=True)
    cur = cnx.cursor(buffered=True)
    # the episode's session settings, so both sides run each query the same way
    for statement in env.backend.server.session_settings(
        env.limits.statement_timeout_s, env.limits.max_result_rows
    ):
        cur.execute(statement)
    compared, kinds = 0, set()
    try:
        for task_id in env.task_ids:
            env.reset(seed=0, options={"task_id": task_id})
            # the very database the episode runs on (a query with ties may order rows
            # differently on another copy)
            database = env.episode.name
            case = env.backend.table_case(database)
            # settled statistics: the server cannot switch plans (and the order of tied
            # rows) between the two sides while it recomputes them in the background
            for table in case.values():
                env.backend.server.run(f"ANALYZE TABLE `{database}`.`{table}`")
            for query in _agent_queries(env):
                ours = env.score_action(f"```sql\n{query}\n```")  # as if submitted after it
                cur.execute(f"USE `{database}`")
                official = sql_env.SqlEnv.__new__(sql_env.SqlEnv)
                official.logger = logging.getLogger("intercode-official")
                official.logger.disabled = True
                official.cur, official.info = cur, {}
                official.exec_action(match_table_case(query, case))
                official.gold = match_table_case(env.gold_query, case)
                theirs, _ = official.get_reward()
                assert ours == theirs, (task_id, query, ours, theirs)
                compared += 1
                kinds.add("1" if theirs == 1 else "0" if theirs == 0 else "partial")
    finally:
        cur.close()
        cnx.close()
        env.close()
    assert compared == 23 * 10 and kinds == {"1", "0", "partial"}


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def test_intercode_json_layout_and_table_names_in_any_case(tmp_path, backend) -> None:
    """InterCode's ``ic_spider_dev.json`` layout over the package's dump: gold queries that
    spell tables and aliases in another case than the dump (InterCode's server folds case,
    lower_case_table_names=1) work on a server that does not, and the schema shown names
    tables as they can be queried."""
    import json
    import shutil

    from agentenvs.envs.intercode_sql.data import intercode_package_files
    from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv

    dump = tmp_path / "spider_dev.sql"  # a dump beside the question file is found
    shutil.copy(intercode_package_files()[1], dump)
    records = [
        {
            "db": "network_1",
            "query": "How many high schoolers are there?",
            "gold": "SELECT count(*) FROM highschooler;",
            "hardness": "easy",
            "db_tables": {"highschooler": ["id", "name", "grade"]},
        },
        {
            "db": "network_1",
            "query": "Names of the friends of Kyle.",
            "gold": "SELECT t3.name FROM FRIEND AS T1 JOIN Highschooler AS t2 ON T1.student_id = "
            'T2.id JOIN HIGHSCHOOLER AS T3 ON t1.friend_id = T3.id WHERE T2.name = "Kyle"',
            "hardness": "medium",
        },
        {
            "db": "pets_1",
            "query": "How many pets are older than 1?",
            "gold": "SELECT count(*) FROM Pets AS P JOIN Has_Pet AS h ON p.PetID = H.PetID",
            "hardness": "easy",
        },
    ]
    questions = tmp_path / "ic_spider_dev.json"
    questions.write_text(json.dumps(records))
    url = require_mysql() if backend == "mysql" else None
    env = InterCodeSQLEnv(tasks_path=questions, backend=backend, mysql_url=url, show_schema=True)
    try:
        assert list(env.task_ids) == ["network_1-001", "network_1-002", "pets_1-001"]
        for task_id in env.task_ids:
            obs, _ = env.reset(seed=0, options={"task_id": task_id})
            shown = env.tables_of(env.task)
            # the dump's own spelling (network_1 has Highschooler, pets_1 has pets)
            assert {"network_1": "Highschooler", "pets_1": "pets"}[env.task.db] in shown, shown
            assert all(f"- {t}:" in obs for t in shown)
            result, *_ = env.step(f"```sql\n{env.gold_query}\n```")
            assert "Error" not in result, result
            assert env.step("submit")[1] == 1.0, task_id
        env.reset(seed=0, options={"task_id": "network_1-001"})
        for spelling in ("Highschooler", "highschooler", "HIGHSCHOOLER", "`hIgHsChOoLeR`"):
            assert "(16,)" in env.step(f"SELECT count(*) FROM {spelling}")[0], spelling
    finally:
        env.close()


@pytest.mark.docker(DEFAULT_MARIADB_IMAGE)
def test_gold_queries_score_one_on_a_case_folding_server_too() -> None:
    """InterCode's own server setting (lower_case_table_names=1), in a MariaDB container:
    the same gold queries score 1.0 there as on the shared server (setting 0)."""
    pytest.importorskip("pymysql")
    from agentenvs.core.errors import ServiceUnavailable
    from agentenvs.envs.intercode_sql.check_gold import check_gold
    from agentenvs.envs.intercode_sql.container import start_mariadb_container

    try:
        box = start_mariadb_container(server_args=["--lower-case-table-names=1"])
    except ServiceUnavailable as exc:
        pytest.skip(f"no MariaDB container: {exc}")
    with box:
        import pymysql

        from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url

        conn = pymysql.connect(**parse_mysql_url(box.url))
        with conn.cursor() as cur:
            cur.execute("SELECT @@lower_case_table_names")
            assert cur.fetchone()[0] == 1
        conn.close()
        report = check_gold("intercode-bench", backend="mysql", mysql_url=box.url)
        assert report.ok and report.scored_one == report.tasks == 23, report.text()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def test_a_database_an_engine_cannot_build_is_a_task_error_naming_it(tmp_path, backend) -> None:
    from agentenvs.core.errors import TaskError
    from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv

    (tmp_path / "broken.sql").write_text(
        "CREATE DATABASE d;\nUSE d;\nCREATE TABLE `t` (`x` int, `y` NOSUCHTYPE);\n"
        "INSERT INTO `t` VALUES (1, 2);\n"
    )
    (tmp_path / "q.csv").write_text("query,gold,db\nq,SELECT x FROM t,d\n")
    url = require_mysql() if backend == "mysql" else None
    env = InterCodeSQLEnv(tasks_path=tmp_path / "q.csv", backend=backend, mysql_url=url)
    try:
        with pytest.raises(TaskError, match=r"broken\.sql.*database d"):
            env.reset(seed=0)
    finally:
        env.close()


def test_a_gold_query_that_fails_is_reported_not_silent(tmp_path) -> None:
    from agentenvs.envs.intercode_sql.check_gold import check_gold
    from agentenvs.envs.intercode_sql.data import intercode_package_files
    from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv

    (tmp_path / "q.csv").write_text(
        "query,gold,db\nok,SELECT count(*) FROM pets,pets_1\n"
        "broken,SELECT no_such_column FROM pets,pets_1\n"
    )
    dump = intercode_package_files()[1]
    report = check_gold(tmp_path / "q.csv", databases_path=dump)
    assert (report.tasks, report.scored_one) == (2, 1) and not report.ok
    assert report.invalid[0][0] == "pets_1-002" and "no_such_column" in report.invalid[0][2]
    assert "1/2 gold queries score 1.0" in report.text() and "invalid on sqlite" in report.text()
    env = InterCodeSQLEnv(tasks_path=tmp_path / "q.csv", databases_path=dump)
    env.reset(seed=0, options={"task_id": "pets_1-002"})
    env.step("SELECT * FROM pets WHERE 0")
    _, reward, _, _, info = env.step("submit")
    assert reward == 1.0  # InterCode's rule: a failing gold counts as []
    assert "no_such_column" in info["gold_error"]
    env.reset(seed=0, options={"task_id": "pets_1-001"})
    env.step("SELECT count(*) FROM pets")
    assert "gold_error" not in env.step("submit")[4]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def test_env_contract_on_the_package_data(backend) -> None:
    import functools

    from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv
    from agentenvs.testing import check_env_contract

    url = require_mysql() if backend == "mysql" else None
    report = check_env_contract(
        functools.partial(
            InterCodeSQLEnv,
            tasks_path="intercode-bench",
            backend=backend,
            mysql_url=url,
            statement_timeout_s=30.0,  # none of the contract's statements comes near it
        ),
        steps=4,
        options={"task_id": "network_1-001"},
    )
    assert report.passed, report.summary()
