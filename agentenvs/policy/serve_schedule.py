"""Whose turn it is on the model of ``agentenvs serve-model``: a fair scheduler.

One thread runs the model, a turn at a time: a request's generation (all its samples in
one batch, as the policy batches them) or one log-prob pass. Turns wait first come first
served, and a request has at most one waiting. A generation under way gives way between
its decoding steps (``between_steps``, which ``HFPolicy.generate`` calls after each
step): the turn waiting longest runs there, to its end, and the generation goes on
where it was. So a one-sample request that comes while a sixteen-sample one of 512
tokens runs waits one decoding step of it, not all 512; and the large one keeps its
batch (a request cut into smaller batches would pay for it in throughput). A turn run
inside another does not give way in turn (one level, so the memory held is two
generations' at most). A request past its deadline gets no further turn, and its
generation ends at its next step (``RequestTimedOut``).
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
    """Run turns on one model thread, first come first served, a generation giving way to
    the turn waiting longest between its decoding steps (see the module docstring)."""

    def __init__(self) -> None:
        self._waiting: deque[_Turn] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._current: _Turn | None = None
        self._nested = False
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
        # a turn under way ends at its next step past the deadline; one waiting is dropped
        if not turn.done.wait(max(0.0, deadline - time.monotonic()) + 1.0):
            with self._cond:
                if turn in self._waiting:
                    self._waiting.remove(turn)
            if not turn.done.is_set():
                raise RequestTimedOut("the request ran out of time waiting for the model")
        turn.done.wait()
        if turn.error is not None:
            raise turn.error
        return turn.result  # type: ignore[no-any-return]

    def between_steps(self) -> None:
        """Called on the model thread between a generation's decoding steps: end the turn
        past its deadline, else run the turn waiting longest (not inside a turn that
        itself runs inside another)."""
        current = self._current
        if current is not None and time.monotonic() >= current.deadline:
            raise RequestTimedOut("the request ran out of time while the model ran it")
        if self._nested:
            return
        with self._cond:
            if not self._waiting:
                return
            turn = self._waiting.popleft()
        self._nested = True
        try:
            self._execute(turn)
        finally:
            self._nested = False
            self._current = current

    def _execute(self, turn: _Turn) -> None:
        if time.monotonic() >= turn.deadline:
            turn.error = RequestTimedOut("the request ran out of time waiting for the model")
        else:
            self._current = turn
            try:
                turn.result = turn.work()
            except BaseException as exc:  # noqa: BLE001 - handed to the request's thread
                turn.error = exc
        turn.done.set()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait()
                if self._closed and not self._waiting:
                    return
                turn = self._waiting.popleft()
            self._execute(turn)
            self._current = None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for turn in self._waiting:
                turn.error = RuntimeError("the server is stopping")
                turn.done.set()
            self._waiting.clear()
            self._cond.notify_all()
        self.thread.join(timeout=60)
