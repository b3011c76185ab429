"""A run on disk: the JSONL file of trajectories, its manifest, and stable seeds.

A run directory holds ``manifest.json`` (the run's config, and its fault counts),
``trajectories.jsonl`` (one JSON object a line, one line per finished trajectory, with
the faults retried before it in ``faults``) and ``faults.jsonl`` (trajectories that ran
out of fault retries and lost workers: never samples; see ``agentenvs.eval.faults``). Readers check every
trajectory record (``read_trajectories``: a bad one raises ``RunFileError`` naming the
file, line and field) and count each trajectory once: an exact repeat of a line is
dropped with a ``RunFileWarning``, two different records of one trajectory are refused. Lines are appended with a
single ``write`` on an ``O_APPEND`` descriptor, so a process killed mid-run leaves at
worst one torn last line without its newline; readers ignore it and writers cut it off
before appending again.

Token ids (``agentenvs eval --record-tokens``; see docs/tokens.md): a step of a model
policy may hold ``tokens``, what the model was given and sampled, compactly:
``{"shared": k, "prompt": P, "completion": C, "logprobs": L, "from": "tokens"}``, where
the step's prompt ids are the first ``k`` ids of the previous step's context (its prompt
ids then its completion ids; ``k`` is 0 on the first step) followed by the ids in ``P``;
``P`` and ``C`` are base64 of little-endian uint32 arrays, ``L`` base64 of little-endian
float32 log-probs (one per completion id, or null). The record's ``token_space`` names
the tokenizer (``vocab``) and what the log-probs are (``logprobs``: ``"sampled"``, under
the distribution sampled from, or ``"raw"``). Whether or not ids are recorded, a step
whose prompt was built from tokens holds ``drift``: null, or the first prompt position
where the chat template would render other ids.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agentenvs.core.errors import AgentEnvsError
from agentenvs.policy.credentials import redact_bytes

MANIFEST_NAME = "manifest.json"
TRAJECTORIES_NAME = "trajectories.jsonl"
FORMAT_VERSION = 1
#: the version of a record's token fields (``token_space["format"]``)
TOKENS_FORMAT = 1
#: a batching ``JsonlAppender`` writes at once when its gathered lines reach this size
BATCH_BYTES = 1 << 16


class RunFileError(AgentEnvsError):
    """A run directory that cannot be read, or that does not match the run asked for."""


def stable_seed(*parts: Any) -> int:
    """A 63-bit seed from ``parts``, the same in every process and Python version.

    Python's ``hash`` is salted per process, so it cannot name a trajectory.
    """
    raw = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little") >> 1


def turn_seeds(seed: int) -> Callable[[int], int]:
    """``turn -> stable_seed(seed, "turn", turn)``, the hash of the common prefix made once
    (the runner draws one a step)."""
    prefix = hashlib.blake2b(f"{seed}\x1fturn\x1f".encode(), digest_size=8)

    def of(turn: int) -> int:
        digest = prefix.copy()
        digest.update(str(turn).encode())
        return int.from_bytes(digest.digest(), "little") >> 1

    return of


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


def dumps_line(record: dict[str, Any]) -> bytes:
    """One record as a compact JSON line (newline included), ready for ``append_line``."""
    text = json.dumps(record, separators=(",", ":"), ensure_ascii=False, default=_json_default)
    return redact_bytes((text + "\n").encode())  # no key a policy was given is written


try:  # the server extra's JSON writer: trajectory lines in a twentieth of the time
    import orjson as _orjson
except ImportError:  # pragma: no cover - without it the standard library writes them
    _orjson = None

#: types orjson would write otherwise than ``json`` with ``_json_default`` does
_ORJSON_OPTIONS = 0 if _orjson is None else (
    _orjson.OPT_APPEND_NEWLINE | _orjson.OPT_PASSTHROUGH_DATACLASS
    | _orjson.OPT_PASSTHROUGH_DATETIME
)


_INF = float("inf")
_PLAIN = frozenset({str, int, bool, type(None)})


def _all_finite(value: Any) -> bool:
    """Whether no float in ``value`` (dicts, lists and tuples within) is NaN or infinite."""
    stack = [value]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind in _PLAIN:
            continue
        if kind is float:
            if item != item or item == _INF or item == -_INF:
                return False
        elif kind is dict:
            for entry in item.values():
                if type(entry) is not str:  # most values of a record are text
                    push(entry)
        elif kind is list or kind is tuple:
            extend(item)
        elif isinstance(item, dict):
            extend(item.values())
        elif isinstance(item, list | tuple):
            extend(item)
        elif isinstance(item, float | np.floating) and not math.isfinite(item):
            return False
    return True


def dumps_record(record: dict[str, Any]) -> bytes:
    """A trajectory record as one JSON line: the same JSON values as ``dumps_line``, written
    with orjson where it is installed (the runner writes a line per trajectory, and the
    standard library's writer cost it a quarter of a FrozenLake step). A record orjson would
    write otherwise goes through ``dumps_line``: a NaN or infinite float (orjson writes
    null), an integer past 64 bits or a key that is not a string (orjson refuses them).
    Not for ``run_id``, which hashes ``dumps_line``'s exact bytes."""
    if _orjson is None:
        return dumps_line(record)
    try:
        data = _orjson.dumps(record, default=_json_default, option=_ORJSON_OPTIONS)
    except _orjson.JSONEncodeError:
        return dumps_line(record)
    # orjson writes NaN as null: where a null may be one (other than an unsuccessful
    # trajectory's first success turn), the record is looked through
    if b"null" in data.replace(b'"first_success_turn":null', b"") and not _all_finite(record):
        return dumps_line(record)
    return redact_bytes(data)  # no key a policy was given is written


class JsonlAppender:
    """Appends whole lines to a JSONL file in one ``write`` on an ``O_APPEND`` fd.

    ``write`` takes one or more complete lines; however it is cut short, every line
    before the last is whole, so readers lose at most the torn last line.

    ``batch_seconds`` > 0 gathers the lines that come within that many seconds of the
    first one into one ``write`` (a thread of the appender writes them then, as do
    ``flush`` and ``close``): the runner's lines, one per trajectory, then cost one system call a
    batch instead of one each. A process killed with SIGKILL loses at most the lines of
    the last ``batch_seconds`` (whole lines: a resume runs them again); one that exits
    otherwise, by an exception or a signal the runner handles, writes them all.

    Opening cuts off a torn last line (a write interrupted by a kill), so the next line
    starts on a line boundary. ``fsync=True`` also survives power loss, at a cost.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, fsync: bool = False, batch_seconds: float = 0.0
    ) -> None:
        if not batch_seconds >= 0:
            raise ValueError(f"batch_seconds must be >= 0, got {batch_seconds!r}")
        self.path = Path(path)
        self.fsync = fsync
        self.batch_seconds = float(batch_seconds)
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._lock = threading.Lock()
        # one thread writes each batch ``batch_seconds`` after its first line (a thread
        # a batch would cost a start each, under load a millisecond)
        self._flusher: threading.Thread | None = None
        self._due = threading.Event()
        self._closing = threading.Event()
        repair_torn_tail(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, line: bytes) -> None:
        if not line.endswith(b"\n"):
            raise ValueError("JSONL data must end with a newline")
        if not self.batch_seconds:
            self._write(line)
            return
        with self._lock:
            self._pending.append(line)
            self._pending_bytes += len(line)
            if self._pending_bytes < BATCH_BYTES:
                if len(self._pending) == 1:
                    if self._flusher is None:
                        self._flusher = threading.Thread(
                            target=self._flush_batches, name="agentenvs-jsonl-batches",
                            daemon=True,
                        )
                        self._flusher.start()
                    self._due.set()
                return
        self.flush()

    def _flush_batches(self) -> None:
        while not self._closing.is_set():
            self._due.wait()
            self._closing.wait(self.batch_seconds)
            self._due.clear()  # a line gathered after this wakes the next round
            self.flush()

    def flush(self) -> None:
        """Write the gathered lines now."""
        with self._lock:
            data, self._pending, self._pending_bytes = b"".join(self._pending), [], 0
            if data and self._fd >= 0:
                self._write(data)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        # a regular file takes the whole line in one write; the loop only guards odd cases
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        if self.fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        self._closing.set()
        self._due.set()  # the flusher ends
        self.flush()
        with self._lock:  # never while the flusher writes
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def repair_torn_tail(path: Path) -> int:
    """Cut the file back to its last newline; returns how many bytes were dropped."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as fh:
        # read backwards in blocks until a newline shows up
        end, block = size, 1 << 16
        keep = 0
        while end > 0:
            start = max(0, end - block)
            fh.seek(start)
            chunk = fh.read(end - start)
            pos = chunk.rfind(b"\n")
            if pos >= 0:
                keep = start + pos + 1
                break
            end = start
        if keep != size:
            fh.truncate(keep)
    return size - keep


def _loads(line: bytes) -> Any:
    """One JSON line, read by orjson where installed; what it refuses (NaN, integers past
    64 bits, escaped lone surrogates) or a bad line goes to ``json``, for its value or its
    error."""
    if _orjson is not None:
        try:
            return _orjson.loads(line)
        except _orjson.JSONDecodeError:
            pass
    return json.loads(line)


def iter_numbered_records(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for every complete record of a JSONL file; a torn last
    line (no newline) is skipped; a line that is not a JSON object raises ``RunFileError``
    naming the file and line."""
    path = Path(path)
    if not path.exists():
        return
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.endswith(b"\n"):
                return  # torn by a kill mid-write: the trajectory will be run again
            if not line.strip():
                continue
            try:
                record = _loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError) as exc:
                raise RunFileError(f"{path}:{number}: not a JSON record ({exc})") from exc
            if not isinstance(record, dict):
                raise RunFileError(
                    f"{path}:{number}: a record must be a JSON object, got {type(record).__name__}"
                )
            yield number, record


def iter_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Every complete record of a JSONL file; a torn last line (no newline) is skipped."""
    for _, record in iter_numbered_records(path):
        yield record


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    return list(iter_records(path))


class RunFileWarning(UserWarning):
    """Something in a run file was set aside (a repeated record), and the reading went on."""


_NONE = type(None)
#: what a trajectory record of the runner must hold, and of which JSON types
TRAJECTORY_FIELDS: dict[str, tuple[type, ...]] = {
    "task_id": (str,),
    "sample": (int,),
    "budget": (int,),
    "seed": (int,),
    "success": (bool,),
    "first_success_turn": (int, _NONE),
    "turns": (int,),
    "initial_observation": (str,),
    "steps": (list,),
}
_TYPE_NAMES = {str: "a string", int: "an integer", bool: "true or false", list: "a list",
               dict: "an object", float: "a number", _NONE: "null"}


def check_fields(
    record: dict[str, Any], fields: dict[str, tuple[type, ...]], where: str
) -> None:
    """Raise ``RunFileError`` naming ``where`` (file:line) and the first bad field."""
    for name, types in fields.items():
        if name not in record:
            raise RunFileError(f"{where}: field {name!r} is missing")
        value = record[name]
        # JSON true is not a sample index: bool passes only where bool is asked for
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            wanted = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
            raise RunFileError(f"{where}: field {name!r} must be {wanted}, got {value!r:.60}")


def check_trajectory(record: dict[str, Any], where: str) -> None:
    """A runner trajectory record: its fields, types and ranges (``where`` is file:line)."""
    check_fields(record, TRAJECTORY_FIELDS, where)
    if record["sample"] < 0:
        raise RunFileError(f"{where}: field 'sample' must be >= 0, got {record['sample']}")
    if record["budget"] < 1:
        raise RunFileError(f"{where}: field 'budget' must be >= 1, got {record['budget']}")
    if not 0 <= record["turns"] <= record["budget"] or record["turns"] != len(record["steps"]):
        raise RunFileError(
            f"{where}: field 'turns' ({record['turns']}) must equal the number of steps "
            f"({len(record['steps'])}) and lie within the budget ({record['budget']})"
        )
    faults = record.get("faults", [])
    if not isinstance(faults, list) or not all(isinstance(f, dict) for f in faults):
        raise RunFileError(f"{where}: field 'faults' must be a list of fault records")
    first = record["first_success_turn"]
    if first is not None and not 1 <= first <= record["turns"]:
        raise RunFileError(
            f"{where}: field 'first_success_turn' must be null or in 1..{record['turns']}, got {first}"
        )


def unique_records(
    numbered: Iterable[tuple[int, dict[str, Any]]],
    key: Callable[[dict[str, Any]], Hashable],
    path: str | os.PathLike[str],
) -> list[dict[str, Any]]:
    """Records with one per key: an exact repeat of an earlier line is dropped with a
    ``RunFileWarning`` naming both lines; two different records under one key raise
    ``RunFileError`` (which one is right cannot be told)."""
    first_line: dict[Hashable, tuple[int, dict[str, Any]]] = {}
    out: list[dict[str, Any]] = []
    dropped: list[tuple[int, int]] = []
    for number, record in numbered:
        k = key(record)
        if k in first_line:
            earlier, kept = first_line[k]
            if kept != record:
                raise RunFileError(
                    f"{path}:{number}: record {k} was already at line {earlier} with other "
                    "contents; remove one of the two lines"
                )
            dropped.append((number, earlier))
            continue
        first_line[k] = (number, record)
        out.append(record)
    if dropped:
        import warnings

        lines = ", ".join(f"{n} (= line {e})" for n, e in dropped[:5])
        more = f" and {len(dropped) - 5} more" if len(dropped) > 5 else ""
        warnings.warn(
            f"{path}: {len(dropped)} repeated record(s) counted once: line(s) {lines}{more}",
            RunFileWarning,
            stacklevel=2,
        )
    return out


def trajectory_key(record: dict[str, Any]) -> tuple[str, int, int]:
    return (str(record["task_id"]), int(record["sample"]), int(record["budget"]))


def read_trajectories(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A runner ``trajectories.jsonl``, every record checked (``RunFileError`` names the
    line and the field) and each trajectory once (see ``unique_records``)."""
    def checked() -> Iterator[tuple[int, dict[str, Any]]]:
        for number, record in iter_numbered_records(path):
            check_trajectory(record, f"{path}:{number}")
            yield number, record

    return unique_records(checked(), trajectory_key, path)


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON through a temp file and a rename, so readers never see half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = json.dumps(data, indent=2, sort_keys=True, default=_json_default) + "\n"
    tmp.write_bytes(redact_bytes(text.encode()))
    os.replace(tmp, path)


def ensure_manifest(
    out_dir: Path,
    config: dict[str, Any],
    *,
    error: type[Exception],
    what: str = "a run",
    **fields: Any,
) -> bool:
    """Write ``out_dir``'s manifest for ``config``, or check that the stored one matches.

    Returns True when it was written now. A resume with another config raises ``error``
    naming the keys that differ (compared through JSON, so tuples equal stored lists).
    """
    import time

    import agentenvs

    wanted = json.loads(dumps_line(config))
    path = out_dir / MANIFEST_NAME
    if path.exists():
        stored = read_manifest(out_dir)["config"]
        if stored != wanted:
            diffs = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
            detail = "; ".join(f"{k}: stored {stored.get(k)!r}, asked {wanted.get(k)!r}" for k in diffs)
            raise error(
                f"{out_dir} holds {what} with another config ({detail}); resume with the same "
                "config or choose another output directory"
            )
        return False
    write_json_atomic(
        path,
        {
            "format": FORMAT_VERSION,
            **fields,
            "config": wanted,
            "agentenvs_version": agentenvs.__version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
    )
    return True


def read_manifest(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(run_dir) / MANIFEST_NAME
    if not path.exists():
        raise RunFileError(f"{run_dir}: no {MANIFEST_NAME}; is this a run directory?")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{path}: not valid JSON ({exc})") from exc
    if manifest.get("format") != FORMAT_VERSION or "config" not in manifest:
        raise RunFileError(f"{path}: not an agentenvs run manifest (format {FORMAT_VERSION})")
    return manifest


# ---------------------------------------------------------------- token ids
def pack_ids(ids: Sequence[int]) -> str:
    """Token ids as base64 of a little-endian uint32 array."""
    return base64.b64encode(np.asarray(ids, dtype="<u4").tobytes()).decode("ascii")


def unpack_ids(text: str) -> list[int]:
    return [int(i) for i in np.frombuffer(base64.b64decode(text), dtype="<u4")]


def pack_floats(values: Sequence[float]) -> str:
    """Log-probs as base64 of a little-endian float32 array."""
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode("ascii")


def unpack_floats(text: str) -> list[float]:
    return [float(v) for v in np.frombuffer(base64.b64decode(text), dtype="<f4")]


@dataclass(frozen=True)
class StepTokens:
    """The ids of one recorded step, decoded (see the module docstring)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    prompt_from: str

    @property
    def context(self) -> list[int]:
        return [*self.prompt_ids, *self.completion_ids]


def step_tokens(sample: Any, previous_context: Sequence[int] = ()) -> dict[str, Any]:
    """The ``tokens`` field of a step for a ``Sample``, its prompt delta-encoded against
    the previous step's context (prompts grow by appending, so the delta is the turn's
    new tokens)."""
    prompt = list(sample.prompt_ids)
    shared = 0
    for a, b in zip(prompt, previous_context, strict=False):
        if a != b:
            break
        shared += 1
    logprobs = sample.logprobs
    return {
        "shared": shared,
        "prompt": pack_ids(prompt[shared:]),
        "completion": pack_ids(sample.completion_ids),
        "logprobs": None if logprobs is None else pack_floats(logprobs),
        "from": sample.prompt_from,
    }


def read_step_tokens(record: dict[str, Any], where: str = "record") -> list[StepTokens | None]:
    """Every step's ids of a trajectory record (``None`` for a step without them);
    ``RunFileError`` names ``where`` and the step when the fields do not fit together."""
    out: list[StepTokens | None] = []
    context: list[int] = []
    for index, step in enumerate(record.get("steps", [])):
        fields = step.get("tokens") if isinstance(step, dict) else None
        if fields is None:
            out.append(None)
            context = []
            continue
        try:
            shared = int(fields["shared"])
            if not 0 <= shared <= len(context):
                raise ValueError(f"shared {shared} outside 0..{len(context)}")
            prompt = [*context[:shared], *unpack_ids(fields["prompt"])]
            completion = unpack_ids(fields["completion"])
            raw = fields.get("logprobs")
            logprobs = None if raw is None else unpack_floats(raw)
            if logprobs is not None and len(logprobs) != len(completion):
                raise ValueError(f"{len(logprobs)} log-probs for {len(completion)} completion ids")
        except (KeyError, TypeError, ValueError) as exc:
            raise RunFileError(f"{where}: step {index + 1}: bad token fields ({exc})") from exc
        tokens = StepTokens(prompt, completion, logprobs, str(fields.get("from", "template")))
        out.append(tokens)
        context = tokens.context
    return out


def token_space(sample: Any) -> dict[str, Any]:
    """A record's ``token_space`` field for samples like ``sample``."""
    return {"format": TOKENS_FORMAT, "vocab": sample.vocab, "logprobs": sample.logprob_kind}


def token_summary(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """How often the chat template would have rewritten a token-built prompt, over the
    steps that checked (``drift`` present): ``checked`` steps, ``drifted`` steps, their
    ``rate``, the trajectories with any drift and the first drift seen (task, sample,
    turn and prompt position); ``recorded``: steps that hold their ids; ``text_only``: steps
    recorded with ``tokens: null`` because the policy's sample had no ids (a model server
    without token extensions), with a ``note`` saying so."""
    checked = drifted = recorded = text_only = trajectories = 0
    first: dict[str, Any] | None = None
    for record in records:
        any_drift = False
        for turn, step in enumerate(record.get("steps", []), start=1):
            if "tokens" in step:
                if step["tokens"] is None:
                    text_only += 1
                else:
                    recorded += 1
            if "drift" not in step:
                continue
            checked += 1
            if step["drift"] is not None:
                drifted += 1
                any_drift = True
                if first is None:
                    first = {"task_id": record.get("task_id"), "sample": record.get("sample"),
                             "turn": turn, "position": step["drift"]}
        trajectories += any_drift
    return {
        "checked": checked,
        "drifted": drifted,
        "rate": drifted / checked if checked else 0.0,
        "trajectories_with_drift": trajectories,
        "first_drift": first,
        "recorded": recorded,
        "text_only": text_only,
        **(
            {
                "note": f"{text_only} step(s) without token ids: the policy's model server "
                "answered text only (no return_token_ids), so they are scored on text"
            }
            if text_only
            else {}
        ),
    }
