"""The MariaDB socket that the env logs in over as passwordless ``root`` cannot be replaced
by another local user.

A child process forked and switched to ``nobody`` tries to remove the socket, to rename
its own socket over it and to bind a new one in its place. In the container's socket
directory (a sticky one inside a private one) every try fails; in the old layout (a
world-writable directory without the sticky bit) they succeed, which shows the test can
fail. The env refuses to log in over a socket in such a directory.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import shutil
import socket
import tempfile
from collections.abc import Iterator

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.envs.intercode_sql.backends.mysql_server import socket_problem
from agentenvs.envs.intercode_sql.container import DEFAULT_MARIADB_IMAGE, private_socket_dir

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="switching to another uid needs root"
)


def _listen(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(1)
    return sock


def replace_as_nobody(path: str) -> dict[str, str]:
    """What a process of uid ``nobody`` achieved against the socket at ``path``: for each
    try, ``"done"`` or the error's name."""
    nobody = pwd.getpwnam("nobody")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest code runs here, only os calls, then _exit
        results: dict[str, str] = {}
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            evil = os.path.join(os.path.dirname(path), "evil.sock")
            for name, attempt in (
                ("unlink", lambda: os.unlink(path)),
                ("bind_beside", lambda: _listen(evil)),
                ("rename_over", lambda: os.replace(evil, path)),
                ("bind_in_place", lambda: _listen(path)),
            ):
                try:
                    attempt()
                    results[name] = "done"
                except OSError as exc:
                    results[name] = errno.errorcode.get(exc.errno or 0, str(exc))
            os.write(write, json.dumps(results).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.fixture
def reachable_parent() -> Iterator[str]:
    """A directory every local user may enter (as /tmp is), for the layouts under test."""
    parent = tempfile.mkdtemp(prefix="agentenvs-socket-test.")
    os.chmod(parent, 0o755)
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


def test_another_user_cannot_replace_the_socket_in_the_containers_dir(reachable_parent) -> None:
    run = private_socket_dir(reachable_parent)
    path = os.path.join(run, "mysqld.sock")
    server = _listen(path)
    try:
        before = os.stat(path).st_ino
        results = replace_as_nobody(path)
        assert "done" not in results.values(), results
        assert os.stat(path).st_ino == before
        assert socket_problem(path) is None
    finally:
        server.close()


def test_in_a_world_writable_dir_another_user_replaces_the_socket(reachable_parent) -> None:
    """The control: the layout the container used before (0777, no sticky bit)."""
    run = os.path.join(reachable_parent, "run")
    os.mkdir(run)
    os.chmod(run, 0o777)
    path = os.path.join(run, "mysqld.sock")
    server = _listen(path)
    try:
        results = replace_as_nobody(path)
        assert results["unlink"] == "done" and results["rename_over"] == "done", results
        assert "writable by every local user" in (socket_problem(path) or "")
    finally:
        server.close()


def test_the_env_will_not_log_in_over_a_replaceable_socket(reachable_parent) -> None:
    pytest.importorskip("pymysql", reason="PyMySQL is not installed")
    from agentenvs.core.errors import ServiceUnavailable

    run = os.path.join(reachable_parent, "run")
    os.mkdir(run)
    os.chmod(run, 0o777)
    path = os.path.join(run, "mysqld.sock")
    with pytest.raises(ServiceUnavailable, match="another user could put their own socket"):
        gym.make(
            "agentenvs/InterCodeSQL-v0",
            backend="mysql",
            mysql_url=f"mysql://root@localhost/?unix_socket={path}",
        )


@pytest.mark.docker(DEFAULT_MARIADB_IMAGE)
def test_the_containers_socket_cannot_be_replaced_and_still_serves() -> None:
    pytest.importorskip("pymysql", reason="PyMySQL is not installed")
    from agentenvs.core.errors import ServiceUnavailable
    from agentenvs.envs.intercode_sql.container import start_mariadb_container

    try:
        box = start_mariadb_container()
    except (ImportError, ServiceUnavailable) as exc:
        pytest.skip(f"no MariaDB container: {exc}")
    with box:
        assert os.stat(box.private_dir).st_mode & 0o777 == 0o700
        results = replace_as_nobody(box.socket_path)
        assert "done" not in results.values(), results
        env = gym.make("agentenvs/InterCodeSQL-v0", backend="mysql", mysql_url=box.url)
        try:
            env.reset(seed=0)
            assert env.step("SELECT 1")[4]["executed"]
        finally:
            env.close()
    assert not os.path.exists(box.private_dir)
