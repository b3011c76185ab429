"""Faults in runs and analyses: retried with the same seed, counted, never scored.

An infrastructure failure (``agentenvs.core.errors.Fault``: a killed sandbox, a lost
database, a model server's error) is not the agent's doing, so it may neither earn a
reward nor count as a failure. Whoever runs episodes here treats it the same way:

- the item (a trajectory, a state of an analysis, a trajectory to score) is run again
  from the start with the same seed, at most ``max_fault_retries`` times, after a short
  backoff (``fault_backoff`` seconds, doubled each time, at most ``MAX_BACKOFF``);
  ``retry_faults`` does that, in the worker that ran it;
- an item that succeeds keeps the faults that preceded it (``"faults"``: a list of
  ``Fault.record()``, each with its ``attempt``); an item out of retries (or whose fault
  says it is not ``retryable``) is no sample: it goes to ``faults.jsonl`` beside the
  results, never into them, and the run stops at once with ``FaultLimitError`` naming
  its faults. Resuming re-runs it (it is not among the results), so nothing is lost or
  repeated;
- a worker process that dies is a fault of kind ``worker`` (``WorkerLostError``): the
  work left is run again on new workers, at most ``max_fault_retries`` times in a row
  without a finished item in between, each loss one line of ``faults.jsonl``;
- ``max_fault_rate`` (off by default) also stops a run whose faulted attempts pass that
  share of its attempts, once ``MIN_ATTEMPTS_FOR_RATE`` attempts were made.

``fault_summary`` counts it all from the files (so a report of a stopped or resumed run
counts every fault once): per task and in all, the attempts (finished items plus faults),
the faults by kind, the fault rate (faults per attempt), the items that ran out of
retries and the worker losses, which belong to no task.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agentenvs.core.errors import AgentEnvsError, Fault

FAULTS_NAME = "faults.jsonl"
DEFAULT_MAX_FAULT_RETRIES = 3
#: seconds before the first retry of a faulted item; doubled for each retry after it
DEFAULT_FAULT_BACKOFF = 1.0
MAX_BACKOFF = 10.0
#: a fault rate is judged against ``max_fault_rate`` only after this many attempts
MIN_ATTEMPTS_FOR_RATE = 20

T = TypeVar("T")


class FaultLimitError(AgentEnvsError):
    """A run stopped because its faults passed the bound (an item out of retries, a fault
    rate past the limit, workers lost in a row); ``faults`` are the records that did it.
    What finished is kept: resuming the same run re-runs the faulted items."""

    def __init__(self, message: str, faults: Iterable[dict[str, Any]] = ()) -> None:
        self.faults = list(faults)
        super().__init__(message)


@dataclass(frozen=True)
class Faulted:
    """What a worker returns for an item that ran out of fault retries: its faults, and
    the line for ``faults.jsonl`` that names the item."""

    faults: tuple[dict[str, Any], ...]
    line: bytes = b""


def backoff_delay(backoff: float, retry: int) -> float:
    """Seconds to wait before retry number ``retry`` (0-based)."""
    return min(MAX_BACKOFF, backoff * (2**retry)) if backoff > 0 else 0.0


def check_bounds(
    max_fault_retries: int, fault_backoff: float, max_fault_rate: float | None
) -> None:
    if isinstance(max_fault_retries, bool) or int(max_fault_retries) != max_fault_retries:
        raise ValueError(f"max_fault_retries must be an int, got {max_fault_retries!r}")
    if max_fault_retries < 0:
        raise ValueError(f"max_fault_retries must be >= 0, got {max_fault_retries}")
    if fault_backoff < 0:
        raise ValueError(f"fault_backoff must be >= 0 seconds, got {fault_backoff}")
    if max_fault_rate is not None and not 0.0 <= max_fault_rate <= 1.0:
        raise ValueError(f"max_fault_rate must lie in [0, 1], got {max_fault_rate}")


def retry_faults(
    attempt: Callable[[], T],
    *,
    max_retries: int = DEFAULT_MAX_FAULT_RETRIES,
    backoff: float = DEFAULT_FAULT_BACKOFF,
    after_fault: Callable[[Fault], None] | None = None,
) -> tuple[T | Faulted, list[dict[str, Any]]]:
    """Call ``attempt()`` until it returns, retrying on ``Fault`` (and on nothing else).

    Returns ``(result, faults)``: the first result and the records of the faults before
    it, or ``(Faulted(faults), faults)`` once ``max_retries`` retries faulted too or a
    fault is not retryable. ``after_fault(fault)`` runs after each fault (e.g. to drop an
    env the fault may have left broken; the next attempt builds a new one).
    """
    faults: list[dict[str, Any]] = []
    for retry in range(max_retries + 1):
        try:
            return attempt(), faults
        except Fault as fault:
            faults.append({**fault.record(), "attempt": retry + 1})
            if after_fault is not None:
                after_fault(fault)
            if not fault.retryable or retry == max_retries:
                break
            time.sleep(backoff_delay(backoff, retry))
    return Faulted(tuple(faults)), faults


def close_quietly(resource: Any) -> None:
    """Close what a fault may have broken: a second failure there says nothing new (the
    fault is already recorded) and must not turn the retry into a crash."""
    close = getattr(resource, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):
            close()


def describe(faults: Iterable[dict[str, Any]], most: int = 3) -> str:
    """A short account of fault records for a message: kind, attribution and message."""
    faults = list(faults)
    shown = [
        f"{f.get('kind', '?')} ({f.get('attribution', '?')}): {str(f.get('message', ''))[:160]}"
        for f in faults[:most]
    ]
    more = f"; and {len(faults) - most} more" if len(faults) > most else ""
    return "; ".join(shown) + more


def worker_fault_record(exc: BaseException) -> dict[str, Any]:
    """The record of a lost worker (a ``WorkerLostError``, itself a ``Fault``)."""
    if isinstance(exc, Fault):
        return exc.record()
    return Fault(str(exc), kind="worker", attribution="unknown").record()


# ---------------------------------------------------------------- riding out worker loss
@dataclass
class FaultTally:
    """What a driver counts as results arrive, to judge ``max_fault_rate`` as it goes."""

    max_fault_rate: float | None = None
    finished: int = 0
    faults: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)

    def add(self, faults: Iterable[dict[str, Any]], *, finished: bool) -> None:
        faults = list(faults)
        self.faults += len(faults)
        self.by_kind.update(str(f.get("kind", "other")) for f in faults)
        self.finished += bool(finished)

    @property
    def attempts(self) -> int:
        return self.finished + self.faults

    def check_rate(self, recent: Iterable[dict[str, Any]] = ()) -> None:
        """Raise ``FaultLimitError`` when the fault rate passed ``max_fault_rate``."""
        if self.max_fault_rate is None or self.attempts < MIN_ATTEMPTS_FOR_RATE:
            return
        rate = self.faults / self.attempts
        if rate > self.max_fault_rate:
            kinds = ", ".join(f"{k} {n}" for k, n in self.by_kind.most_common())
            raise FaultLimitError(
                f"{self.faults} of {self.attempts} attempts faulted ({rate:.1%}, more than "
                f"max_fault_rate {self.max_fault_rate:.1%}; by kind: {kinds}); last: "
                f"{describe(recent)}. What finished is kept: fix the infrastructure and run "
                "the same command again to resume",
                recent,
            )


def ride_out_worker_loss(
    run_rest: Callable[[], None],
    *,
    progress: Callable[[], int],
    max_retries: int,
    backoff: float,
    log_loss: Callable[[dict[str, Any]], None],
) -> int:
    """Call ``run_rest()`` (which runs the work not done yet on new workers) until it
    returns; a ``WorkerLostError`` is logged (``log_loss``) and the rest run again, at
    most ``max_retries`` times in a row without ``progress()`` (items finished) moving.
    Returns how many workers were lost."""
    from agentenvs.eval.executors import WorkerLostError

    lost = 0
    in_a_row = 0
    last = progress()
    while True:
        try:
            run_rest()
            return lost
        except WorkerLostError as exc:
            record = worker_fault_record(exc)
            log_loss(record)
            lost += 1
            now = progress()
            in_a_row = 1 if now > last else in_a_row + 1
            last = now
            if in_a_row > max_retries:
                raise FaultLimitError(
                    f"worker processes died {in_a_row} times in a row without finishing "
                    f"anything (max_fault_retries {max_retries}): {describe([record])}. What "
                    "finished is kept: run the same command again to resume",
                    [record],
                ) from exc
            time.sleep(backoff_delay(backoff, in_a_row - 1))


# ---------------------------------------------------------------- counting from files
def iter_fault_lines(path: str | Path) -> Iterator[dict[str, Any]]:
    """The records of a ``faults.jsonl`` (none when it does not exist)."""
    from agentenvs.eval.records import iter_records

    yield from iter_records(path)


def _task_entry() -> dict[str, Any]:
    return {"attempts": 0, "finished": 0, "faults": 0, "faulted": 0, "with_faults": 0}


def fault_summary(
    results: Iterable[dict[str, Any]],
    fault_lines: Iterable[dict[str, Any]],
    *,
    group: str = "task_id",
) -> dict[str, Any]:
    """Fault counts of a run or an analysis, from its results and its ``faults.jsonl``.

    ``results`` are the finished items (their ``faults`` fields: faults retried away);
    ``fault_lines`` hold items that ran out of retries (``type`` ``"item"``), lost
    workers (``type`` ``"worker"``) and the faults of a driver's own stage (``"stage"``:
    collecting an analysis' states), which belong to no task either. Per ``group`` (the task) and in all: ``attempts``
    (finished items plus faults), ``faults``, ``rate`` (faults per attempt), ``faulted``
    (times an item ran out of retries), ``with_faults`` (finished items that needed a
    retry); in all also ``by_kind`` and ``worker_losses`` (which belong to no task).
    """
    per: dict[str, dict[str, Any]] = {}
    kinds: Counter[str] = Counter()
    worker_losses = 0
    for record in results:
        faults = record.get("faults") or []
        entry = per.setdefault(str(record.get(group)), _task_entry())
        entry["finished"] += 1
        entry["faults"] += len(faults)
        entry["with_faults"] += bool(faults)
        kinds.update(str(f.get("kind", "other")) for f in faults)
    stage_faults = 0
    for line in fault_lines:
        if line.get("type") == "worker":
            worker_losses += 1
            kinds["worker"] += 1
            continue
        if line.get("type") == "stage":  # e.g. collecting states in the driver
            stage_faults += len(line.get("faults") or [])
            kinds.update(str(f.get("kind", "other")) for f in line.get("faults") or [])
            continue
        faults = line.get("faults") or []
        entry = per.setdefault(str(line.get(group)), _task_entry())
        entry["faults"] += len(faults)
        entry["faulted"] += 1
        kinds.update(str(f.get("kind", "other")) for f in faults)
    total = _task_entry()
    for entry in per.values():
        entry["attempts"] = entry["finished"] + entry["faults"]
        entry["rate"] = entry["faults"] / entry["attempts"] if entry["attempts"] else 0.0
        for name in ("finished", "faults", "faulted", "with_faults"):
            total[name] += entry[name]
    total["faults"] += worker_losses + stage_faults
    total["attempts"] = total["finished"] + total["faults"]
    total["rate"] = total["faults"] / total["attempts"] if total["attempts"] else 0.0
    return {
        **total,
        "worker_losses": worker_losses,
        "stage_faults": stage_faults,
        "by_kind": dict(sorted(kinds.items())),
        "by_task": {task: per[task] for task in sorted(per)},
    }


def read_fault_summary(
    results: Iterable[dict[str, Any]], out_dir: str | Path, *, group: str = "task_id"
) -> dict[str, Any]:
    """``fault_summary`` of ``results`` and the ``faults.jsonl`` in ``out_dir``."""
    return fault_summary(results, iter_fault_lines(Path(out_dir) / FAULTS_NAME), group=group)


def fault_line(summary: dict[str, Any]) -> str:
    """One sentence of a fault summary, for summary lines and reports."""
    if not summary["faults"]:
        return f"no faults (fault rate 0% of {summary['attempts']} attempts)"
    kinds = ", ".join(f"{k} {n}" for k, n in summary["by_kind"].items())
    text = (
        f"{summary['faults']} fault(s) in {summary['attempts']} attempts (fault rate "
        f"{summary['rate']:.1%}; {kinds}), retried with the same seeds and never scored"
    )
    if summary["faulted"]:
        text += f"; {summary['faulted']} time(s) an item ran out of retries (no sample)"
    if summary["worker_losses"]:
        text += f"; {summary['worker_losses']} worker(s) lost"
    return text


def fault_markdown(summary: dict[str, Any], env_id: str, *, group_label: str = "task") -> str:
    """The fault rate of a run's env and of each task that saw a fault, as Markdown."""
    lines = [
        "### Faults",
        "",
        f"{env_id}: {fault_line(summary)}.",
    ]
    faulty = {t: e for t, e in summary["by_task"].items() if e["faults"] or e["faulted"]}
    if faulty:
        lines += [
            "",
            f"| {group_label} | attempts | faults | fault rate | out of retries |",
            "|---|---|---|---|---|",
        ]
        for task, entry in faulty.items():
            lines.append(
                f"| {task} | {entry['attempts']} | {entry['faults']} | {entry['rate']:.1%} | "
                f"{entry['faulted']} |"
            )
    return "\n".join(lines) + "\n"
