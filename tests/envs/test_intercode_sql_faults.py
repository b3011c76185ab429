"""InterCode-SQL on MySQL/MariaDB: faults of the infrastructure are faults, never scores.

Real faults, injected from outside the env: a MariaDB server of this module's own (a data
dir in a temporary folder, its own socket, no network) shut down and restarted around and
during the agent's statements, so other tests' server never goes down; and on the shared
server (``mysql_url``) the env's own sessions killed from a second root connection, its
database dropped, the gold connection killed. Each test checks the attribution, that a
``Fault`` is raised (or the agent's outcome scored), that the next reset works and scores as
a run without the fault, and that no episode database or user is left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenvs.core.errors import Fault
from agentenvs.envs.intercode_sql.env import InterCodeSQLEnv

pytest.importorskip("pymysql", reason="PyMySQL is not installed (pip install 'agentenvs[mysql]')")

FIXTURES = Path(__file__).parent / "intercode_sql_fixtures"
TASK = "concert-002"
GOLD = "SELECT name, country, age FROM singer ORDER BY age DESC"
WAIT_S = 60.0

pytestmark = pytest.mark.mysql


# ----------------------------------------------------------------------------- helpers
def connect(url: str):
    import pymysql

    from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url

    return pymysql.connect(**parse_mysql_url(url), autocommit=True)


def query(url: str, sql: str, args=None) -> list[tuple]:
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    finally:
        conn.close()


def own_leftovers(url: str) -> set[str]:
    """Episode databases and users of this process left on the server."""
    from agentenvs.envs.intercode_sql.backends.mysql import parse_episode_name

    names = {r[0] for r in query(url, "SHOW DATABASES LIKE 'ae\\_ep\\_%'")}
    names |= {r[0] for r in query(url, "SELECT User FROM mysql.user WHERE User LIKE 'ae\\_ep\\_%'")}
    return {n for n in names if (parse_episode_name(n) or (0,))[0] == os.getpid()}


def make(url: str, **kwargs) -> InterCodeSQLEnv:
    return InterCodeSQLEnv(tasks_path=FIXTURES, backend="mysql", mysql_url=url, **kwargs)


def fault_free(url: str, seed: int = 3) -> list:
    """The episode each test plays, on a server that does not fail."""
    env = make(url)
    try:
        return play(env, seed)
    finally:
        env.close()


def play(env: InterCodeSQLEnv, seed: int = 3) -> list:
    out = [env.reset(seed=seed, options={"task_id": TASK})[0]]
    for action in ("SELECT count(*) FROM singer", GOLD, "submit"):
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs, reward, terminated, info["success"]))
    return out


def wait_running(url: str, session: int, runner: threading.Thread) -> None:
    """Until session ``session`` runs a SLEEP (a kill before that would miss it)."""
    deadline = time.monotonic() + WAIT_S
    while runner.is_alive() and time.monotonic() < deadline:
        rows = query(
            url, "SELECT INFO FROM information_schema.PROCESSLIST WHERE ID = %s", (session,)
        )
        if rows and rows[0][0] and "SLEEP" in rows[0][0].upper():
            return
        time.sleep(0.01)


def in_thread(fn) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome["error"] = exc

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    return runner, outcome


# ------------------------------------------------------------ a server of our own
class PrivateServer:
    """A MariaDB server on a data dir and unix socket of its own, started and stopped at
    will (``mysqladmin shutdown``, then started again on the same data)."""

    def __init__(self, root: Path, options: tuple[str, ...] = ()) -> None:
        self.root = root
        self.data = root / "data"
        self.socket = root / "mysqld.sock"
        self.url = f"mysql://root@localhost/?unix_socket={self.socket}"
        self.proc: subprocess.Popen | None = None
        #: more server options (``--tmpdir=...``)
        self.options = options

    def install(self) -> None:
        install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
        if install is None:
            pytest.skip("no mariadb-install-db to make a private server's data dir")
        cmd = [
            install,
            "--no-defaults",
            f"--datadir={self.data}",
            "--skip-test-db",
            "--auth-root-authentication-method=normal",
        ]
        if os.geteuid() == 0:
            cmd.append("--user=root")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            pytest.skip(f"could not make a private MariaDB data dir: {done.stderr[-500:]}")

    def start(self) -> None:
        server = shutil.which("mariadbd") or shutil.which("mysqld") or "/usr/sbin/mariadbd"
        cmd = [
            server,
            "--no-defaults",
            f"--datadir={self.data}",
            f"--socket={self.socket}",
            "--skip-networking",
            f"--pid-file={self.root / 'mysqld.pid'}",
            f"--log-error={self.root / 'error.log'}",
            "--innodb-buffer-pool-size=32M",
            *self.options,
        ]
        if os.geteuid() == 0:
            cmd.append("--user=root")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                connect(self.url).close()
                return
            except Exception:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = (self.root / "error.log").read_text(errors="replace")[-1000:]
                    raise AssertionError(f"the private MariaDB did not start: {log}") from None
                time.sleep(0.05)

    def shutdown(self) -> None:
        subprocess.run(
            ["mysqladmin", f"--socket={self.socket}", "-uroot", "shutdown"],
            capture_output=True,
            timeout=WAIT_S,
        )
        if self.proc is not None:
            self.proc.wait(timeout=WAIT_S)
            self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            self.shutdown()
        except Exception:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateServer]:
    if (
        shutil.which("mariadbd") is None
        and shutil.which("mysqld") is None
        and not Path("/usr/sbin/mariadbd").exists()
    ):
        pytest.skip(
            "no mariadbd to start a private server (bash .ci/services/mariadb.sh installs it)"
        )
    server = PrivateServer(tmp_path_factory.mktemp("mariadb"))
    server.install()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(private: PrivateServer) -> Iterator[PrivateServer]:
    """The private server, up before and after the test, whatever the test did."""
    if private.proc is None:
        private.start()
    yield private
    if private.proc is None:
        private.start()


# ------------------------------------------------------------ the server goes away
def test_a_server_shut_down_between_statements_is_a_fault_and_the_next_reset_works(server) -> None:
    expected = fault_free(server.url)
    env = make(server.url)
    try:
        env.reset(seed=3, options={"task_id": TASK})
        env.step("SELECT count(*) FROM singer")
        server.shutdown()
        with pytest.raises(Fault) as err:
            env.step(GOLD)
        fault = err.value
        assert (fault.kind, fault.attribution) == ("database", "infrastructure"), fault.record()
        assert "does not answer" in fault.evidence, fault.evidence
        assert env.unwrapped.done  # only a reset can follow
        # while it is down a reset is a fault too, and leaves the env as it was
        with pytest.raises(Fault) as err:
            env.reset(seed=3, options={"task_id": TASK})
        assert err.value.kind == "database"
        server.start()
        assert play(env, 3) == expected  # the same seed, as if nothing had failed
    finally:
        env.close()
    assert own_leftovers(server.url) == set()


def test_a_server_restarted_between_statements_is_a_fault(server) -> None:
    expected = fault_free(server.url)
    env = make(server.url)
    try:
        env.reset(seed=3, options={"task_id": TASK})
        env.step("SELECT count(*) FROM singer")
        server.shutdown()
        server.start()
        with pytest.raises(Fault) as err:
            env.step(GOLD)
        assert (err.value.kind, err.value.attribution) == ("database", "infrastructure")
        assert "never reached the server" in err.value.evidence, err.value.evidence
        assert play(env, 3) == expected
    finally:
        env.close()
    assert own_leftovers(server.url) == set()


def test_a_server_shut_down_while_the_agent_statement_runs_is_an_unknown_fault(server) -> None:
    env = make(server.url, statement_timeout_s=60)
    try:
        env.reset(seed=3, options={"task_id": TASK})
        runner, outcome = in_thread(lambda: env.step("SELECT SLEEP(50)"))
        wait_running(server.url, env.unwrapped.episode.thread_id, runner)
        server.shutdown()
        runner.join(WAIT_S)
        fault = outcome.get("error")
        assert isinstance(fault, Fault), outcome
        # a shutdown while the statement ran cannot be told from a crash the statement caused
        assert (fault.kind, fault.attribution) == ("database", "unknown"), fault.record()
        server.start()
        assert play(env, 3) == fault_free(server.url)
    finally:
        env.close()
    assert own_leftovers(server.url) == set()


# ------------------------------------------------------------ killed from outside
def test_a_session_killed_from_outside_is_a_fault(mysql_url) -> None:
    expected = fault_free(mysql_url)
    env = make(mysql_url)
    try:
        # killed while idle
        env.reset(seed=3, options={"task_id": TASK})
        query(mysql_url, f"KILL {int(env.unwrapped.episode.thread_id)}")
        with pytest.raises(Fault) as err:
            env.step("SELECT count(*) FROM singer")
        assert (err.value.kind, err.value.attribution) == ("database", "infrastructure")
        assert play(env, 3) == expected
        # killed while its statement runs
        env.reset(seed=3, options={"task_id": TASK})
        session = env.unwrapped.episode.thread_id
        runner, outcome = in_thread(lambda: env.step("SELECT SLEEP(4)"))
        wait_running(mysql_url, session, runner)
        query(mysql_url, f"KILL {int(session)}")
        runner.join(WAIT_S)
        fault = outcome.get("error")
        assert isinstance(fault, Fault), outcome
        assert fault.attribution == "infrastructure", fault.record()
        assert "killed or dropped from outside" in fault.evidence, fault.evidence
        assert play(env, 3) == expected
    finally:
        env.close()
    assert own_leftovers(mysql_url) == set()


def test_a_statement_killed_from_outside_is_a_fault_not_a_time_limit(mysql_url) -> None:
    env = make(mysql_url, statement_timeout_s=60)
    try:
        env.reset(seed=3, options={"task_id": TASK})
        session = env.unwrapped.episode.thread_id
        runner, outcome = in_thread(lambda: env.step("SELECT SLEEP(30)"))
        wait_running(mysql_url, session, runner)
        query(mysql_url, f"KILL QUERY {int(session)}")
        runner.join(WAIT_S)
        fault = outcome.get("error")
        assert isinstance(fault, Fault), outcome
        assert (fault.kind, fault.attribution) == ("database", "infrastructure")
        assert "watchdog did not stop" in fault.evidence
    finally:
        env.close()
    assert own_leftovers(mysql_url) == set()


def test_the_watchdog_stopping_the_agent_statement_stays_the_agents(mysql_url) -> None:
    env = make(mysql_url, statement_timeout_s=0.5)
    try:
        env.reset(seed=3, options={"task_id": TASK})
        obs, *_ = env.step("SELECT SLEEP(30)")  # the server's own limit
        assert "time limit" in obs, obs
        with env.unwrapped.episode.conn.cursor() as cur:  # as if a statement had lifted it
            cur.execute("SET SESSION max_statement_time = 0")
        obs, reward, *_ = env.step("SELECT SLEEP(120)")  # the watchdog's KILL QUERY
        assert "time limit" in obs and reward == 0.0, obs
        env.step(GOLD)  # the episode goes on, and scores
        assert env.step("submit")[1] == 1.0
    finally:
        env.close()
    assert own_leftovers(mysql_url) == set()


def test_the_episode_database_dropped_from_outside_is_a_fault(mysql_url) -> None:
    env = make(mysql_url)
    try:
        env.reset(seed=3, options={"task_id": TASK})
        query(mysql_url, f"DROP DATABASE `{env.unwrapped.episode.name}`")
        with pytest.raises(Fault) as err:
            env.step("SELECT count(*) FROM singer")
        assert (err.value.kind, err.value.attribution) == ("database", "infrastructure")
        assert "dropped from outside" in err.value.evidence
        assert play(env, 3) == fault_free(mysql_url)
    finally:
        env.close()
    assert own_leftovers(mysql_url) == set()


SLOW_GOLD = "SELECT name, country, age, SLEEP(1) FROM singer WHERE singer_id = 1"


@pytest.fixture
def slow_gold_tasks(tmp_path: Path) -> Path:
    (tmp_path / "databases").mkdir()
    shutil.copy(FIXTURES / "databases" / "concert.sql", tmp_path / "databases" / "concert.sql")
    first = (FIXTURES / "tasks.jsonl").read_text().splitlines()[0]
    task = {**json.loads(first), "id": "slow-001", "gold": SLOW_GOLD}
    (tmp_path / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    return tmp_path


def test_the_gold_connection_lost_is_a_fault_and_made_anew_when_idle(
    mysql_url, slow_gold_tasks
) -> None:
    env = InterCodeSQLEnv(tasks_path=slow_gold_tasks, backend="mysql", mysql_url=mysql_url)
    try:
        server = env.unwrapped.backend.server
        env.reset(seed=0)
        # killed while the gold query runs (a step's reward compares its result with the
        # gold's, so the first step runs it): a fault, never a score
        runner, outcome = in_thread(lambda: env.step(SLOW_GOLD))
        deadline = time.monotonic() + WAIT_S
        while server.gold_conn is None and time.monotonic() < deadline:
            time.sleep(0.01)
        wait_running(mysql_url, server.gold_conn.thread_id(), runner)
        query(mysql_url, f"KILL {int(server.gold_conn.thread_id())}")
        runner.join(WAIT_S)
        fault = outcome.get("error")
        assert isinstance(fault, Fault), outcome
        assert (fault.kind, fault.attribution) == ("database", "infrastructure")
        assert "gold connection" in fault.evidence
        # the next episode scores as ever, on a new gold connection
        env.reset(seed=0)
        env.step(SLOW_GOLD)
        assert env.step("submit")[1] == 1.0
        # killed while idle: made anew before the next gold query
        env.reset(seed=0)
        env.step(SLOW_GOLD)
        query(mysql_url, f"KILL {int(server.gold_conn.thread_id())}")
        assert env.step("submit")[1] == 1.0
    finally:
        env.close()
    assert own_leftovers(mysql_url) == set()


# ------------------------------------------------------------ what stays the agent's
AGENT_FAILURES = [
    "KILL CONNECTION_ID()",
    "KILL QUERY CONNECTION_ID()",
    "```sql\nSHUTDOWN\n```",
    "DROP DATABASE concert",
    "SELECT * FROM no_such_table",
    "SELECT name FROM singer WHERE",
    "SELECT SLEEP(30)",
    "DROP TABLE singer",
    "SELECT count(*) FROM singer",  # after its own DROP TABLE: the agent's doing
]


def test_the_agent_cannot_turn_its_failures_into_faults(mysql_url) -> None:
    env = make(mysql_url, statement_timeout_s=0.5)
    try:
        env.reset(seed=3, options={"task_id": TASK})
        for action in AGENT_FAILURES:
            obs, reward, terminated, truncated, info = env.step(action)  # no Fault
            if action != "DROP TABLE singer":
                assert obs.startswith("Error executing query:"), (action, obs)
            assert reward == 0.0
        assert env.step("submit")[1] == 0.0
    finally:
        env.close()
    assert own_leftovers(mysql_url) == set()


# ------------------------------------------------------------ the runner rides it out
class RestartingGold:
    """The gold policy, which on its ``at``-th action overall restarts the private server
    first (from outside the env: the episode's session dies with the old server)."""

    server: PrivateServer | None = None
    at = 0
    calls = 0

    def __new__(cls, **kwargs):  # noqa: ANN204 - the registry calls this with the spec's kwargs
        from agentenvs.envs.intercode_sql.policies import GoldPolicy

        class Restarting(GoldPolicy):
            def act(self, conversation, rng):  # noqa: ANN001, ANN202
                RestartingGold.calls += 1
                if RestartingGold.calls == RestartingGold.at and RestartingGold.server:
                    RestartingGold.server.shutdown()
                    RestartingGold.server.start()
                return super().act(conversation, rng)

        return Restarting(**kwargs)


def test_a_restart_mid_run_is_retried_and_the_run_equals_a_fault_free_one(
    server, tmp_path: Path
) -> None:
    from agentenvs.eval.records import TRAJECTORIES_NAME, read_records
    from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t
    from agentenvs.policy.registry import register_policy

    register_policy("test/intercode-restarting-gold", f"{__name__}:RestartingGold")
    config = EvalConfig(
        env_id="agentenvs/InterCodeSQL-v0",
        policy="test/intercode-restarting-gold",
        task_ids=["concert-001", "concert-002", "pets-001"],
        n=2,
        budgets=[3],
        seed=1,
        env_kwargs={"tasks_path": str(FIXTURES), "backend": "mysql", "mysql_url": server.url},
    )

    def records(run_dir: Path) -> list[dict]:
        out = read_records(run_dir / TRAJECTORIES_NAME)
        return sorted(out, key=lambda r: (r["task_id"], r["sample"], r["budget"]))

    RestartingGold.server, RestartingGold.at, RestartingGold.calls = server, 0, 0
    reference = run_pass_at_k_t(config, tmp_path / "reference", workers=0, progress=False)
    assert reference.faults["faults"] == 0
    RestartingGold.at, RestartingGold.calls = 5, 0  # the third trajectory's first action
    try:
        faulty = run_pass_at_k_t(
            config, tmp_path / "faulty", workers=0, progress=False, fault_backoff=0
        )
    finally:
        RestartingGold.server = None
    assert faulty.total == faulty.ran == 6
    got, expected = records(tmp_path / "faulty"), records(tmp_path / "reference")
    faults = [f for r in got for f in r.pop("faults", [])]
    for r in expected:
        r.pop("faults", None)
    assert got == expected
    assert faulty.faults["faults"] == len(faults) == 1
    assert (faults[0]["kind"], faults[0]["attribution"]) == ("database", "infrastructure")
    assert all(r["success"] for r in got)
    assert own_leftovers(server.url) == set()
