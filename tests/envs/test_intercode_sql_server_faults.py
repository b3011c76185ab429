"""InterCode-SQL on MySQL/MariaDB: the server's own failures are faults, never the agent's.

Real faults, caused from outside the env on a MariaDB server of this module's own (a data
dir and a temporary dir in a temporary folder, its own socket), so nothing of another
test's server is touched: a temporary file of the agent's statement removed while it runs
(the server then fails to delete it: error 6), the server's temporary directory gone
(error 1, on the episode's, the admin's and the gold connection), an episode table's
definition file removed or overwritten on disk. Only the files of the databases the
test's env made are touched, and what a test moves it puts back. The controls: what the
agent itself does (its own ``DROP TABLE``, a misspelt table, a refused ``DISCARD
TABLESPACE``) stays its observation. The rules themselves (``mysql_faults.server_failure``)
are checked against the server's messages as MariaDB words them.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenvs.core.errors import Fault
from agentenvs.envs.intercode_sql.backends import mysql_faults as faults
from tests.envs.test_intercode_sql_faults import (
    FIXTURES,
    GOLD,
    TASK,
    WAIT_S,
    PrivateServer,
    fault_free,
    in_thread,
    make,
    own_leftovers,
    play,
    query,
    wait_running,
)

#: needs an on-disk temporary table (a TEXT column made distinct): its files go to @@tmpdir
TEMP_TABLE_QUERY = "SELECT DISTINCT name FROM singer"
#: the same, running long enough to remove its files meanwhile (6 singers, 0.4 s each)
SLOW_TEMP_TABLE_QUERY = "SELECT DISTINCT name, SLEEP(0.4) FROM singer"


# ----------------------------------------------------------------------------- the rules
def server_error(code: int, message: str) -> Exception:
    pymysql = pytest.importorskip("pymysql")
    cls = pymysql.err.InternalError if code < 1000 else pymysql.err.OperationalError
    return cls(code, message)


RULES = [
    # the server's own files: infrastructure
    (6, "Error on delete of '/tmp/#sql-temptable-55b4-9-6.MAI' (Errcode: 2 \"No such file or directory\")", "infrastructure"),
    (1, "Can't create/write to file '/t/#sql-temptable-1.MAI' (Errcode: 2 \"No such file or directory\")", "infrastructure"),
    (2, "Error reading file './db/t.frm' (Errcode: 5 \"Input/output error\")", "infrastructure"),
    (1017, "Can't find file: './db/t.frm' (errno: 2 \"No such file or directory\")", "infrastructure"),
    (1024, "Error reading file './db/t.MAD' (errno: 13 \"Permission denied\")", "infrastructure"),
    (1033, "Incorrect information in file: './db/singer.frm'", "infrastructure"),
    (1030, "Got error 194 \"Tablespace is missing for a table\" from storage engine InnoDB", "infrastructure"),
    (1030, "Got error 176 \"Read page with wrong checksum\" from storage engine InnoDB", "infrastructure"),
    (1812, "Tablespace is missing for table `db`.`t`", "infrastructure"),
    (1877, "Operation cannot be performed. The table 'db.t' is missing, corrupt or contains bad data", "infrastructure"),
    (1932, "Table 'db.t' doesn't exist in engine", "infrastructure"),
    (1194, "Table 't' is marked as crashed and should be repaired", "infrastructure"),
    # a resource ran out, which the agent's statement may have done: unknown
    (3, "Error writing file '/tmp/#sql-temptable-1.MAD' (Errcode: 28 \"No space left on device\")", "unknown"),
    (1030, "Got error 28 \"No space left on device\" from storage engine Aria", "unknown"),
    (1030, "Got error 128 \"Out of memory in engine\" from storage engine InnoDB", "unknown"),
    (1016, "Can't open file: './db/t.ibd' (errno: 24 \"Too many open files\")", "unknown"),
    (5, "Out of memory (Needed 1048576 bytes)", "unknown"),
    (1021, "Disk full (/tmp/#sql-1.MAD); waiting for someone to free some space... (errno: 28 \"No space left on device\")", "unknown"),
    (1041, "Out of memory.", "unknown"),
    (1114, "The table '/tmp/#sql-temptable-1' is full", "unknown"),
    # the statement's own outcome: the agent's
    (1025, "Error on rename of './db/#sql-alter-1' to './db/t' (errno: 150 \"Foreign key constraint is incorrectly formed\")", None),
    (1030, "Got error 191 \"Too many words in a FTS phrase or proximity search\" from storage engine InnoDB", None),
    (1030, "Got error 149 \"Lock deadlock; Retry transaction\" from storage engine InnoDB", None),
    (1146, "Table 'db.no_such_table' doesn't exist", None),
    (1064, "You have an error in your SQL syntax; check the manual near 'WHERE' at line 1", None),
    (1062, "Duplicate entry '1' for key 'PRIMARY'", None),
    (1452, "Cannot add or update a child row: a foreign key constraint fails", None),
    (1205, "Lock wait timeout exceeded; try restarting transaction", None),
    (1213, "Deadlock found when trying to get lock; try restarting transaction", None),
    (1969, "Query execution was interrupted (max_statement_time exceeded)", None),
    (1317, "Query execution was interrupted", None),
]  # fmt: skip


@pytest.mark.parametrize(("code", "message", "attribution"), RULES)
def test_the_server_failure_rules(code: int, message: str, attribution: str | None) -> None:
    assert faults.server_failure(server_error(code, message)) == attribution


def test_a_file_error_number_is_read_after_the_file_name() -> None:
    # a name that looks like an error number never decides: the file's own number comes last
    exc = server_error(1026, "Error writing file './db/errno: 2.MAD' (errno: 28 \"No space\")")
    assert faults.errno_of(exc) == 28
    assert faults.server_failure(exc) == "unknown"


# ------------------------------------------------------------ a server of our own
def _has_mariadbd() -> bool:
    return bool(
        shutil.which("mariadbd") or shutil.which("mysqld") or Path("/usr/sbin/mariadbd").exists()
    )


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateServer]:
    pytest.importorskip(
        "pymysql", reason="PyMySQL is not installed (pip install 'agentenvs[mysql]')"
    )
    if not _has_mariadbd():
        pytest.skip(
            "no mariadbd to start a private server (bash .ci/services/mariadb.sh installs it)"
        )
    root = tmp_path_factory.mktemp("mariadb-files")
    temporary = root / "tmp"
    temporary.mkdir()
    server = PrivateServer(root, options=(f"--tmpdir={temporary}",))
    server.install()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(private: PrivateServer) -> Iterator[PrivateServer]:
    """The private server, up and with its temporary directory, before and after the test."""
    if private.proc is None:
        private.start()
    yield private
    temporary(private).mkdir(exist_ok=True)
    if private.proc is None:
        private.start()


def temporary(server: PrivateServer) -> Path:
    """The server's own temporary directory (@@tmpdir), which this module made."""
    return server.root / "tmp"


def database_dir(server: PrivateServer, name: str) -> Path:
    """The directory of database ``name`` (one this test's env made) in the server's data
    dir, as the server reports it; the test is skipped where it is not on this host or not
    writable."""
    datadir = Path(query(server.url, "SELECT @@datadir")[0][0])
    directory = datadir / name
    if not directory.is_dir() or not os.access(directory, os.W_OK):
        pytest.skip(f"the server's data dir {datadir} is not on this host or not writable")
    return directory


def innodb_tables(server: PrivateServer, name: str) -> list[str]:
    """The tables of database ``name`` in InnoDB's own dictionary."""
    rows = query(
        server.url,
        "SELECT NAME FROM information_schema.INNODB_SYS_TABLES WHERE NAME LIKE %s",
        (name.replace("_", "\\_") + "/%",),
    )
    return [r[0] for r in rows]


def temporary_files(directory: Path, runner) -> list[Path]:  # noqa: ANN001
    """The server's temporary table files in ``directory``, once the statement made them."""
    deadline = time.monotonic() + WAIT_S
    while runner.is_alive() and time.monotonic() < deadline:
        found = [p for p in directory.iterdir() if p.name.startswith("#sql")]
        if found:
            return found
        time.sleep(0.01)
    return []


def assert_infrastructure(fault: object, connection: str) -> Fault:
    assert isinstance(fault, Fault), fault
    assert (fault.kind, fault.attribution) == ("database", "infrastructure"), fault.record()
    assert connection in fault.evidence, fault.evidence
    return fault


# ------------------------------------------------------------ the server's files
@pytest.mark.mysql
def test_a_temporary_file_removed_while_the_agent_statement_runs_is_a_fault(server) -> None:
    expected = fault_free(server.url)
    env = make(server.url, statement_timeout_s=60)
    try:
        env.reset(seed=3, options={"task_id": TASK})
        runner, outcome = in_thread(lambda: env.step(SLOW_TEMP_TABLE_QUERY))
        wait_running(server.url, env.unwrapped.episode.thread_id, runner)
        files = temporary_files(temporary(server), runner)
        assert files, "the statement made no temporary table file"
        for path in files:  # as a clean-up of the host's temporary files would
            path.unlink(missing_ok=True)
        runner.join(WAIT_S)
        fault = assert_infrastructure(outcome.get("error"), "episode connection")
        assert "Error on delete" in str(fault), fault  # the server lost its own file
        assert env.unwrapped.done  # only a reset can follow
        assert play(env, 3) == expected  # and the same seed plays as without the fault
    finally:
        env.close()
    assert own_leftovers(server.url) == set()


@pytest.fixture
def distinct_gold_tasks(tmp_path: Path) -> Path:
    """A task whose gold query needs an on-disk temporary table."""
    (tmp_path / "databases").mkdir()
    shutil.copy(FIXTURES / "databases" / "concert.sql", tmp_path / "databases" / "concert.sql")
    first = (FIXTURES / "tasks.jsonl").read_text().splitlines()[0]
    task = {**json.loads(first), "id": "distinct-001", "gold": TEMP_TABLE_QUERY}
    (tmp_path / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    return tmp_path


@pytest.mark.mysql
def test_the_server_temporary_directory_gone_is_a_fault_on_every_connection(
    server, distinct_gold_tasks: Path
) -> None:
    from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv

    expected = fault_free(server.url)
    env = make(server.url)
    gold_env = InterCodeSQLEnv(
        tasks_path=distinct_gold_tasks, backend="mysql", mysql_url=server.url
    )
    fresh = make(server.url)
    away = server.root / "tmp-away"
    try:
        env.reset(seed=3, options={"task_id": TASK})
        gold_env.reset(seed=0)
        temporary(server).rename(away)  # the server's @@tmpdir is gone
        try:
            # the agent's statement, scored by score_action and by step
            with pytest.raises(Fault) as err:
                env.score_action(TEMP_TABLE_QUERY)
            fault = assert_infrastructure(err.value, "episode connection")
            assert "Can't create/write to file" in str(fault), fault
            env.reset(seed=3, options={"task_id": TASK})
            with pytest.raises(Fault) as err:
                env.step(TEMP_TABLE_QUERY)
            assert_infrastructure(err.value, "episode connection")
            # the admin connection: a new env's first reset reads the task's schema
            with pytest.raises(Fault) as err:
                fresh.reset(seed=3, options={"task_id": TASK})
            assert_infrastructure(err.value, "admin connection")
            # the gold connection: the first step's reward runs the gold query
            with pytest.raises(Fault) as err:
                gold_env.step("SELECT 1")
            assert_infrastructure(err.value, "gold connection")
        finally:
            away.rename(temporary(server))
        assert play(env, 3) == expected
        gold_env.reset(seed=0)
        gold_env.step(TEMP_TABLE_QUERY)
        assert gold_env.step("submit")[1] == 1.0
        assert play(fresh, 3) == expected
    finally:
        env.close()
        gold_env.close()
        fresh.close()
    assert own_leftovers(server.url) == set()


@pytest.mark.mysql
@pytest.mark.parametrize("damage", ["removed", "overwritten"])
def test_a_table_definition_damaged_on_disk_is_a_fault(server, damage: str) -> None:
    expected = fault_free(server.url)
    env = make(server.url)
    try:
        env.reset(seed=3, options={"task_id": TASK})
        name = env.unwrapped.episode.name
        definition = database_dir(server, name) / "singer.frm"
        assert definition.exists(), "the episode's tables have no .frm file on this server"
        if damage == "removed":
            definition.unlink()
        else:
            definition.write_bytes(b"not a table definition")
        # the server reads the file again once its cached definition goes (as when its
        # table cache is full)
        query(server.url, "FLUSH TABLES")
        with pytest.raises(Fault) as err:
            env.step("SELECT count(*) FROM singer")
        fault = assert_infrastructure(err.value, "episode connection")
        if damage == "removed":
            assert "dictionary still holds" in fault.evidence, fault.evidence
        else:
            assert "Incorrect information in file" in str(fault), fault
        assert play(env, 3) == expected
    finally:
        env.close()
    assert own_leftovers(server.url) == set()
    assert innodb_tables(server, name) == []  # dropped whole, InnoDB's side included


# ------------------------------------------------------------ what stays the agent's
AGENT_ERRORS = [
    "SELECT count(*) FROM singers",  # a misspelt table
    "ALTER TABLE singer DISCARD TABLESPACE",  # refused: the agent cannot discard its files
    "DROP TABLE singer",
    "SELECT count(*) FROM singer",  # after its own DROP TABLE
    "SELECT DISTINCT name FROM singer",  # the same, needing a temporary table
]


@pytest.mark.mysql
def test_the_agent_own_missing_tables_stay_its_observations(server) -> None:
    env = make(server.url)
    try:
        env.reset(seed=3, options={"task_id": TASK})
        name = env.unwrapped.episode.name
        for action in AGENT_ERRORS:
            obs, reward, *_ = env.step(action)  # never a Fault
            if action != "DROP TABLE singer":
                assert obs.startswith("Error executing query:"), (action, obs)
            assert reward == 0.0
            if action.startswith("ALTER"):
                assert f"{name}/singer" in innodb_tables(server, name)  # untouched
        assert f"{name}/singer" not in innodb_tables(server, name)
        assert env.step("submit")[1] == 0.0
        # and the episode after it plays as ever
        env.reset(seed=3, options={"task_id": TASK})
        env.step(GOLD)
        assert env.step("submit")[1] == 1.0
    finally:
        env.close()
    assert own_leftovers(server.url) == set()
