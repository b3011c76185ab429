"""InterCode-SQL's limits on what an agent can make the database hold, through ``gym.make``.

Each bomb (a recursive CTE insert, ``INSERT ... SELECT`` doubling, wide blobs, ``CREATE
TABLE ... AS SELECT``, an index) runs through ``step`` on SQLite and (marked ``mysql``) on
MariaDB. The database is measured from outside the env: SQLite's image as it serializes,
MySQL's table files as the server's admin sees them (``INNODB_SYS_TABLESPACES``). It must
stay under the cap (MySQL: plus ``MYSQL_SLACK``, documented in ``docs/intercode_sql.md``),
``step`` must answer with an observation, and a well-behaved episode must still score 1
afterwards and on the next reset. A control with the cap lifted shows each bomb grows past
it, so the tests can fail.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids

FIXTURES = Path(__file__).parent / "intercode_sql_fixtures"
ORDERED = "concert-002"
ORDERED_GOLD = "SELECT name, country, age FROM singer ORDER BY age DESC"
CAP = 16_000_000
#: what MariaDB may write past the cap before the env sees and stops a write (its files
#: never shrink): the docs' figure, with room for a faster disk
MYSQL_SLACK = 64_000_000
FULL = "Error executing query: database or disk is full"

#: (name, statements), per backend: each would take the database well past CAP
BOMBS = {
    "sqlite": {
        "recursive_cte": [
            "CREATE TABLE b (x BLOB)",
            "INSERT INTO b WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c "
            "LIMIT 60000) SELECT randomblob(1000) FROM c",
        ],
        "doubling": [
            "CREATE TABLE b (x BLOB)",
            "INSERT INTO b VALUES (randomblob(1000000))",
            *["INSERT INTO b SELECT randomblob(1000000) FROM b"] * 6,
        ],
        "wide_blobs": [
            "CREATE TABLE b (x BLOB)",
            "INSERT INTO b SELECT zeroblob(9000000) FROM singer",
        ],
        "create_as_select": [
            "CREATE TABLE b AS SELECT randomblob(5000000) AS x FROM singer a, singer c",
        ],
        "index": [
            "CREATE TABLE b (x TEXT)",
            "INSERT INTO b WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c "
            "LIMIT 9000) SELECT hex(randomblob(500)) FROM c",
            "CREATE INDEX bx ON b (x)",
            "CREATE INDEX bx2 ON b (x, x)",
        ],
    },
    "mysql": {
        "recursive_cte": [
            "CREATE TABLE b (x LONGBLOB)",
            "INSERT INTO b WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c "
            "WHERE i < 1000) SELECT REPEAT('x', 100000) FROM c",
        ],
        "doubling": [
            "CREATE TABLE b (x LONGBLOB)",
            "INSERT INTO b VALUES (REPEAT('x', 1000000))",
            *["INSERT INTO b SELECT x FROM b"] * 7,
        ],
        "wide_blobs": [
            "CREATE TABLE b (x LONGBLOB)",
            "INSERT INTO b SELECT REPEAT('y', 1000000) FROM singer a, singer c, singer d",
        ],
        "create_as_select": [
            "CREATE TABLE b AS SELECT REPEAT('y', 1000000) AS x FROM singer a, singer c, singer d",
        ],
        "index": [
            "CREATE TABLE b (x VARCHAR(700))",
            "INSERT INTO b WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c "
            "WHERE i < 1000) SELECT REPEAT(MD5(a.i * 1000 + d.i), 20) FROM c a, c d "
            "WHERE d.i <= 20",
            "CREATE INDEX bx ON b (x)",
            "INSERT INTO b SELECT x FROM b",
        ],
    },
}


def make(backend: str, url: str | None, **kwargs):
    extra = {"backend": "mysql", "mysql_url": url} if backend == "mysql" else {}
    return gym.make(
        "agentenvs/InterCodeSQL-v0",
        tasks_path=FIXTURES,
        max_turns=50,
        statement_timeout_s=20,
        **extra,
        **kwargs,
    )


def mysql_files(url: str, db: str) -> int:
    """The size of ``db``'s table files, as the server's admin sees them."""
    import pymysql

    from agentenvs.envs.intercode_sql.backends.mysql_server import parse_mysql_url

    conn = pymysql.connect(**parse_mysql_url(url), autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COALESCE(SUM(FILE_SIZE), 0) FROM information_schema.INNODB_SYS_TABLESPACES "
                "WHERE NAME LIKE %s",
                (db.replace("_", "\\_") + "/%",),
            )
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def size_of(env, backend: str, url: str | None) -> int:
    episode = env.unwrapped.episode
    if backend == "sqlite":
        return len(episode.dump())  # the database's whole image
    return mysql_files(url, episode.name)


@pytest.fixture(params=["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def backend(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    if request.param == "mysql":
        return "mysql", request.getfixturevalue("mysql_url")
    return "sqlite", None


def play_bomb(env, statements: list[str]) -> list[str]:
    observations = []
    for sql in statements:
        obs, reward, terminated, truncated, info = env.step(sql)
        assert isinstance(obs, str) and reward == 0.0 and not terminated and not truncated
        assert isinstance(info["state_key"], str)
        observations.append(obs)
    return observations


def still_scores(env) -> None:
    env.step(ORDERED_GOLD)
    assert env.step("submit")[1] == 1.0
    env.reset(seed=1, options={"task_id": ORDERED})
    env.step(ORDERED_GOLD)
    assert env.step("submit")[1] == 1.0


@pytest.mark.parametrize("bomb", sorted(BOMBS["sqlite"]))
def test_a_bomb_stays_under_the_cap_and_the_episode_goes_on(backend, bomb) -> None:
    kind, url = backend
    env = make(kind, url, max_db_bytes=CAP)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        start = size_of(env, kind, url)
        observations = play_bomb(env, BOMBS[kind][bomb])
        size = size_of(env, kind, url)
        slack = 0 if kind == "sqlite" else MYSQL_SLACK
        assert size <= CAP + slack, (bomb, start, size, observations)
        assert any(obs.startswith(FULL) for obs in observations), observations
        # what was refused left nothing behind: the tables answer, the gold still scores
        assert not env.step("SELECT count(*) FROM singer")[0].startswith("Error")
        still_scores(env)
    finally:
        env.close()


@pytest.mark.parametrize("bomb", ["doubling", "wide_blobs"])
def test_without_the_cap_the_bomb_grows_past_it(backend, bomb) -> None:
    """The control: the same statements with the cap lifted take the database past
    ``CAP`` plus the slack, so the test above measures the cap, not the bomb's size."""
    kind, url = backend
    env = make(kind, url, max_db_bytes=400_000_000)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        observations = play_bomb(env, BOMBS[kind][bomb])
        assert not any(obs.startswith(FULL) for obs in observations), observations
        slack = 0 if kind == "sqlite" else MYSQL_SLACK
        assert size_of(env, kind, url) > CAP + slack
    finally:
        env.close()


def test_a_refused_data_change_leaves_the_rows_as_they_were(backend) -> None:
    kind, url = backend
    env = make(kind, url, max_db_bytes=CAP)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        blob = "randomblob(1000000)" if kind == "sqlite" else "REPEAT('x', 1000000)"
        env.step("CREATE TABLE b (x LONGBLOB)" if kind == "mysql" else "CREATE TABLE b (x BLOB)")
        env.step(f"INSERT INTO b VALUES ({blob})")
        counts = []
        for _ in range(6):
            obs = env.step(f"INSERT INTO b SELECT {blob} FROM b")[0]
            counts.append(env.step("SELECT count(*) FROM b")[0])
            if obs.startswith(FULL):
                break
        assert obs.startswith(FULL), counts
        # the refused statement added no row: the count is the one before it
        assert len(counts) >= 2 and counts[-1] == counts[-2], counts
        # rows deleted make room again (SQLite reuses its pages, InnoDB its file's)
        obs, *_, info = env.step("DELETE FROM b")
        assert info["executed"], obs
        obs, *_, info = env.step(f"INSERT INTO b VALUES ({blob})")
        assert info["executed"], obs
    finally:
        env.close()


@pytest.mark.parametrize(
    "sql",
    [
        "PRAGMA max_page_count = 2147483646",
        "PRAGMA main.max_page_count = 2147483646",
        "SELECT * FROM pragma_max_page_count(2147483646)",
        "pragma MAX_PAGE_COUNT=2147483646",
        "```sql\n/* raise it */ PRAGMA max_page_count = 2147483646\n```",
    ],
)
def test_sqlite_the_cap_cannot_be_raised(sql) -> None:
    env = make("sqlite", None, max_db_bytes=CAP)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        obs = env.step(sql)[0]
        assert obs.startswith("Error executing query:"), obs
        play_bomb(env, BOMBS["sqlite"]["recursive_cte"])
        assert size_of(env, "sqlite", None) <= CAP
    finally:
        env.close()


def test_a_task_database_over_the_cap_cannot_be_opened(backend) -> None:
    from agentenvs.core.errors import TaskError

    kind, url = backend
    env = make(kind, url, max_db_bytes=1000)
    try:
        with pytest.raises(TaskError, match="max_db_bytes"):
            env.reset(seed=0, options={"task_id": ORDERED})
    finally:
        env.close()


def test_max_db_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_db_bytes"):
        make("sqlite", None, max_db_bytes=0)


# ------------------------------------------------------------ the state key stays cheap
def test_sqlite_state_key_of_a_large_database_reads_no_table() -> None:
    """Past ``DIGEST_LIMIT_BYTES`` a step's state key follows the writes: the statements
    the connection runs for it (SQLite's trace) read no table; below it, equal contents
    still give equal keys."""
    env = make("sqlite", None)
    other = make("sqlite", None)
    try:
        for e in (env, other):
            e.reset(seed=0, options={"task_id": ORDERED})
            e.step("CREATE TABLE b (x BLOB)")
            e.step(
                "INSERT INTO b WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c "
                "LIMIT 6000) SELECT zeroblob(1000) FROM c"
            )
        assert env.unwrapped.state_key() == other.unwrapped.state_key()
        traced: list[str] = []
        env.unwrapped.episode.conn.set_trace_callback(traced.append)
        info = env.step("INSERT INTO b VALUES (zeroblob(10))")[4]
        reads = [sql for sql in traced if sql.lstrip().upper().startswith("SELECT")]
        assert reads == [], reads
        # the same write from the same key gives the same key; another write another one
        same = other.step("INSERT INTO b VALUES (zeroblob(10))")[4]
        assert same["state_key"] == info["state_key"]
        differs = other.step("INSERT INTO b VALUES (zeroblob(11))")[4]
        assert differs["state_key"] != info["state_key"]
        # back under the limit, the contents decide again
        env.step("DROP TABLE b")
        other.step("DROP TABLE b")
        env.step("SELECT 1")
        other.step("SELECT 1")
        assert env.unwrapped.state_key() == other.unwrapped.state_key()
    finally:
        env.close()
        other.close()


def test_a_repeated_write_is_seen_every_time(backend) -> None:
    """The same text run twice is a write both times: it changes the state key, and
    ``score_action`` of it never writes (SQLite's authorizer runs at every prepare: a
    cached statement ran unseen, so a probe wrote and the key stayed)."""
    kind, url = backend
    env = make(kind, url)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        env.step("CREATE TABLE w (i INT)")
        keys = [env.step("INSERT INTO w VALUES (1)")[4]["state_key"] for _ in range(3)]
        assert len(set(keys)) == 3, keys
        key = env.unwrapped.state_key()
        env.unwrapped.score_action("INSERT INTO w VALUES (1)")
        assert env.unwrapped.state_key() == key
        assert "(3,)" in env.step("SELECT count(*) FROM w")[0]
    finally:
        env.close()


@pytest.mark.mysql
@pytest.mark.parametrize("bomb", ["doubling", "wide_blobs"])
def test_a_session_the_size_watcher_ends_is_the_agents_outcome(
    mysql_url: str, bomb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no grace after its ``KILL QUERY``, the size watcher also ends the statement's
    session at once, whichever way the statement then reports (interrupted, or a lost
    connection): the episode goes on in a new session, the write rolled back, no Fault."""
    from agentenvs.envs.intercode_sql.backends import mysql as mysql_backend

    monkeypatch.setattr(mysql_backend, "SIZE_KILL_GRACE_S", 0.0)
    env = make("mysql", mysql_url, max_db_bytes=CAP)
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        observations = play_bomb(env, BOMBS["mysql"][bomb])
        assert any(obs.startswith(FULL) for obs in observations), observations
        assert size_of(env, "mysql", mysql_url) <= CAP + MYSQL_SLACK
        assert not env.step("SELECT count(*) FROM singer")[0].startswith("Error")
        still_scores(env)
    finally:
        env.close()
