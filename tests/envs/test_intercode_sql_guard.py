"""Smuggling a forbidden statement past InterCode-SQL's MySQL guard (``statements.classify``).

The payload is a named lock (``GET_LOCK``: the server's, shared by every session, and
visible from outside), hidden in every way the tokenizer and the server might read
differently: comments (``--`` without a space, ``#``, nested ``/* */``), executable comments,
backslash escapes in strings, several statements, ``DELIMITER``, look-alike unicode,
string concatenation run as SQL, unterminated quotes and comments, NUL. Each must be
refused by the guard (text it cannot read is refused, never judged by its first word), and
through ``gym.make`` + ``step`` on MariaDB (marked ``mysql``) none may take the lock.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.envs.intercode_sql.statements import classify, server_reading

FIXTURES = Path(__file__).parent / "intercode_sql_fixtures"
ORDERED = "concert-002"
ORDERED_GOLD = "SELECT name, country, age FROM singer ORDER BY age DESC"
LOCK = "GET_LOCK('ae_smuggle', 0)"

SMUGGLED = {
    # comments the server and a tokenizer could end in different places
    "dash_dash_without_space": f"SELECT 1 --{LOCK}",
    "dash_dash_at_the_end": f"SELECT {LOCK} --",
    "nested_comment": f"SELECT 1 /* /* */, {LOCK} # */",
    "hash_comment_then_code": f"SELECT 1 #\n, {LOCK}",
    "dash_dash_no_break_space": f"SELECT 1 --\u00a0, {LOCK}",
    "unterminated_comment": f"SELECT {LOCK} /* x",
    # executable comments: the server runs their content
    "executable_comment": f"SELECT 1 /*!, {LOCK} */",
    "versioned_executable_comment": f"/*!50000 SELECT {LOCK} */",
    "mariadb_executable_comment": f"/*M!100000 SELECT {LOCK} */",
    "executable_comment_in_a_name": f"SELECT 1 /*!,*/ {LOCK}",
    # strings whose end a reader could misplace
    "hex_literal_backslash": f"SELECT X'\\' , {LOCK} -- '",
    "backtick_backslash": f"SELECT `a\\` , {LOCK} -- `",
    "unterminated_string": f"SELECT {LOCK}, 'abc",
    "unterminated_name": f"SELECT {LOCK}, `abc",
    # several statements
    "second_statement": f"SELECT 1; SELECT {LOCK}",
    "second_statement_after_comment": f"SELECT 1 /* ; */; SELECT {LOCK}",
    "second_statement_after_newline": f"SELECT 1;\n{LOCK}",
    "delimiter": f"DELIMITER //\nSELECT {LOCK}//",
    "delimiter_alone": "DELIMITER ;;",
    # look-alikes and invisible characters
    "fullwidth_select": f"ＳＥＬＥＣＴ {LOCK}",
    "no_break_space": f"SELECT\u00a0{LOCK}",
    "zero_width_space": f"SELECT 1,\u200b{LOCK}",
    "cyrillic_e": f"SЕLECT {LOCK}",
    "nul": f"SELECT 1\x00, {LOCK}",
    "vertical_tab_control": f"SELECT 1,\x01{LOCK}",
    # text assembled into SQL and run
    "execute_immediate_concat": "EXECUTE IMMEDIATE CONCAT('SELECT GET_', 'LOCK(''ae_smuggle'', 0)')",
    "prepare_concat": "PREPARE s FROM CONCAT('SELECT GET_', 'LOCK(''ae_smuggle'', 0)')",
    "execute_prepared": "EXECUTE s",
    "set_variable_then_prepare": "SET @q = CONCAT('SELECT GET_', 'LOCK(1, 0)')",
    # plain, for the record
    "plain": f"SELECT {LOCK}",
    "in_a_subquery": f"SELECT name FROM singer WHERE ({LOCK}) = 1",
}

#: the payload where the server too reads it as a string or a comment: the guard may let
#: these through (it reads them as the server does), and no lock may be taken
HIDDEN = {
    "comment_ended_by_cr": f"SELECT 1 -- x\r, {LOCK}",
    "backslash_quote": f"SELECT 'a\\' , {LOCK} -- '",
    "backslash_double_quote": f'SELECT "a\\" , {LOCK} -- "',
    "national_backslash": f"SELECT N'a\\' , {LOCK} -- '",
    "binary_introducer_backslash": f"SELECT _binary'a\\' , {LOCK} -- '",
    "doubled_quote": f"SELECT 'a'' , {LOCK} -- '",
}

#: statements the guard must still let through (comments, quotes and unicode used plainly)
ORDINARY = [
    ORDERED_GOLD,
    "SELECT name FROM singer -- the names\n",
    "SELECT name FROM singer # the names",
    "SELECT /* the names */ name FROM singer",
    "SELECT name FROM singer WHERE country = 'Zürich' OR name = \"O'Brien\"",
    "SELECT name FROM singer WHERE name LIKE '%\\_%' OR name = 'it''s'",
    "SELECT `name` AS `naïve` FROM singer",
    "SELECT count(*) FROM singer\n\tWHERE age > 40;",
    "SELECT N'x', X'41', _utf8mb4'y'",
    "SELECT 1 - -1",
]


@pytest.mark.parametrize("sql", list(SMUGGLED.values()), ids=list(SMUGGLED))
def test_the_guard_refuses_every_smuggled_statement(sql) -> None:
    statement = classify(sql, "mysql")
    assert statement.problem is not None, statement


@pytest.mark.parametrize("sql", ORDINARY)
def test_the_guard_lets_ordinary_statements_through(sql) -> None:
    assert classify(sql, "mysql").problem is None


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("SELECT 'abc", "unterminated"),
        ('SELECT "abc', "unterminated"),
        ("SELECT `abc", "unterminated"),
        ("SELECT 1 /* abc", "unterminated"),
        ("SELECT 1 --", "code"),
        ("ＳＥＬＥＣＴ 1", "ASCII"),
        ("SELECT 1\x00", "NUL"),
    ],
)
def test_unreadable_text_is_refused_with_a_reason(sql, why) -> None:
    statement = classify(sql, "mysql")
    problem = statement.problem
    assert problem is not None and problem.startswith("the statement could not be read")
    assert statement.writes  # never taken for a read
    assert why in problem or "tokenizer" in problem, problem


def test_the_servers_reading_marks_strings_comments_and_code() -> None:
    sql = "SELECT 'a\\'b', `c` -- x\n/* y */ #z"
    reading, why = server_reading(sql)
    assert why is None and len(reading) == len(sql)
    def span(part: str) -> str:
        start = sql.index(part)
        return reading[start : start + len(part)]

    assert span("'a\\'b'") == "s" * 6  # with its escaped quote
    assert span("`c`") == "sss"
    assert set(span("-- x") + span("/* y */") + span("#z")) == {"#"}
    assert span("SELECT") == "cccccc"
    assert server_reading("SELECT 1 --x")[0].endswith("cc")  # --x is two minus signs


# ------------------------------------------------------------ through the env, on MariaDB
def _lock_holder(url: str) -> object:
    import pymysql

    from agentenvs.envs.intercode_sql.backends.mysql_server import parse_mysql_url

    conn = pymysql.connect(**parse_mysql_url(url), autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT IS_USED_LOCK('ae_smuggle')")
            return cur.fetchone()[0]
    finally:
        conn.close()


def test_no_smuggled_statement_takes_the_lock_on_mariadb(mysql_url) -> None:
    env = gym.make(
        "agentenvs/InterCodeSQL-v0",
        tasks_path=FIXTURES,
        backend="mysql",
        mysql_url=mysql_url,
        max_turns=len(SMUGGLED) + len(HIDDEN) + 5,
    )
    try:
        env.reset(seed=0, options={"task_id": ORDERED})
        for name, sql in SMUGGLED.items():
            obs, reward, terminated, truncated, info = env.step(sql)
            assert not terminated and not truncated, name
            assert obs.startswith(("Error executing query:", "Invalid action:")), (name, obs)
            assert _lock_holder(mysql_url) is None, name
        for name, sql in HIDDEN.items():
            obs, *_ = env.step(sql)
            assert _lock_holder(mysql_url) is None, (name, obs)
        for sql in ORDINARY[:3]:
            assert env.step(sql)[4]["executed"], sql
        env.step(ORDERED_GOLD)
        assert env.step("submit")[1] == 1.0
    finally:
        env.close()
