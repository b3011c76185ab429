"""Whose turn it is on the model of ``agentenvs serve-model``: a fair scheduler.

One thread runs the model. A request's work comes in turns (``ServeLimits.turn_sequences``
sequences generated or scored, one log-prob pass), and a request waits for one turn to end
before it asks for the next, so the turns of the requests under way run in round-robin:
a request of one sample that comes while one of sixteen runs waits for one turn of it,
not for all sixteen. A request past its deadline gets no further turn
(``RequestTimedOut``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class RequestTimedOut(Exception):
    """A request ran past its time (``ServeLimits.request_timeout``) before its work was done."""


class _Turn:
    def __init__(self, work: Callable[[], Any], deadline: float) -> None:
        self.work = work
        self.deadline = deadline
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class FairScheduler:
    """Run each request's turns on one thread, first come first served per turn (a request
    has at most one turn waiting, so the requests under way take turns)."""

    def __init__(self) -> None:
        self._waiting: deque[_Turn] = deque()
        self._cond = threading.Condition()
        self._closed = False
        #: turns run so far (a request's turns, in order: what the tests read)
        self.turns_run = 0
        self.thread = threading.Thread(target=self._loop, name="serve-model-model", daemon=True)
        self.thread.start()

    def run(self, work: Callable[[], T], deadline: float) -> T:
        """Run ``work`` on the model thread at the caller's turn and return its result
        (its exception raised here); ``RequestTimedOut`` where ``deadline`` (a
        ``time.monotonic()``) passes first."""
        if time.monotonic() >= deadline:
            raise RequestTimedOut("the request ran out of time")
        turn = _Turn(work, deadline)
        with self._cond:
            if self._closed:
                raise RuntimeError("the server is stopping")
            self._waiting.append(turn)
            self._cond.notify()
        # a turn under way is not cut short; one still waiting is dropped
        if not turn.done.wait(max(0.0, deadline - time.monotonic())):
            with self._cond:
                if turn in self._waiting:
                    self._waiting.remove(turn)
            raise RequestTimedOut("the request ran out of time waiting for the model")
        if turn.error is not None:
            raise turn.error
        return turn.result  # type: ignore[no-any-return]

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait()
                if self._closed and not self._waiting:
                    return
                turn = self._waiting.popleft()
            if time.monotonic() >= turn.deadline:
                turn.error = RequestTimedOut("the request ran out of time waiting for the model")
            else:
                try:
                    turn.result = turn.work()
                except BaseException as exc:  # noqa: BLE001 - handed to the request's thread
                    turn.error = exc
                self.turns_run += 1
            turn.done.set()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for turn in self._waiting:
                turn.error = RuntimeError("the server is stopping")
                turn.done.set()
            self._waiting.clear()
            self._cond.notify_all()
        self.thread.join(timeout=60)
