"""InterCode-SQL on the embedded SQLite backend: episodes, reward, safety, snapshots, policies."""

from __future__ import annotations

import functools
import pickle
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.snapshot import Snapshot
from agentenvs.envs.intercode_sql.backends.base import QueryResult
from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv, format_result, parse_action
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import make_policy
from agentenvs.testing import check_env_contract

FIXTURES = Path(__file__).parent / "intercode_sql_fixtures"
ORDERED = "concert-002"  # name, country, age ORDER BY age DESC
ORDERED_GOLD = "SELECT name, country, age FROM singer ORDER BY age DESC"


def make_env(**kwargs) -> InterCodeSQLEnv:
    return InterCodeSQLEnv(tasks_path=FIXTURES, **kwargs)


@pytest.fixture
def env():
    e = make_env(max_turns=20)
    yield e
    e.close()


def play(env: InterCodeSQLEnv, task_id: str, *actions: str):
    env.reset(seed=0, options={"task_id": task_id})
    out = None
    for action in actions:
        out = env.step(action)
    return out


# ------------------------------------------------------------------------ parsing
@pytest.mark.parametrize(
    ("action", "kind", "payload"),
    [
        ("submit", "submit", ""),
        ("  Submit; ", "submit", ""),
        ("```submit```", "submit", ""),
        ("```sql\nsubmit\n```", "submit", ""),
        ("SELECT 1;", "sql", "SELECT 1"),
        ("select 1;;  ", "sql", "select 1"),
        ("Let me look.\n```sql\nSELECT 2;\n```\nand ```sql\nSELECT 3\n```", "sql", "SELECT 2"),
        ("```\nSELECT 4\n```", "sql", "SELECT 4"),
        ("```python\nprint(1)\n```", "invalid", None),
        ("```sql\n;\n```", "invalid", None),
        ("I think the answer is 42", "invalid", None),
        ("", "invalid", None),
        ("WITH t AS (SELECT 1) SELECT * FROM t", "sql", "WITH t AS (SELECT 1) SELECT * FROM t"),
    ],
)
def test_parse_action(action, kind, payload) -> None:
    got_kind, got_payload = parse_action(action)
    assert got_kind == kind
    if payload is not None:
        assert got_payload == payload
    else:
        assert got_payload  # says what was wrong


def test_format_result_truncates_rows_and_characters() -> None:
    rows = tuple((i, "x" * 30) for i in range(200))
    text = format_result(QueryResult(rows=rows, columns=("i", "s")), max_rows=50, max_chars=100_000)
    assert "[200 rows in total; showing the first 50]" in text
    assert text.count("\n") == 51
    text = format_result(QueryResult(rows=rows, columns=("i", "s")), max_rows=50, max_chars=300)
    assert "[output truncated to 300 characters; 200 rows in total]" in text
    assert (
        format_result(QueryResult(error="boom"), max_rows=5, max_chars=50)
        == "Error executing query: boom"
    )
    assert "no result set; 3 row(s) affected" in format_result(
        QueryResult(rowcount=3), max_rows=5, max_chars=99
    )


# ------------------------------------------------------------------------ episodes and reward
def test_first_observation_and_schema_flag() -> None:
    plain = make_env()
    obs, info = plain.reset(seed=0, options={"task_id": ORDERED})
    assert "Question: Show the name, country and age" in obs
    assert "singer: singer_id" not in obs
    assert info["system_prompt"] in obs and info["db"] == "concert" and info["backend"] == "sqlite"
    handicap = make_env(show_schema=True)
    obs, _ = handicap.reset(seed=0, options={"task_id": ORDERED})
    assert (
        "SQLite tables, with their columns:\n- stadium:" in obs
        and "- singer: singer_id, name" in obs
    )


CONCERT_SCHEMA = {
    "stadium": ["stadium_id", "name", "location", "capacity", "average"],
    "singer": ["singer_id", "name", "country", "age", "is_male"],
    "concert": ["concert_id", "concert_name", "theme", "stadium_id", "year"],
    "singer_in_concert": ["concert_id", "singer_id"],
}


def test_info_schema_on_reset_and_every_step(env, monkeypatch) -> None:
    reads = []
    read = env.backend.schema
    monkeypatch.setattr(env.backend, "schema", lambda source: reads.append(source) or read(source))
    obs, info = env.reset(seed=0, options={"task_id": ORDERED})
    assert info["schema"] == CONCERT_SCHEMA
    assert list(info["schema"]) == list(CONCERT_SCHEMA)  # creation order, every time
    assert "singer: singer_id" not in obs  # the default prompt has the agent explore
    info["schema"]["singer"].append("mangled")  # the caller's copy, not the env's
    for action in ("SELECT 1", "not sql", "DROP TABLE singer"):
        assert env.step(action)[4]["schema"] == CONCERT_SCHEMA  # the database as it began
    assert env.reset(seed=1, options={"task_id": "concert-001"})[1]["schema"] == CONCERT_SCHEMA
    pets = env.reset(options={"task_id": "pets-001"})[1]["schema"]
    assert pets == {
        "student": ["stuid", "lname", "fname", "age", "sex", "city_code"],
        "pets": ["petid", "pettype", "pet_age", "weight"],
        "has_pet": ["stuid", "petid"],
    }
    env.reset(options={"task_id": ORDERED})
    assert len(reads) == 2  # once per database, not per reset or step


def test_show_schema_appends_the_info_schema_to_the_first_observation() -> None:
    handicap = make_env(show_schema=True)
    obs, info = handicap.reset(seed=0, options={"task_id": ORDERED})
    lines = [f"- {table}: {', '.join(cols)}" for table, cols in CONCERT_SCHEMA.items()]
    assert obs.endswith("SQLite tables, with their columns:\n" + "\n".join(lines))
    assert obs.startswith(info["system_prompt"]) and info["schema"] == CONCERT_SCHEMA
    assert "SQLite tables" not in handicap.step("SELECT 1")[0]  # the first observation only
    handicap.close()


def test_gold_then_submit_scores_one(env) -> None:
    obs, reward, terminated, truncated, info = play(env, ORDERED, f"```sql\n{ORDERED_GOLD};\n```")
    assert "('Joe Sharp', 'Netherlands', 52)" in obs and "(6 rows)" in obs
    assert reward == 0 and not terminated and info["executed"]
    obs, reward, terminated, truncated, info = env.step("submit")
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["success"] is True and info["score"] == 1.0
    with pytest.raises(gym.error.ResetNeeded):
        env.step("submit")


def test_reversed_order_is_negative_and_score_is_clipped(env) -> None:
    _, reward, terminated, _, info = play(
        env, ORDERED, "SELECT name, country, age FROM singer ORDER BY age ASC", "submit"
    )
    # tau pairs the i-th agent row with the i-th gold row and ranks each side's rows as
    # strings, so reversing 6 rows gives -0.47 here, not -1 (InterCode's own arithmetic)
    assert reward == -0.47 and terminated
    assert info["score"] == 0.0 and info["success"] is False


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        (["submit"], 0.0),  # nothing run yet
        (["SELECT nosuchcol FROM singer", "submit"], 0.0),  # an error is the last result
        ([ORDERED_GOLD, "SELECT nosuchcol FROM singer", "submit"], 0.0),
        ([ORDERED_GOLD, "hello there", "submit"], 1.0),  # an invalid action changes nothing
        ([ORDERED_GOLD + " LIMIT 3", "submit"], 0.5),
        (["UPDATE singer SET age = age", "submit"], 0.0),  # no result set
    ],
)
def test_submit_scores_the_last_result(env, actions, expected) -> None:
    _, reward, terminated, _, _ = play(env, ORDERED, *actions)
    assert terminated and reward == expected


def test_float_and_decimal_results_match_gold(env) -> None:
    for task_id, query in [
        ("concert-003", "SELECT avg(age), min(age), max(age) FROM singer WHERE country = 'France'"),
        ("concert-006", "SELECT sum(average) / count(*) FROM stadium"),
        ("concert-001", "SELECT count(singer_id) FROM singer"),
    ]:
        _, reward, *_ = play(env, task_id, query, "submit")
        assert reward == 1.0, task_id


def test_budget_truncates() -> None:
    env = make_env(max_turns=2)
    env.reset(seed=0, options={"task_id": ORDERED})
    assert env.step("SELECT 1")[3] is False
    _, reward, terminated, truncated, info = env.step(ORDERED_GOLD)
    assert (reward, terminated, truncated, info["turns_left"]) == (0.0, False, True, 0)


def test_try_again_scores_every_statement_and_stops_at_one() -> None:
    env = make_env(try_again=True)
    env.reset(seed=0, options={"task_id": ORDERED})
    obs, reward, terminated, _, info = env.step(ORDERED_GOLD + " LIMIT 3")
    assert reward == 0.5 and not terminated and obs.endswith("Reward: 0.5")
    assert info["best_reward"] == 0.5 and info["score"] == 0.5 and not info["success"]
    _, reward, terminated, _, info = env.step("SELECT nosuchcol FROM singer")
    assert reward == 0.0 and info["best_reward"] == 0.5 and info["score"] == 0.5
    _, reward, terminated, _, info = env.step(ORDERED_GOLD)
    assert reward == 1.0 and terminated and info["success"] and info["score"] == 1.0
    env.reset(seed=0, options={"task_id": ORDERED})
    env.step(ORDERED_GOLD + " LIMIT 3")
    obs, reward, terminated, _, info = env.step("submit")
    assert terminated and reward == 0.0 and info["score"] == 0.5 and "Best reward: 0.5" in obs


def test_hardness_filter() -> None:
    env = make_env(hardness=["hard"])
    assert set(env.task_ids) == {"concert-005", "pets-001"}
    with pytest.raises(ValueError):
        make_env(hardness="impossible")


def test_registered_id() -> None:
    env = gym.make("agentenvs/InterCodeSQL-v0", tasks_path=FIXTURES)
    _, info = env.reset(seed=3)
    assert info["task_id"] in env.unwrapped.task_ids
    env.close()


def test_mysql_style_inspection_works_on_sqlite(env) -> None:
    obs, *_ = play(env, ORDERED, "SHOW TABLES")
    assert "('singer',)" in obs and "(4 rows)" in obs
    obs, *_ = env.step("DESCRIBE singer")
    assert "('singer_id', 'INTEGER'" in obs
    obs, *_ = env.step("PRAGMA table_info(singer)")
    assert "'age'" in obs


# ------------------------------------------------------------------------ isolation and safety
def test_writes_stay_in_their_episode() -> None:
    a, b = make_env(), make_env()
    play(a, ORDERED, "DELETE FROM singer")
    b.reset(seed=0, options={"task_id": ORDERED})
    assert "(6 rows)" in b.step("SELECT * FROM singer")[0]
    assert "(0 rows)" in a.step("SELECT * FROM singer")[0]
    # the next episode on the same env starts from the template again
    _, reward, *_ = play(a, ORDERED, ORDERED_GOLD, "submit")
    assert reward == 1.0


HOSTILE = [
    ("DROP DATABASE concert", "syntax error"),
    ("USE other", "syntax error"),
    ("SELECT * FROM mysql.user", "no such table"),
    ("SELECT SLEEP(1e9)", "no such function"),
    ("ATTACH DATABASE '/tmp/agentenvs-attack.db' AS x", "ATTACH is not allowed"),
    ("DETACH DATABASE main", "not authorized"),
    ("PRAGMA writable_schema = 1", "PRAGMA writable_schema is not allowed"),
    ("BEGIN", "transaction control"),
    ("CREATE TEMP TABLE t (x)", "temporary tables"),
    ("SELECT 1; DROP TABLE singer", "only one SQL statement per action"),
    (
        "SELECT count(*) FROM singer a, singer b, singer c, singer d, singer e, singer f, "
        "singer g, singer h, singer i, singer j, singer k",
        "time limit",
    ),
    (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c",
        "time limit",
    ),
    (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c",
        "more than 100000 rows",
    ),
    ("SELECT randomblob(2000000000)", "too big"),
    ("SELECT load_extension('/lib/x.so')", "not authorized"),
]


@pytest.mark.parametrize(("sql", "message"), HOSTILE, ids=[h[0][:30] for h in HOSTILE])
def test_hostile_statements_give_error_observations(sql, message) -> None:
    # the row-limit case gets a time limit it cannot reach on a loaded machine, so the
    # outcome does not depend on speed; the wall-clock bound only rules out a hang
    timeout_s = 60.0 if "rows" in message else 0.3
    env = make_env(statement_timeout_s=timeout_s)
    env.reset(seed=0, options={"task_id": ORDERED})
    start = time.monotonic()
    obs, reward, terminated, _, info = env.step(sql)
    assert time.monotonic() - start < timeout_s + 60
    assert obs.startswith("Error executing query:") and message in obs, obs
    assert info["action_valid"] and not info["executed"] and not terminated
    # the episode's database is intact
    env.step(ORDERED_GOLD)
    assert env.step("submit")[1] == 1.0


def test_one_megabyte_of_sql_is_refused() -> None:
    env = make_env()
    env.reset(seed=0, options={"task_id": ORDERED})
    obs, _, _, _, info = env.step("SELECT " + "1 + " * 260_000 + "1")
    assert not info["action_valid"] and "over the limit" in obs
    # even when the env allows long actions, SQLite's own SQL length cap answers
    env = make_env(max_action_chars=2_000_000)
    env.reset(seed=0, options={"task_id": ORDERED})
    obs, _, _, _, info = env.step("SELECT " + "1 + " * 260_000 + "1")
    assert obs.startswith("Error executing query:")


def test_huge_results_are_refused_not_fetched() -> None:
    env = make_env(max_result_rows=1000)
    env.reset(seed=0, options={"task_id": ORDERED})
    obs, *_ = env.step(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 5000) SELECT x FROM c"
    )
    assert "more than 1000 rows" in obs
    obs, *_ = env.step(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 120) SELECT x FROM c"
    )
    assert "[120 rows in total; showing the first 50]" in obs


# ------------------------------------------------------------------------ state
def test_state_key_tracks_database_and_last_result(env) -> None:
    _, info0 = env.reset(seed=0, options={"task_id": ORDERED})
    info_err = env.step("SELECT nosuchcol FROM singer")[4]
    assert info_err["state_key"] == info0["state_key"]  # nothing graded changed
    info_a = env.step(ORDERED_GOLD)[4]
    info_b = env.step("SELECT name, country, age FROM singer ORDER BY age DESC, name")[4]
    assert info_a["state_key"] == info_b["state_key"]  # same result, same database
    info_del = env.step("DELETE FROM singer WHERE age > 50")[4]
    assert info_del["state_key"] != info_b["state_key"]
    info_ins = env.step("INSERT INTO singer VALUES (1, 'Joe Sharp', 'Netherlands', 52, 0)")[4]
    # back to the original contents, last result "no result set": like the start
    assert info_ins["state_key"] == info0["state_key"]


def test_snapshot_includes_database_and_restores_into_fresh_env(env) -> None:
    play(env, ORDERED, "DELETE FROM singer WHERE country = 'France'", "SELECT name FROM singer")
    snap = env.snapshot()
    key = env.state_key()
    data = pickle.dumps(snap)
    assert env.step("DROP TABLE singer")[4]["executed"]
    after_here = env.step("SELECT count(*) FROM singer")[0]
    assert "no such table" in after_here
    fresh = make_env(max_turns=20)
    fresh.restore(pickle.loads(data))
    assert fresh.state_key() == key
    fresh.restore(Snapshot.from_bytes(snap.to_bytes()))
    obs = fresh.step("SELECT count(*) FROM singer")[0]
    assert "(2,)" in obs
    env.restore(snap)
    assert env.step("SELECT count(*) FROM singer")[0] == obs
    # restoring a snapshot of another task's database reopens that database
    fresh.reset(seed=0, options={"task_id": "pets-001"})
    fresh.restore(snap)
    assert fresh.task_id == ORDERED and "(2,)" in fresh.step("SELECT count(*) FROM singer")[0]


def test_score_action_does_not_advance_or_write(env) -> None:
    env.reset(seed=0, options={"task_id": ORDERED})
    key = env.state_key()
    assert env.score_action(ORDERED_GOLD) == 1.0
    assert env.score_action("SELECT name, country, age FROM singer ORDER BY age") == -0.47
    assert env.score_action("DELETE FROM singer") == 0.0
    assert env.score_action("submit") == 0.0 and env.score_action("nonsense") == 0.0
    assert env.turn == 0 and env.state_key() == key
    assert "(6 rows)" in env.step("SELECT * FROM singer")[0]
    env.step(ORDERED_GOLD)
    assert env.score_action("submit") == 1.0 and env.score_action("nonsense") == 1.0


def test_error_action_is_seeded_wrong_and_harmless(env) -> None:
    for task_id in env.task_ids:
        env.reset(seed=0, options={"task_id": task_id})
        key = env.state_key()
        seen = set()
        for seed in range(6):
            first = env.error_action(np.random.default_rng(seed))
            assert first == env.error_action(np.random.default_rng(seed))
            assert env.score_action(first) < 1.0, (task_id, first)
            seen.add(first)
        assert len(seen) >= 2 and env.state_key() == key and env.turn == 0


# ------------------------------------------------------------------------ policies
def run_policy(spec: str, env: InterCodeSQLEnv, task_id: str, seed: int = 0) -> tuple[bool, int]:
    policy = make_policy(spec)
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    conv = Conversation.start(obs, info, env=env)
    rng = np.random.default_rng(seed)
    while True:
        action = policy.act(conv, rng)
        obs, reward, terminated, truncated, info = env.step(action)
        conv.add_turn(action, obs)
        if terminated or truncated:
            return bool(info["success"]), info["turn"]


def test_gold_policy_solves_every_task_in_two_turns(env) -> None:
    for task_id in env.task_ids:
        assert run_policy("intercode_sql/gold", env, task_id) == (True, 2), task_id


def test_noisy_policy_errs_at_any_turn_and_recovers(env) -> None:
    # erring at every turn it never gets to submit; erring at half of them it recovers
    for task_id in env.task_ids[:10]:
        assert run_policy("intercode_sql/noisy:error_rate=1.0", env, task_id)[0] is False
    outcomes = [
        run_policy("intercode_sql/noisy:error_rate=0.5", env, t, seed)
        for t in env.task_ids[:10]
        for seed in range(3)
    ]
    assert any(success and turns > 2 for success, turns in outcomes)  # recovered
    assert any(success and turns > 3 for success, turns in outcomes)  # a later error too
    assert run_policy("intercode_sql/noisy:error_rate=0", env, ORDERED) == (True, 2)
    with pytest.raises(ValueError):
        make_policy("intercode_sql/noisy:error_rate=2")


def test_gold_policy_in_try_again_mode() -> None:
    env = make_env(try_again=True)
    assert run_policy("intercode_sql/gold", env, ORDERED) == (True, 1)


# ------------------------------------------------------------------------ contract
# the contract compares envs stepped alike: a time limit that one statement reaches on a
# loaded machine and its twin does not would tell them apart, so it is one none reaches
ROOMY_S = 30.0


def test_env_contract() -> None:
    report = check_env_contract(
        functools.partial(InterCodeSQLEnv, tasks_path=str(FIXTURES), statement_timeout_s=ROOMY_S),
        steps=20,
    )
    assert report.passed, report.summary()


def test_env_contract_with_show_schema() -> None:
    report = check_env_contract(
        functools.partial(
            InterCodeSQLEnv, tasks_path=str(FIXTURES), statement_timeout_s=ROOMY_S, show_schema=True
        ),
        steps=10,
    )
    assert report.passed, report.summary()


# ---------------------------------------------------------------------- ways around the rules
def test_a_write_that_returns_rows_still_counts_as_a_write() -> None:
    env = make_env()
    env.reset(seed=0, options={"task_id": ORDERED})
    obs, *_ = env.step("DELETE FROM singer RETURNING singer_id")
    assert "(6 rows)" in obs  # it returned rows ...
    env.step("SELECT name, country, age FROM singer")  # [] on the emptied copy
    # ... and the gold still ran on the pristine database: the empty answer is wrong
    assert env.step("submit")[1] == 0.0


def test_bytes_are_not_an_action() -> None:
    env = make_env()
    env.reset(seed=0, options={"task_id": ORDERED})
    obs, reward, terminated, _, info = env.step(b"SELECT 1")
    assert not info["action_valid"] and "expected text" in obs and not terminated
    assert env.score_action(b"SELECT 1") == 0.0  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sql", "kind", "writes", "problem"),
    [
        ("SELECT 1", "SELECT", False, None),
        ("(SELECT 1) UNION (SELECT 2)", "SELECT", False, None),
        ("/**/ SET SESSION max_statement_time=0", "SET", True, "not allowed"),
        ("/**/SET STATEMENT max_statement_time=0 FOR SELECT SLEEP(7)", "SET", True, "not allowed"),
        ("-- c\nSTART TRANSACTION", "START", True, "transaction control"),
        ("# c\nSET PASSWORD = PASSWORD('x')", "SET", True, "not allowed"),
        ("/*!50000 SET SESSION max_statement_time=0 */ SELECT 1", "SELECT", False, "executable"),
        ("SELECT 1 /*M! , SLEEP(9) */", "SELECT", False, "executable"),
        ("DELETE FROM student RETURNING student_id", "DELETE", True, None),
        ("WITH x AS (SELECT 1) DELETE FROM t", "WITH", True, None),
        ("SELECT REPLACE(name, 'a', 'b') FROM t", "SELECT", False, None),
        ("SELECT 'DELETE FROM t; DROP TABLE t'", "SELECT", False, None),
        ("SELECT 1; DROP TABLE singer", "", True, "only one SQL statement"),
        ("CREATE USER x", "CREATE", True, "not allowed"),
        ("CREATE OR REPLACE VIEW v AS SELECT 1", "CREATE", True, None),
        ("CREATE TEMPORARY TABLE t (x INT)", "CREATE", True, "temporary"),
        ("DROP SCHEMA concert", "DROP", True, "databases"),
        ("HANDLER singer OPEN", "HANDLER", True, "not allowed"),
        ("KILL 1", "KILL", True, "not allowed"),
        ("SELECT * FROM t INTO OUTFILE '/tmp/x'", "SELECT", False, "writing files"),
    ],
)
def test_statement_kind_comes_from_tokens_not_from_how_text_starts(
    sql, kind, writes, problem
) -> None:
    from agentenvs.envs.intercode_sql.statements import classify

    got = classify(sql, "mysql")
    assert (got.kind, got.writes) == (kind, writes), got
    assert (got.problem is None) if problem is None else (problem in (got.problem or "")), got


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT t1.name FROM highschooler AS T1 JOIN FRIEND f ON T1.id = F.student_id",
            "SELECT T1.name FROM Highschooler AS T1 JOIN Friend f ON T1.id = f.student_id",
        ),
        # strings, comments and functions keep their letters; quoted names are fixed inside
        (
            "SELECT 'highschooler', `HIGHSCHOOLER`.name FROM `highschooler` -- highschooler",
            "SELECT 'highschooler', `Highschooler`.name FROM `Highschooler` -- highschooler",
        ),
        ("SELECT likes(1) FROM likes", "SELECT likes(1) FROM Likes"),
        ("SELECT 1", "SELECT 1"),
        ("SELECT 'unterminated", "SELECT 'unterminated"),
    ],
)
def test_table_names_are_spelt_as_stored(sql, expected) -> None:
    from agentenvs.envs.intercode_sql.statements import match_table_case

    tables = {"highschooler": "Highschooler", "friend": "Friend", "likes": "Likes"}
    assert match_table_case(sql, tables) == expected
