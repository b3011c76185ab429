"""The local sandbox's warm fork servers under concurrency: at most ``warm_servers`` of
them, callers beyond the cap queued until one comes back (``agentenvs/sandbox/_local_warm.py``).

Every test drives real servers (bwrap, a forked program per call) from several threads
and counts the servers the sandbox started; nothing depends on how fast the machine is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from _services import require_bwrap

from agentenvs.core.errors import SandboxError
from agentenvs.sandbox.base import SandboxProcess
from agentenvs.sandbox.local import LocalSandbox

pytestmark = [pytest.mark.bwrap, pytest.mark.timeout(300)]

#: a program that answers one line with the same line, after a short nap
ECHO = (
    "import os, time\n"
    "def serve(r, w):\n"
    "    data = os.read(r, 100)\n"
    "    time.sleep(0.05)\n"
    "    os.write(w, data)\n"
)
OTHER = ECHO + "# another kind of server\n"


def _echo(proc: SandboxProcess, text: str) -> bytes:
    proc.write(text.encode() + b"\n")
    got = b""
    deadline = time.monotonic() + 60
    while b"\n" not in got and not proc.eof and time.monotonic() < deadline:
        got += proc.read(1.0)
    return got


@pytest.fixture
def capped() -> Iterator[LocalSandbox]:
    require_bwrap()
    with LocalSandbox(warm_servers=2) as box:
        yield box


def _run(box: LocalSandbox, i: int, source: str = ECHO) -> bytes:
    proc = box.spawn_warm(source, "serve", ())
    try:
        return _echo(proc, f"call{i}")
    finally:
        proc.kill()


def test_callers_beyond_the_cap_are_all_served_by_no_more_servers_than_the_cap(
    capped: LocalSandbox,
) -> None:
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda i: _run(capped, i), range(24)))
    assert got == [f"call{i}\n".encode() for i in range(24)]
    warm = capped._warm
    assert warm.started <= 2
    assert warm.peak <= 2
    # the servers came back and serve again
    assert _run(capped, 99) == b"call99\n"
    assert warm.started <= 2


def test_without_a_cap_each_caller_at_once_gets_a_server_of_its_own() -> None:
    require_bwrap()
    with LocalSandbox(warm_servers=None) as box:
        gate = threading.Barrier(4)

        def hold(i: int) -> bytes:
            proc = box.spawn_warm(ECHO, "serve", ())
            try:
                gate.wait(timeout=120)  # four programs at once
                return _echo(proc, f"p{i}")
            finally:
                proc.kill()

        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(hold, range(4))) == [f"p{i}\n".encode() for i in range(4)]
        assert box._warm.started == 4


def test_a_caller_that_holds_a_program_is_not_queued_behind_itself(
    capped: LocalSandbox,
) -> None:
    procs = [capped.spawn_warm(ECHO, "serve", ()) for _ in range(3)]
    try:
        assert [_echo(p, f"h{i}") for i, p in enumerate(procs)] == [b"h0\n", b"h1\n", b"h2\n"]
    finally:
        for proc in procs:
            proc.kill()
    warm = capped._warm
    assert warm.started == 3
    # the server beyond the cap was retired when its program ended: two stay
    assert sum(len(group) for group in warm._idle.values()) == 2


def test_at_the_cap_an_idle_server_of_another_kind_makes_room() -> None:
    require_bwrap()
    with LocalSandbox(warm_servers=1) as box:
        assert _run(box, 1) == b"call1\n"
        assert _run(box, 2, OTHER) == b"call2\n"
        assert _run(box, 3) == b"call3\n"
        warm = box._warm
        assert warm.started == 3 and warm.peak == 1


def test_closing_the_sandbox_ends_the_wait_of_queued_callers() -> None:
    require_bwrap()
    box = LocalSandbox(warm_servers=1)
    errors: list[BaseException] = []
    try:
        held = box.spawn_warm(ECHO, "serve", ())

        def wait_for_one() -> None:
            try:
                box.spawn_warm(ECHO, "serve", ())
            except BaseException as exc:  # noqa: BLE001 - what the waiter got
                errors.append(exc)

        waiter = threading.Thread(target=wait_for_one)
        waiter.start()
        deadline = time.monotonic() + 60
        while not box._warm._queue and time.monotonic() < deadline:
            time.sleep(0.01)
        assert box._warm._queue  # it waits for the one server, which is held
        box.close()
        waiter.join(60)
        assert not waiter.is_alive()
        held.kill()
    finally:
        box.close()
    assert len(errors) == 1 and isinstance(errors[0], SandboxError), errors


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "two"])
def test_the_cap_must_be_a_positive_integer(bad: object) -> None:
    require_bwrap()
    with pytest.raises(ValueError, match="warm_servers"):
        LocalSandbox(warm_servers=bad)  # type: ignore[arg-type]
