"""Every local sandbox is started from one thread that lives as long as the process.

bubblewrap's ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, which the kernel binds to the
*thread* that forked bwrap, not to its process: a sandbox started on a worker thread is
SIGKILLed the moment that thread ends (a ``ThreadPoolExecutor`` leaving its ``with``, a
server's request thread, a trainer's rollout thread), while its owner still holds it. A
warm server kept idle after the pool that started it had ended then died under the next
program, and the program's verdict became "killed from outside".

So no other thread forks bwrap itself: :func:`popen` hands the ``subprocess.Popen`` call
of any thread but the main one (which ends only with the process) to one daemon thread of
the process (started on first use, again in a forked child) and waits for its result. That thread ends only with the interpreter, when every sandbox should die
anyway, so a sandbox lives exactly as long as its owner keeps it, whichever thread
started it. The call is ``Popen``'s own (its exceptions included); the handoff costs a
few microseconds against the milliseconds of starting bwrap.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from typing import Any

_Job = tuple[tuple[Any, ...], dict[str, Any], list[Any], threading.Event]

_lock = threading.Lock()
_jobs: queue.SimpleQueue[_Job] | None = None
_thread: threading.Thread | None = None


def _serve(jobs: queue.SimpleQueue[_Job]) -> None:
    while True:
        args, kwargs, out, done = jobs.get()
        try:
            out.append(subprocess.Popen(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller
            out.append(exc)
        finally:
            done.set()


def _queue() -> queue.SimpleQueue[_Job]:
    global _jobs, _thread
    with _lock:
        if _jobs is None or _thread is None or not _thread.is_alive():
            _jobs = queue.SimpleQueue()
            _thread = threading.Thread(
                target=_serve, args=(_jobs,), name="agentenvs-sandbox-launcher", daemon=True
            )
            _thread.start()
        return _jobs


def launcher_thread() -> threading.Thread | None:
    """The thread every sandbox's bwrap is a child of (None before the first start)."""
    return _thread


def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(*args, **kwargs)``, forked from the launcher thread."""
    here = threading.current_thread()
    if here is _thread or here is threading.main_thread():
        # the main thread ends only with the process, as the launcher does
        return subprocess.Popen(*args, **kwargs)
    out: list[Any] = []
    done = threading.Event()
    _queue().put((args, kwargs, out, done))
    try:
        done.wait()
    except BaseException:
        # interrupted (a signal's exception): the start goes on regardless; undo it
        done.wait()
        if isinstance(out[0], subprocess.Popen):
            out[0].kill()
            out[0].wait()
        raise
    result = out[0]
    if isinstance(result, BaseException):
        raise result
    return result  # type: ignore[no-any-return]


def _after_fork_in_child() -> None:
    # the launcher thread does not exist in a forked child: the next start makes one
    global _jobs, _thread, _lock
    _jobs, _thread, _lock = None, None, threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
