"""A local sandbox lives as long as its owner holds it, whichever thread started it.

bwrap's ``--die-with-parent`` follows the thread that forks it: sandbox processes started
on the threads of a pool that then ended (a ``ThreadPoolExecutor`` leaving its ``with``)
were SIGKILLed under their owner (7 of 8 here), and a DeepCoder program run on a warm
server such a pool had started read "killed from outside". Each test starts processes on
threads, lets the threads end, then uses the processes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from agentenvs.sandbox import Sandbox
from agentenvs.sandbox.base import SandboxProcess

pytestmark = [pytest.mark.bwrap, pytest.mark.timeout(300)]


def _on_ended_thread(start: Callable[[], Any]) -> Any:
    """``start()`` on a thread of its own; returned once the kernel has ended that thread."""
    out: list[Any] = []
    ids: list[int] = []

    def body() -> None:
        ids.append(threading.get_native_id())
        out.append(start())

    t = threading.Thread(target=body)
    t.start()
    t.join()
    task = f"/proc/self/task/{ids[0]}"
    deadline = time.monotonic() + 60
    while os.path.exists(task) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not os.path.exists(task), "the starting thread never ended"
    return out[0]


def _echo(proc: SandboxProcess, text: str) -> bytes:
    proc.write(text.encode() + b"\n")
    got = b""
    deadline = time.monotonic() + 60
    while b"\n" not in got and not proc.eof and time.monotonic() < deadline:
        got += proc.read(1.0)
    return got


def test_a_spawned_process_outlives_the_thread_that_started_it(local_box: Sandbox) -> None:
    proc = _on_ended_thread(lambda: local_box.spawn(["cat"]))
    try:
        assert _echo(proc, "still here") == b"still here\n"
        assert proc.fault() is None
    finally:
        proc.kill()


def test_warm_servers_outlive_the_pool_that_started_them(local_box: Sandbox) -> None:
    warm = getattr(local_box, "spawn_warm", None)
    assert warm is not None
    source = "import os\ndef serve(r, w):\n    data = os.read(r, 100)\n    os.write(w, data)\n"
    gate = threading.Barrier(4)

    def start_and_end(i: int) -> bytes:
        proc = warm(source, "serve", ())
        try:
            gate.wait(timeout=120)  # four programs at once: four servers
            return _echo(proc, f"first{i}")
        finally:
            proc.kill()  # its server goes back to the idle ones; the pool then ends

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(start_and_end, range(4))) == [f"first{i}\n".encode() for i in range(4)]
    # the idle servers the ended pool started serve the next programs, which must not die
    procs = [warm(source, "serve", ()) for _ in range(4)]
    try:
        for i, proc in enumerate(procs):
            assert _echo(proc, f"second{i}") == f"second{i}\n".encode()
            assert proc.fault() is None
    finally:
        for proc in procs:
            proc.kill()


def test_starts_from_many_threads_at_once_each_get_their_own_process(local_box: Sandbox) -> None:
    def start(i: int) -> SandboxProcess:
        return local_box.spawn(["cat"])

    with ThreadPoolExecutor(8) as pool:
        procs = list(pool.map(start, range(8)))
    try:
        for i, proc in enumerate(procs):
            assert _echo(proc, f"p{i}") == f"p{i}\n".encode()
    finally:
        for proc in procs:
            proc.kill()


def _run_in_fresh_box(queue: Any) -> None:
    from agentenvs.sandbox import make_sandbox

    box = make_sandbox("local")
    try:
        queue.put(box.run("echo from-the-child", timeout=60).stdout)
    finally:
        box.close()


def test_a_forked_child_starts_sandboxes_of_its_own(local_box: Sandbox) -> None:
    import multiprocessing

    assert local_box.run("true", timeout=60).returncode == 0  # the launcher runs here
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_run_in_fresh_box, args=(queue,))
    child.start()
    try:
        assert queue.get(timeout=120) == "from-the-child\n"
    finally:
        child.join(timeout=60)
    assert child.exitcode == 0
