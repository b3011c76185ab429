"""The host's reading of the case worker's answers (``harness.py``'s protocol), which every
sandbox backend shares: one answer line as a ``CaseRun``, and what the cases the worker
never answered report.

A line that is not a well-formed answer (not JSON, JSON that is not an object, fields of
the wrong type, a line over the cap) is the failure of the case it answers, never an
exception out of ``run_python_cases``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from agentenvs.sandbox.base import CaseRun

#: the error of a case the worker did not answer (it died, or its stream ended)
WORKER_DIED = "worker died"
#: the error of a case whose answer cannot be read (the worker's own word for it too)
UNREADABLE = "crashed: unreadable result"


def read_answer(line: bytes) -> dict[str, Any] | None:
    """One line of the worker's as the JSON object it holds; None when it holds none."""
    try:
        answer = json.loads(line)
    except (ValueError, RecursionError, MemoryError):
        return None
    return answer if isinstance(answer, dict) else None


def case_run(answer: Mapping[str, Any] | None) -> CaseRun:
    """One case's answer from the worker (``read_answer``), as a ``CaseRun``."""
    if answer is None:
        return CaseRun(stdout="", error=UNREADABLE)
    stdout, stderr = answer.get("stdout", ""), answer.get("stderr", "")
    error, duration = answer.get("error"), answer.get("duration_s", 0.0)
    well_formed = (
        isinstance(stdout, str)
        and isinstance(stderr, str)
        and (error is None or isinstance(error, str))
        and isinstance(duration, (int, float))
        and not isinstance(duration, bool)
        and math.isfinite(duration)
    )
    if not well_formed:
        return CaseRun(stdout="", error=UNREADABLE)
    return CaseRun(
        stdout=stdout,
        stderr=stderr,
        value=answer.get("value"),
        error=error,
        duration_s=float(duration),
    )


def unanswered(count: int) -> Iterator[CaseRun]:
    """The ``CaseRun`` of each of ``count`` cases the worker did not answer."""
    for _ in range(count):
        yield CaseRun(stdout="", error=WORKER_DIED)
