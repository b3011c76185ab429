"""Strict case workers started ahead (``LocalSandbox(strict_spares=...)``): a call takes a
spare that has read nothing yet, gives what a fresh worker gives, and no program reaches a
spare; a dead spare is never used, and close leaves none behind.

Every test drives real workers under bwrap; nothing depends on how fast the machine is.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from _services import require_bwrap

from agentenvs.core.errors import Fault
from agentenvs.sandbox._local_procs import _pid1
from agentenvs.sandbox.base import PyCase
from agentenvs.sandbox.local import LocalSandbox

pytestmark = [pytest.mark.bwrap, pytest.mark.timeout(300)]


@pytest.fixture
def box() -> Iterator[LocalSandbox]:
    require_bwrap()
    sb = LocalSandbox()
    try:
        yield sb
    finally:
        sb.close()


def ready_spares(box: LocalSandbox, n: int = 1) -> list[subprocess.Popen[bytes]]:
    """The sandbox's spares once ``n`` of them wait (started by an earlier call)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with box._spare_lock:
            procs = [p for _, p in box._spares]
        if len(procs) >= n and all(_pid1(p) for p in procs):
            return procs
        time.sleep(0.05)
    raise AssertionError(f"{n} spare(s) never came up")


def cases(box: LocalSandbox, src: str, inputs: str = "0") -> list[str]:
    return [r.stdout for r in box.run_python_cases(src, [PyCase("stdin", stdin=s) for s in inputs])]


ECHO = "print(int(input()) * 2)"


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].startswith("Z")  # a zombie is no process
    except OSError:
        return True


def test_a_call_takes_the_spare_and_the_next_one_is_started(box: LocalSandbox) -> None:
    assert cases(box, ECHO, "12") == ["2\n", "4\n"]  # fresh: the first call starts the spare
    (spare,) = ready_spares(box)
    assert cases(box, ECHO, "34") == ["6\n", "8\n"]
    assert spare.wait(timeout=60) is not None  # taken, run, ended (reaped behind the call)
    (nxt,) = ready_spares(box)
    assert nxt is not spare


def test_results_on_a_spare_match_a_fresh_worker() -> None:
    require_bwrap()
    src = (
        "import os, sys, json\nn = int(input())\n"
        "if n == 1:\n    sys.exit(3)\n"
        "if n == 2:\n    raise ValueError('x')\n"
        "open('/work/f', 'w').write('y')\n"
        "print(json.dumps([os.listdir('/work'), os.getuid(), sorted(os.environ)]))"
    )
    with LocalSandbox(strict_spares=0) as fresh, LocalSandbox() as spared:
        want = [
            (r.stdout, r.error) for r in fresh.run_python_cases(src, [PyCase("stdin", stdin="0")])
        ]
        assert not fresh._spares and not fresh._spare_starts
        cases(spared, ECHO)
        ready_spares(spared)
        for _ in range(2):  # on the spare, then on the next one
            runs = list(spared.run_python_cases(src, [PyCase("stdin", stdin=s) for s in "0120"]))
            got = [(r.stdout, r.error) for r in runs]
            assert got[0] == got[3] == want[0]  # /work is fresh on a spare too: only f
            assert json.loads(got[0][0])[0] == ["f"]
            assert runs[1].error != runs[2].error and "ValueError" in str(runs[2].error)
            ready_spares(spared)


def test_a_spare_is_pid_1_of_its_own_namespace(box: LocalSandbox) -> None:
    cases(box, ECHO)
    (spare,) = ready_spares(box)
    pid1 = _pid1(spare)
    assert pid1 is not None
    with open(f"/proc/{pid1}/status") as f:
        nspid = next(line for line in f if line.startswith("NSpid:")).split()[1:]
    assert nspid[-1] == "1" and len(nspid) >= 2
    assert os.readlink(f"/proc/{pid1}/ns/pid") != os.readlink("/proc/self/ns/pid")


@pytest.mark.parametrize("wait", [True, False])
def test_a_spare_killed_from_outside_is_not_used(box: LocalSandbox, wait: bool) -> None:
    cases(box, ECHO)
    (spare,) = ready_spares(box)
    pid1 = _pid1(spare)
    assert pid1 is not None
    os.kill(pid1, signal.SIGKILL)
    if wait:  # ended before the call: never taken
        spare.wait(timeout=60)
    # without waiting it may still look alive when taken: the call then starts fresh
    assert cases(box, ECHO, "56") == ["10\n", "12\n"]
    assert spare.wait(timeout=60) is not None
    assert ready_spares(box)[0] is not spare


def test_a_spare_killed_during_its_call_is_a_fault(box: LocalSandbox) -> None:
    # taken, then killed from the host while the program runs: the same fault as a fresh
    # worker's (test_sandbox_faults.py)
    cases(box, ECHO)
    (spare,) = ready_spares(box)
    got: list[BaseException | list[str]] = []

    def call() -> None:
        try:
            got.append(cases(box, "import time\nprint(1, flush=True)\ntime.sleep(30)"))
        except BaseException as exc:  # noqa: BLE001 - checked below
            got.append(exc)

    t = threading.Thread(target=call)
    t.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # taken, and the program's case runs below pid 1
        pid1 = _pid1(spare)
        with box._spare_lock:
            taken = all(p is not spare for _, p in box._spares)
        if taken and pid1 is not None and os.path.exists(f"/proc/{pid1}/task/{pid1}/children"):
            with open(f"/proc/{pid1}/task/{pid1}/children") as f:
                if f.read().split():
                    break
        time.sleep(0.02)
    time.sleep(0.3)
    assert pid1 is not None
    os.kill(pid1, signal.SIGKILL)
    t.join(120)
    assert len(got) == 1 and isinstance(got[0], Fault), got
    assert "killed from outside" in str(got[0]) and got[0].kind == "sandbox"
    assert cases(box, ECHO, "3") == ["6\n"]


def test_a_program_cannot_reach_a_waiting_spare() -> None:
    require_bwrap()
    src = (
        "import os, signal, json\n"
        "try:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n"
        "pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
        "print(json.dumps([pids, os.getpid()]))"
    )
    with LocalSandbox(strict_spares=2) as box:
        cases(box, ECHO)
        before = ready_spares(box, 2)
        out = cases(box, src)[0]
        pids, me = json.loads(out)
        # only the worker (pid 1) and the program itself: nothing of any spare
        assert set(pids) - {1, me} == set()
        with box._spare_lock:
            waiting = [p for _, p in box._spares]
        kept = [p for p in before if p in waiting]
        assert len(kept) == 1  # one taken by the call, the other untouched
        assert box._spare_waits(kept[0])
        # and it still works: the next call takes it
        assert cases(box, ECHO, "7") == ["14\n"]
        assert kept[0].wait(timeout=60) is not None


def test_a_spare_started_for_other_limits_is_not_taken(box: LocalSandbox) -> None:
    src = "import os\ns = os.statvfs('/work')\nprint(s.f_blocks * s.f_frsize >> 20)"
    cases(box, ECHO)
    (spare,) = ready_spares(box)
    box.limits = replace(box.limits, disk_mb=box.limits.disk_mb + 7)
    assert cases(box, src) == [f"{box.limits.disk_mb}\n"]
    assert spare.poll() is not None  # discarded, not used


def children() -> set[int]:
    kids: set[int] = set()
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/children") as f:
            kids.update(int(p) for p in f.read().split())
    return kids


def test_close_leaves_no_spare() -> None:
    require_bwrap()
    before = children()
    box = LocalSandbox()
    cases(box, ECHO)
    (spare,) = ready_spares(box)
    pid1 = _pid1(spare)
    assert cases(box, ECHO) == ["0\n"]  # takes it; the next is starting as we close
    box.close()
    assert spare.poll() is not None and pid1 is not None and gone(pid1)
    assert not box._spares and not box._spare_starts and not box._procs
    assert all(gone(p) for p in children() - before)


def test_reset_keeps_the_spare(box: LocalSandbox) -> None:
    cases(box, ECHO)
    (spare,) = ready_spares(box)
    box.reset()
    assert box._spare_waits(spare)
    assert cases(box, ECHO, "4") == ["8\n"]
    assert spare.wait(timeout=60) is not None


def test_strict_spares_is_checked() -> None:
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="strict_spares"):
            LocalSandbox(strict_spares=bad)  # type: ignore[arg-type]
