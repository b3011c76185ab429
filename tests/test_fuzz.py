"""A seeded fuzz of every env on every backend this machine has.

Each run drives one env through a random mix of operations: steps with real and hostile
actions (deep JSON, huge numbers, lone surrogates, control characters, non-text),
``score_action`` and ``error_action``, good and bad resets, snapshots restored whole or
corrupted (in bytes and in fields), all from one seed. It fails on

- an uncaught exception: a step, ``score_action`` or ``error_action`` that raises, a bad
  reset that raises anything but a clear error, a bad restore that raises anything but
  ``SnapshotError``;
- a silent change of state: a failed reset or restore, ``score_action`` or
  ``error_action`` that changes the snapshot, or a restore after which the same action
  gives another result;
- a leak: a child process, a temp dir, a file descriptor, a container or a database left
  after ``close()``;
- a hang: every test runs under a timeout.

The seed is in every failure message; ``AGENTENVS_FUZZ_SEED`` and ``AGENTENVS_FUZZ_SCALE``
(a factor on the number of operations) change the run.
"""

from __future__ import annotations

import ast
import contextlib
import math
import os
import pickle
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from _services import find_mysql, require_mysql

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.core.errors import AgentEnvsError, SnapshotError
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot
from agentenvs.testing import FileProbe, check_env_contract
from agentenvs.testing.contract import CHECKS, _corrupted_snapshots, _flip_bytes

SEED = int(os.environ.get("AGENTENVS_FUZZ_SEED", "17"))
SCALE = float(os.environ.get("AGENTENVS_FUZZ_SCALE", "1"))
TEMP_PREFIXES = ("agentenvs-sbx-", "agentenvs-bwrap-", "agentenvs-pylib-")

# ---------------------------------------------------------------- hostile actions
_DEEP = 5000
#: what a number parser may choke on: signaling and quiet NaNs, infinities, signed zero,
#: overflowing and underflowing exponents, hex floats, very long digit strings
SPECIAL_NUMBERS: tuple[str, ...] = (
    "sNaN", "-sNaN", "sNaN123", "NaN", "-nan", "nan", "Infinity", "-Infinity", "inf", "-inf",
    "-0", "-0.0", "0e-7", "1e999", "-1e999", "1e-99999999", "1e+999999999999999999",
    "0x1p-1074", "0x1.fffffffffffffp+1023", "0x10", "1_000", "9" * 5000, "0." + "0" * 5000 + "1",
)  # fmt: skip
HOSTILE: tuple[Any, ...] = (
    "",
    " ",
    "\x00",
    "\x00\x01\x02\x1b[31m\x7f",
    "\ud800",
    "a\udfffb",
    "[" * _DEEP,
    "{" * _DEEP,
    '{"a":' * _DEEP + "1" + "}" * _DEEP,
    "[" * _DEEP + "]" * _DEEP,
    "1" * 5000,
    "-" + "9" * 5000 + ".5e99999",
    "1e999999",
    "NaN",
    # special number tokens (a program printing them is DeepCoder's action below)
    *SPECIAL_NUMBERS,
    "[f(x=" + "1" * 5000 + ")]",
    "[f(x=" + "[" * _DEEP + "]" * _DEEP + ")]",
    '[{"name": "f", "arguments": ' + "[" * _DEEP + "]" * _DEEP + "}]",
    '{"analysis": "", "plan": "", "commands": [{"keystrokes": "\\ud800", "duration": 1}]}',
    '{"commands": [{"keystrokes": ' + "[" * _DEEP + "]" * _DEEP + ', "duration": 1}]}',
    '{"commands": [{"keystrokes": "ls\\n", "duration": ' + "9" * 5000 + "}]}",
    "```python\n" + "(" * _DEEP + "\n```",
    "```sql\n" + "(" * _DEEP + "\n```",
    "```bash\n\x00\n```",
    "<answer>" * 1000,
    "<answer></answer>",
    "submit",
    "x" * (1 << 20),
    "x" * ((1 << 20) + 1),
    "é漢字🙂" * 100,
    None,
    42,
    3.5,
    b"\xff\xfe bytes",
    ["a", "list"],
    {"a": "dict"},
    object(),
)


def _random_text(rng: np.random.Generator) -> str:
    n = int(rng.integers(0, 200))
    kind = int(rng.integers(3))
    if kind == 0:
        return "".join(chr(int(c)) for c in rng.integers(32, 127, n))
    if kind == 1:
        # any code point but the surrogates' encoded forms, surrogates included
        return "".join(chr(int(c)) for c in rng.integers(0, 0x10FFFF, n))
    return bytes(rng.integers(0, 256, n, dtype=np.uint8)).decode("utf-8", "replace")


# ---------------------------------------------------------------- per-env pieces
@dataclass(frozen=True)
class Target:
    """How to make one env on one backend, and what its good actions look like."""

    name: str
    make: Callable[[], gym.Env]
    ops: int
    good: Callable[[Any], list[str]] = lambda inner: []
    marks: tuple[Any, ...] = ()
    #: score_action is as costly as a step (tests run in a sandbox): use it less
    cheap_scores: bool = True


def _frozenlake_good(inner: Any) -> list[str]:
    return ["<answer>Left</answer>", "Down", "right", "4", "Up || Down", "1,2"]


def _sql_good(inner: Any) -> list[str]:
    gold = inner.gold_query
    return [
        f"```sql\n{gold}\n```",
        "SELECT 1",
        "SELECT name FROM sqlite_master",
        "DELETE FROM " + next(iter(inner.task.db_tables), "t"),
        "DROP TABLE " + next(iter(inner.task.db_tables), "t"),
        "submit",
    ]


def _bfcl_good(inner: Any) -> list[str]:
    try:
        return [inner.gold_reply(), "[]", "None of the functions apply."]
    except Exception:  # a gold the checker cannot spell: the other actions still run
        return ["[]"]


def _bfcl_mt_good(inner: Any) -> list[str]:
    from agentenvs.envs.bfcl.multi_turn.env import END_TURN_REPLY
    from agentenvs.envs.bfcl.multi_turn.policies import format_calls

    try:
        gold = inner.gold_calls()
        return [format_calls(gold) if gold else END_TURN_REPLY, END_TURN_REPLY, "[]"]
    except Exception:  # a turn without gold calls: the other actions still run
        return [END_TURN_REPLY, "[]"]


def _deepcoder_good(inner: Any) -> list[str]:
    ref = inner.reference
    out = ["```python\nprint(input())\n```", "```python\nimport os\nos._exit(3)\n```"]
    # special numbers where the answer's numbers are: printed (stdin) or returned (calls)
    for token in SPECIAL_NUMBERS[:: 1 + len(SPECIAL_NUMBERS) // 6]:
        out.append(f"```python\nimport sys\nsys.stdin.read()\nprint({token!r})\n```")
        if inner.task.func_name:
            # a literal as written, else a float, else a Decimal (an sNaN crosses as one)
            value = f"__import__('decimal').Decimal({token!r})"
            with contextlib.suppress(ValueError, SyntaxError, MemoryError):
                value = repr(ast.literal_eval(token)) if token[-1].isdigit() else value
                value = f"float({token!r})" if float(token) is not None else value
            out.append(
                f"```python\nclass Solution:\n    def {inner.task.func_name}(self, *a):\n"
                f"        return {value}\n\ndef {inner.task.func_name}(*a):\n"
                f"    return {value}\n```"
            )
    if ref:
        out.append(f"```python\n{ref}\n```")
    return out


def _terminal_good(inner: Any) -> list[str]:
    return [
        "ls -la",
        "```bash\necho hi > notes.txt && chmod 640 notes.txt\n```",
        "mkdir -p empty/dir && ln -sf notes.txt link",
        "cat /etc/hostname; exit 3",
        '{"analysis": "", "plan": "", "commands": [{"keystrokes": "pwd\\n", "duration": 1}], '
        '"task_complete": false}',
        "submit",
    ]


def _ops(n: int) -> int:
    return max(5, int(n * SCALE))


TARGETS = [
    Target("FrozenLake", lambda: gym.make("agentenvs/FrozenLake-v0"), _ops(4000), _frozenlake_good),
    Target(
        "FrozenLake-8x8-many-moves",
        lambda: gym.make("agentenvs/FrozenLake-v0", map_name="8x8", actions_per_turn=3),
        _ops(1500),
        _frozenlake_good,
    ),
    Target(
        "InterCodeSQL-sqlite", lambda: gym.make("agentenvs/InterCodeSQL-v0"), _ops(1500), _sql_good
    ),
    Target(
        "InterCodeSQL-mysql",
        lambda: gym.make("agentenvs/InterCodeSQL-v0", backend="mysql", mysql_url=require_mysql()),
        _ops(300),
        _sql_good,
        marks=(pytest.mark.mysql,),
    ),
    Target("BFCL", lambda: gym.make("agentenvs/BFCL-v0"), _ops(1500), _bfcl_good),
    Target(
        "BFCLMultiTurn", lambda: gym.make("agentenvs/BFCLMultiTurn-v0"), _ops(1200), _bfcl_mt_good
    ),
    Target(
        "DeepCoderMT-local",
        lambda: gym.make("agentenvs/DeepCoderMT-v0", sandbox="local"),
        _ops(60),
        _deepcoder_good,
        marks=(pytest.mark.bwrap,),
        cheap_scores=False,
    ),
    Target(
        "DeepCoderMT-local-official",
        lambda: gym.make("agentenvs/DeepCoderMT-v0", sandbox="local", rules="official"),
        _ops(40),
        _deepcoder_good,
        marks=(pytest.mark.bwrap,),
        cheap_scores=False,
    ),
    Target(
        "DeepCoderMT-docker",
        lambda: gym.make("agentenvs/DeepCoderMT-v0", sandbox="docker"),
        _ops(25),
        _deepcoder_good,
        marks=(pytest.mark.docker,),
        cheap_scores=False,
    ),
    Target(
        "TerminalBench-local",
        lambda: gym.make("agentenvs/TerminalBench-v0"),
        _ops(120),
        _terminal_good,
        marks=(pytest.mark.bwrap,),
        cheap_scores=False,
    ),
    Target(
        "TerminalBench-docker",
        lambda: gym.make("agentenvs/TerminalBench-v0", runtime="docker"),
        _ops(40),
        _terminal_good,
        marks=(pytest.mark.docker("agentenvs/terminal:latest"),),
        cheap_scores=False,
    ),
]


# ---------------------------------------------------------------- leak accounting
def _children() -> set[int]:
    """Live descendants of this process (from /proc: no extra package needed)."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":  # a zombie is gone already, only not reaped
            parent[int(name)] = int(fields[1])
    found: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - found
        found |= frontier
    return found


def _temp_dirs() -> set[str]:
    # temp dirs name their owner (prefix, pid, start time): other processes' are not ours
    root = Path(tempfile.gettempdir())
    mine = tuple(f"{prefix}{os.getpid()}-" for prefix in TEMP_PREFIXES)
    return {p.name for p in root.iterdir() if p.name.startswith(mine)}


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _containers() -> set[str]:
    try:
        import docker

        from agentenvs.sandbox.docker import POOL_LABEL

        client = docker.from_env(timeout=10)
        try:
            # containers carry their owner's pid: other processes' are not ours
            mine = {"label": f"{POOL_LABEL}={os.getpid()}"}
            return {c.id for c in client.containers.list(all=True, filters=mine)}
        finally:
            client.close()
    except Exception:
        return set()


def _mysql_databases() -> set[str]:
    try:
        import pymysql

        from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url

        url = find_mysql()[0]
        if url is None:
            return set()
        conn = pymysql.connect(**parse_mysql_url(url), connect_timeout=3)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW DATABASES")
                names = {row[0] for row in cur.fetchall()}
        finally:
            conn.close()
        # episode databases name their owner's pid (base 36): other processes' are not ours
        pid, digits = os.getpid(), "0123456789abcdefghijklmnopqrstuvwxyz"
        tag = ""
        while pid:
            pid, r = divmod(pid, 36)
            tag = digits[r] + tag
        return {n for n in names if n.startswith(f"ae_ep_{tag}_")}
    except Exception:
        return set()


@dataclass
class Resources:
    children: set[int]
    temp_dirs: set[str]
    fds: int
    containers: set[str] = field(default_factory=set)
    databases: set[str] = field(default_factory=set)

    @classmethod
    def now(cls, docker: bool, mysql: bool) -> Resources:
        return cls(
            _children(),
            _temp_dirs(),
            _fds(),
            _containers() if docker else set(),
            _mysql_databases() if mysql else set(),
        )

    def leaks_since(self, before: Resources) -> list[str]:
        out = []
        if extra := self.children - before.children:
            out.append(f"child processes alive after close(): {sorted(extra)}")
        if extra := self.temp_dirs - before.temp_dirs:
            out.append(f"temp dirs left after close(): {sorted(extra)}")
        if self.fds > before.fds + 2:
            out.append(f"open file descriptors grew from {before.fds} to {self.fds}")
        if extra := self.containers - before.containers:
            out.append(f"containers left after close(): {sorted(extra)}")
        if extra := self.databases - before.databases:
            out.append(f"databases left after close(): {sorted(extra)}")
        return out


# ---------------------------------------------------------------- the fuzzer
class FuzzFailure(AssertionError):
    pass


def _frozen(env: gym.Env) -> bytes:
    return pickle.dumps(take_snapshot(env), protocol=pickle.HIGHEST_PROTOCOL)


#: what a bad reset may raise: a clear error, not a crash from deep inside
RESET_ERRORS = (ValueError, TypeError, KeyError, AgentEnvsError, gym.error.Error)


class Fuzzer:
    def __init__(self, target: Target, seed: int) -> None:
        self.target = target
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.log: list[str] = []
        self.counts: dict[str, int] = {}

    def fail(self, what: str, exc: BaseException | None = None) -> None:
        tail = "\n".join(self.log[-8:])
        detail = ""
        if exc is not None:
            detail = "\n" + "".join(
                traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-4)
            )
        raise FuzzFailure(
            f"{self.target.name}, seed {self.seed}, op {len(self.log)}: {what}\n"
            f"last operations:\n{tail}{detail}"
        )

    def action(self, env: gym.Env) -> Any:
        u = self.rng.random()
        inner = env.unwrapped
        if u < 0.3:
            return inner.error_action(np.random.default_rng(int(self.rng.integers(2**31))))
        if u < 0.55:
            good = self.target.good(inner) if not inner.done else []
            if good:
                return good[int(self.rng.integers(len(good)))]
        if u < 0.8:
            return HOSTILE[int(self.rng.integers(len(HOSTILE)))]
        return _random_text(self.rng)

    def note(self, op: str, detail: Any = "") -> None:
        self.counts[op] = self.counts.get(op, 0) + 1
        text = repr(detail)
        self.log.append(f"{op} {text[:100]}")

    def reset(self, env: gym.Env) -> None:
        seed = int(self.rng.integers(2**31)) if self.rng.random() < 0.7 else None
        options: dict[str, Any] = {}
        if self.rng.random() < 0.4:
            options["max_turns"] = int(self.rng.choice([1, 2, 5, 30, 10**6, 2**63 - 1]))
        if self.rng.random() < 0.3:
            ids = list(env.unwrapped.task_ids[:50])
            options["task_id"] = ids[int(self.rng.integers(len(ids)))]
        self.note("reset", (seed, options))
        try:
            env.reset(seed=seed, options=options)
        except Exception as exc:
            self.fail(f"a valid reset(seed={seed}, options={options!r:.200}) raised", exc)

    def bad_reset(self, env: gym.Env) -> None:
        choices: list[dict[str, Any]] = [
            {"options": {"task_id": "\x00nope", "max_turns": 100}},
            {"options": {"task_id": 7}},
            {"options": {"task_id": ["list"]}},
            {"options": {"max_turns": 0}},
            {"options": {"max_turns": -1}},
            {"options": {"max_turns": 2**64}},
            {"options": {"max_turns": "5"}},
            {"options": {"max_turns": float("nan")}},
            {"options": {"\x00unknown": 1}},
            {"options": "task"},
            {"seed": -3},
            {"seed": "seed"},
            {"seed": 2**200},
        ]
        kwargs = choices[int(self.rng.integers(len(choices)))]
        self.note("bad_reset", kwargs)
        before = _frozen(env)
        try:
            env.reset(**kwargs)
        except RESET_ERRORS:
            if _frozen(env) != before:
                self.fail(f"reset({kwargs!r:.120}) raised but changed the live episode")
        except Exception as exc:
            self.fail(f"reset({kwargs!r:.120}) raised {type(exc).__name__}, not a clear error", exc)

    def step(self, env: gym.Env) -> None:
        action = self.action(env)
        self.note("step", action)
        try:
            obs, reward, terminated, truncated, info = env.step(action)
        except Exception as exc:
            self.fail(f"step({action!r:.100}) raised", exc)
        if not isinstance(obs, str) or not isinstance(info, dict):
            self.fail(
                f"step({action!r:.100}) returned {type(obs).__name__} and {type(info).__name__}"
            )
        if not math.isfinite(float(reward)) or not 0.0 <= float(info["score"]) <= 1.0:
            self.fail(f"step({action!r:.100}) gave reward {reward!r} and score {info['score']!r}")

    def score(self, env: gym.Env) -> None:
        action = self.action(env)
        self.note("score_action", action)
        before = _frozen(env)
        try:
            value = env.unwrapped.score_action(action)
        except Exception as exc:
            self.fail(f"score_action({action!r:.100}) raised", exc)
        if not isinstance(value, float | int) or not math.isfinite(value):
            self.fail(f"score_action({action!r:.100}) returned {value!r}")
        if _frozen(env) != before:
            self.fail(f"score_action({action!r:.100}) changed the env")

    def error_action(self, env: gym.Env) -> None:
        self.note("error_action")
        before = _frozen(env)
        try:
            text = env.unwrapped.error_action(np.random.default_rng(int(self.rng.integers(2**31))))
        except Exception as exc:
            self.fail("error_action raised", exc)
        if not isinstance(text, str) or _frozen(env) != before:
            self.fail(f"error_action returned {type(text).__name__} or changed the env")

    def roundtrip(self, env: gym.Env, twin: gym.Env) -> None:
        """snapshot, act, restore, act again (here and in a twin, through bytes): same result."""
        action = self.action(env)
        self.note("roundtrip", action)
        snap = take_snapshot(env)
        data = snap.to_bytes()
        first = env.step(action)
        restore_snapshot(env, snap)
        again = env.step(action)
        restore_snapshot(twin, Snapshot.from_bytes(data))
        there = twin.step(action)
        if not (_same(first, again) and _same(first, there)):
            self.fail(
                f"after a restore the action {action!r:.80} gave another result:\n"
                f"  first: {_brief(first)}\n  again: {_brief(again)}\n  twin:  {_brief(there)}"
            )

    def bad_restore(self, env: gym.Env) -> None:
        good = take_snapshot(env)
        if self.rng.random() < 0.5:
            cases = _flip_bytes(good.to_bytes(), self.rng, 2)
            label, data = cases[int(self.rng.integers(len(cases)))]
            self.note("bad_bytes", label)
            try:
                Snapshot.from_bytes(data)
            except SnapshotError:
                return
            except Exception as exc:
                self.fail(f"from_bytes with a {label} raised {type(exc).__name__}", exc)
            self.fail(f"from_bytes with a {label} decoded silently")
        cases_ = _corrupted_snapshots(good, self.rng)
        label, snap, must_raise = cases_[int(self.rng.integers(len(cases_)))]
        self.note("bad_restore", label)
        before = _frozen(env)
        try:
            restore_snapshot(env, snap)
        except SnapshotError:
            if _frozen(env) != before:
                self.fail(f"a restore of a snapshot with {label} raised but changed the env")
            return
        except Exception as exc:
            self.fail(f"a restore of a snapshot with {label} raised {type(exc).__name__}", exc)
        if must_raise:
            self.fail(f"a snapshot with {label} restored silently")
        # accepted as a valid state: it must be playable, then put the good one back
        if not env.unwrapped.done:
            self.step(env)
        restore_snapshot(env, good)

    def run(self, env: gym.Env, twin: gym.Env) -> dict[str, int]:
        self.reset(env)
        twin.reset(seed=0)
        score_weight = 0.08 if self.target.cheap_scores else 0.03
        weights = {
            "step": 0.5,
            "score": score_weight,
            "error_action": 0.05,
            "roundtrip": 0.06,
            "bad_restore": 0.12,
            "bad_reset": 0.1,
            "reset": 0.05,
        }
        names = list(weights)
        probs = np.array([weights[n] for n in names])
        probs /= probs.sum()
        for _ in range(self.target.ops):
            if env.unwrapped.done:
                self.reset(env)
                continue
            op = names[int(self.rng.choice(len(names), p=probs))]
            if op == "roundtrip":
                self.roundtrip(env, twin)
            elif op == "score":
                self.score(env)
            else:
                getattr(self, op)(env)
        return self.counts


def _same(a: tuple, b: tuple) -> bool:
    return pickle.dumps(a[:4]) == pickle.dumps(b[:4]) and a[4].get("state_key") == b[4].get(
        "state_key"
    )


def _brief(result: tuple) -> str:
    obs, reward, terminated, truncated, info = result
    return f"obs={obs[:120]!r} reward={reward} term={terminated} trunc={truncated} key={info.get('state_key')}"


def _close_warm_pools() -> None:
    import sys

    pools = sys.modules.get("agentenvs.sandbox.docker_pool")
    if pools is not None:
        for pool in list(pools._live_pools):
            pool.close()


def _params() -> Iterator[Any]:
    for target in TARGETS:
        yield pytest.param(target, id=target.name, marks=target.marks)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("target", list(_params()))
def test_fuzz(target: Target) -> None:
    docker = any(m.name == "docker" for m in target.marks)
    mysql = any(m.name == "mysql" for m in target.marks)
    # one env made, played to its end (a one-turn episode: what grades at the end runs)
    # and closed first, so lazily loaded modules and per-process caches (the verifier's
    # package copies) count as baseline whichever test ran before
    warm = target.make()
    warm.reset(seed=0, options={"max_turns": 1})
    warm.step(warm.unwrapped.error_action(np.random.default_rng(0)))
    warm.close()
    _close_warm_pools()
    before = Resources.now(docker, mysql)
    env, twin = target.make(), target.make()
    try:
        counts = Fuzzer(target, SEED).run(env, twin)
    finally:
        env.close()
        twin.close()
        # the process-wide warm pool keeps released containers for the next env by
        # design; closing it must leave nothing either
        _close_warm_pools()
    leaks = Resources.now(docker, mysql).leaks_since(before)
    print(f"{target.name}: {sum(counts.values())} operations {counts}")
    assert not leaks, f"{target.name}, seed {SEED}: " + "; ".join(leaks)
    assert (
        counts.get("step", 0) > 0 and counts.get("bad_restore", 0) + counts.get("bad_bytes", 0) > 0
    )


# ---------------------------------------------------------------- file modes
TERMINAL_FILE_PROBE = FileProbe(
    options={"task_id": "fix-permissions"},
    setup=(
        "cd /app && mkdir -p probe/empty && printf x > probe/a && printf y > probe/b "
        "&& chmod 777 probe/a && chmod 666 probe/b && chmod 700 probe/empty "
        "&& ln -s a probe/link && touch -h -d @1000000000 probe/a probe/link",
    ),
    disturb=(
        "cd /app && chmod 755 probe/a && chmod 644 probe/b && rmdir probe/empty && touch probe/a",
    ),
    listing="cd /app && find . -printf '%p %M %y %l %s %T@\\n' | sort",
)


@pytest.mark.bwrap
@pytest.mark.timeout(600)
def test_terminal_restore_keeps_modes_dirs_links_and_mtimes() -> None:
    """fix-permissions: 777 and 666 stay 777 and 666 after a restore (they once became
    755 and 644), and the task's tests give the same verdict before and after."""
    report = check_env_contract(
        "agentenvs/TerminalBench-v0",
        file_probe=TERMINAL_FILE_PROBE,
        skip=[name for name in CHECKS if name != "file_modes"],
        raise_on_failure=False,
    )
    result = report.result("file_modes")
    assert result.passed is True, report.summary()
    env = gym.make("agentenvs/TerminalBench-v0")
    try:
        env.reset(seed=0, options={"task_id": "fix-permissions"})
        snap = take_snapshot(env)
        first = env.step("submit")
        restore_snapshot(env, snap)
        again = env.step("submit")
        assert first[4]["score"] == again[4]["score"] and first[1] == again[1]
    finally:
        env.close()
