"""Each benchmark's fork fast path: the children hold copies (databases, sandboxes,
containers), play as the restored parent, and closing them leaves nothing behind."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.core.snapshot import restore_snapshot, take_snapshot


def _run(env: gym.Env, action: str) -> str:
    return env.step(action)[0]


def test_intercode_sqlite_children_have_their_own_database() -> None:
    env = gym.make("agentenvs/InterCodeSQL-v0")
    env.reset(seed=0)
    _run(env, "CREATE TABLE zz (a INTEGER PRIMARY KEY, b TEXT)")
    _run(env, "INSERT INTO zz (b) VALUES ('x'), ('y')")
    a, b = env.unwrapped.fork(2)
    _run(a, "INSERT INTO zz (b) VALUES ('z')")
    assert "(3 rows)" in _run(a, "SELECT * FROM zz")
    assert "(2 rows)" in _run(b, "SELECT * FROM zz")
    env.close()  # the backend is shared: closing the parent first leaves the children whole
    assert "(2 rows)" in _run(b, "SELECT * FROM zz")
    a.close()
    b.close()


@pytest.mark.mysql
def test_intercode_mysql_children_get_databases_of_their_own(mysql_url: str) -> None:
    import pymysql

    from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url

    env = gym.make("agentenvs/InterCodeSQL-v0", backend="mysql", mysql_url=mysql_url)
    env.reset(seed=0)
    _run(env, "CREATE TABLE zz (a INT PRIMARY KEY AUTO_INCREMENT, b TEXT)")
    _run(env, "INSERT INTO zz (b) VALUES ('x'), ('y')")
    snap = take_snapshot(env)
    kids = env.unwrapped.fork(3)
    names = [k.held_resources() for k in kids]
    assert len(set().union(*names) | env.unwrapped.held_resources()) == 4
    # a restore of the dump and a copy on the server agree: rows and the auto-increment
    _run(kids[0], "INSERT INTO zz (b) VALUES ('z')")
    got = _run(kids[0], "SELECT * FROM zz")
    restore_snapshot(env, snap)
    _run(env, "INSERT INTO zz (b) VALUES ('z')")
    assert got == _run(env, "SELECT * FROM zz") and "(3, 'z')" in got
    assert "(2 rows)" in _run(kids[1], "SELECT * FROM zz")
    databases = {n.removeprefix("mysql database ") for n in set().union(*names)}
    for env_ in (*kids, env):
        env_.close()
    conn = pymysql.connect(**parse_mysql_url(mysql_url))
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES")
            left = {r[0] for r in cur.fetchall()} & databases
    finally:
        conn.close()
    assert not left, f"databases left after the last env closed: {left}"


def test_deepcoder_children_make_sandboxes_of_their_own() -> None:
    env = gym.make("agentenvs/DeepCoderMT-v0")
    env.reset(seed=0)
    reply = env.unwrapped.error_action(np.random.default_rng(0))
    env.step(reply)
    snap = take_snapshot(env)
    a, b = env.unwrapped.fork(2)
    assert a.unwrapped._sandbox is not env.unwrapped._sandbox
    got = a.step(reply)
    env.close()  # the parent's sandbox goes; the children's are their own
    restored = gym.make("agentenvs/DeepCoderMT-v0")
    restore_snapshot(restored, snap)
    assert got[1:4] == restored.step(reply)[1:4]
    assert b.step(reply)[1:4] == got[1:4]
    for e in (a, b, restored):
        e.close()


LOOK = '```bash\npwd; echo "var=$FORKED"; cat /app/kept.txt; jobs | wc -l\n```'


def _terminal_fork_keeps_files_cwd_and_vars(env: gym.Env) -> list[str]:
    env.reset(seed=0)
    env.step("```bash\ncd /tmp && export FORKED=yes && echo hi > /app/kept.txt\n```")
    env.step("```bash\nsleep 300 &\n```")
    kids = env.unwrapped.fork(3)
    held = [k.held_resources() for k in kids]
    assert all(held) and len(set().union(*held)) == sum(len(h) for h in held)
    for kid in kids:
        out = kid.step(LOOK)[0]
        # files, cwd and exported variables carry over; background jobs do not
        assert out.startswith("/tmp\nvar=yes\nhi\n0"), out
    env.close()
    assert "hi" in kids[2].step("```bash\ncat /app/kept.txt\n```")[0]
    for kid in kids:
        kid.close()
    return sorted(set().union(*held))


@pytest.mark.bwrap
def test_terminal_local_fork_keeps_the_work_dir_and_shell_state() -> None:
    held = _terminal_fork_keeps_files_cwd_and_vars(gym.make("agentenvs/TerminalBench-v0"))
    dirs = [h.removeprefix("sandbox dir ") for h in held]
    assert dirs and not any(os.path.exists(d) for d in dirs)


@pytest.mark.docker("agentenvs/terminal:latest")
def test_terminal_docker_fork_fills_containers_and_removes_them() -> None:
    import docker

    env = gym.make("agentenvs/TerminalBench-v0", runtime="docker")
    held = _terminal_fork_keeps_files_cwd_and_vars(env)
    ids = [h.removeprefix("container ") for h in held]
    client = docker.from_env()
    try:
        left = [c for c in ids if client.api.containers(all=True, filters={"id": c})]
    finally:
        client.close()
    assert ids and not left, f"containers left: {left}"
