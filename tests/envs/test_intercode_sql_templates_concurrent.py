"""InterCode-SQL templates on MySQL/MariaDB built from nothing by many builders at once.

Every test starts from a cold server: its templates live under a prefix of its own
(``$AGENTENVS_MYSQL_TEMPLATE_PREFIX``, which spawned processes, the docs' example and the
env server inherit), none of which exists when it starts, so it builds every template
itself without touching those of tests running beside it, and drops them at the end.
Each episode then checks that its database holds every table of the task's database with
every row (a count per table, against the embedded SQLite build's), so a template used
half-built fails it, as does any error.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.errors import Fault
from agentenvs.envs.intercode_sql.backends.mysql import TEMPLATE_PREFIX_ENV
from agentenvs.envs.intercode_sql.data import load_tasks
from tests.envs.test_intercode_sql_faults import query as _query

pytestmark = pytest.mark.mysql

ROOT = Path(__file__).resolve().parents[2]
ENV_ID = "agentenvs/InterCodeSQL-v0"
THREADS = 16
PROCESSES = 4
THREADS_PER_PROCESS = 4
SESSIONS = 16
#: (database, a task on it, a statement that counts the rows of each of its tables)
Plan = list[tuple[str, str, str]]


# ------------------------------------------------------------------------------ helpers
def _like(prefix: str) -> str:
    return re.sub(r"([\\_%])", r"\\\1", prefix) + "%"


def _databases(url: str, prefix: str) -> list[str]:
    return sorted(r[0] for r in _query(url, "SHOW DATABASES LIKE %s", (_like(prefix),)))


def _drop_databases(url: str, prefix: str) -> None:
    for name in _databases(url, prefix):
        _query(url, f"DROP DATABASE IF EXISTS `{name}`")


def _builds_of(url: str, pids: set[int]) -> list[str]:
    """The template build databases that processes ``pids`` left on the server."""
    from agentenvs.envs.intercode_sql.backends.mysql_databases import _parse

    out = []
    for name in _databases(url, "ae_bld_"):
        parsed = _parse(name)
        if parsed is not None and parsed[1] in pids:
            out.append(name)
    return out


def _plan() -> Plan:
    """One task on every bundled database, and its counting statement."""
    tasks = load_tasks(None)
    plan = []
    for db in sorted(tasks.databases):
        task = min(t.id for t in tasks.tasks.values() if t.db == db)
        plan.append((db, task, ""))
    return plan


def _expected(plan: Plan) -> tuple[Plan, dict[str, tuple[list[str], str]]]:
    """The plan with its statements, and per database (its tables, the observation of
    the statement) on the embedded SQLite build."""
    env = gym.make(ENV_ID)
    out, expected = [], {}
    try:
        for db, task, _ in plan:
            _, info = env.reset(options={"task_id": task})
            tables = sorted(info["schema"])
            sql = "SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {t}) AS n_{t}" for t in tables)
            obs, *_ = env.step(sql)
            assert re.search(r"\(\d+(, \d+)*,?\)", obs), obs
            out.append((db, task, sql))
            expected[db] = (tables, obs)
    finally:
        env.close()
    return out, expected


def _episodes(url: str, plan: Plan, first: int, env: Any = None) -> list[Any]:
    """An env on MySQL (``env``, else a new one) that plays one episode on every database
    of ``plan`` (from the ``first``-th on): (database, its tables, the observation) each,
    or the error."""
    out: list[Any] = []
    try:
        env = env or gym.make(ENV_ID, backend="mysql", mysql_url=url)
    except Exception as exc:  # noqa: BLE001 - every failure is reported, none hidden
        return [_failure(exc)]
    try:
        for i in range(len(plan)):
            db, task, sql = plan[(first + i) % len(plan)]
            try:
                _, info = env.reset(options={"task_id": task})
                obs, *_ = env.step(sql)
                out.append((db, sorted(info["schema"]), obs))
            except Exception as exc:  # noqa: BLE001
                out.append(_failure(exc))
    finally:
        env.close()
    return out


def _failure(exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__module__}.{type(exc).__name__}: {exc} (at {where.name})"


def _threads(
    url: str, plan: Plan, n: int, first: int, go: Any, made: Callable[[], None]
) -> list[Any]:
    """``n`` threads that each make an env, then (``made()`` called once all are made)
    wait for ``go`` and play ``_episodes``: every first reset asks for a template at once."""
    results: list[Any] = [None] * n
    all_made = threading.Barrier(n + 1)

    def run(i: int) -> None:
        try:
            env = gym.make(ENV_ID, backend="mysql", mysql_url=url)
        except Exception as exc:  # noqa: BLE001
            results[i] = [_failure(exc)]
            all_made.wait()
            return
        all_made.wait()
        go.wait()
        results[i] = _episodes(url, plan, first + i, env)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    all_made.wait()
    made()
    for t in threads:
        t.join()
    return [episode for result in results for episode in result]


def _process_main(url: str, plan: Plan, first: int, n: int, ready: Any, go: Any, out: Any) -> None:
    """A spawned process: ``n`` threads of episodes once ``go`` is set."""
    try:
        out.put((first, _threads(url, plan, n, first, go, lambda: ready.put(os.getpid()))))
    except BaseException as exc:  # noqa: BLE001
        out.put((first, [_failure(exc)]))


def _hang_before_publishing(url: str, task: str, ready: Any) -> None:
    """A spawned process that builds a template and stops just before moving its tables
    into place (the build complete in its own database), until it is killed."""
    from agentenvs.envs.intercode_sql.backends import mysql_templates

    def stop(conn: Any, built: str, name: str) -> None:
        ready.put((built, name))
        time.sleep(3600)

    mysql_templates.publish = stop
    env = gym.make(ENV_ID, backend="mysql", mysql_url=url)
    env.reset(options={"task_id": task})


def _check(results: list[Any], expected: dict[str, tuple[list[str], str]]) -> None:
    failures = [r for r in results if not isinstance(r, tuple)]
    assert not failures, f"{len(failures)} of {len(results)} episodes failed: {failures[:5]}"
    for db, tables, obs in results:
        assert (tables, obs) == expected[db], (db, tables, obs, expected[db])


def _templates_complete(url: str, prefix: str, expected: dict[str, tuple[list[str], str]]) -> None:
    """Exactly one template per database under ``prefix``, each with its marker."""
    names = _databases(url, prefix)
    assert len(names) == len(expected), names
    for name in names:
        tables = {
            r[0]
            for r in _query(
                url,
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s",
                (name,),
            )
        }
        db = next(d for d in expected if name.startswith(f"{prefix}{d}_"))
        assert tables == {*expected[db][0], "_ae_ready"}, (name, tables)


@pytest.fixture(scope="module")
def planned() -> tuple[Plan, dict[str, tuple[list[str], str]]]:
    return _expected(_plan())


@pytest.fixture
def cold(mysql_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A template prefix of this test's own, with no template under it: a cold server as
    far as this test can tell. Its templates are dropped at the end."""
    prefix = f"aet{secrets.token_hex(4)}_"
    _drop_databases(mysql_url, prefix)
    assert _databases(mysql_url, prefix) == []
    monkeypatch.setenv(TEMPLATE_PREFIX_ENV, prefix)
    yield prefix
    _drop_databases(mysql_url, prefix)


# -------------------------------------------------------------------------------- tests
def test_every_template_built_at_once_by_threads_and_processes(
    mysql_url: str, cold: str, planned
) -> None:
    plan, expected = planned
    ctx = multiprocessing.get_context("spawn")
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(
            target=_process_main,
            args=(mysql_url, plan, THREADS + i, THREADS_PER_PROCESS, ready, go, out),
        )
        for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    try:
        pids: set[int] = set()
        started = [0.0]

        def start() -> None:  # every env made, here and there: all reset together
            pids.update(ready.get(timeout=120) for _ in procs)
            started[0] = time.monotonic()
            go.set()

        results = _threads(mysql_url, plan, THREADS, 0, go, start)
        for _ in procs:
            results += out.get(timeout=240)[1]
        elapsed = time.monotonic() - started[0]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    _check(results, expected)
    assert len(results) == (THREADS + PROCESSES * THREADS_PER_PROCESS) * len(plan)
    _templates_complete(mysql_url, cold, expected)
    assert _builds_of(mysql_url, pids | {os.getpid()}) == []
    print(
        f"{len(plan)} templates from nothing, {THREADS} threads here and {PROCESSES} spawned "
        f"processes of {THREADS_PER_PROCESS} threads: {len(results)} episodes in {elapsed:.1f} s"
    )


def _docs_block(path: Path, marker: str) -> str:
    """The Python block of ``path`` that contains ``marker``, as the docs show it."""
    blocks = re.findall(r"^```python\n(.*?)^```$", path.read_text(), flags=re.S | re.M)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"{path}: {len(found)} Python blocks contain {marker!r}"
    return found[0]


def test_the_documented_async_pool_example_from_cold_templates(
    mysql_url: str, cold: str, planned, tmp_path: Path
) -> None:
    code = _docs_block(ROOT / "docs" / "integrations.md", 'backend="mysql", mysql_url=URL')
    (tmp_path / "snippet.py").write_text(code)
    env = {**os.environ, "AGENTENVS_MYSQL_URL": mysql_url}
    proc = subprocess.run(
        [sys.executable, "snippet.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^64 episodes on MySQL, mean reward [0-9.]+$", proc.stdout, re.M), proc.stdout
    # the example's episodes built the templates of the tasks it drew, under this prefix
    built = _databases(mysql_url, cold)
    ready = _query(
        mysql_url,
        "SELECT TABLE_SCHEMA FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE %s "
        "AND TABLE_NAME = '_ae_ready'",
        (_like(cold),),
    )
    assert built and sorted(r[0] for r in ready) == built, (built, ready)


def test_concurrent_sessions_of_a_cold_env_server(
    mysql_url: str, cold: str, planned, tmp_path: Path
) -> None:
    pytest.importorskip("fastapi", reason="pip install 'agentenvs[server]'")
    pytest.importorskip("uvicorn", reason="pip install 'agentenvs[server]'")
    pytest.importorskip("websockets", reason="pip install 'agentenvs[server]'")
    from agentenvs.server.client import RemoteEnv

    plan, expected = planned
    token = secrets.token_hex(16)
    kwargs = {"backend": "mysql", "mysql_url": mysql_url}
    cmd = [sys.executable, "-m", "agentenvs.cli", "serve", "--env", ENV_ID, "--port", "0",
           "--env-kwargs", json.dumps(kwargs), "--max-sessions", str(SESSIONS),
           "--token", token]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=tmp_path)  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match, line + (proc.stdout.read() if proc.poll() is not None else "")
        url = f"http://127.0.0.1:{match.group(1)}"
        # drain the server's output, so that its pipe never fills
        threading.Thread(target=proc.stdout.read, daemon=True).start()

        async def session(i: int) -> list[Any]:
            env = RemoteEnv(url, token=token, timeout=240)
            out: list[Any] = []
            try:
                for k in range(len(plan)):
                    db, task, sql = plan[(i + k) % len(plan)]
                    try:
                        _, info = await env.areset(options={"task_id": task})
                        obs, *_ = await env.astep(sql)
                        out.append((db, sorted(info["schema"]), obs))
                    except Exception as exc:  # noqa: BLE001
                        out.append(_failure(exc))
            finally:
                await env.aclose()
            return out

        async def main() -> list[Any]:
            done = await asyncio.gather(*(session(i) for i in range(SESSIONS)))
            return [episode for result in done for episode in result]

        deadline = time.monotonic() + 60
        while True:  # the server answers once its app is up
            try:
                health = urllib.request.Request(
                    url + "/health", headers={"Authorization": f"Bearer {token}"}
                )
                urllib.request.urlopen(health, timeout=30).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        results = asyncio.run(main())
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    _check(results, expected)
    assert len(results) == SESSIONS * len(plan)
    _templates_complete(mysql_url, cold, expected)


def test_a_build_killed_half_way_is_built_again_not_used(
    mysql_url: str, cold: str, planned
) -> None:
    from agentenvs.envs.intercode_sql.backends.mysql import sweep

    plan, expected = planned
    db, task, _ = plan[0]
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Queue()
    builder = ctx.Process(target=_hang_before_publishing, args=(mysql_url, task, ready))
    builder.start()
    try:
        built, name = ready.get(timeout=120)
        # its build is complete in its own database; the template does not exist yet
        assert _databases(mysql_url, built) == [built]
        assert _databases(mysql_url, cold) == []
        # a second builder waits on the first's lock meanwhile, then builds once it dies
        results: list[Any] = []
        waiter = threading.Thread(target=lambda: results.extend(_episodes(mysql_url, plan, 0)))
        waiter.start()
        time.sleep(0.5)
        assert waiter.is_alive() and results == []
        os.kill(builder.pid, signal.SIGKILL)
        builder.join(timeout=60)
        waiter.join(timeout=240)
        assert not waiter.is_alive()
    finally:
        if builder.is_alive():
            builder.kill()
    _check(results, expected)
    assert len(results) == len(plan)
    _templates_complete(mysql_url, cold, expected)
    # what the killed builder left is its own database, which the sweep drops
    assert _builds_of(mysql_url, {builder.pid}) == [built]
    sweep(mysql_url)
    assert _builds_of(mysql_url, {builder.pid}) == []


def test_a_template_left_without_its_marker_is_built_again(
    mysql_url: str, cold: str, planned
) -> None:
    plan, expected = planned
    db, _, _ = plan[0]
    # another process builds every template; then one is cut back to what a build that
    # died before its marker (as one in place would) leaves: a table, half its rows
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        _check(pool.apply(_episodes, (mysql_url, plan, 0)), expected)
    name = next(n for n in _databases(mysql_url, cold) if n.startswith(f"{cold}{db}_"))
    first, *rest = expected[db][0]
    for table in [*rest, "_ae_ready"]:
        _query(mysql_url, f"DROP TABLE `{name}`.`{table}`")
    _query(mysql_url, f"DELETE FROM `{name}`.`{first}` LIMIT 1")
    # a fresh process knows nothing of it: the template is built again, not used
    with ctx.Pool(1) as pool:
        results = pool.apply(_episodes, (mysql_url, plan, 0))
    _check(results, expected)
    _templates_complete(mysql_url, cold, expected)


def _with_user(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    netloc = f"{quote(user)}:{quote(password)}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def test_a_template_the_server_refuses_is_a_one_line_fault(
    mysql_url: str, cold: str, planned
) -> None:
    plan, _ = planned
    user, password = f"aet_{secrets.token_hex(4)}", secrets.token_hex(12)
    hosts = ("localhost", "%")
    for host in hosts:
        _query(mysql_url, "CREATE USER %s@%s IDENTIFIED BY %s", (user, host, password))
        # enough to reach the server and sweep it, not to make a database
        _query(mysql_url, "GRANT SELECT ON mysql.user TO %s@%s", (user, host))
        _query(mysql_url, "GRANT ALL ON `ae_meta`.* TO %s@%s", (user, host))
    env = None
    try:
        env = gym.make(ENV_ID, backend="mysql", mysql_url=_with_user(mysql_url, user, password))
        with pytest.raises(Fault) as err:
            env.reset(options={"task_id": plan[0][1]})
        message = str(err.value)
        assert "\n" not in message, message
        assert message.startswith(f"could not build template {cold}{plan[0][0]}_"), message
        assert "denied" in message.lower(), message
        assert err.value.kind == "database" and not err.value.retryable
        assert err.value.__cause__ is not None  # the server's own error stays attached
    finally:
        if env is not None:
            env.close()
        for host in hosts:
            _query(mysql_url, "DROP USER IF EXISTS %s@%s", (user, host))
    assert _databases(mysql_url, cold) == []
