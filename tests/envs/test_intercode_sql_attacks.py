"""What a reward-maximizing policy would try on InterCode-SQL, on SQLite and MariaDB/MySQL.

Every attack goes through the public API (``gym.make``, ``reset``, ``step``,
``score_action``) and must earn nothing: an error observation that says why, a reward
below 1, and no trace outside the episode. The MySQL tests take the ``mysql_url`` fixture
(marked ``mysql``: skipped with the reason when no server answers).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.envs.intercode_sql.reward import intercode_reward

FIXTURES = Path(__file__).parent / "intercode_sql_fixtures"
ORDERED = "concert-002"
ORDERED_GOLD = "SELECT name, country, age FROM singer ORDER BY age DESC"
COUNT = "concert-001"  # SELECT count(*) FROM singer: 6


def make(backend: str, url: str | None = None, **kwargs):
    extra = {"backend": "mysql", "mysql_url": url} if backend == "mysql" else {}
    return gym.make(
        "agentenvs/InterCodeSQL-v0", tasks_path=FIXTURES, max_turns=50, **extra, **kwargs
    )


def admin(url: str):
    import pymysql

    from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url

    return pymysql.connect(**parse_mysql_url(url), autocommit=True)


def scalar(url: str, sql: str, args=None):
    conn = admin(url)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            row = cur.fetchone()
            return row[0] if row else None
    finally:
        conn.close()


def refused(obs: str, *words: str) -> bool:
    return obs.startswith("Error executing query:") and all(w in obs for w in words)


@pytest.fixture(params=["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def backend(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    if request.param == "mysql":
        return "mysql", request.getfixturevalue("mysql_url")
    return "sqlite", None


# ------------------------------------------------------------ MySQL: named locks, files
LOCK_CALLS = [
    "SELECT GET_LOCK('ae_x', 0)",
    "select get_lock('ae_x', 0)",
    "SELECT `get_lock`('ae_x', 0)",
    "SELECT GET_LOCK ('ae_x', 0)",
    "SELECT GET_LOCK/* a comment */('ae_x', 0)",
    "SELECT\n\tGet_Lock(\n'ae_x',\n0)",
    "SELECT name FROM singer WHERE (SELECT GET_LOCK('ae_x', 0)) = 1",
    "SELECT * FROM (SELECT GET_LOCK('ae_x', 0) AS l) AS t",
    "CREATE VIEW v AS SELECT GET_LOCK('ae_x', 0) AS l",
    "INSERT INTO singer (singer_id, name) SELECT 99, GET_LOCK('ae_x', 0)",
    "WITH l AS (SELECT GET_LOCK('ae_x', 0)) SELECT * FROM l",
    "SELECT IS_FREE_LOCK('ae_x')",
    "SELECT IS_USED_LOCK('ae_x')",
    "SELECT RELEASE_LOCK('ae_x')",
    "SELECT RELEASE_ALL_LOCKS()",
    "VALUES (GET_LOCK('ae_x', 0))",
    "SELECT 1 /*!GET_LOCK('ae_x', 0) */",
]


@pytest.mark.parametrize("sql", LOCK_CALLS)
def test_named_lock_functions_are_refused(mysql_url, sql) -> None:
    env = make("mysql", mysql_url)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        obs, *_ = env.step(sql)
        assert refused(obs, "not allowed"), (sql, obs)
        assert "lock" in obs or "executable comments" in obs, obs
        assert scalar(mysql_url, "SELECT IS_USED_LOCK('ae_x')") is None
        env.step(ORDERED_GOLD)
        assert env.step("submit")[1] == 1.0
    finally:
        env.close()


FILE_STATEMENTS = [
    "CREATE TABLE t (x INT) DATA DIRECTORY = '/tmp'",
    "CREATE TABLE t (x INT) ENGINE=InnoDB DATA DIRECTORY='/tmp'",
    "CREATE OR REPLACE TABLE t (x INT) data   directory '/tmp'",
    "CREATE TABLE t (x INT) ENGINE=MyISAM INDEX DIRECTORY='/tmp'",
    "CREATE TABLE t (x INT) PARTITION BY HASH (x) (PARTITION p0 DATA DIRECTORY = '/tmp')",
    "CREATE TABLE t AS SELECT * FROM singer",  # allowed: the control below
    "ALTER TABLE t DISCARD TABLESPACE",
    "ALTER TABLE t IMPORT TABLESPACE",
    "CREATE TABLE u (x INT) TABLESPACE innodb_system",
    "CREATE TABLE u (x INT) ENGINE=CONNECT TABLE_TYPE=CSV FILE_NAME='/etc/passwd'",
    "CREATE TABLE u (x INT) ENGINE = 'CSV'",
    "CREATE TABLE u (x INT) ENGINE `MEMORY`",
    "CREATE TABLE u (x INT) ENGINE=FEDERATED CONNECTION='mysql://root@127.0.0.1/mysql/user'",
    "ALTER TABLE singer ENGINE=MyISAM",
    "ALTER TABLE singer ENGINE = Aria",
    "SELECT LOAD_FILE('/etc/passwd')",
    "SELECT `load_file`('/etc/passwd')",
    "LOAD DATA INFILE '/etc/passwd' INTO TABLE singer",
    "LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE singer",
    "SELECT * FROM singer INTO OUTFILE '/tmp/ae_out'",
    "SELECT name FROM singer LIMIT 1 INTO DUMPFILE '/tmp/ae_dump'",
    "CREATE OR REPLACE DATABASE ae_evil",
    "CREATE OR REPLACE FUNCTION f RETURNS STRING SONAME 'ha_connect.so'",
    "RENAME USER CURRENT_USER TO root",
    "CREATE TABLE u (x INT) ENGINE=InnoDB",  # allowed: the env's engine
]


def test_statements_that_place_or_read_files_are_refused_and_leave_nothing(mysql_url) -> None:
    env = make("mysql", mysql_url)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        name = env.unwrapped.episode.name
        for sql in FILE_STATEMENTS:
            obs, *_ = env.step(sql)
            if sql.startswith("CREATE TABLE t AS") or sql.endswith("ENGINE=InnoDB"):
                assert obs.startswith("Statement executed"), (sql, obs)
                continue
            assert refused(obs, "not allowed"), (sql, obs)
    finally:
        env.close()
    # nothing of the episode on the server or on its host
    assert scalar(mysql_url, "SELECT COUNT(*) FROM mysql.user WHERE User = %s", (name,)) == 0
    assert scalar(mysql_url, "SHOW DATABASES LIKE %s", (name,)) is None
    assert scalar(mysql_url, "SHOW DATABASES LIKE 'ae\\_evil'") is None
    if "unix_socket" in mysql_url:  # the server runs on this host
        assert not os.path.exists(f"/tmp/{name}")
        assert not os.path.exists("/tmp/ae_out") and not os.path.exists("/tmp/ae_dump")


def test_episode_user_holds_no_global_privilege(mysql_url) -> None:
    env = make("mysql", mysql_url)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        obs, *_ = env.step("SHOW GRANTS")
        lines = [line for line in obs.splitlines() if line.startswith(("('", '("'))]
        assert len(lines) == 2, obs
        assert "GRANT USAGE ON *.*" in lines[0]
        assert "ON `concert`.*" in lines[1] and "ALL" not in lines[1], obs
        for word in ("FILE", "PROCESS", "SUPER", "TRIGGER", "CREATE ROUTINE", "EVENT"):
            assert word not in lines[1], (word, obs)
    finally:
        env.close()


def _fresh_tasks(tmp_path: Path) -> Path:
    """The fixture tasks over a concert database with one more row: a template never built."""
    shutil.copytree(FIXTURES, tmp_path / "tasks")
    script = tmp_path / "tasks" / "databases" / "concert.sql"
    stamp = f"{os.getpid()}{time.time_ns()}"
    script.write_text(
        script.read_text()
        + f"\nINSERT INTO stadium (stadium_id, name) VALUES ({int(stamp[-9:]) + 1000}, 'x');\n"
    )
    return tmp_path / "tasks"


def test_no_name_from_public_data_blocks_another_process_building_a_template(
    mysql_url, tmp_path: Path, monkeypatch
) -> None:
    from agentenvs.envs.intercode_sql.backends import mysql as backend_module
    from agentenvs.envs.intercode_sql.backends.sqlite import template_bytes
    from agentenvs.envs.intercode_sql.data import load_tasks

    tasks = _fresh_tasks(tmp_path)
    data = template_bytes(load_tasks(tasks).databases["concert"])
    key = hashlib.blake2b(data, digest_size=6).hexdigest()
    public = [f"ae_tpl_concert_{key}", "ae_tpl_concert", "ae_meta", "agentenvs"]
    attacker = make("mysql", mysql_url)
    victim = None
    try:
        attacker.reset(seed=0, options={"task_id": ORDERED})
        # as if a lock function slipped past the statement guard
        with attacker.unwrapped.episode.conn.cursor() as cur:
            for name in public:
                cur.execute("SELECT GET_LOCK(%s, 0)", (name,))
                assert cur.fetchone() == (1,)
        # a builder that cannot take its lock at once fails instead of waiting 120 s
        monkeypatch.setattr(backend_module, "TEMPLATE_LOCK_WAIT_S", 1)
        victim = gym.make(
            "agentenvs/InterCodeSQL-v0", tasks_path=tasks, backend="mysql", mysql_url=mysql_url
        )
        victim.reset(seed=0, options={"task_id": ORDERED})
        victim.step(ORDERED_GOLD)
        assert victim.step("submit")[1] == 1.0
    finally:
        attacker.close()
        if victim is not None:
            template = victim.unwrapped.backend.template(
                victim.unwrapped.task_set.databases["concert"]
            )[0]
            victim.close()
            conn = admin(mysql_url)
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{template}`")
            conn.close()


def test_the_template_lock_name_is_kept_from_episode_users(mysql_url) -> None:
    env = make("mysql", mysql_url)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        for sql in (
            "SELECT * FROM ae_meta.lock_key",
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'ae_meta'",
        ):
            obs, *_ = env.step(sql)
            assert refused(obs, "denied") or "(0,)" in obs, (sql, obs)
    finally:
        env.close()


# ------------------------------------------------------------ reading beyond the episode
SQLITE_REACH = [
    ("ATTACH DATABASE '/tmp/ae_attach.db' AS x", "ATTACH"),
    ("ATTACH ':memory:' AS x", "ATTACH"),
    ("VACUUM INTO '/tmp/ae_vacuum.db'", "ATTACH"),
    ("SELECT load_extension('/usr/lib/x86_64-linux-gnu/libsqlite3.so.0')", "not authorized"),
    ("SELECT readfile('/etc/passwd')", "no such function"),
    ("SELECT writefile('/tmp/ae_written', 'x')", "no such function"),
    ("PRAGMA database_list", "not allowed"),
    ("SELECT * FROM pragma_database_list", "not allowed"),
    ("PRAGMA temp_store_directory = '/tmp'", "not allowed"),
    ("PRAGMA reverse_unordered_selects = 1", "not allowed"),
    ("PRAGMA case_sensitive_like = 1", "not allowed"),
    ("SELECT fts3_tokenizer('simple')", "fts3_tokenizer"),
    ("SELECT fts3_tokenizer('evil', X'4141414141414141')", "fts3_tokenizer"),
    ("CREATE VIRTUAL TABLE c USING csv(filename='/etc/passwd')", "no such module"),
]


@pytest.mark.parametrize(("sql", "message"), SQLITE_REACH, ids=[s for s, _ in SQLITE_REACH])
def test_sqlite_statements_cannot_reach_files_memory_or_settings(sql, message) -> None:
    env = make("sqlite")
    env.reset(seed=0, options={"task_id": ORDERED})
    obs, *_ = env.step(sql)
    assert refused(obs, message), obs
    env.step(ORDERED_GOLD)
    assert env.step("submit")[1] == 1.0
    for path in ("/tmp/ae_attach.db", "/tmp/ae_vacuum.db", "/tmp/ae_written"):
        assert not os.path.exists(path)


def test_a_forged_fts3_tokenizer_cannot_crash_the_process() -> None:
    env = make("sqlite")
    env.reset(seed=0, options={"task_id": ORDERED})
    env.step("SELECT fts3_tokenizer('evil', X'4141414141414141')")
    # with the tokenizer registered this dereferences 0x4141...: the process would die
    obs, *_ = env.step("CREATE VIRTUAL TABLE t USING fts3(x, tokenize=evil)")
    assert obs.startswith("Error executing query:"), obs
    env.step(ORDERED_GOLD)
    assert env.step("submit")[1] == 1.0


MYSQL_REACH = [
    "SELECT User, authentication_string FROM mysql.user",
    "SELECT * FROM mysql.db",
    "SELECT * FROM performance_schema.events_statements_history",
    "SELECT * FROM performance_schema.metadata_locks",
    "SELECT * FROM sys.processlist",
    "SHOW ENGINE INNODB STATUS",
    "SHOW BINLOG EVENTS",
]


def test_mysql_episode_sees_nothing_of_other_databases(mysql_url) -> None:
    env, other = make("mysql", mysql_url), make("mysql", mysql_url)
    try:
        other.reset(seed=0, options={"task_id": ORDERED})
        env.reset(seed=0, options={"task_id": ORDERED})
        other_name = other.unwrapped.episode.name
        template = env.unwrapped.episode.template
        for sql in MYSQL_REACH + [
            f"SELECT * FROM `{other_name}`.singer",
            f"SELECT * FROM `{template}`.singer",
            f"CREATE TABLE t AS SELECT * FROM `{template}`.singer",
            f"CREATE TABLE t LIKE `{other_name}`.singer",
        ]:
            obs, *_ = env.step(sql)
            assert obs.startswith("Error executing query:"), (sql, obs)
            assert "denied" in obs or "not allowed" in obs, (sql, obs)
        for sql in (
            "SELECT DISTINCT TABLE_SCHEMA FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA NOT IN ('information_schema', 'performance_schema')",
            "SHOW DATABASES",
            "SELECT DISTINCT USER FROM information_schema.PROCESSLIST",
        ):
            obs, *_ = env.step(sql)
            assert "ae_" not in obs and other_name not in obs and "root" not in obs, (sql, obs)
    finally:
        env.close()
        other.close()


def test_the_gold_query_leaves_no_trace_in_the_agents_session(mysql_url) -> None:
    # with try_again the gold is graded after every statement: the agent's next statement
    # must not learn how many rows it returned (FOUND_ROWS) or what it warned
    env = make("mysql", mysql_url, try_again=True)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        env.step("SELECT 1")
        obs, *_ = env.step("SELECT FOUND_ROWS()")
        assert "(1,)" in obs, obs
        obs, *_ = env.step("SHOW SESSION STATUS LIKE 'Com_select'")
        # the agent's own statements only: 2 SELECTs so far (this one counts too on MariaDB)
        assert "'Com_select', '2'" in obs or "'Com_select', '3'" in obs, obs
    finally:
        env.close()


# ------------------------------------------------------------ writing to fool the gold
def _writes(backend: str) -> list[list[str]]:
    attacks = [
        ["DELETE FROM singer", "SELECT name, country, age FROM singer"],
        ["UPDATE singer SET age = 0", "SELECT name, country, 0 FROM singer"],
        [
            "DROP TABLE singer",
            "CREATE TABLE singer (name TEXT, country TEXT, age INT)",
            "SELECT name, country, age FROM singer",
        ],
        [
            "CREATE TABLE answer AS SELECT 1 AS x",
            "ALTER TABLE singer RENAME TO old",
            "CREATE VIEW singer AS SELECT 'a' AS name, 'b' AS country, 1 AS age, 1 AS singer_id",
            "SELECT name, country, age FROM singer",
        ],
    ]
    if backend == "sqlite":
        attacks += [
            [
                "CREATE TRIGGER tr AFTER UPDATE ON singer BEGIN DELETE FROM singer; END",
                "UPDATE singer SET age = age",
                "SELECT name, country, age FROM singer",
            ],
            [
                "CREATE TEMP VIEW singer AS SELECT 1 AS name, 1 AS country, 1 AS age",
                "SELECT 1 WHERE 0",
            ],
            ["ANALYZE", "DELETE FROM singer", "SELECT name, country, age FROM singer"],
        ]
    else:
        attacks += [
            # an empty shadow of singer: in the gold's session it would empty the key too
            [
                "CREATE TEMPORARY TABLE singer (name TEXT, country TEXT, age INT)",
                "SELECT 1 WHERE 0",
            ],
            ["SET SESSION sql_select_limit = 0", "SELECT 1 WHERE 0"],
            ["SET STATEMENT sql_select_limit = 0 FOR SELECT 1", "SELECT 1 WHERE 0"],
            [
                "ALTER TABLE singer CONVERT TO CHARACTER SET latin1",
                "DELETE FROM singer",
                "SELECT name, country, age FROM singer",
            ],
            ["PREPARE s FROM 'DELETE FROM singer'", "EXECUTE s", "SELECT 1 WHERE 0"],
            ["SET time_zone = '+14:00'", "SELECT 1 WHERE 0"],
            ["HANDLER singer OPEN", "SELECT 1 WHERE 0"],
            ["LOCK TABLES singer WRITE", "SELECT 1 WHERE 0"],
        ]
    return attacks


def test_changing_the_database_never_changes_the_answer_key(backend) -> None:
    kind, url = backend
    for rules in ("official", "iou", "normalized"):
        env = make(kind, url, rules=rules)
        try:
            for actions in _writes(kind):
                env.reset(seed=0, options={"task_id": ORDERED})
                for action in actions:
                    env.step(action)
                reward = env.step("submit")[1]
                assert reward < 1, (rules, actions, reward)
                assert env.unwrapped.score_action(actions[-1]) < 1, (rules, actions)
        finally:
            env.close()


# ------------------------------------------------------------ gaming the comparison
GAMES = [
    # (what the policy sends for the ordered task, every rules mode's reward must be < 1)
    f"{ORDERED_GOLD.replace(' ORDER BY', ' UNION ALL SELECT name, country, age FROM singer ORDER BY')}",
    "SELECT DISTINCT name, country, age FROM singer UNION ALL SELECT 'x', 'y', 1",
    "SELECT name, country, CAST(age AS CHAR) FROM singer ORDER BY age DESC",
    "SELECT name, country, NULL FROM singer ORDER BY age DESC",
    "SELECT name, country, 'None' FROM singer ORDER BY age DESC",
    "SELECT name, country FROM singer ORDER BY age DESC",
    "SELECT name, country, age, age FROM singer ORDER BY age DESC",
    "SELECT 1 WHERE 1 = 0",
    "SELECT CONCAT('(', QUOTE(name), ', ', QUOTE(country), ', ', age, ')') FROM singer",
    "SELECT name FROM singer",
]


def test_the_comparison_cannot_be_gamed(backend) -> None:
    kind, url = backend
    for rules in ("official", "iou", "normalized"):
        env = make(kind, url, rules=rules)
        try:
            for sql in GAMES:
                if kind == "sqlite":
                    sql = sql.replace("CAST(age AS CHAR)", "CAST(age AS TEXT)").replace(
                        "CONCAT('(', QUOTE(name), ', ', QUOTE(country), ', ', age, ')')",
                        "'(' || quote(name) || ', ' || quote(country) || ', ' || age || ')'",
                    )
                env.reset(seed=0, options={"task_id": ORDERED})
                obs, *_ = env.step(sql)
                reward = env.step("submit")[1]
                assert reward < 1, (rules, sql, obs, reward)
        finally:
            env.close()


def test_reversed_order_scores_below_one_where_order_counts() -> None:
    reversed_ = ORDERED_GOLD.replace("DESC", "ASC")
    for rules in ("official", "normalized", "iou"):
        env = make("sqlite", rules=rules)
        env.reset(seed=0, options={"task_id": ORDERED})
        env.step(reversed_)
        reward = env.step("submit")[1]
        # InterCode's reward before its sort-order scaling ignores order by definition
        assert reward == 1.0 if rules == "iou" else reward < 0, (rules, reward)


def test_a_near_superset_rounds_to_one_only_under_intercodes_own_rules() -> None:
    gold = [(i,) for i in range(250)]
    agent = gold + [(999,)]  # 250 of 251 rows: IoU 0.996, tau 1
    assert intercode_reward(agent, gold) == 1.0  # InterCode's round(0.996, 2)
    assert intercode_reward(agent, gold, rules="iou") < 1
    assert intercode_reward(agent, gold, rules="normalized") < 1
    assert intercode_reward(gold, gold, rules="normalized") == 1.0


def test_a_failing_gold_pays_an_empty_answer_only_under_intercodes_own_rules() -> None:
    # InterCode counts a gold without rows (it failed) as []: an empty answer gets 1
    assert intercode_reward([], None) == 1
    assert intercode_reward([], None, rules="iou") == 1
    assert intercode_reward([], None, rules="normalized") == 0.0


# ------------------------------------------------------------ exhausting what others share
def test_long_statements_stop_at_the_limit_and_others_still_score(backend) -> None:
    kind, url = backend
    heavy = {
        "sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
        "SELECT max(x) FROM c",
        "mysql": "SELECT COUNT(*) FROM singer a, singer b, singer c, singer d, singer e, "
        "singer f, singer g, singer h, singer i, singer j, singer k",
    }[kind]
    env, other = make(kind, url, statement_timeout_s=0.5), make(kind, url)
    try:
        other.reset(seed=0, options={"task_id": ORDERED})
        env.reset(seed=0, options={"task_id": ORDERED})
        for _ in range(3):
            obs, *_ = env.step(heavy)
            assert refused(obs, "time limit"), obs
        other.step(ORDERED_GOLD)
        assert other.step("submit")[1] == 1.0
        env.step(ORDERED_GOLD)
        assert env.step("submit")[1] == 1.0
    finally:
        env.close()
        other.close()


def test_wide_results_are_refused_before_they_fill_memory(backend) -> None:
    kind, url = backend
    wide = {
        "sqlite": "SELECT zeroblob(1000000) FROM singer a, singer b, singer c",
        "mysql": "SELECT REPEAT('x', 1000000) FROM singer a, singer b, singer c",
    }[kind]
    # a limit no loaded machine reaches: only the size can stop it
    env = make(kind, url, statement_timeout_s=120)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        obs, *_ = env.step(wide)
        assert refused(obs, "MB"), obs
        env.step(ORDERED_GOLD)
        assert env.step("submit")[1] == 1.0
    finally:
        env.close()
