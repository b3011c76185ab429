"""A strict call's worker (``run_python_cases``) is reaped on a thread of its own once every
answer is in: the call returns without waiting for bwrap's exit. Until it is gone the
worker stays in the sandbox's cgroup and counts toward its limits like any of its
processes; the next call waits for it before it takes a worker, and close() leaves nothing
of it.

Each test holds the used worker with a call that runs beside it, stops it from the host
before its input is closed (it cannot exit while stopped) and gives the reaping thread a
patience no test reaches, so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from _services import require_bwrap
from test_local_spare import gone

from agentenvs.sandbox import local
from agentenvs.sandbox._local_procs import _pid1
from agentenvs.sandbox.base import PyCase
from agentenvs.sandbox.local import LocalSandbox

pytestmark = [pytest.mark.bwrap, pytest.mark.timeout(300)]

ECHO = "print(int(input()) * 2)"


@pytest.fixture(params=[1, 0], ids=["spare", "fresh"])
def box(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalSandbox]:
    require_bwrap()
    # a stopped worker is never killed by the reaping thread's patience during a test
    monkeypatch.setattr(local, "_REAP_S", 120.0)
    sb = LocalSandbox(strict_spares=request.param)
    try:
        yield sb
    finally:
        sb.close()


def stopped_call(box: LocalSandbox) -> tuple[int, int, list[str]]:
    """A one-case call whose worker is stopped before its input is closed (it waits for a
    call beside it, which then ends): (bwrap's pid, the worker's host pid, the outputs)."""
    got: list[object] = []
    t, case_pid, held, pid1 = held_beside_a_long_call(box, got)
    os.kill(pid1, signal.SIGSTOP)
    os.kill(case_pid, signal.SIGKILL)  # the long call ends: the held worker is ended
    t.join(120)
    assert got and not box._held
    return held.pid, pid1, ["6\n"]


def spares(box: LocalSandbox) -> set[object]:
    with box._spare_lock:
        return {p for _, p in box._spares}


def test_a_call_returns_before_its_worker_exits(box: LocalSandbox) -> None:
    bwrap, pid1, out = stopped_call(box)
    assert out == ["6\n"]
    assert not gone(pid1) and not gone(bwrap)
    if box._cgroup is not None:  # still the sandbox's: it counts toward its limits
        assert pid1 in box._cgroup.pids()
    os.kill(pid1, signal.SIGCONT)  # its input is closed: it exits, and is reaped

    def reaped() -> bool:
        with box._lock:
            forgotten = not any(p.pid == bwrap for p in box._procs)
        return forgotten and gone(pid1) and gone(bwrap)

    deadline = time.monotonic() + 60
    while not reaped() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert reaped()


def test_the_next_call_waits_until_the_worker_is_gone(box: LocalSandbox) -> None:
    bwrap, pid1, _ = stopped_call(box)
    got: list[object] = []

    def call() -> None:
        try:
            got.append([r.stdout for r in box.run_python_cases(ECHO, [PyCase("stdin", stdin="5")])])
        except BaseException as exc:  # noqa: BLE001 - checked below
            got.append(exc)
        got.append(gone(pid1) and gone(bwrap))

    t = threading.Thread(target=call)
    t.start()
    t.join(1.0)
    # the earlier worker cannot exit while stopped: the next call has not run its program
    assert t.is_alive() and not got
    os.kill(pid1, signal.SIGCONT)
    t.join(120)
    assert got == [["10\n"], True]


def test_close_leaves_nothing_of_a_worker_being_reaped(box: LocalSandbox) -> None:
    bwrap, pid1, _ = stopped_call(box)
    cgroup_dirs = [] if box._cgroup is None else list(box._cgroup.dirs.values())
    box.close()
    assert gone(pid1) and gone(bwrap)
    assert not box._procs and not box._reaping
    assert not any(os.path.exists(d) for d in cgroup_dirs)


def test_a_worker_killed_after_its_answers_is_no_fault_of_the_next_call(
    box: LocalSandbox,
) -> None:
    # killed from outside once its call has returned: nothing of any call is lost
    bwrap, pid1, _ = stopped_call(box)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid1, signal.SIGKILL)
    assert [r.stdout for r in box.run_python_cases(ECHO, [PyCase("stdin", stdin="4")])] == ["8\n"]
    assert gone(pid1) and gone(bwrap)


def held_beside_a_long_call(
    box: LocalSandbox, got: list[object]
) -> tuple[threading.Thread, int, subprocess.Popen[bytes], int]:
    """A call that sleeps (on a thread, its results into ``got``) and a one-case call that
    ends beside it: (that thread, the long call's case pid, the short call's worker and
    its host pid)."""
    slow = "import time\ntime.sleep(120)"

    def long_call() -> None:
        runs = box.run_python_cases(slow, [PyCase("stdin", stdin="")], timeout_per_case=200)
        got.append([r.error for r in runs])

    t = threading.Thread(target=long_call)
    t.start()
    deadline = time.monotonic() + 120
    case_pid = None
    while case_pid is None and time.monotonic() < deadline:  # its case runs below pid 1
        with box._lock:
            procs = [p for p in box._procs if p not in spares(box)]
        for p in procs:
            pid1 = _pid1(p)
            if pid1 is not None:
                with contextlib.suppress(OSError), open(f"/proc/{pid1}/task/{pid1}/children") as f:
                    kids = [int(k) for k in f.read().split()]
                    case_pid = kids[0] if kids else None
        time.sleep(0.02)
    assert case_pid is not None
    gen = box.run_python_cases(ECHO, [PyCase("stdin", stdin="3")])
    first = next(gen)
    with box._reaped:
        (held,) = [p for p, _ in box._held]
    assert first.stdout == "6\n" and list(gen) == []
    pid1 = _pid1(held)
    assert pid1 is not None and not gone(pid1) and held not in box._reaping
    return t, case_pid, held, pid1


def test_a_worker_is_ended_once_the_calls_beside_it_are_over(box: LocalSandbox) -> None:
    # a call that ends while another still runs leaves its worker waiting (its exit, and
    # the next spare's start, would compete with that call) until the other is over
    got: list[object] = []
    t, case_pid, held, pid1 = held_beside_a_long_call(box, got)
    os.kill(case_pid, signal.SIGKILL)  # the long call's case ends: so does its call
    t.join(120)
    assert got and got[0] != [None]
    assert held.wait(timeout=60) is not None and gone(pid1)
    assert not box._held


def test_close_leaves_nothing_of_a_waiting_worker(box: LocalSandbox) -> None:
    got: list[object] = []
    t, _, held, pid1 = held_beside_a_long_call(box, got)
    box.close()
    t.join(120)
    assert held.poll() is not None and gone(pid1)
    assert not box._held and not box._procs
