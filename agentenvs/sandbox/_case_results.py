"""The host's reading of the case worker's answers (``harness.py``'s protocol), which every
sandbox backend shares: one answer line as a ``CaseRun``, and what the cases the worker
never answered report.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from agentenvs.sandbox.base import CaseRun

#: the error of a case the worker did not answer (it died, or its stream ended)
WORKER_DIED = "worker died"


def case_run(answer: Mapping[str, Any]) -> CaseRun:
    """One case's answer line from the worker, as a ``CaseRun``."""
    return CaseRun(
        stdout=answer.get("stdout", ""),
        stderr=answer.get("stderr", ""),
        value=answer.get("value"),
        error=answer.get("error"),
        duration_s=float(answer.get("duration_s", 0.0)),
    )


def unanswered(count: int) -> Iterator[CaseRun]:
    """The ``CaseRun`` of each of ``count`` cases the worker did not answer."""
    for _ in range(count):
        yield CaseRun(stdout="", error=WORKER_DIED)
