"""``agentenvs certify ENV``: what holds of an env, written down with reproducers.

Three parts, each run on fresh envs of the id (with its kwargs), each reported with what
it found and how to see it again:

1. **Contract** (``check_env_contract``): determinism across processes, snapshot (or
   replay) equivalence, budget and truncation semantics, bad actions, atomic resets and
   restores, forks. Each check's result as the checker reports it.
2. **Fuzz**: ``fuzz_episodes`` episodes of hostile actions (empty, whitespace, control
   characters, lone surrogates, NUL bytes, markup fragments, a repeated tag, the longest
   action allowed, random printable text, and the env's own ``error_action``), mixed
   with snapshot/restore round trips where the env has snapshots. It holds when no call
   raised, no call took longer than ``call_limit_s`` (a hang is reported, not waited on
   forever: the call runs under an interval timer on the main thread), every
   observation is a str, and after ``close()`` no child process, thread or file
   descriptor is left beyond a warm-up env's. A failure's reproducer is the seed, the
   episode and the actions up to it.
3. **Reward-gaming probe**: degenerate policies, each played over the first
   ``probe_tasks`` tasks: the empty action, a format-only answer (``<answer></answer>``),
   the longest action allowed, and one action repeated for the whole budget (the env's
   first ``error_action``). An invalid action (empty, format-only, overlong) that earns
   success or a positive score is a finding: the env rewards what says nothing. The
   repeated action's success rate is reported as a fact of the env (a legal move
   repeated may solve a task).

The certificate is a dict (``Certificate.as_dict``, written as ``certificate.json``) and
Markdown (``certificate.md``): the env, its kwargs, the package versions, and one row
per check: ``holds``, ``fails``, ``not applicable`` (with what is missing) or
``finding``, with details and reproducers.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

#: the statuses of a certificate's rows
HOLDS, FAILS, NOT_APPLICABLE, FINDING = "holds", "fails", "not applicable", "finding"


@dataclass
class Row:
    """One check's outcome in a certificate."""

    part: str
    check: str
    status: str
    detail: str = ""
    reproducer: dict[str, Any] | None = None


@dataclass
class Certificate:
    """What holds of an env: its rows, and the facts of the run."""

    env: str
    env_kwargs: dict[str, Any]
    seed: int
    rows: list[Row] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        """True when no row failed (findings are results about the env, not failures)."""
        return all(r.status != FAILS for r in self.rows)

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in (HOLDS, FAILS, NOT_APPLICABLE, FINDING)}
        for r in self.rows:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "env_kwargs": self.env_kwargs,
            "seed": self.seed,
            "holds": self.holds,
            "counts": self.counts(),
            "facts": self.facts,
            "rows": [asdict(r) for r in self.rows],
        }

    def markdown(self) -> str:
        c = self.counts()
        kwargs = json.dumps(self.env_kwargs, sort_keys=True) if self.env_kwargs else "(none)"
        lines = [
            f"# Certificate: {self.env}",
            "",
            f"- kwargs: `{kwargs}`; seed {self.seed}",
            f"- verdict: **{'holds' if self.holds else 'fails'}** "
            f"({c[HOLDS]} hold, {c[FAILS]} fail, {c[NOT_APPLICABLE]} not applicable, "
            f"{c[FINDING]} finding{'s' if c[FINDING] != 1 else ''})",
        ]
        for key, value in self.facts.items():
            lines.append(f"- {key}: {value}")
        lines += ["", "| part | check | status | detail |", "|---|---|---|---|"]
        for r in self.rows:
            detail = " ".join(r.detail.split())[:300].replace("|", "\\|")
            lines.append(f"| {r.part} | {r.check} | {r.status} | {detail} |")
        repro = [r for r in self.rows if r.reproducer]
        if repro:
            lines += ["", "## Reproducers", ""]
            for r in repro:
                lines.append(f"- {r.part}/{r.check}: `{json.dumps(r.reproducer)[:1000]}`")
        return "\n".join(lines) + "\n"

    def write(self, out: str | Path) -> tuple[Path, Path]:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        js, md = folder / "certificate.json", folder / "certificate.md"
        js.write_text(json.dumps(self.as_dict(), indent=2, default=str) + "\n", "utf-8")
        md.write_text(self.markdown(), "utf-8")
        return js, md


# ----------------------------------------------------------------------------- helpers
class CallTimeout(Exception):
    """A call ran past the certify's limit."""


@contextlib.contextmanager
def _limit(seconds: float) -> Iterator[None]:
    """Raise ``CallTimeout`` in the block after ``seconds`` (main thread only; elsewhere
    the block runs unbounded and its time is still measured by the caller)."""
    outer = signal.getitimer(signal.ITIMER_REAL)[0] if hasattr(signal, "setitimer") else 1.0
    if threading.current_thread() is not threading.main_thread() or seconds <= 0 or outer > 0:
        # not the main thread, or a timer already set (a test runner's own limit, which
        # this one would cancel): the call is measured, not bounded
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise CallTimeout(f"no answer within {seconds:g} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _children() -> set[int]:
    pid = os.getpid()
    out: set[int] = set()
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as f:
                out.update(int(p) for p in f.read().split())
    return {p for p in out if os.path.exists(f"/proc/{p}")}


def _fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def hostile_actions(rng: np.random.Generator, max_chars: int) -> list[tuple[str, Any]]:
    """The fuzz's action pool: (label, action)."""
    printable = "".join(chr(c) for c in range(32, 127))
    random_text = "".join(printable[int(i)] for i in rng.integers(len(printable), size=200))
    return [
        ("empty", ""),
        ("whitespace", " \t\n  \r\n"),
        ("control characters", "".join(chr(c) for c in range(0, 32))),
        ("lone surrogate", "\ud800 answer \udfff"),
        ("NUL bytes", "a\x00b\x00" * 8),
        ("markup fragment", "<answer>"),
        ("nested tags", "<answer><answer>1</answer></answer>"),
        ("repeated tag", "<answer>x</answer>" * 500),
        ("json", '{"action": [1, 2, {"x": null}]}'),
        ("shell", "$(rm -rf /); `id`; ../../etc/passwd"),
        ("random text", random_text),
        ("longest allowed", "x" * max_chars),
        ("over the limit", "y" * (max_chars + 1)),
    ]


# ----------------------------------------------------------------------------- parts
def _contract_rows(env: str, env_kwargs: dict[str, Any], seed: int, steps: int) -> list[Row]:
    from agentenvs.testing import check_env_contract

    report = check_env_contract(
        env, env_kwargs=env_kwargs, seed=seed, steps=steps, raise_on_failure=False
    )
    rows = []
    for r in report.results:
        status = {
            "passed": HOLDS,
            "failed": FAILS,
            "skipped": NOT_APPLICABLE,
            "not applicable": NOT_APPLICABLE,
        }[r.status]
        rows.append(
            Row("contract", r.name, status, r.detail.strip().splitlines()[0] if r.detail else "")
        )
    return rows


def _make(env: str, env_kwargs: dict[str, Any]) -> gym.Env[Any, Any]:
    return gym.make(env, **env_kwargs)


def _fuzz_rows(
    env_id: str, env_kwargs: dict[str, Any], seed: int, episodes: int, call_limit_s: float
) -> tuple[list[Row], dict[str, Any]]:
    rng = np.random.default_rng(seed)
    # a warm-up env played to its end and closed: what loads once per process is baseline
    warm = _make(env_id, env_kwargs)
    inner = warm.unwrapped
    max_chars = int(getattr(inner, "max_action_chars", 4096))
    warm.reset(seed=seed)
    with contextlib.suppress(Exception):
        warm.step(inner.error_action(np.random.default_rng(seed)))
    warm.close()
    before = (_children(), threading.active_count(), _fds())
    env = _make(env_id, env_kwargs)
    inner = env.unwrapped
    has_snapshot = callable(getattr(inner, "snapshot", None)) and callable(
        getattr(inner, "restore", None)
    )
    pool = hostile_actions(rng, max_chars)
    crashes: list[Row] = []
    slowest = 0.0
    calls = 0
    for episode in range(episodes):
        taken: list[str] = []
        ep_seed = int(seed * 1000 + episode)
        try:
            with _limit(call_limit_s):
                env.reset(seed=ep_seed)
        except Exception as exc:  # noqa: BLE001 - reported
            crashes.append(
                Row(
                    "fuzz",
                    "reset",
                    FAILS,
                    f"reset raised {type(exc).__name__}: {exc}"[:400],
                    {"seed": ep_seed, "actions": []},
                )
            )
            break
        for _ in range(40):
            kind = rng.random()
            if kind < 0.15 and has_snapshot:
                label = "snapshot/restore round trip"
                action = None
            elif kind < 0.35 and hasattr(inner, "error_action"):
                label = "error_action"
                try:
                    action = inner.error_action(rng)
                except Exception:  # noqa: BLE001 - an env whose error_action has no move here
                    action = ""
            else:
                label, action = pool[int(rng.integers(len(pool)))]
            start = time.perf_counter()
            try:
                with _limit(call_limit_s):
                    if action is None:
                        snap = inner.snapshot()
                        inner.restore(snap)
                        calls += 1
                        continue
                    obs, _, terminated, truncated, _ = env.step(action)
            except Exception as exc:  # noqa: BLE001 - reported with its reproducer
                what = "hang" if isinstance(exc, CallTimeout) else "crash"
                crashes.append(
                    Row(
                        "fuzz",
                        what,
                        FAILS,
                        f"{label}: {type(exc).__name__}: {exc}"[:400]
                        + " | "
                        + traceback.format_exc(limit=-2).strip().splitlines()[-1][:200],
                        {
                            "seed": ep_seed,
                            "actions": [a[:200] for a in taken] + [str(action)[:200]],
                        },
                    )
                )
                break
            finally:
                slowest = max(slowest, time.perf_counter() - start)
            calls += 1
            taken.append(action if isinstance(action, str) else repr(action))
            if not isinstance(obs, str):
                crashes.append(
                    Row(
                        "fuzz",
                        "observation type",
                        FAILS,
                        f"{label}: the observation is a {type(obs).__name__}, not a str",
                        {"seed": ep_seed, "actions": [a[:200] for a in taken]},
                    )
                )
                break
            if terminated or truncated:
                break
        if len(crashes) >= 5:
            break
    env.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        now = (_children(), threading.active_count(), _fds())
        if not (now[0] - before[0]) and now[1] <= before[1] and now[2] <= before[2] + 2:
            break
        time.sleep(0.1)
    left = []
    if extra := now[0] - before[0]:
        left.append(f"child processes {sorted(extra)}")
    if now[1] > before[1]:
        left.append(f"threads {before[1]} -> {now[1]}")
    if now[2] > before[2] + 2:
        left.append(f"file descriptors {before[2]} -> {now[2]}")
    rows = crashes or [
        Row(
            "fuzz",
            "hostile actions",
            HOLDS,
            f"{calls} calls over {episodes} episodes: no exception, every observation a str",
        )
    ]
    rows.append(
        Row(
            "fuzz",
            "no hang",
            FAILS if any(r.check == "hang" for r in crashes) else HOLDS,
            f"slowest call {slowest * 1e3:.1f} ms (limit {call_limit_s:g} s)",
        )
    )
    rows.append(
        Row(
            "fuzz",
            "nothing left after close",
            FAILS if left else HOLDS,
            "; ".join(left) if left else "no child process, thread or descriptor left",
        )
    )
    return rows, {"fuzz calls": calls, "slowest call (ms)": round(slowest * 1e3, 1)}


def _probe_rows(env_id: str, env_kwargs: dict[str, Any], seed: int, tasks: int) -> list[Row]:
    env = _make(env_id, env_kwargs)
    inner = env.unwrapped
    ids = list(getattr(inner, "task_ids", []) or [])[:tasks]
    max_chars = int(getattr(inner, "max_action_chars", 4096))
    first: str | None = None
    if hasattr(inner, "error_action"):
        env.reset(seed=seed)
        with contextlib.suppress(Exception):
            first = inner.error_action(np.random.default_rng(seed))
    probes: list[tuple[str, str | None, bool]] = [
        ("empty action", "", True),
        ("format only", "<answer></answer>", True),
        ("longest allowed", "x" * max_chars, True),
        ("one action repeated", first, False),
    ]
    rows = []
    for label, action, invalid in probes:
        if action is None:
            rows.append(
                Row("reward gaming", label, NOT_APPLICABLE, "the env has no error_action to repeat")
            )
            continue
        solved, scored, episodes, valid_steps = 0, 0.0, 0, 0
        for t in ids or [None]:
            options = {"task_id": t} if t is not None else None
            env.reset(seed=seed, options=options)
            info: dict[str, Any] = {}
            done = False
            while not done:
                _, _, terminated, truncated, info = env.step(action)
                valid_steps += bool(info.get("action_valid", True))
                done = terminated or truncated
            episodes += 1
            solved += bool(info.get("success", False))
            scored += float(info.get("score", 0.0) or 0.0)
        rate, mean = solved / episodes, scored / episodes
        detail = f"success {solved}/{episodes}, mean score {mean:.3f}"
        if invalid and (rate > 0 or mean > 0):
            rows.append(
                Row(
                    "reward gaming",
                    label,
                    FINDING,
                    f"an action that says nothing scores: {detail}",
                    {"seed": seed, "action": action[:200], "tasks": ids},
                )
            )
        elif invalid:
            rows.append(Row("reward gaming", label, HOLDS, f"{detail} (no reward for it)"))
        else:
            rows.append(
                Row(
                    "reward gaming",
                    label,
                    HOLDS if rate == 0 else FINDING,
                    f"{action[:60]!r} every turn: {detail}",
                    {"seed": seed, "action": action[:200], "tasks": ids} if rate else None,
                )
            )
    env.close()
    return rows


def certify(
    env: str,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    seed: int = 0,
    contract_steps: int = 30,
    fuzz_episodes: int = 20,
    probe_tasks: int = 10,
    call_limit_s: float = 60.0,
) -> Certificate:
    """Certify ``env`` (a registered id, with ``env_kwargs``): contract, fuzz, probe."""
    import agentenvs

    kwargs = dict(env_kwargs or {})
    _make(env, kwargs).close()  # an env that cannot be built raises here, before any part
    cert = Certificate(env=env, env_kwargs=kwargs, seed=seed)
    cert.facts["agentenvs"] = agentenvs.__version__
    cert.facts["gymnasium"] = gym.__version__
    start = time.perf_counter()
    cert.rows += _contract_rows(env, kwargs, seed, contract_steps)
    fuzz, facts = _fuzz_rows(env, kwargs, seed, fuzz_episodes, call_limit_s)
    cert.rows += fuzz
    cert.facts.update(facts)
    cert.rows += _probe_rows(env, kwargs, seed, probe_tasks)
    cert.facts["seconds"] = round(time.perf_counter() - start, 1)
    return cert
