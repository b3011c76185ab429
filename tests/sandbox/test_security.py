"""Hostile programs, through ``run`` and through ``run_python_cases``, on every backend.

Each must be contained (the limit or timeout is reported, the host is untouched) and
leave nothing behind: no host process carries the test's marker afterwards.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentenvs.sandbox import PyCase, Sandbox


@pytest.fixture
def marker(nothing_left: Callable[[str], None]) -> Iterator[str]:
    """A unique string hostile programs put in their argv, so leftovers can be found."""
    tag = f"agentenvs-leak-{uuid.uuid4().hex[:12]}"
    yield tag
    nothing_left(tag)


def py(code: str, *extra: str) -> list[str]:
    return ["python3", "-c", code, *extra]


def one_case(box: Sandbox, source: str, *, stdin: str = "", timeout: float = 3.0):  # noqa: ANN201
    (result,) = list(
        box.run_python_cases(source, [PyCase("stdin", stdin=stdin)], timeout_per_case=timeout)
    )
    return result


def still_works(box: Sandbox) -> None:
    assert box.run(["python3", "-c", "print(6*7)"]).stdout == "42\n"
    assert one_case(box, "print(int(input())+1)", stdin="41").stdout == "42\n"


# ----------------------------------------------------------------------------- network
@pytest.fixture
def listener() -> Iterator[socket.socket]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    yield srv
    srv.close()


CONNECT = """
import socket, sys
port = int(sys.argv[1]) if len(sys.argv) > 1 else int(input())
for addr in [("127.0.0.1", port), ("1.1.1.1", 53)]:
    try:
        socket.create_connection(addr, timeout=1).close()
        print("connected", addr)
    except OSError as exc:
        print("refused", addr, type(exc).__name__)
"""


def assert_no_connection(srv: socket.socket, out: str) -> None:
    assert "connected" not in out
    assert out.count("refused") == 2
    with pytest.raises(BlockingIOError):
        srv.accept()


def test_network_run(backend: Sandbox, listener: socket.socket) -> None:
    port = str(listener.getsockname()[1])
    r = backend.run(py(CONNECT, port), timeout=10)
    assert_no_connection(listener, r.stdout)


def test_network_cases(backend: Sandbox, listener: socket.socket) -> None:
    r = one_case(backend, CONNECT, stdin=str(listener.getsockname()[1]), timeout=10)
    assert r.error is None, r
    assert_no_connection(listener, r.stdout)


# ----------------------------------------------------------------------------- filesystem
@pytest.fixture
def host_targets(tmp_path: Path) -> Iterator[list[str]]:
    """Host paths a program must not be able to create."""
    name = f"agentenvs-pwned-{uuid.uuid4().hex[:8]}"
    paths = [str(tmp_path / name), f"/tmp/{name}", f"/etc/{name}", f"/usr/{name}"]
    paths.append(str(Path.home() / name))
    yield paths
    for p in paths:
        if os.path.exists(p):
            os.unlink(p)


WRITE = """
import sys
for p in sys.argv[1:] or input().split():
    try:
        with open(p, "w") as f:
            f.write("pwned")
    except OSError as exc:
        print("blocked", p, type(exc).__name__)
"""


def test_write_outside_run(backend: Sandbox, host_targets: list[str]) -> None:
    backend.run(py(WRITE, *host_targets))
    assert not [p for p in host_targets if os.path.exists(p)]


def test_write_outside_cases(backend: Sandbox, host_targets: list[str]) -> None:
    one_case(backend, WRITE, stdin=" ".join(host_targets))
    assert not [p for p in host_targets if os.path.exists(p)]


@pytest.fixture
def secret() -> Iterator[tuple[str, str]]:
    """A secret file under the host's home and a secret env var: (path, token)."""
    token = f"agentenvs-secret-{uuid.uuid4().hex}"
    path = Path.home() / f".agentenvs-test-secret-{uuid.uuid4().hex[:8]}"
    path.write_text(token)
    path.chmod(0o600)
    os.environ["AGENTENVS_TEST_SECRET"] = token
    yield str(path), token
    del os.environ["AGENTENVS_TEST_SECRET"]
    path.unlink()


READ = """
import os, sys
path = sys.argv[1] if len(sys.argv) > 1 else input()
print(sorted(os.environ.items()))
for p in [path, "/etc/shadow", "/proc/1/environ"]:
    try:
        print(open(p).read())
    except OSError as exc:
        print("blocked", p, type(exc).__name__)
"""


def test_secrets_run(backend: Sandbox, secret: tuple[str, str]) -> None:
    path, token = secret
    r = backend.run(py(READ, path))
    assert f"blocked {path}" in r.stdout
    assert token not in r.stdout + r.stderr
    assert "root:" not in r.stdout  # /etc/shadow, when the host has one, stays unreadable


def test_secrets_cases(backend: Sandbox, secret: tuple[str, str]) -> None:
    path, token = secret
    r = one_case(backend, READ, stdin=path)
    assert f"blocked {path}" in r.stdout
    assert token not in r.stdout + r.stderr
    assert "root:" not in r.stdout


def test_host_processes_invisible(backend: Sandbox) -> None:
    r = backend.run(py("import os; print(len([p for p in os.listdir('/proc') if p.isdigit()]))"))
    assert int(r.stdout) < 20  # only the sandbox's own few processes


# ----------------------------------------------------------------------------- resources
#: an upper bound on calls that must not wait for the runaway they stop (which runs for
#: ever, or 1000 s): far above any slowness of a loaded machine, so only a hang trips it
NO_HANG_S = 60

FORK_BOMB = """
import os, sys
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


def test_fork_bomb_run(backend: Sandbox, marker: str) -> None:
    start = time.monotonic()
    r = backend.run(py(FORK_BOMB, marker), timeout=3)
    assert r.timed_out and r.returncode is None
    assert time.monotonic() - start < NO_HANG_S
    still_works(backend)


def test_fork_bomb_cases(backend: Sandbox) -> None:
    r = one_case(backend, FORK_BOMB, timeout=2)
    assert r.error == "timeout"
    still_works(backend)


ALLOC = "x = bytearray(10 * 1024**3)\nprint('allocated', len(x))"


def test_memory_run(backend: Sandbox) -> None:
    r = backend.run(py(ALLOC))
    assert r.returncode != 0 and "allocated" not in r.stdout
    assert "MemoryError" in r.stderr or r.returncode in (137, -9)


def test_memory_cases(backend: Sandbox) -> None:
    r = one_case(backend, ALLOC)
    assert r.error == "memory" and "allocated" not in r.stdout


def test_infinite_loop_run(backend: Sandbox, marker: str) -> None:
    start = time.monotonic()
    r = backend.run(py("while True: pass", marker), timeout=1.5)
    assert r.timed_out and r.returncode is None
    assert time.monotonic() - start < NO_HANG_S


def test_infinite_loop_cases(backend: Sandbox) -> None:
    cases = [PyCase("stdin", stdin=s) for s in ("1", "0", "2")]
    src = "n = int(input())\nwhile not n: pass\nprint(n)"
    start = time.monotonic()
    # roomy for the cases that end at once: only the loop may reach it
    got = list(backend.run_python_cases(src, cases, timeout_per_case=3.0))
    assert [r.error for r in got] == [None, "timeout", None]
    assert [r.stdout for r in got] == ["1\n", "", "2\n"]
    assert time.monotonic() - start < NO_HANG_S


BIG_PRINT = "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * (1 << 20))"


def test_huge_output_run(backend: Sandbox) -> None:
    r = backend.run(py(BIG_PRINT), timeout=15)
    assert r.output_truncated
    assert len(r.stdout) <= backend.limits.max_output_bytes


def test_huge_output_cases(backend: Sandbox) -> None:
    r = one_case(backend, BIG_PRINT, timeout=10)
    assert r.error == "output limit"
    assert len(r.stdout) <= backend.limits.max_output_bytes


# ----------------------------------------------------------------------------- processes
def test_kill_parent_run(backend: Sandbox, marker: str) -> None:
    r = backend.run(
        py("import os, signal; os.kill(os.getppid(), signal.SIGKILL); print('ok')", marker)
    )
    assert r.returncode is not None and not r.timed_out
    r = backend.run(f"kill -9 $PPID; kill -9 1; echo {marker}")
    assert not r.timed_out
    still_works(backend)


def test_kill_parent_cases(backend: Sandbox) -> None:
    src = "import os, signal\nn = int(input())\nif n == 1:\n    os.kill(os.getppid(), signal.SIGKILL)\nprint(n)"
    cases = [PyCase("stdin", stdin=s) for s in ("0", "1", "2", "3")]
    start = time.monotonic()
    got = list(backend.run_python_cases(src, cases, timeout_per_case=3))
    assert got[0].stdout == "0\n" and got[0].error is None
    # a worker out of the case's reach (e.g. pid 1 of its namespace) runs every case;
    # otherwise the cases after it report that the worker died; never a hang
    survived = [r.stdout for r in got] == ["0\n", "1\n", "2\n", "3\n"]
    assert survived or [r.error for r in got[2:]] == ["worker died", "worker died"]
    assert time.monotonic() - start < NO_HANG_S
    still_works(backend)


def test_sigterm_parent_cases(backend: Sandbox) -> None:
    src = "import os, signal\nn = int(input())\nif n == 1:\n    os.kill(os.getppid(), signal.SIGTERM)\nprint(n)"
    got = list(backend.run_python_cases(src, [PyCase("stdin", stdin=s) for s in "012"]))
    assert [r.stdout for r in got] == ["0\n", "1\n", "2\n"]


def test_background_process_run(backend: Sandbox, marker: str) -> None:
    sleeper = f"python3 -c 'import time; time.sleep(1000)' {marker}"
    start = time.monotonic()
    r = backend.run(f"{sleeper} & (setsid {sleeper} &) ; echo started")
    assert r.stdout == "started\n" and r.returncode == 0
    assert time.monotonic() - start < NO_HANG_S  # the sleepers run for 1000 s


def test_background_process_cases(backend: Sandbox, marker: str) -> None:
    src = f"""
import os, subprocess, sys
n = int(input())
if n == 0:
    os.system("python3 -c 'import time; time.sleep(1000)' {marker} &")
    subprocess.Popen(["python3", "-c", "import time; time.sleep(1000)", "{marker}"],
                     start_new_session=True)
    if os.fork() == 0:  # a classic daemon: fork, setsid, fork
        os.setsid()
        if os.fork() == 0:
            os.execvp("python3", ["python3", "-c", "import time; time.sleep(1000)", "{marker}"])
        os._exit(0)
print(n)
"""
    got = list(backend.run_python_cases(src, [PyCase("stdin", stdin=s) for s in "01"]))
    assert [r.stdout for r in got] == ["0\n", "1\n"]
