"""The Pass@(K,T) runner: determinism across workers, kill-and-resume, manifests, modes.

Most tests drive a tiny "guess the number" env defined here; worker processes import
this module through the env id's ``module:`` prefix, which registers env and policy.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from agentenvs.core import TextEnv, Transition
from agentenvs.eval.records import (
    TRAJECTORIES_NAME,
    JsonlAppender,
    RunFileError,
    read_records,
    stable_seed,
)
from agentenvs.eval.runner import (
    EvalConfig,
    RunConfigError,
    WorkItem,
    resolve_tasks,
    run_pass_at_k_t,
    task_chunk_size,
)
from agentenvs.policy.base import Conversation, ScriptedPolicy
from agentenvs.policy.registry import register_policy

HERE = Path(__file__).resolve().parent
GUESS_ID = "test_runner:agentenvs_test/Guess-v0"


class GuessEnv(TextEnv):
    """Guess a number in [1, size] drawn at reset; the answer is "higher"/"lower"/"correct"."""

    default_max_turns = 8

    def __init__(self, *, delay: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay = delay  # lets a test kill a run partway

    @property
    def task_ids(self) -> list[str]:
        return ["small", "medium", "large"]

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        self.size = {"small": 4, "medium": 10, "large": 30}[task_id]
        self.target = int(self.np_random.integers(1, self.size + 1))
        self.low, self.high = 1, self.size
        return f"Guess a number from 1 to {self.size}."

    def _apply(self, action: str) -> Transition:
        if self.delay:
            time.sleep(self.delay)
        try:
            guess = int(action)
        except ValueError:
            return Transition("Answer with a whole number.", action_valid=False)
        if guess == self.target:
            return Transition("correct", reward=1.0, terminated=True, success=True, score=1.0)
        if guess < self.target:
            self.low = max(self.low, guess + 1)
            return Transition("higher")
        self.high = min(self.high, guess - 1)
        return Transition("lower")

    def _get_state(self) -> Any:
        return (self.size, self.target, self.low, self.high)

    def _set_state(self, state: Any) -> None:
        self.size, self.target, self.low, self.high = state

    def _state_key(self) -> str:
        return f"{self.low}-{self.high}"

    def error_action(self, rng: np.random.Generator) -> str:
        return "0"


class RandomGuesser(ScriptedPolicy):
    """Guesses uniformly within the bounds learned so far; sometimes says nonsense."""

    conditions_on_budget = False

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        env = conversation.env
        if rng.random() < 0.1:
            return "no idea"
        return str(int(rng.integers(env.low, env.high + 1)))


if "agentenvs_test/Guess-v0" not in gym.registry:
    gym.register("agentenvs_test/Guess-v0", entry_point=GuessEnv, order_enforce=False)
register_policy("test/guesser", f"{__name__}:RandomGuesser")


class CrashingGuesser(RandomGuesser):
    """The first process to act while ``marker`` is missing creates it and dies at once,
    as a worker killed by the OOM killer would."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return super().act(conversation, rng)
        os._exit(17)


register_policy("test/crashing-guesser", f"{__name__}:CrashingGuesser")


def config(**overrides: Any) -> EvalConfig:
    base: dict[str, Any] = dict(
        env_id=GUESS_ID,
        policy="test/guesser",
        task_ids=["small", "medium", "large"],
        n=5,
        budgets=[1, 2, 4, 6],
        mode="derive",
        seed=11,
    )
    base.update(overrides)
    return EvalConfig(**base)


def lines(run_dir: Path) -> list[str]:
    return sorted((run_dir / TRAJECTORIES_NAME).read_text().splitlines())


def outcomes(run_dir: Path) -> Counter:
    return Counter(
        (r["task_id"], r["sample"], r["budget"], r["success"], tuple(s["action"] for s in r["steps"]))
        for r in read_records(run_dir / TRAJECTORIES_NAME)
    )


def test_stable_seed_is_stable_across_processes() -> None:
    code = "from agentenvs.eval.records import stable_seed; print(stable_seed(3, 'task', 7, 2))"
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert int(out.stdout) == stable_seed(3, "task", 7, 2)
    assert 0 <= stable_seed("x") < 2**63
    assert stable_seed(3, "task", 7, 2) != stable_seed(3, "task", 7, 4)


def test_records_and_derive_semantics(tmp_path: Path) -> None:
    summary = run_pass_at_k_t(config(), tmp_path, workers=0, progress=False)
    assert (summary.total, summary.ran, summary.already_done) == (15, 15, 0)
    records = read_records(tmp_path / TRAJECTORIES_NAME)
    assert len(records) == 15
    for r in records:
        # derive: one run per trajectory at the largest budget
        assert r["budget"] == 6 and r["mode"] == "derive" and r["policy"] == "test/guesser"
        assert r["turns"] == len(r["steps"]) <= 6
        assert r["seed"] == stable_seed(11, r["task_id"], r["sample"])
        if r["success"]:
            assert r["first_success_turn"] == r["turns"] and r["steps"][-1]["observation"] == "correct"
        else:
            assert r["first_success_turn"] is None and r["truncated"]
        assert set(r["steps"][0]["info"]) == {
            "turn", "turns_left", "success", "score", "action_valid", "state_key"
        }
    assert any(not s["info"]["action_valid"] for r in records for s in r["steps"])
    # a finished run resumes to nothing
    again = run_pass_at_k_t(config(), tmp_path, workers=0, progress=False)
    assert (again.ran, again.already_done) == (0, 15)
    assert len(read_records(tmp_path / TRAJECTORIES_NAME)) == 15


def test_worker_counts_give_identical_trajectories(tmp_path: Path) -> None:
    cfg = config(mode="rerun", n=4)
    for workers, chunk in ((0, 5), (1, 3), (2, 2)):
        run_pass_at_k_t(cfg, tmp_path / f"w{workers}", workers=workers, chunk_size=chunk, progress=False)
    assert len(lines(tmp_path / "w0")) == 3 * 4 * 4
    assert lines(tmp_path / "w0") == lines(tmp_path / "w1") == lines(tmp_path / "w2")
    budgets = {r["budget"] for r in read_records(tmp_path / "w2" / TRAJECTORIES_NAME)}
    assert budgets == {1, 2, 4, 6}


def test_default_chunks_hold_whole_tasks_where_that_balances() -> None:
    def work(tasks: int, n: int) -> list[WorkItem]:
        return EvalConfig(GUESS_ID, "x", [f"t{i}" for i in range(tasks)], n, (3,)).work()

    # 12 tasks of 8 on 2 workers: one task a chunk (the default, 3, would split each)
    assert task_chunk_size(work(12, 8), 2) == 8
    # many tasks: as many whole tasks as the default chunk holds
    assert task_chunk_size(work(162, 16), 2) == 64
    assert task_chunk_size(work(40, 3), 2) == 3
    # too few tasks to keep two workers busy, tasks past the cap, no pool: the default
    assert task_chunk_size(work(3, 8), 2) is None
    assert task_chunk_size(work(20, 100), 2) is None
    assert task_chunk_size(work(12, 8), 0) is None
    # a resumed run (tasks partly done) or items out of task order: the default
    assert task_chunk_size(work(12, 8)[1:], 2) is None
    items = work(12, 8)
    assert task_chunk_size(items[8:] + items[:8], 2) == 8
    assert task_chunk_size(items[4:12] + items[:4] + items[12:], 2) is None


def test_killed_run_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    cfg = config(mode="rerun", n=6, env_kwargs={"delay": 0.01})
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    run_pass_at_k_t(cfg, reference, workers=0, progress=False)
    total = len(lines(reference))
    script = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); "
        "from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t; "
        "cfg = EvalConfig.from_dict(json.loads(sys.argv[2])); "
        "run_pass_at_k_t(cfg, sys.argv[3], workers=2, chunk_size=2, progress=False)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(HERE), json.dumps(cfg.to_dict()), str(killed)],
        start_new_session=True,  # its own process group: the kill takes its workers too
    )
    path = killed / TRAJECTORIES_NAME
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if path.exists() and path.read_bytes().count(b"\n") >= 10:
                break
            assert proc.poll() is None, "the run finished before it could be killed"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    partial = path.read_bytes().count(b"\n")
    assert 10 <= partial < total
    # a kill in the middle of a write leaves a torn line: simulate one on top
    with open(path, "ab") as fh:
        fh.write(b'{"task_id":"small","sample":0,"bud')
    summary = run_pass_at_k_t(cfg, killed, workers=2, progress=False)
    assert summary.already_done == partial and summary.ran == total - partial
    assert outcomes(killed) == outcomes(reference)
    assert lines(killed) == lines(reference)  # no loss, no duplicate, byte-identical lines


def test_resume_with_another_config_is_refused(tmp_path: Path) -> None:
    run_pass_at_k_t(config(n=2), tmp_path, workers=0, progress=False)
    with pytest.raises(RunConfigError, match="n: stored 2, asked 3"):
        run_pass_at_k_t(config(n=3), tmp_path, workers=0, progress=False)
    with pytest.raises(RunConfigError, match="seed"):
        run_pass_at_k_t(config(n=2, seed=5), tmp_path, workers=0, progress=False)


def test_derive_refused_when_budget_is_shown(tmp_path: Path) -> None:
    with pytest.raises(RunConfigError, match="show_budget"):
        run_pass_at_k_t(config(env_kwargs={"show_budget": True}), tmp_path, progress=False)
    summary = run_pass_at_k_t(
        config(mode="rerun", n=1, env_kwargs={"show_budget": True}), tmp_path, workers=0,
        progress=False,
    )
    assert summary.ran == 3 * 4


def test_bad_configs() -> None:
    with pytest.raises(RunConfigError):
        config(mode="sometimes")
    with pytest.raises(RunConfigError):
        config(budgets=[0, 2])
    with pytest.raises(RunConfigError):
        config(env_kwargs={"max_turns": 3})
    assert config(budgets=[4, 1, 4]).budgets == (1, 4)


def test_foreign_trajectories_are_refused(tmp_path: Path) -> None:
    with JsonlAppender(tmp_path / TRAJECTORIES_NAME) as out:
        out.write(b'{"task_id":"small","sample":0,"budget":6}\n')
    with pytest.raises(RunFileError, match="without manifest"):
        run_pass_at_k_t(config(), tmp_path, workers=0, progress=False)


def test_resolve_tasks() -> None:
    assert resolve_tasks(GUESS_ID, "all") == ["small", "medium", "large"]
    assert resolve_tasks(GUESS_ID, "first:2") == ["small", "medium"]
    assert resolve_tasks(GUESS_ID, "large, small") == ["large", "small"]
    with pytest.raises(RunConfigError, match="unknown"):
        resolve_tasks(GUESS_ID, "huge")


# ---------------------------------------------------------------- on FrozenLake
HAS_FROZENLAKE = importlib.util.find_spec("agentenvs.envs.frozenlake.policies") is not None
needs_frozenlake = pytest.mark.skipif(not HAS_FROZENLAKE, reason="FrozenLake is not available")
LAKE = "agentenvs/FrozenLake-v0"


def lake_config(**overrides: Any) -> EvalConfig:
    base: dict[str, Any] = dict(
        env_id=LAKE,
        policy="frozenlake/noisy:error_rate=0.3,recover=0.5",
        task_ids=resolve_tasks(LAKE, "first:4"),
        n=6,
        budgets=[4, 8, 16],
        mode="rerun",
        seed=5,
        env_kwargs={"success_rate": 0.8},
    )
    base.update(overrides)
    return EvalConfig(**base)


@needs_frozenlake
@pytest.mark.parametrize("mode", ["derive", "rerun"])
def test_frozenlake_worker_counts_agree(tmp_path: Path, mode: str) -> None:
    # the noisy oracle plans on the turns left, so derive refuses it: random play instead
    policy = "frozenlake/random" if mode == "derive" else lake_config().policy
    cfg = lake_config(mode=mode, policy=policy)
    run_pass_at_k_t(cfg, tmp_path / "one", workers=1, chunk_size=4, progress=False)
    run_pass_at_k_t(cfg, tmp_path / "two", workers=2, chunk_size=3, progress=False)
    assert lines(tmp_path / "one") == lines(tmp_path / "two")
    records = read_records(tmp_path / "one" / TRAJECTORIES_NAME)
    assert len(records) == 4 * 6 * (3 if mode == "rerun" else 1)
    if mode == "rerun":  # random play hardly ever reaches the goal
        assert any(r["success"] for r in records) and not all(r["success"] for r in records)
    for r in records:
        assert r["turns"] <= r["budget"]
        assert all(s["info"]["state_key"] for s in r["steps"])
        assert r["success"] == (r["first_success_turn"] is not None)


@needs_frozenlake
def test_frozenlake_visible_budget_needs_rerun(tmp_path: Path) -> None:
    cfg = lake_config(mode="derive", policy="frozenlake/random", env_kwargs={"show_budget": True})
    with pytest.raises(RunConfigError, match="show_budget"):
        run_pass_at_k_t(cfg, tmp_path, progress=False)
    cfg = lake_config(mode="rerun", n=2, env_kwargs={"show_budget": True})
    run_pass_at_k_t(cfg, tmp_path, workers=0, progress=False)
    first = read_records(tmp_path / TRAJECTORIES_NAME)[0]
    assert "turns left" in first["initial_observation"]


def test_a_dying_worker_is_a_fault_the_run_rides_out(tmp_path: Path) -> None:
    from agentenvs.eval.faults import FAULTS_NAME, FaultLimitError

    marker = tmp_path / "crashed"
    cfg = config(mode="rerun", n=4, policy=f"test/crashing-guesser:marker={marker}")
    marker.touch()  # the reference run must not crash
    run_pass_at_k_t(cfg, tmp_path / "reference", workers=0, progress=False)
    marker.unlink()
    summary = run_pass_at_k_t(
        cfg, tmp_path / "rode-out", workers=2, chunk_size=2, progress=False, fault_backoff=0
    )
    assert marker.exists()  # a worker really exited mid-chunk
    assert summary.total == summary.ran == 3 * 4 * 4
    assert lines(tmp_path / "rode-out") == lines(tmp_path / "reference")
    assert summary.faults["worker_losses"] == 1 and summary.faults["by_kind"] == {"worker": 1}
    lost = [json.loads(line) for line in (tmp_path / "rode-out" / FAULTS_NAME).read_text().splitlines()]
    assert [(r["type"], r["fault"]["kind"], r["fault"]["attribution"]) for r in lost] == [
        ("worker", "worker", "unknown")
    ]
    # with no retries the loss stops the run, and a resume completes it
    marker.unlink()
    with pytest.raises(FaultLimitError, match="worker process died"):
        run_pass_at_k_t(
            cfg, tmp_path / "crashed-run", workers=2, chunk_size=2, progress=False,
            max_fault_retries=0,
        )
    assert marker.exists()
    summary = run_pass_at_k_t(cfg, tmp_path / "crashed-run", workers=2, chunk_size=2, progress=False)
    assert summary.total == 3 * 4 * 4
    assert lines(tmp_path / "crashed-run") == lines(tmp_path / "reference")
    assert summary.faults["worker_losses"] == 1


class LoggedState:
    """A worker state that notes in ``log`` when it is built and closed, and by whom."""

    def __init__(self, log: str, name: str) -> None:
        self.log, self.name = log, name
        self._note("open")

    def _note(self, what: str) -> None:
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(f"{what} {self.name} {os.getpid()}\n")

    def close(self) -> None:
        self._note("close")


def whoami(state: LoggedState, payload: Any) -> tuple[str, int]:
    if payload == "die":
        os._exit(17)
    time.sleep(0.05)  # long enough for both workers to take chunks
    return state.name, os.getpid()


def test_kept_workers_serve_run_after_run_and_close_each_state(tmp_path: Path) -> None:
    import functools

    from agentenvs.eval.executors import Job, LocalPoolExecutor, WorkerLostError

    log = tmp_path / "log"
    jobs = [Job(i, whoami, None) for i in range(8)]
    with LocalPoolExecutor(2, keep_workers=True) as executor:
        first = dict(executor.run(functools.partial(LoggedState, str(log), "a"), jobs, chunk_size=1))
        second = dict(executor.run(functools.partial(LoggedState, str(log), "b"), jobs, chunk_size=1))
        assert {name for name, _ in first.values()} == {"a"}
        assert {name for name, _ in second.values()} == {"b"}
        pids = {pid for _, pid in [*first.values(), *second.values()]}
        assert len(pids) <= 2  # the same two workers for both runs
        # a worker that dies breaks the kept pool; the next run starts a new one
        with pytest.raises(WorkerLostError):
            dict(executor.run(functools.partial(LoggedState, str(log), "c"), [Job(0, whoami, "die")]))
        third = dict(executor.run(functools.partial(LoggedState, str(log), "d"), jobs[:2]))
        assert {name for name, _ in third.values()} == {"d"}
        assert not pids & {pid for _, pid in third.values()}
    notes = [line.split() for line in log.read_text().splitlines()]
    for pid in pids:
        mine = [(what, name) for what, name, p in notes if int(p) == pid]
        # each worker closes a run's state before it builds the next one's (the broken
        # pool's workers were killed with the state they held)
        whats = [what for what, _ in mine]
        assert whats == ["open", "close"] * (len(mine) // 2) + ["open"] * (len(mine) % 2)
        assert all(mine[i][1] == mine[i + 1][1] for i in range(0, len(mine) - 1, 2))
        names = [name for what, name in mine if what == "open"]
        assert names == sorted(set(names)) and set(names) <= {"a", "b", "c"}
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # gone, and waited for
    # the last run's states are closed with the pool
    assert sorted(p for what, n, p in notes if n == "d" and what == "open") == sorted(
        p for what, n, p in notes if n == "d" and what == "close"
    )


def test_kept_workers_get_back_the_groups_they_ran(tmp_path: Path) -> None:
    import functools

    from agentenvs.eval.executors import Job, LocalPoolExecutor

    log = tmp_path / "log"
    # four groups of two jobs, a chunk each; the second run lists them in another order
    jobs = [Job((group, i), whoami, None) for group in "ABCD" for i in range(2)]
    where: list[dict[str, set[int]]] = []
    with LocalPoolExecutor(2, keep_workers=True) as executor:
        for name, order in (("a", jobs), ("b", jobs[::-1])):
            results = executor.run(
                functools.partial(LoggedState, str(log), name), order, chunk_size=2,
                affinity=lambda job: job.key[0],
            )
            seen: dict[str, set[int]] = {}
            for (group, _), (_, pid) in results:
                seen.setdefault(group, set()).add(pid)
            where.append(seen)
    first, second = where
    assert all(len(pids) == 1 for pids in [*first.values(), *second.values()])
    assert len(set.union(*first.values())) == 2  # both workers ran
    assert second == first  # every group ran where it ran before


# ---------------------------------------------------------------- when derive is wrong
def test_rerun_is_the_default_mode() -> None:
    from agentenvs.cli import build_parser, single_env_defaults

    assert EvalConfig(
        env_id=GUESS_ID, policy="test/guesser", task_ids=["small"], n=1, budgets=[1]
    ).mode == "rerun"
    args = build_parser().parse_args(["eval", "--env", LAKE, "--policy", "x", "--out", "o"])
    assert single_env_defaults(args).mode == "rerun"


class UndeclaredGuesser(ScriptedPolicy):
    """Says nothing about the budget: derive cannot trust it."""

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        return "1"


register_policy("test/undeclared", f"{__name__}:UndeclaredGuesser")


def test_derive_refuses_a_policy_that_does_not_declare_its_budget_use(tmp_path: Path) -> None:
    with pytest.raises(RunConfigError, match="does not declare.*conditions_on_budget.*rerun"):
        run_pass_at_k_t(config(policy="test/undeclared"), tmp_path, workers=0, progress=False)
    assert not (tmp_path / TRAJECTORIES_NAME).exists()
    run_pass_at_k_t(config(policy="test/undeclared", mode="rerun", n=1), tmp_path / "r",
                    workers=0, progress=False)


@needs_frozenlake
@pytest.mark.parametrize("policy", ["frozenlake/oracle", "frozenlake/noisy:error_rate=0.2"])
def test_derive_refuses_frozenlake_policies_that_plan_on_the_turns_left(
    tmp_path: Path, policy: str
) -> None:
    with pytest.raises(RunConfigError, match="conditions on the turn budget.*rerun"):
        run_pass_at_k_t(lake_config(mode="derive", policy=policy), tmp_path, progress=False)


@needs_frozenlake
def test_derive_would_mislead_for_the_oracle(tmp_path: Path) -> None:
    """Why the refusal matters: the oracle's first-success turns at T=16 say little about
    its play with 8 turns (it takes safe detours when it has time)."""
    from agentenvs.eval.report import load_run, run_surface

    cfg = lake_config(policy="frozenlake/oracle", budgets=[8, 16], n=16,
                      task_ids=resolve_tasks(LAKE, "first:8"))
    run_pass_at_k_t(cfg, tmp_path / "rerun", workers=0, progress=False)
    rerun = run_surface(load_run(tmp_path / "rerun"), ks=[1], n_boot=0).value(1, 8)
    records = [r for r in read_records(tmp_path / "rerun" / TRAJECTORIES_NAME) if r["budget"] == 16]
    derived = np.mean([bool(r["first_success_turn"]) and r["first_success_turn"] <= 8
                       for r in records])
    assert rerun > derived + 0.1, (rerun, derived)


def test_derive_refuses_an_env_that_checks_success_when_the_budget_runs_out(
    tmp_path: Path,
) -> None:
    """Terminal-Bench runs the tests when the budget runs out: success within T is not the
    first success at a turn <= T of a longer episode."""
    from agentenvs.envs.terminal.env import TerminalBenchEnv

    assert TerminalBenchEnv.success_checked_at_budget_end
    terminal = "agentenvs/TerminalBench-v0"
    cfg = EvalConfig(env_id=terminal, policy="terminal/solution", n=1, budgets=[1, 2],
                     task_ids=resolve_tasks(terminal, "first:1"), mode="derive")
    with pytest.raises(RunConfigError, match="budget runs out.*rerun"):
        run_pass_at_k_t(cfg, tmp_path, workers=0, progress=False)


# ---------------------------------------------------------------- run files that were edited
def test_a_wrong_record_is_named_by_line_and_field(tmp_path: Path) -> None:
    from agentenvs.eval.report import load_run

    cfg = config(n=2)
    run_pass_at_k_t(cfg, tmp_path, workers=0, progress=False)
    path = tmp_path / TRAJECTORIES_NAME
    good = path.read_bytes()
    line = good.count(b"\n") + 1
    for bad, field in ((b'{"bad": 1}\n', "task_id"), (b'[1, 2]\n', "JSON object")):
        path.write_bytes(good + bad)
        with pytest.raises(RunFileError, match=rf"{TRAJECTORIES_NAME}:{line}: .*{field}"):
            run_pass_at_k_t(cfg, tmp_path, workers=0, progress=False)
        with pytest.raises(RunFileError, match=rf":{line}: .*{field}"):
            load_run(tmp_path)
    first = json.loads(good.splitlines()[0])
    for field, value in (("sample", "0"), ("success", 1), ("first_success_turn", 99)):
        path.write_bytes(good + json.dumps({**first, field: value}).encode() + b"\n")
        with pytest.raises(RunFileError, match=rf":{line}: field '{field}'"):
            load_run(tmp_path)


def test_a_repeated_record_counts_once_and_a_conflicting_one_is_refused(tmp_path: Path) -> None:
    from agentenvs.eval.records import RunFileWarning
    from agentenvs.eval.report import load_run, run_surface

    cfg = config(n=3)
    run_pass_at_k_t(cfg, tmp_path, workers=0, progress=False)
    path = tmp_path / TRAJECTORIES_NAME
    good = path.read_bytes()
    before = run_surface(load_run(tmp_path), n_boot=0)
    first_line = good.splitlines(keepends=True)[0]
    path.write_bytes(good + first_line)
    with pytest.warns(RunFileWarning, match=r"1 repeated record.*counted once: line\(s\) \d+ \(= line 1\)"):
        data = load_run(tmp_path)
    assert data.n_records == good.count(b"\n")
    after = run_surface(data, n_boot=0)
    assert np.array_equal(before.mean, after.mean) and before.n_samples == after.n_samples
    with pytest.warns(RunFileWarning):
        summary = run_pass_at_k_t(cfg, tmp_path, workers=0, progress=False)
    assert summary.ran == 0
    record = json.loads(first_line)
    record["success"] = not record["success"]
    record["first_success_turn"] = None if record["first_success_turn"] else 1
    record["turns"] = max(record["turns"], 1)
    record["steps"] = record["steps"] or [{}]
    path.write_bytes(good + json.dumps(record).encode() + b"\n")
    with pytest.raises(RunFileError, match="already at line 1 with other contents"):
        load_run(tmp_path)
    with pytest.raises(RunFileError, match="already at line 1 with other contents"):
        run_pass_at_k_t(cfg, tmp_path, workers=0, progress=False)


# ---------------------------------------------------------------- a killed driver
def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _semaphores(pid: int) -> set[str]:
    """The multiprocessing semaphores a process maps (glibc maps them under a temporary
    name, so they are found by inode)."""
    inodes = {
        int(line.split()[4]) for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
        if len(line.split()) >= 6 and line.split()[5].startswith("/dev/shm/")
    }
    found = set()
    for name in os.listdir("/dev/shm"):
        path = os.path.join("/dev/shm", name)
        try:
            if name.startswith("sem.mp-") and os.stat(path).st_ino in inodes:
                found.add(path)
        except OSError:
            continue
    return found


def _start_killable_run(cfg: EvalConfig, out: Path) -> tuple[subprocess.Popen, list[int], set[str]]:
    """A run in its own process (group) with 2 pool workers, once it is well under way:
    the process, its children (workers and resource tracker) and the semaphores it maps."""
    script = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); "
        "from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t; "
        "cfg = EvalConfig.from_dict(json.loads(sys.argv[2])); "
        "run_pass_at_k_t(cfg, sys.argv[3], workers=2, chunk_size=1, progress=False)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(HERE), json.dumps(cfg.to_dict()), str(out)],
        start_new_session=True, stderr=subprocess.DEVNULL,
    )
    path = out / TRAJECTORIES_NAME
    deadline = time.monotonic() + 120
    while not (path.exists() and path.read_bytes().count(b"\n") >= 4):
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.02)
    children = _children(proc.pid)
    assert len(children) >= 3  # two workers and the resource tracker
    semaphores = _semaphores(proc.pid)
    assert semaphores
    return proc, children, semaphores


def _wait_for(predicate: Any, seconds: float = 120) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs Linux /proc and /dev/shm")
def test_workers_and_semaphores_go_with_a_sigkilled_driver(tmp_path: Path) -> None:
    cfg = config(mode="rerun", n=50, env_kwargs={"delay": 0.02})
    proc, children, semaphores = _start_killable_run(cfg, tmp_path / "run")
    proc.kill()  # the driver only: no cleanup code of its own can run
    proc.wait(timeout=30)
    try:
        assert _wait_for(lambda: not any(_running(pid) for pid in children)), [
            pid for pid in children if _running(pid)
        ]
        # the resource tracker, alone at last, unlinks the pool's semaphores
        assert _wait_for(lambda: not any(os.path.exists(s) for s in semaphores)), semaphores
    finally:
        for pid in children:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs Linux /proc and /dev/shm")
def test_semaphores_of_a_killed_process_group_are_swept_by_the_next_run(tmp_path: Path) -> None:
    from agentenvs.eval.executors import sweep_orphan_semaphores

    cfg = config(mode="rerun", n=50, env_kwargs={"delay": 0.02})
    proc, children, semaphores = _start_killable_run(cfg, tmp_path / "run")
    os.killpg(proc.pid, signal.SIGKILL)  # driver, workers and resource tracker at once
    proc.wait(timeout=30)
    assert _wait_for(lambda: not any(_running(pid) for pid in children))
    left = {s for s in semaphores if os.path.exists(s)}
    assert left, "nothing was left behind to sweep"
    # the next run sweeps them, and leaves a live run's semaphores alone
    live, live_children, live_semaphores = _start_killable_run(cfg, tmp_path / "live")
    try:
        assert not any(os.path.exists(s) for s in left)
        removed = {"/dev/shm/sem." + name.lstrip("/") for name in sweep_orphan_semaphores()}
        assert not removed & live_semaphores
        assert all(os.path.exists(s) for s in live_semaphores)
    finally:
        os.killpg(live.pid, signal.SIGKILL)
        live.wait(timeout=30)
        _wait_for(lambda: not any(_running(pid) for pid in live_children))
        sweep_orphan_semaphores()
    assert not any(os.path.exists(s) for s in live_semaphores)


def test_a_script_without_a_main_guard_is_told_why_its_workers_would_die(tmp_path: Path) -> None:
    script = tmp_path / "no_guard.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t\n"
        f"cfg = EvalConfig(env_id={GUESS_ID!r}, policy='test/guesser', task_ids=['small'],"
        " n=2, budgets=[2])\n"
        f"run_pass_at_k_t(cfg, {str(tmp_path / 'run')!r}, workers=2, progress=False)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "MainModuleError" in out.stderr and "__main__" in out.stderr and "guard" in out.stderr
    assert "worker process died" not in out.stderr
    guarded = tmp_path / "guarded.py"
    body = script.read_text().splitlines()
    guarded.write_text("\n".join(body[:3]) + "\nif __name__ == '__main__':\n"
                       + "\n".join("    " + line for line in body[3:]) + "\n")
    out = subprocess.run([sys.executable, str(guarded)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


class TemplateTrouble(RandomGuesser):
    """Cannot format the history of the "medium" task after its first turn, as a chat
    template that refuses a message order would."""

    def sample(self, conversations: Any, n: int = 1, *, seed: int | None = None) -> Any:
        from agentenvs.policy.chat import ChatTemplateError

        for conversation in conversations:
            if conversation.env.size == 10 and len(conversation.messages) > 1:
                raise ChatTemplateError("the template cannot render this history")
        return super().sample(conversations, n, seed=seed)


register_policy("test/template-trouble", f"{__name__}:TemplateTrouble")


def test_a_chat_template_error_ends_its_trajectory_not_the_run(tmp_path: Path) -> None:
    cfg = config(policy="test/template-trouble", mode="rerun", n=3, budgets=[4])
    summary = run_pass_at_k_t(cfg, tmp_path, workers=0, progress=False)
    assert summary.ran == 9
    records = read_records(tmp_path / TRAJECTORIES_NAME)
    medium = [r for r in records if r["task_id"] == "medium"]
    others = [r for r in records if r["task_id"] != "medium"]
    for r in medium:
        if r["turns"] == 1 and r["success"]:
            continue  # guessed right at once: the template was never asked again
        assert r["error"].startswith("ChatTemplateError: the template cannot render")
        assert not r["success"] and r["turns"] == len(r["steps"]) == 1
    assert any("error" in r for r in medium)
    assert not any("error" in r for r in others)
    from agentenvs.eval.report import load_run, run_surface

    assert run_surface(load_run(tmp_path), ks=[1], n_boot=0).n_tasks == 3
