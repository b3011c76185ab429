"""The runner's writes and worker count: trajectory lines gathered into batches and
written before a run stops (an error, SIGTERM), the serializer's fallbacks, the turn
seeds, and the local workers capped at the usable cores."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_runner import HERE, config, lines

from agentenvs.eval.executors import (
    OVERSUBSCRIBE_VARIABLE,
    InlineExecutor,
    OversubscribeWarning,
    capped_workers,
    default_workers,
)
from agentenvs.eval.records import (
    TRAJECTORIES_NAME,
    JsonlAppender,
    dumps_line,
    dumps_record,
    read_records,
    stable_seed,
    turn_seeds,
)
from agentenvs.eval.runner import run_pass_at_k_t


# ---------------------------------------------------------------- the batched writer
def test_a_batch_is_written_at_close_and_by_its_timer(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    with JsonlAppender(path, batch_seconds=3600) as out:
        out.write(b'{"a":1}\n')
        out.write(b'{"a":2}\n')
        assert path.read_bytes() == b""  # gathered, not yet written
    assert path.read_bytes() == b'{"a":1}\n{"a":2}\n'
    with JsonlAppender(path, batch_seconds=0.05) as out:
        out.write(b'{"a":3}\n')
        deadline = time.monotonic() + 60
        while path.read_bytes().count(b"\n") < 3:  # the timer writes it, without a close
            assert time.monotonic() < deadline, "the timer never wrote the batch"
            time.sleep(0.01)
        out.write(b'{"a":4}\n')
    assert [json.loads(x)["a"] for x in path.read_bytes().splitlines()] == [1, 2, 3, 4]


def test_a_full_batch_is_written_at_once(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    big = b'{"text":"' + b"x" * (1 << 16) + b'"}\n'
    with JsonlAppender(path, batch_seconds=3600) as out:
        out.write(b'{"a":1}\n')
        out.write(big)
        assert path.read_bytes() == b'{"a":1}\n' + big
        with pytest.raises(ValueError, match="newline"):
            out.write(b'{"a":2}')
    with pytest.raises(ValueError, match="batch_seconds"):
        JsonlAppender(path, batch_seconds=-1)


class StopsAfter(InlineExecutor):
    """Runs in this process and stops the run (as Ctrl-C would) after ``count`` results."""

    def __init__(self, count: int, stop: BaseException) -> None:
        super().__init__()
        self.count, self.stop = count, stop

    def run(self, setup: Any, jobs: Any, **kwargs: Any) -> Iterator[tuple[Hashable, Any]]:
        results = super().run(setup, jobs, **kwargs)
        for done, result in enumerate(results, start=1):
            yield result
            if done == self.count:
                raise self.stop


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), SystemExit(143)])
def test_a_stopped_run_keeps_every_finished_trajectory(tmp_path: Path, stop: BaseException) -> None:
    cfg = config(n=4)
    with pytest.raises(type(stop)):
        run_pass_at_k_t(cfg, tmp_path, executor=StopsAfter(5, stop), progress=False)
    # well within the batch's seconds: only the flush before stopping wrote them
    assert len(read_records(tmp_path / TRAJECTORIES_NAME)) == 5
    summary = run_pass_at_k_t(cfg, tmp_path, workers=0, progress=False)
    assert (summary.already_done, summary.ran) == (5, 7)
    reference = tmp_path.parent / "reference"
    run_pass_at_k_t(cfg, reference, workers=0, progress=False)
    assert lines(tmp_path) == lines(reference)


def test_sigterm_writes_every_finished_trajectory(tmp_path: Path) -> None:
    """A run told to stop with SIGTERM writes every trajectory it finished: the run logs
    each key once the runner asks for the next result (it has taken the previous one),
    and every logged key is in the file after the signal."""
    cfg = config(mode="rerun", n=6, env_kwargs={"delay": 0.01})
    run_dir, taken = tmp_path / "run", tmp_path / "taken.txt"
    script = textwrap.dedent("""
        import json, os, sys
        sys.path.insert(0, sys.argv[1])
        from agentenvs.eval.executors import InlineExecutor
        from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t

        log = os.open(sys.argv[4], os.O_WRONLY | os.O_APPEND | os.O_CREAT)

        class Logged(InlineExecutor):
            def run(self, setup, jobs, **kw):
                for key, out in super().run(setup, jobs, **kw):
                    yield key, out
                    os.write(log, (json.dumps(list(key)) + "\\n").encode())

        cfg = EvalConfig.from_dict(json.loads(sys.argv[2]))
        run_pass_at_k_t(cfg, sys.argv[3], executor=Logged(), progress=False)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(HERE), json.dumps(cfg.to_dict()), str(run_dir),
         str(taken)],
    )  # fmt: skip
    deadline = time.monotonic() + 60
    try:
        while not (taken.exists() and taken.read_bytes().count(b"\n") >= 5):
            assert time.monotonic() < deadline, "the run took nothing in time"
            assert proc.poll() is None, "the run finished before it could be stopped"
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    logged = {tuple(json.loads(x)) for x in taken.read_text().splitlines()}
    written = {(r["task_id"], r["sample"], r["budget"]) for r in read_records(run_dir / TRAJECTORIES_NAME)}
    assert logged <= written
    assert len(written) < len(cfg.work())


# ---------------------------------------------------------------- serializing
def test_records_written_by_either_serializer_read_the_same() -> None:
    record = {
        "task_id": "é\x1b\u2028", "sample": np.int64(3), "steps": [{"reward": 0.1, "info": {
            "score": np.float32(0.5), "ids": np.arange(3), "set": {2}, "pair": (1, 2)}}],
        "first_success_turn": None, "tiny": 1e-05, "big": 2**70,
    }
    assert json.loads(dumps_record(record)) == json.loads(dumps_line(record))
    for odd in ({"a": float("nan")}, {"a": [1.0, -math.inf]}, {"a": np.float32("inf")},
                {1: "non-string key"}):
        assert dumps_record(odd) == dumps_line(odd)  # written as the standard writer does


def test_turn_seeds_are_the_stable_seeds() -> None:
    seeds = turn_seeds(1234567890123)
    assert [seeds(t) for t in range(1, 50)] == [
        stable_seed(1234567890123, "turn", t) for t in range(1, 50)
    ]


# ---------------------------------------------------------------- worker count
def test_workers_are_capped_at_the_usable_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(OVERSUBSCRIBE_VARIABLE, raising=False)
    cores = default_workers()
    assert cores == len(os.sched_getaffinity(0))
    assert capped_workers(cores) == cores
    with pytest.warns(OversubscribeWarning, match=f"running {cores} .*allow_oversubscribe"):
        assert capped_workers(cores + 3) == cores
    assert capped_workers(cores + 3, allow_oversubscribe=True) == cores + 3
    monkeypatch.setenv(OVERSUBSCRIBE_VARIABLE, "1")
    assert capped_workers(cores + 3) == cores + 3


def test_a_run_asking_for_more_workers_than_cores_runs_on_the_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(OVERSUBSCRIBE_VARIABLE, raising=False)
    cfg = config(n=2)
    with pytest.warns(OversubscribeWarning, match="workers asked for"):
        summary = run_pass_at_k_t(cfg, tmp_path / "capped", workers=default_workers() + 2,
                                  progress=False)
    assert summary.ran == len(cfg.work())
    run_pass_at_k_t(cfg, tmp_path / "inline", workers=0, progress=False)
    assert lines(tmp_path / "capped") == lines(tmp_path / "inline")
