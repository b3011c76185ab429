"""InterCode-SQL on a real MariaDB/MySQL server.

Every test runs against two servers: ``local`` (marked ``mysql``) is the one the
``mysql_url`` fixture finds, ``$AGENTENVS_MYSQL_URL`` else root over a default unix socket
(``.ci/services/mariadb.sh`` starts one and prints its URL); ``container`` (marked
``docker``) is a MariaDB container started for this module from ``agentenvs/mariadb:latest``
(``sandboxes/build_images.sh`` builds it). Each skips with its reason when its server is
missing.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenvs.envs.intercode_sql.container import DEFAULT_MARIADB_IMAGE
from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv

FIXTURES = Path(__file__).parent / "intercode_sql_fixtures"
ORDERED = "concert-002"
ORDERED_GOLD = "SELECT name, country, age FROM singer ORDER BY age DESC"


def _container_url() -> Iterator[str]:
    pytest.importorskip(
        "pymysql", reason="PyMySQL is not installed (pip install 'agentenvs[mysql]')"
    )
    from agentenvs.core.errors import ServiceUnavailable
    from agentenvs.envs.intercode_sql.container import start_mariadb_container

    try:
        box = start_mariadb_container()
    except (ImportError, ServiceUnavailable) as exc:
        pytest.skip(f"no MariaDB container: {exc}")
    with box:
        yield box.url


# one server of each kind per module: the container starts once (about a second)
@pytest.fixture(
    scope="module",
    params=[
        pytest.param("local", marks=pytest.mark.mysql),
        pytest.param("container", marks=pytest.mark.docker(DEFAULT_MARIADB_IMAGE)),
    ],
)
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "local":
        yield request.getfixturevalue("mysql_url")
    else:
        yield from _container_url()


def admin(url: str):
    import pymysql

    from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url

    return pymysql.connect(**parse_mysql_url(url), autocommit=True)


def episode_dbs(url: str) -> set[str]:
    conn = admin(url)
    with conn.cursor() as cur:
        cur.execute("SHOW DATABASES LIKE 'ae\\_ep\\_%'")
        names = {r[0] for r in cur.fetchall()}
    conn.close()
    return names


def own_episode_dbs(url: str) -> set[str]:
    """Episode databases of this process (tests elsewhere may run beside)."""
    from agentenvs.envs.intercode_sql.backends.mysql import parse_episode_name

    return {n for n in episode_dbs(url) if (parse_episode_name(n) or (0,))[0] == os.getpid()}


def make(url: str, **kwargs) -> InterCodeSQLEnv:
    return InterCodeSQLEnv(tasks_path=FIXTURES, backend="mysql", mysql_url=url, **kwargs)


def play(env, task_id, *actions):
    env.reset(seed=0, options={"task_id": task_id})
    out = None
    for a in actions:
        out = env.step(a)
    return out


PARITY = [
    ("concert-001", "SELECT count(*) FROM singer"),
    ("concert-002", ORDERED_GOLD),
    ("concert-002", "SELECT name, country, age FROM singer ORDER BY age ASC"),
    ("concert-002", ORDERED_GOLD + " LIMIT 3"),
    ("concert-003", "SELECT avg(age), min(age), max(age) FROM singer WHERE country = 'France'"),
    ("concert-003", "SELECT avg(age) FROM singer"),
    ("concert-006", "SELECT avg(average) FROM stadium"),
    ("concert-006", "SELECT average FROM stadium"),
    (
        "concert-004",
        "SELECT T2.name, count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id GROUP BY T1.stadium_id",
    ),
    ("pets-002", "SELECT pettype, weight FROM pets ORDER BY pet_age LIMIT 1"),
    (
        "pets-002",
        "SELECT weight * 2, pet_age + 0.5 FROM pets",
    ),  # (integer division differs by dialect)
    ("pets-001", "SELECT fname FROM student WHERE sex = 'f'"),  # binary collation, as in SQLite
]


def test_same_rewards_and_rows_as_sqlite(url) -> None:
    # the comparable mode: canonical values, SQLite's division precision
    mysql = make(url, rules="normalized")
    sqlite = InterCodeSQLEnv(tasks_path=FIXTURES, rules="normalized")
    try:
        for task_id, query in PARITY:
            a = play(mysql, task_id, query)[0]
            b = play(sqlite, task_id, query)[0]
            rows = lambda text: text.splitlines()[1:]  # noqa: E731 - column labels may differ
            assert rows(a) == rows(b), (task_id, query, a, b)
            assert mysql.step("submit")[1] == sqlite.step("submit")[1], (task_id, query)
    finally:
        mysql.close()
        sqlite.close()


def test_gold_policy_and_observations_hide_the_episode_name(url) -> None:
    env = make(url)
    try:
        for task_id in env.task_ids:
            env.reset(seed=0, options={"task_id": task_id})
            env.step(env.gold_query)
            assert env.step("submit")[1] == 1.0, task_id
        obs = play(env, ORDERED, "SHOW TABLES")[0]
        assert "Tables_in_concert" in obs and "ae_ep_" not in obs
        obs = env.step("SELECT * FROM mysql.user")[0]
        assert "denied" in obs and "ae_ep_" not in obs
    finally:
        env.close()


HOSTILE = [
    ("DROP DATABASE concert", "not allowed"),
    ("USE mysql", "USE is not available"),
    ("SELECT * FROM mysql.user", "denied"),
    ("SELECT SLEEP(1e9)", "time limit"),
    (
        "SELECT count(*) FROM singer a, singer b, singer c, singer d, singer e, singer f, "
        "singer g, singer h, singer i, singer j, singer k",
        "time limit",
    ),
    ("SELECT 1; DROP TABLE singer", "only one SQL statement"),
    ("SELECT * FROM singer INTO OUTFILE '/tmp/agentenvs-x'", "not allowed"),
    ("GRANT ALL ON *.* TO CURRENT_USER", "not allowed"),
    ("CREATE DATABASE evil", "not allowed"),
    ("DROP TABLE mysql.user", "denied"),
    ("SET GLOBAL max_connections = 1", "not allowed"),
    ("CREATE TEMPORARY TABLE t (x INT)", "temporary"),
]


def test_hostile_statements_harm_nothing(url) -> None:
    env, other = make(url, statement_timeout_s=0.5, max_turns=30), make(url)
    try:
        other.reset(seed=0, options={"task_id": ORDERED})
        env.reset(seed=0, options={"task_id": ORDERED})
        for sql, message in HOSTILE:
            start = time.monotonic()
            obs, _, terminated, _, info = env.step(sql)
            # the messages tell what stopped each; the clock only rules out a hang
            assert time.monotonic() - start < 60, sql
            assert obs.startswith("Error executing query:") and message in obs, (sql, obs)
            assert not terminated
        obs = env.step("SELECT 'x' || 1")[0]  # still usable
        assert "Error" not in obs
        env.step(ORDERED_GOLD)
        assert env.step("submit")[1] == 1.0
        other.step(ORDERED_GOLD)
        assert other.step("submit")[1] == 1.0
        big = "SELECT " + "1 + " * 260_000 + "1"
        other.reset(seed=0, options={"task_id": ORDERED})
        obs, _, _, _, info = other.step(big)
        assert not info["action_valid"] and "over the limit" in obs
    finally:
        env.close()
        other.close()


def test_writes_are_private_and_databases_are_dropped_at_close(url) -> None:
    before = own_episode_dbs(url)
    a, b = make(url), make(url)
    play(a, ORDERED, "DELETE FROM singer")
    b.reset(seed=0, options={"task_id": ORDERED})
    assert "(6 rows)" in b.step("SELECT * FROM singer")[0]
    # each env its own database (spares made ahead for later episodes may exist beside)
    assert a.episode.name != b.episode.name
    assert {a.episode.name, b.episode.name} <= own_episode_dbs(url) - before
    play(a, ORDERED, "SELECT count(*) FROM singer")  # a new episode starts from the template
    assert "(6,)" in a.step("SELECT count(*) FROM singer")[0]
    names = (a.episode.name, b.episode.name)
    a.close()
    b.close()
    assert own_episode_dbs(url) - before == set()
    conn = admin(url)
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM mysql.user WHERE User IN (%s, %s)", names)
        assert cur.fetchone()[0] == 0
    conn.close()


def test_snapshot_restores_database_into_fresh_env(url) -> None:
    env, fresh = make(url), make(url)
    try:
        play(
            env,
            ORDERED,
            "DELETE FROM singer WHERE country = 'France'",
            "CREATE TABLE notes (t TEXT)",
            "INSERT INTO notes VALUES ('hello')",
            "SELECT name FROM singer",
        )
        snap = pickle.loads(pickle.dumps(env.snapshot()))
        key = env.state_key()
        env.step("DROP TABLE singer")
        fresh.restore(snap)
        assert fresh.state_key() == key
        assert "(2,)" in fresh.step("SELECT count(*) FROM singer")[0]
        assert "('hello',)" in fresh.step("SELECT * FROM notes")[0]
        env.restore(snap)
        assert env.state_key() == key
        assert "(2,)" in env.step("SELECT count(*) FROM singer")[0]
        # score_action on a write leaves the database as it was
        assert env.score_action("DELETE FROM singer") == 0.0
        assert "(2,)" in env.step("SELECT count(*) FROM singer")[0]
    finally:
        env.close()
        fresh.close()


def test_sweep_drops_orphans_of_dead_processes(url) -> None:
    from agentenvs.envs.intercode_sql.backends import mysql as backend
    from agentenvs.envs.intercode_sql.backends.mysql_databases import _b36

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = backend.episode_name().replace(_b36(os.getpid()), _b36(dead.pid), 1)
    mine = backend.episode_name()
    conn = admin(url)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{orphan}`")
        cur.execute(f"CREATE DATABASE `{mine}`")
    try:
        dropped = backend.sweep(url)
        assert orphan in dropped and mine not in dropped
        assert orphan not in episode_dbs(url) and mine in episode_dbs(url)
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{orphan}`")
            cur.execute(f"DROP DATABASE IF EXISTS `{mine}`")
        conn.close()


def test_exit_without_close_leaves_nothing_and_a_kill_is_swept(url) -> None:
    code = textwrap.dedent(
        f"""
        import os, sys
        from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv
        env = InterCodeSQLEnv(tasks_path={str(FIXTURES)!r}, backend="mysql", mysql_url={url!r})
        env.reset(seed=0)
        print(env.unwrapped.episode.name, flush=True)
        if sys.argv[1] == "kill":
            os.kill(os.getpid(), 9)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, "exit"], capture_output=True, text=True, timeout=60
    )
    name = out.stdout.strip()
    assert name.startswith("ae_ep_"), out.stderr
    assert name not in episode_dbs(url)  # atexit dropped it
    out = subprocess.run(
        [sys.executable, "-c", code, "kill"], capture_output=True, text=True, timeout=60
    )
    name = out.stdout.strip()
    assert name in episode_dbs(url)  # SIGKILL: nothing could clean up
    from agentenvs.envs.intercode_sql.backends.mysql import sweep

    assert name in sweep(url)
    assert name not in episode_dbs(url)


def test_env_contract_on_mysql(url) -> None:
    import functools

    from agentenvs.testing import check_env_contract

    report = check_env_contract(
        functools.partial(
            InterCodeSQLEnv,
            tasks_path=str(FIXTURES),
            backend="mysql",
            mysql_url=url,
            statement_timeout_s=30.0,  # none of the contract's statements comes near it
        ),
        steps=6,
        options={"task_id": "pets-002"},
    )
    assert report.passed, report.summary()


def test_info_schema_and_show_schema_on_mysql(url) -> None:
    env = make(url, show_schema=True)
    try:
        obs, info = env.reset(seed=0, options={"task_id": ORDERED})
        # the same tables and columns as SQLite's, tables by name (information_schema's order)
        assert info["schema"] == {
            "concert": ["concert_id", "concert_name", "theme", "stadium_id", "year"],
            "singer": ["singer_id", "name", "country", "age", "is_male"],
            "singer_in_concert": ["concert_id", "singer_id"],
            "stadium": ["stadium_id", "name", "location", "capacity", "average"],
        }
        assert list(info["schema"]) == ["concert", "singer", "singer_in_concert", "stadium"]
        assert obs.endswith(
            "MySQL tables, with their columns:\n"
            + "\n".join(f"- {t}: {', '.join(c)}" for t, c in info["schema"].items())
        )
        assert "ae_ep_" not in repr(info["schema"])  # the template's, not the episode's name
        step_info = env.step("CREATE TABLE extra (x INT)")[4]
        assert step_info["schema"] == info["schema"]
        assert env.reset(options={"task_id": "pets-001"})[1]["schema"] == {
            "has_pet": ["stuid", "petid"],
            "pets": ["petid", "pettype", "pet_age", "weight"],
            "student": ["stuid", "lname", "fname", "age", "sex", "city_code"],
        }
    finally:
        env.close()


def test_every_bundled_gold_query_agrees_across_dialects(url) -> None:
    """Every bundled gold query gives the same rows on MySQL as on SQLite (compared in the
    comparable mode), and scores 1."""
    mysql = InterCodeSQLEnv(backend="mysql", mysql_url=url, rules="normalized")
    sqlite = InterCodeSQLEnv(rules="normalized")
    rows = lambda text: text.splitlines()[1:]  # noqa: E731 - column labels may differ
    try:
        assert len(sqlite.task_ids) >= 120
        for task_id in sqlite.task_ids:
            results = []
            for env in (sqlite, mysql):
                env.reset(seed=0, options={"task_id": task_id})
                # the gold query as written, transpiled only where the dialect needs it
                obs, *_ = env.step(f"```sql\n{env.gold_query}\n```")
                _, reward, terminated, _, _ = env.step("submit")
                assert terminated and reward == 1.0, (task_id, env.backend.dialect, obs)
                results.append(rows(obs))
            # rows in the same order where the gold query fixes one, else the same multiset
            ordered = "order by" in sqlite.gold_query.lower()
            same = results[0] == results[1] if ordered else sorted(results[0]) == sorted(results[1])
            assert same, (task_id, results)
    finally:
        mysql.close()
        sqlite.close()


BYPASSES = [
    "```sql\n/**/ SET SESSION max_statement_time=0\n```",
    "```sql\n/**/SET STATEMENT max_statement_time=0 FOR SELECT SLEEP(7)\n```",
    "```sql\n/**/ START TRANSACTION\n```",
    "```sql\n/**/ SET PASSWORD = PASSWORD('x')\n```",
    "```sql\n/*!50000 SET SESSION max_statement_time=0 */ SELECT 1\n```",
    "```sql\n/*M!100000 SET SESSION max_statement_time=0 */ SELECT 1\n```",
]


def test_comments_do_not_hide_refused_statements(url) -> None:
    env = make(url, statement_timeout_s=0.5)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        for action in BYPASSES:
            obs, *_ = env.step(action)
            assert obs.startswith("Error executing query:"), (action, obs)
            assert "allowed" in obs or "not available" in obs, (action, obs)
        # the time limit is still in force
        obs, *_ = env.step("SELECT SLEEP(30)")
        assert "time limit" in obs
    finally:
        env.close()


def test_the_time_limit_holds_even_when_the_session_limit_is_lifted(url) -> None:
    env = make(url, statement_timeout_s=0.5)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        with env.episode.conn.cursor() as cur:  # as if a statement had lifted it
            cur.execute("SET SESSION max_statement_time = 0")
        start = time.monotonic()
        obs, *_ = env.step("SELECT SLEEP(120)")
        assert "time limit" in obs, obs
        assert time.monotonic() - start < 60  # killed from outside, long before 120 s
        env.step(ORDERED_GOLD)  # the connection is still usable
        assert env.step("submit")[1] == 1.0
    finally:
        env.close()


def test_a_write_that_returns_rows_still_counts_as_a_write(url) -> None:
    env = make(url)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        obs, *_ = env.step("DELETE FROM singer RETURNING singer_id")
        assert "(6 rows)" in obs
        env.step("SELECT name, country, age FROM singer")
        assert env.step("submit")[1] == 0.0
    finally:
        env.close()


def _wait_until_running(episode, runner) -> None:
    """Until the server runs the episode's statement (a KILL before that would miss it),
    or the statement is over."""
    while runner.is_alive():
        rows = episode.backend.server.run(
            "SELECT INFO FROM information_schema.PROCESSLIST WHERE ID = %s", (episode.thread_id,)
        )
        if rows and rows[0][0] and "SLEEP" in rows[0][0]:
            return
        time.sleep(0.01)


def test_a_late_watchdog_never_stops_the_next_statement(url) -> None:
    import threading

    env = make(url, statement_timeout_s=60)  # only the kills stop these statements
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        episode = env.episode
        episode.execute("SELECT 1")
        stale = episode._statements  # that statement's watchdog, firing too late
        outcome = {}
        runner = threading.Thread(
            target=lambda: outcome.update(result=episode.execute("SELECT SLEEP(2), 7"))
        )
        runner.start()
        _wait_until_running(episode, runner)
        episode._kill(stale)
        runner.join()
        assert outcome["result"].ok and outcome["result"].rows[0][1] == 7, outcome
        # the watchdog of the statement that is running does stop it
        runner = threading.Thread(
            target=lambda: outcome.update(result=episode.execute("SELECT SLEEP(30)"))
        )
        runner.start()
        _wait_until_running(episode, runner)
        episode._kill(episode._running)
        runner.join()
        assert "time limit" in (outcome["result"].error or ""), outcome
    finally:
        env.close()


def test_a_database_only_read_serves_a_later_episode_in_a_new_session(url) -> None:
    before = own_episode_dbs(url)
    env = make(url)
    try:
        play(env, ORDERED, "SELECT @seen := 41 + 1")
        first = env.episode.name
        env.reset(seed=0, options={"task_id": ORDERED})  # the first is still open meanwhile
        env.reset(seed=0, options={"task_id": ORDERED})
        assert env.episode.name == first  # only read: kept and served again
        # a new session: nothing the earlier episode set in its session is there
        assert "(None,)" in env.step("SELECT @seen")[0]
        env.step("DELETE FROM singer")
        for _ in range(3):
            env.reset(seed=0, options={"task_id": ORDERED})  # the written one, if served, as new
            assert "(6,)" in env.step("SELECT count(*) FROM singer")[0]
    finally:
        env.close()
    assert own_episode_dbs(url) - before == set()  # spares included


def ready_names(env) -> set[str]:
    pool = env.unwrapped.backend.pool
    pool.settle()
    with pool.lock:
        return {entry[0] for ready in pool.ready.values() for entry in ready}


def test_a_written_database_serves_again_once_its_rows_are_copied_back(url) -> None:
    env = make(url)
    try:
        play(env, ORDERED, "DELETE FROM singer", "UPDATE stadium SET capacity = 0")
        written = env.episode.name
        env.reset(seed=0, options={"task_id": ORDERED})  # the written one goes to the pool
        assert written in ready_names(env)  # ready to serve again, with its rows back
        server = env.unwrapped.backend.server
        assert server.scalar(f"SELECT count(*) FROM `{written}`.singer") == 6
        assert server.scalar(f"SELECT count(*) FROM `{written}`.stadium WHERE capacity = 0") == 0
        # an episode that takes it sees the task's data
        pool = env.unwrapped.backend.pool
        with pool.lock:
            ready = next(r for r in pool.ready.values() if any(e[0] == written for e in r))
            ready.sort(key=lambda e: e[0] == written)  # taken next
        env.reset(seed=0, options={"task_id": ORDERED})
        assert env.episode.name == written
        assert "(6,)" in env.step("SELECT count(*) FROM singer")[0]
        env.step(ORDERED_GOLD)
        assert env.step("submit")[1] == 1.0
    finally:
        env.close()


@pytest.mark.parametrize(
    "change",
    [
        "CREATE INDEX by_age ON singer (age)",
        "CREATE TABLE extra (a INT)",
        "CREATE VIEW old AS SELECT * FROM singer WHERE age > 40",
        "ALTER TABLE singer ADD COLUMN z INT",
        "DROP TABLE concert",
    ],
)
def test_a_database_whose_tables_changed_is_dropped_not_reused(url, change) -> None:
    before = own_episode_dbs(url)
    env = make(url)
    try:
        obs, *_ = play(env, ORDERED, "DELETE FROM singer", change)
        assert "rror" not in obs, obs
        written = env.episode.name
        env.reset(seed=0, options={"task_id": ORDERED})
        assert written not in ready_names(env)
        assert written not in own_episode_dbs(url)  # dropped
        for _ in range(4):
            env.reset(seed=0, options={"task_id": ORDERED})
            assert env.episode.name != written
            assert "(6,)" in env.step("SELECT count(*) FROM singer")[0]
    finally:
        env.close()
    assert own_episode_dbs(url) - before == set()


SHOP_DUMP = """CREATE DATABASE `shop`;
USE `shop`;
CREATE TABLE `item` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `name` varchar(20) DEFAULT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB AUTO_INCREMENT=3 DEFAULT CHARSET=utf8mb4;
INSERT INTO `item` VALUES (1,'pen'),(2,'ink');
"""


def test_an_advanced_auto_increment_counter_is_not_reused(url, tmp_path: Path) -> None:
    import json

    (tmp_path / "shop.sql").write_text(SHOP_DUMP)
    questions = tmp_path / "questions.json"
    questions.write_text(
        json.dumps([{"db": "shop", "query": "Items?", "gold": "SELECT name FROM item"}])
    )
    env = InterCodeSQLEnv(
        tasks_path=questions, databases_path=tmp_path / "shop.sql", backend="mysql", mysql_url=url
    )
    try:
        task = env.task_ids[0]
        # a delete leaves the counter as it was: the rows come back, the database serves again
        play(env, task, "DELETE FROM item WHERE id = 2")
        deleted = env.episode.name
        env.reset(seed=0, options={"task_id": task})
        assert deleted in ready_names(env)
        # an insert moves the counter on: copying rows back cannot undo that
        env.step("INSERT INTO item (name) VALUES ('cap')")
        inserted = env.episode.name
        env.reset(seed=0, options={"task_id": task})
        assert inserted not in ready_names(env)
        for _ in range(4):  # every episode sees the next id the dump's table gives
            env.reset(seed=0, options={"task_id": task})
            env.step("INSERT INTO item (name) VALUES ('cap')")
            assert "(3, 'cap')" in env.step("SELECT id, name FROM item WHERE name = 'cap'")[0]
    finally:
        env.close()


def test_without_spares_each_reset_builds_and_drops_its_own(url) -> None:
    from agentenvs.envs.intercode_sql.backends.base import Limits
    from agentenvs.envs.intercode_sql.backends.mysql import MySQLBackend
    from agentenvs.envs.intercode_sql.data import load_tasks

    before = own_episode_dbs(url)
    backend = MySQLBackend(url, Limits(), spares=0)
    source = next(iter(load_tasks(str(FIXTURES)).databases.values()))
    try:
        names = []
        for _ in range(3):
            episode = backend.open_episode(source)
            names.append(episode.name)
            assert own_episode_dbs(url) - before == {episode.name}
            episode.close()
            assert own_episode_dbs(url) - before == set()
        assert len(set(names)) == 3
    finally:
        backend.close()


def test_backends_share_one_admin_connection_and_the_last_closes_it(url) -> None:
    from agentenvs.envs.intercode_sql.backends.base import Limits
    from agentenvs.envs.intercode_sql.backends.mysql import MySQLBackend
    from agentenvs.envs.intercode_sql.backends.mysql_server import _SERVERS
    from agentenvs.envs.intercode_sql.data import load_tasks

    source = next(iter(load_tasks(str(FIXTURES)).databases.values()))
    others = _SERVERS.get((os.getpid(), url), [None, 0])[1]  # backends of other tests alive
    a, b = MySQLBackend(url, Limits()), MySQLBackend(url, Limits())
    try:
        assert a.server is b.server
        a.close()
        a.close()  # idempotent: b keeps the connection
        assert b.server.admin.open
        episode = b.open_episode(source)
        assert episode.execute("SELECT 1").rows == ((1,),)
        episode.close()
    finally:
        b.close()
    if others:
        return
    assert not b.server.admin.open
    c = MySQLBackend(url, Limits())  # a new one after the last closed connects anew
    try:
        assert c.server is not a.server and c.server.admin.open
    finally:
        c.close()
