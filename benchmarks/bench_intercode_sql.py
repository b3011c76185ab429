"""InterCode-SQL speed: episode reset cost and steps per second, SQLite and MySQL.

Prints, from one run:
- SQLite reset: per-episode in-memory copy of the template vs rebuilding from the script;
- MySQL reset (when a server answers at $AGENTENVS_MYSQL_URL or the default socket):
  cloning the template database vs re-running the script into a new database;
- steps per second of the gold policy on each backend;
- the MySQL statement guard (statement kind from sqlglot tokens, table names spelt as
  stored) per statement, beside one statement's round trip to the server;
- InterCode's MySQL dump (extra ``intercode``) as SQLite databases: rows read from the
  INSERT tokens vs from sqlglot's full parse of each INSERT;
- ``error_action`` with the gold query parsed once per process vs once per mistake kind
  tried;
- the size cap (``max_db_bytes``): a step that writes with the cap vs without it (SQLite:
  the cap vs one SQLite never reaches; MySQL: the env's write path vs the statement run
  bare, as before the cap), and a write step's state key on an 8 MB database, keyed by its
  writes vs read whole for its content digest.

Usage: python benchmarks/bench_intercode_sql.py [--tasks PATH] [--episodes N]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import time
from pathlib import Path

from agentenvs.envs.intercode_sql.backends.base import Limits
from agentenvs.envs.intercode_sql.backends.sqlite import SqliteBackend, template_bytes
from agentenvs.envs.intercode_sql.data import load_tasks
from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import make_policy

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "envs" / "intercode_sql_fixtures"
DEFAULT_URL = "mysql://root@localhost/?unix_socket=/run/mysqld/mysqld.sock"


def per_call(fn, n: int) -> float:
    """Median seconds per call over ``n`` calls (after one warm-up)."""
    fn()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_sqlite_reset(tasks, n: int) -> None:
    source = max(tasks.databases.values(), key=lambda s: s.path.stat().st_size)
    script = source.sqlite_script()
    backend = SqliteBackend(Limits())

    def copy() -> None:
        backend.open_episode(source).close()

    def rebuild() -> None:
        conn = sqlite3.connect(":memory:")
        conn.executescript(script)
        conn.close()

    template_bytes(source)
    t_copy, t_script = per_call(copy, n), per_call(rebuild, n)
    print(f"SQLite reset, db {source.name!r} ({len(template_bytes(source)) / 1024:.0f} KiB):")
    print(f"  per-episode copy   {t_copy * 1e6:9.1f} us")
    print(f"  re-run the script  {t_script * 1e6:9.1f} us   ratio {t_script / t_copy:.1f}x")


def bench_mysql_reset(tasks, url: str, n: int) -> None:
    from agentenvs.envs.intercode_sql.backends.mysql import MySQLBackend
    from agentenvs.envs.intercode_sql.backends.mysql_databases import _q
    from agentenvs.envs.intercode_sql.backends.mysql_templates import build_template

    source = max(tasks.databases.values(), key=lambda s: s.path.stat().st_size)
    backend = MySQLBackend(url, Limits(), spares=0)  # a clone at every reset, no pool
    name = "ae_bench_rebuild"

    def clone() -> None:
        backend.open_episode(source).close()

    def rerun() -> None:
        # the whole script, table by table
        with backend.server.lock:
            build_template(backend.server.live_admin(), name, template_bytes(source))
        backend.server.run(f"DROP DATABASE IF EXISTS {_q(name)}")

    try:
        t_clone, t_rerun = per_call(clone, n), per_call(rerun, n)
    finally:
        backend.server.run(f"DROP DATABASE IF EXISTS {_q(name)}")
        backend.close()
    print(f"MySQL reset, db {source.name!r} (episode db + user + connection):")
    print(f"  clone the template {t_clone * 1e3:9.1f} ms")
    print(f"  re-run the script  {t_rerun * 1e3:9.1f} ms   ratio {t_rerun / t_clone:.1f}x")


def bench_guard(url: str, n: int) -> None:
    from agentenvs.envs.intercode_sql.backends.mysql import MySQLBackend
    from agentenvs.envs.intercode_sql.statements import classify, match_table_case

    gold = (
        "SELECT T3.name FROM Friend AS T1 JOIN Highschooler AS T2 ON T1.student_id = T2.id "
        "JOIN Highschooler AS T3 ON T1.friend_id = T3.id WHERE T2.name = 'Kyle'"
    )
    tables = {"friend": "Friend", "highschooler": "Highschooler", "likes": "Likes"}
    queries = [f"{gold} AND T3.grade > {i}" for i in range(n * 4)]  # no cache hits
    it = iter(queries)

    def guard() -> None:
        sql = next(it)
        classify(sql, "mysql")
        match_table_case(sql, tables)

    backend = MySQLBackend(url)
    conn = backend.server.connect()

    def round_trip() -> None:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchall()

    try:
        t_guard, t_trip = per_call(guard, n), per_call(round_trip, n)
    finally:
        conn.close()
        backend.close()
    print("MySQL statement guard (kind + table-name case), a 3-table join:")
    print(f"  guard              {t_guard * 1e6:9.1f} us")
    print(
        f"  SELECT 1 round trip{t_trip * 1e6:9.1f} us   guard / round trip {t_guard / t_trip:.2f}"
    )


def bench_dump_to_sqlite() -> None:
    import sqlglot

    from agentenvs.envs.intercode_sql import mysql_dump
    from agentenvs.envs.intercode_sql.data import intercode_package_files

    try:
        dump = mysql_dump.read_dump(intercode_package_files()[1])
    except ImportError as exc:
        print(f"InterCode dump: skipped ({exc})")
        return
    inserts = [i for db in dump.databases.values() for t in db.tables for i in t.inserts]

    def tokens() -> None:
        for insert in inserts:
            mysql_dump.insert_rows(insert)

    def parser() -> None:
        for insert in inserts:
            tree = sqlglot.parse_one(insert, read="mysql")
            [tuple(mysql_dump._literal(v) for v in row.expressions) for row in tree.expression]

    def build_all() -> None:
        for db in dump.databases.values():
            conn = sqlite3.connect(":memory:")
            mysql_dump.build_sqlite(conn, db, "bench")
            conn.close()

    t_tokens, t_parser = per_call(tokens, 1), per_call(parser, 1)
    t_build = per_call(build_all, 1)
    print(f"InterCode dump -> SQLite ({len(dump.databases)} databases, {len(inserts)} INSERTs):")
    print(f"  rows from tokens   {t_tokens * 1e3:9.1f} ms")
    print(f"  rows from parse    {t_parser * 1e3:9.1f} ms   ratio {t_parser / t_tokens:.1f}x")
    print(f"  all 20 databases built {t_build * 1e3:9.1f} ms (once per process)")


def bench_error_action(tasks_path: str | None, repeats: int) -> None:
    """``error_action`` (a wrong statement from the gold query) on every task, with the
    gold query's tree parsed once and copied per mistake vs parsed for every kind tried
    (the old way); the same statements both ways."""
    import numpy as np

    from agentenvs.envs.intercode_sql import mistakes

    env = InterCodeSQLEnv(tasks_path=tasks_path)
    cached = mistakes._parse

    def all_tasks() -> list[str]:
        out = []
        for task_id in env.task_ids:
            env.reset(seed=0, options={"task_id": task_id})
            rng = np.random.default_rng(0)
            out += [env.error_action(rng) for _ in range(repeats)]
        return out

    timings: dict[str, list[float]] = {"parsed once": [], "parsed per kind (old)": []}
    results = {}
    try:
        for _ in range(3):  # alternating rounds
            for name, parse in (("parsed once", cached), ("parsed per kind (old)", cached.__wrapped__)):
                mistakes._parse = parse
                start = time.perf_counter()
                results[name] = all_tasks()
                timings[name].append(time.perf_counter() - start)
    finally:
        mistakes._parse = cached
        env.close()
    assert results["parsed once"] == results["parsed per kind (old)"]
    new = statistics.median(timings["parsed once"])
    old = statistics.median(timings["parsed per kind (old)"])
    calls = len(results["parsed once"])
    print(f"error_action, {calls} calls over {len(env.task_ids)} tasks (resets included):")
    print(f"  gold query parsed once    {new / calls * 1e3:8.2f} ms/call")
    print(f"  parsed per kind (old)     {old / calls * 1e3:8.2f} ms/call   ratio {old / new:.2f}x")


def bench_size_cap(tasks_path: str | None, url: str | None, n: int) -> None:
    """The size cap's cost on a step that writes, with and without it, in one run."""
    from agentenvs.envs.intercode_sql.backends import sqlite as sqlite_backend

    write, read = "INSERT INTO w VALUES (1, 'x')", "SELECT count(*) FROM w"

    def env_on(backend: str, **kwargs) -> InterCodeSQLEnv:
        extra = {"backend": "mysql", "mysql_url": url} if backend == "mysql" else {}
        env = InterCodeSQLEnv(tasks_path=tasks_path, max_turns=100_000, **extra, **kwargs)
        env.reset(seed=0)
        env.step("CREATE TABLE w (i INT, x TEXT)")
        return env

    print(f"size cap, one step ({n} each, alternating; state key and reward included):")
    backends = ["sqlite"] + (["mysql"] if url else [])
    for backend in backends:
        capped = env_on(backend)
        if backend == "sqlite":
            uncapped = env_on(backend, max_db_bytes=2**62)  # a cap SQLite never reaches
        else:
            uncapped = env_on(backend)
            episode = uncapped.episode  # the statement run bare, as before the cap
            episode._write = lambda sql, transaction, e=episode: e._run(sql)  # type: ignore[method-assign]
        try:
            for sql, what in ((write, "write"), (read, "read")):
                with_cap, without = [], []
                for _ in range(3):
                    with_cap.append(per_call(lambda s=sql, e=capped: e.step(s), n))
                    without.append(per_call(lambda s=sql, e=uncapped: e.step(s), n))
                w, wo = statistics.median(with_cap), statistics.median(without)
                print(
                    f"  {backend:6} {what:5}  with the cap {w * 1e3:7.3f} ms   without "
                    f"{wo * 1e3:7.3f} ms   ratio {w / wo:.2f}"
                )
        finally:
            capped.close()
            uncapped.close()

    # the state key of an 8 MB database after a write: keyed by its writes vs read whole
    env = env_on("sqlite")
    try:
        env.step(
            "INSERT INTO w WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c "
            "LIMIT 8000) SELECT i, hex(zeroblob(500)) FROM c"
        )
        size = env.episode.used_bytes()
        keyed = per_call(lambda: env.step(write), max(3, n // 4))
        whole = per_call(lambda: sqlite_backend._digest(env.episode.conn), max(3, n // 4))
        print(
            f"  sqlite state key at {size / 1e6:.1f} MB: write step (keyed by its writes) "
            f"{keyed * 1e3:.2f} ms; reading it whole for the digest alone {whole * 1e3:.2f} ms "
            f"({whole / keyed:.0f}x a step)"
        )
    finally:
        env.close()


def steps_per_second(env: InterCodeSQLEnv, episodes: int) -> tuple[float, float]:
    """(steps/s, resets/s share of time) for the gold policy over ``episodes`` episodes."""
    policy = make_policy("intercode_sql/gold")
    import numpy as np

    rng = np.random.default_rng(0)
    steps = 0
    start = time.perf_counter()
    for i in range(episodes):
        obs, info = env.reset(seed=i)
        conv = Conversation.start(obs, info, env=env)
        done = False
        while not done:
            action = policy.act(conv, rng)
            obs, _, terminated, truncated, _ = env.step(action)
            conv.add_turn(action, obs)
            steps += 1
            done = terminated or truncated
    return steps / (time.perf_counter() - start), steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks", default=None, help="tasks path (default: bundled, else test fixtures)"
    )
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    tasks_path = args.tasks
    if tasks_path is None:
        try:
            load_tasks(None)
        except Exception:
            tasks_path = str(FIXTURES)
    tasks = load_tasks(tasks_path)
    print(f"tasks: {tasks.origin} ({len(tasks.tasks)} tasks, {len(tasks.databases)} databases)")
    bench_sqlite_reset(tasks, args.repeats)

    url = os.environ.get("AGENTENVS_MYSQL_URL", DEFAULT_URL)
    mysql_ok = True
    try:
        import pymysql

        from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url

        pymysql.connect(**parse_mysql_url(url), connect_timeout=3).close()
    except Exception as exc:
        mysql_ok = False
        print(f"MySQL: skipped (no server at {url}: {exc})")
    if mysql_ok:
        bench_mysql_reset(tasks, url, max(3, args.repeats // 4))
        bench_guard(url, args.repeats * 10)
    bench_dump_to_sqlite()
    bench_error_action(tasks_path, 8)
    bench_size_cap(tasks_path, url if mysql_ok else None, args.repeats * 5)

    env = InterCodeSQLEnv(tasks_path=tasks_path)
    sps_sqlite, n = steps_per_second(env, args.episodes)
    env.close()
    print(f"gold policy, SQLite: {sps_sqlite:9.1f} steps/s ({n} steps, resets included)")
    if mysql_ok:
        env = InterCodeSQLEnv(tasks_path=tasks_path, backend="mysql", mysql_url=url)
        sps_mysql, n = steps_per_second(env, max(5, args.episodes // 4))
        env.close()
        print(f"gold policy, MySQL:  {sps_mysql:9.1f} steps/s ({n} steps, resets included)")
        print(f"  SQLite / MySQL: {sps_sqlite / sps_mysql:.1f}x")


if __name__ == "__main__":
    main()
