"""RecordEpisode: every reset and step of every episode, as JSON lines.

Each line is written with one ``os.write`` on a file opened with ``O_APPEND``, so a
process that dies between steps (an exception, ``os._exit``, a kill while computing)
leaves only complete lines, and several processes may append to the same file. A
SIGKILL that lands *during* a write can cut that one line short (Linux stops a write at
a page boundary for a dying process); ``read_records`` drops such a torn last line, and a
recorder that appends to the file starts on a fresh line. Lines by event:

- ``{"event": "reset", "episode", "turn": 0, "seed", "options", "observation", "info"}``
- ``{"event": "step", "episode", "turn", "action", "observation", "reward",
  "terminated", "truncated", "info"}``
- ``{"event": "restore", "episode", "turn"}``: the env was restored from a snapshot;
  the following steps continue from that episode and turn (a branch).

Values that JSON cannot hold are converted: numpy scalars and arrays to numbers and
lists, non-finite floats to the strings ``"nan"``/``"inf"``/``"-inf"``, bytes to text,
anything else to its ``repr``.
"""

from __future__ import annotations

import json
import math
import os
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agentenvs.core.errors import SnapshotError
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot

#: with flush_every_step=False, lines are written once this many bytes are pending
_BUFFER_BYTES = 1 << 20


def json_safe(value: Any) -> Any:
    """``value`` turned into plain JSON data (see the module docstring for the rules)."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return json_safe(float(value))
    if isinstance(value, np.ndarray):
        return [json_safe(v) for v in value.tolist()]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [json_safe(v) for v in items]
    if isinstance(value, Path):
        return str(value)
    return repr(value)


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a JSONL file written by ``RecordEpisode``.

    Skips blank lines and torn lines (cut short by a writer killed mid-write: the last
    line, or one that a later recorder closed with a newline before appending).
    """
    records = []
    for line in Path(path).read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class _Sink:
    """The file end of a recorder: lazy open, whole-line writes, idempotent close.

    Kept apart from the wrapper so an exit-time finalizer can close it without keeping
    the wrapper (and its env) alive.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.pending: list[bytes] = []
        self.pending_bytes = 0

    def write(self, line: bytes, *, now: bool) -> None:
        self.pending.append(line)
        self.pending_bytes += len(line)
        if now or self.pending_bytes >= _BUFFER_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            size = os.fstat(self.fd).st_size
            if size and os.pread(self.fd, 1, size - 1) != b"\n":
                # a torn line from a killed writer: keep ours off it
                self.pending.insert(0, b"\n")
        data = b"".join(self.pending)
        self.pending.clear()
        self.pending_bytes = 0
        view = memoryview(data)
        while view:  # os.write may write less than asked (huge lines, signals)
            written = os.write(self.fd, view)
            view = view[written:]

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self.fd is not None:
                fd, self.fd = self.fd, None
                os.close(fd)


class RecordEpisode(gym.Wrapper[str, str, str, str]):
    """Append every reset and step to a JSONL file (format in the module docstring).

    Arguments:
        path: the JSONL file; created on the first write, appended to if it exists.
        flush_every_step: write each line at once (the default); otherwise lines are
            held in memory and written at episode end, at ``close()`` and at exit.

    ``episode`` counts resets seen by this wrapper from 0; ``turn`` is the step within
    the episode (0 on reset). Both take part in snapshots, and a restore is logged.
    """

    def __init__(
        self,
        env: gym.Env[str, str],
        path: str | os.PathLike[str],
        *,
        flush_every_step: bool = True,
    ) -> None:
        super().__init__(env)
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or path-like, got {path!r}")
        self.path = Path(path)
        if self.path.is_dir():
            raise IsADirectoryError(f"path {str(self.path)!r} is a directory, not a file")
        if not self.path.parent.is_dir():
            raise FileNotFoundError(f"directory {str(self.path.parent)!r} does not exist")
        if not isinstance(flush_every_step, bool):
            raise TypeError(f"flush_every_step must be a bool, got {flush_every_step!r}")
        self.flush_every_step = flush_every_step
        self._sink = _Sink(self.path)
        # closes (and flushes) at garbage collection or interpreter exit, whichever first
        self._finalizer = weakref.finalize(self, self._sink.close)
        self._episode = -1
        self._turn = 0

    @property
    def episode(self) -> int:
        """Index of the current episode (-1 before the first reset)."""
        return self._episode

    def _write(self, record: dict[str, Any], *, now: bool) -> None:
        line = json.dumps(json_safe(record), ensure_ascii=True, allow_nan=False) + "\n"
        self._sink.write(line.encode("ascii"), now=now or self.flush_every_step)

    # ---------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._episode += 1
        self._turn = 0
        self._write(
            {
                "event": "reset",
                "episode": self._episode,
                "turn": 0,
                "seed": seed,
                "options": options,
                "observation": obs,
                "info": info,
            },
            now=False,
        )
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._turn += 1
        self._write(
            {
                "event": "step",
                "episode": self._episode,
                "turn": self._turn,
                "action": action,
                "observation": obs,
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
                "info": info,
            },
            now=bool(terminated or truncated),
        )
        return obs, reward, terminated, truncated, info

    def flush(self) -> None:
        """Write any held lines now."""
        self._sink.flush()

    def close(self) -> None:
        """Flush and close the file (idempotent), then close the env."""
        self._sink.close()
        super().close()

    # ---------------------------------------------------------------- snapshots
    def fork_wrapper(self, env: gym.Env) -> RecordEpisode:
        """Refused: the children of a fork would interleave their steps in one file."""
        raise SnapshotError(
            f"RecordEpisode({self.path}) cannot be forked: the children would write one "
            "file; fork the env inside it and wrap each child in a RecordEpisode of its own"
        )

    def wrapper_state(self) -> dict[str, int]:
        return {"episode": self._episode, "turn": self._turn}

    def check_wrapper_state(self, state: Any) -> None:
        if not isinstance(state, dict) or set(state) != {"episode", "turn"}:
            raise ValueError("a RecordEpisode state is a dict with 'episode' and 'turn'")
        for name, low in (("episode", -1), ("turn", 0)):
            value = state[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")

    def restore_wrapper_state(self, state: dict[str, int]) -> None:
        self._episode = int(state["episode"])
        self._turn = int(state["turn"])
        self._write({"event": "restore", "episode": self._episode, "turn": self._turn}, now=False)

    def snapshot(self) -> Snapshot:
        """Snapshot the whole chain under (and including) this wrapper."""
        return take_snapshot(self)

    def restore(self, snapshot: Snapshot) -> None:
        restore_snapshot(self, snapshot)
