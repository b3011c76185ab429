"""Faults are not failures: the runner and the analyses ride out real infrastructure faults.

The env and policy here depend on a real service on a Unix socket (``fault_service``, a
separate process). The service breaks from outside the episode: it drops the
connection of chosen requests, or SIGKILLs itself at a chosen request so that every
later call is refused; the env and the policy raise ``Fault`` when their call fails, as
an env whose database or container is gone would. The runner logic under test is the
real one: its workers, retries, files and reports. Each test checks the property: the
run completes (or stops, naming the faults, past its bound), its records and Pass@(K,T)
tables equal those of a fault-free run with the same seeds, the fault count is right,
and nothing is left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from fault_service import Service, request
from test_likelihood import CharUnigramScorer
from test_runner import GuessEnv, RandomGuesser

from agentenvs.cli import main
from agentenvs.core import Transition
from agentenvs.core.errors import Fault
from agentenvs.eval.faults import (
    FAULTS_NAME,
    Faulted,
    FaultLimitError,
    fault_summary,
    retry_faults,
)
from agentenvs.eval.likelihood import LikelihoodConfig, run_likelihood
from agentenvs.eval.records import TRAJECTORIES_NAME, read_manifest, read_records
from agentenvs.eval.report import write_report
from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t
from agentenvs.eval.step_quality import StepQualityConfig, run_step_quality, summary_markdown
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import register_policy

REMOTE_ID = "test_faults:agentenvs_test/RemoteGuess-v0"


def _call(path: str, line: str, kind: str) -> str:
    try:
        return request(path, line)
    except OSError as exc:
        raise Fault(
            f"the guess service at {path} failed: {type(exc).__name__}: {exc}",
            kind=kind,
            evidence=f"{type(exc).__name__} from the service's socket, which the agent cannot reach",
        ) from exc


class RemoteGuessEnv(GuessEnv):
    """The guessing game, judged by the service: each reset checks it answers, each guess
    is sent to it. A failed call raises ``Fault``: the agent did nothing wrong."""

    def __init__(self, *, service: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.service = service

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        observation = super()._load_task(task_id, options)
        _call(self.service, "ping", "other")
        return observation

    def _apply(self, action: str) -> Transition:
        try:
            guess = int(action)
        except ValueError:
            return Transition("Answer with a whole number.", action_valid=False)
        verdict = _call(self.service, f"guess {self.target} {guess}", "other")
        if verdict == "correct":
            return Transition("correct", reward=1.0, terminated=True, success=True, score=1.0)
        if verdict == "higher":
            self.low = max(self.low, guess + 1)
            return Transition("higher")
        self.high = min(self.high, guess - 1)
        return Transition("lower")


class RemoteGuesser(RandomGuesser):
    """The random guesser, calling the service before each action as a model policy calls
    its server (a failed call is a fault of kind ``model``)."""

    def __init__(self, service: str) -> None:
        self.service = service

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        _call(self.service, "ping", "model")
        return super().act(conversation, rng)


if "agentenvs_test/RemoteGuess-v0" not in gym.registry:
    gym.register("agentenvs_test/RemoteGuess-v0", entry_point=RemoteGuessEnv, order_enforce=False)
register_policy("test/remote-guesser", f"{__name__}:RemoteGuesser")


@pytest.fixture
def service_path() -> Iterator[str]:
    # a short folder: a Unix socket's path has at most 107 bytes
    folder = tempfile.mkdtemp(prefix="agentenvs-fs-")
    try:
        yield os.path.join(folder, "s")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def remote_config(service: str, **overrides: Any) -> EvalConfig:
    base: dict[str, Any] = dict(
        env_id=REMOTE_ID,
        policy=f"test/remote-guesser:service={service}",
        task_ids=["small", "medium", "large"],
        n=4,
        budgets=[2, 4, 6],
        mode="rerun",
        seed=5,
        env_kwargs={"service": service},
    )
    base.update(overrides)
    return EvalConfig(**base)


def without_faults(run_dir: Path) -> list[str]:
    """The run's records, sorted, each without its ``faults`` field."""
    records = read_records(run_dir / TRAJECTORIES_NAME)
    for record in records:
        record.pop("faults", None)
    return sorted(json.dumps(r, sort_keys=True) for r in records)


def fault_records(run_dir: Path) -> list[dict[str, Any]]:
    return [f for r in read_records(run_dir / TRAJECTORIES_NAME) for f in r.get("faults", [])]


def child_pids() -> set[int]:
    """Living processes whose parent is this one, but multiprocessing's resource tracker
    (started with the first pool, it serves the process to its end)."""
    mine = str(os.getpid())
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                command = fh.read()
        except OSError:
            continue
        if fields[1] == mine and fields[0] != "Z" and b"resource_tracker" not in command:
            out.add(int(entry))
    return out


def reference(service: str, run_dir: Path, config: EvalConfig) -> None:
    with Service(service):
        summary = run_pass_at_k_t(config, run_dir, workers=0, progress=False)
    assert summary.faults["faults"] == 0


# ---------------------------------------------------------------- the retry itself
def test_retry_faults_retries_faults_only_and_stops_at_a_fault_not_worth_retrying() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise Fault("lost", kind="database")
        return "ok"

    result, faults = retry_faults(flaky, max_retries=3, backoff=0)
    assert result == "ok" and [f["attempt"] for f in faults] == [1, 2]
    assert {f["kind"] for f in faults} == {"database"}

    def broken() -> str:
        raise Fault("image gone", kind="registry", retryable=False)

    result, faults = retry_faults(broken, max_retries=3, backoff=0)
    assert isinstance(result, Faulted) and len(faults) == 1  # not retried

    def bug() -> str:
        raise KeyError("a bug is no fault")

    with pytest.raises(KeyError):
        retry_faults(bug, max_retries=3, backoff=0)


def test_fault_summary_counts_attempts_per_task() -> None:
    fault = Fault("x", kind="sandbox").record()
    results = [
        {"task_id": "a", "faults": [fault, fault]},
        {"task_id": "a"},
        {"task_id": "b", "faults": [fault]},
    ]
    lines = [
        {"type": "item", "task_id": "b", "faults": [fault] * 4},
        {"type": "worker", "fault": Fault("w", kind="worker").record()},
    ]
    summary = fault_summary(results, lines)
    assert summary["by_task"]["a"] == {
        "attempts": 4, "finished": 2, "faults": 2, "faulted": 0, "with_faults": 1, "rate": 0.5,
    }
    assert summary["by_task"]["b"]["attempts"] == 6 and summary["by_task"]["b"]["faulted"] == 1
    assert summary["faults"] == 8 and summary["worker_losses"] == 1
    assert summary["by_kind"] == {"sandbox": 7, "worker": 1}
    assert summary["attempts"] == 3 + 8


# ---------------------------------------------------------------- runs that ride out faults
@pytest.mark.parametrize("workers", [0, 2])
def test_dropped_calls_are_retried_and_the_run_equals_a_fault_free_one(
    service_path: str, tmp_path: Path, workers: int
) -> None:
    cfg = remote_config(service_path)
    reference(service_path, tmp_path / "reference", cfg)
    before = child_pids()
    drops = [3, 40, 41, 97, 150]  # requests whose connection the service drops
    with Service(service_path, drop=drops):
        summary = run_pass_at_k_t(
            cfg, tmp_path / "faulty", workers=workers, chunk_size=4, progress=False,
            fault_backoff=0,
        )
    assert summary.total == summary.ran == 3 * 3 * 4
    assert without_faults(tmp_path / "faulty") == without_faults(tmp_path / "reference")
    # one fault per dropped call, each in the record of the trajectory that saw it
    faults = fault_records(tmp_path / "faulty")
    assert len(faults) == len(drops) == summary.faults["faults"] == summary.new_faults
    assert {f["attribution"] for f in faults} == {"infrastructure"}
    assert {f["kind"] for f in faults} <= {"other", "model"}
    assert all("closed the connection" in f["message"] for f in faults)
    assert summary.faults["rate"] == pytest.approx(len(drops) / (36 + len(drops)))
    manifest = read_manifest(tmp_path / "faulty")
    assert manifest["faults"]["faults"] == len(drops)
    assert not (tmp_path / "faulty" / FAULTS_NAME).read_text()  # nothing ran out of retries
    # the estimate does not see the faults: the tables are those of the fault-free run
    ref = write_report(tmp_path / "reference", n_boot=50, plots=False)
    got = write_report(tmp_path / "faulty", n_boot=50, plots=False)
    assert (got.out_dir / "passk.csv").read_text() == (ref.out_dir / "passk.csv").read_text()
    table = (got.out_dir / "passk.md").read_text()
    assert "### Faults" in table and f"{len(drops)} fault(s)" in table
    assert "no faults (fault rate 0%" in (ref.out_dir / "passk.md").read_text()
    report = json.loads((got.out_dir / "passk.json").read_text())
    assert report["faults"]["faults"] == len(drops) and report["short_tasks"] == {}
    assert child_pids() == before  # workers and the service are gone


def test_a_dead_service_stops_the_run_naming_the_faults_and_a_resume_completes_it(
    service_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = remote_config(service_path)
    reference(service_path, tmp_path / "reference", cfg)
    out = tmp_path / "run"
    argv = [
        "eval", "--env", REMOTE_ID, "--policy", cfg.policy, "--tasks", "small,medium,large",
        "--n", "4", "--budgets", "2,4,6", "--seed", "5", "--env-kwargs",
        json.dumps(cfg.env_kwargs), "--out", str(out), "--workers", "2", "--chunk-size", "3",
        "--no-progress", "--max-fault-retries", "2", "--fault-backoff", "0",
    ]
    before = child_pids()
    with Service(service_path, die_at=60) as service:  # killed partway through the run
        assert main(argv) == 2
        assert service.wait_dead() == -9
    err = capsys.readouterr().err
    assert "faulted in every attempt (3 attempts (max_fault_retries 2))" in err
    assert "ConnectionRefusedError" in err and "resume" in err
    assert child_pids() == before
    # what finished is kept, each record as the fault-free run wrote it
    done = without_faults(out)
    assert 0 < len(done) < 36 and set(done) <= set(without_faults(tmp_path / "reference"))
    faulted = [r for r in read_records(out / FAULTS_NAME) if r["type"] == "item"]
    assert len(faulted) == 1 and len(faulted[0]["faults"]) == 3
    # the report of the stopped run says which tasks are short, and the faults
    write_report(out, n_boot=0, plots=False)
    table = (out / "report" / "passk.md").read_text()
    assert "fewer than n = 4 samples" in table and "out of retries" in table
    # the service is back: a resume runs exactly what is missing, faulted one included
    with Service(service_path):
        assert main(argv) == 0
    printed = capsys.readouterr().out
    assert without_faults(out) == without_faults(tmp_path / "reference")
    summary = read_manifest(out)["faults"]
    assert summary["faulted"] == 1 and summary["faults"] >= 3
    assert "fault rate" in printed and "ran out of retries" in printed
    write_report(out, n_boot=0, plots=False)
    assert "fewer than n" not in (out / "report" / "passk.md").read_text()
    assert child_pids() == before


def test_a_fault_rate_past_its_bound_stops_the_run(service_path: str, tmp_path: Path) -> None:
    cfg = remote_config(service_path, budgets=[2])  # at most 5 calls a trajectory
    drops = list(range(6, 1000, 6))  # every sixth call fails: every attempt can succeed
    with (
        Service(service_path, drop=drops),
        pytest.raises(FaultLimitError, match=r"attempts faulted \(.*more than max_fault_rate 10"),
    ):
        run_pass_at_k_t(
            cfg, tmp_path / "run", workers=0, progress=False, fault_backoff=0,
            max_fault_retries=10, max_fault_rate=0.1,
        )
    faults = read_manifest(tmp_path / "run")["faults"]
    assert faults["faults"] > 0.1 * faults["attempts"] and faults["attempts"] >= 20
    assert faults["finished"] < 12  # stopped before the end


# ---------------------------------------------------------------- the analyses
class RemoteScorer(CharUnigramScorer):
    """The character-unigram scorer of test_likelihood, asking the service first, as a
    model server would be asked (a failed call is a fault of kind ``model``)."""

    name = "test/remote-scorer"

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def score(self, conversations: Any, actions: Any) -> Any:
        _call(self.service, "ping", "model")
        return super().score(conversations, actions)


register_policy("test/remote-scorer", f"{__name__}:RemoteScorer")


def without_fault_fields(path: Path, key: str) -> list[str]:
    records = read_records(path)
    for record in records:
        record.pop("faults", None)
    return sorted(json.dumps(r, sort_keys=True) for r in sorted(records, key=lambda r: r[key]))


def test_step_quality_retries_faulted_scoring_and_equals_the_fault_free_analysis(
    service_path: str, tmp_path: Path
) -> None:
    cfg = remote_config(service_path, n=3, budgets=[6])
    reference(service_path, tmp_path / "run", cfg)
    sq = StepQualityConfig(
        env_id=REMOTE_ID, policy_a=cfg.policy, policy_b=cfg.policy, env_kwargs=cfg.env_kwargs,
        run_dir=str(tmp_path / "run"), n_states=8, n_actions=3, seed=1,
    )
    with Service(service_path):
        clean = run_step_quality(sq, tmp_path / "clean", workers=0, progress=False, plots=False)
        # the states of the faulty analysis, collected while nothing fails
        run_step_quality(sq, tmp_path / "faulty", workers=0, progress=False, plots=False, limit=0)
    drops = [2, 30, 31, 77]  # sampling (the policy's calls) and scoring (the env's) fail
    with Service(service_path, drop=drops):
        faulty = run_step_quality(
            sq, tmp_path / "faulty", workers=2, chunk_size=2, progress=False, plots=False,
            fault_backoff=0,
        )
    assert faulty.ran == clean.ran == 8
    assert without_fault_fields(tmp_path / "faulty" / "results.jsonl", "state_id") == (
        without_fault_fields(tmp_path / "clean" / "results.jsonl", "state_id")
    )
    assert faulty.summary["faults"]["faults"] == len(drops)
    assert clean.summary["faults"]["faults"] == 0
    def rest(summary: dict[str, Any]) -> str:  # as JSON: NaN (no decided pairs) equals NaN
        return json.dumps({k: v for k, v in summary.items() if k != "faults"}, sort_keys=True)

    assert rest(faulty.summary) == rest(clean.summary)
    assert f"Faults: {len(drops)} fault(s)" in summary_markdown(faulty.summary)


def test_likelihood_retries_a_model_server_that_drops_calls(
    service_path: str, tmp_path: Path
) -> None:
    cfg = remote_config(service_path, n=2, budgets=[4])
    reference(service_path, tmp_path / "run", cfg)
    lk = LikelihoodConfig(
        run_dirs=[str(tmp_path / "run")], model_a=f"test/remote-scorer:service={service_path}",
        history="record",
    )
    with Service(service_path):
        clean = run_likelihood(lk, tmp_path / "clean", progress=False, plots=False, n_boot=20)
    drops = [1, 4, 5]
    with Service(service_path, drop=drops):
        faulty = run_likelihood(
            lk, tmp_path / "faulty", progress=False, plots=False, n_boot=20, fault_backoff=0
        )
    assert without_fault_fields(tmp_path / "faulty" / "results.jsonl", "id") == (
        without_fault_fields(tmp_path / "clean" / "results.jsonl", "id")
    )
    assert faulty.summary["faults"]["faults"] == len(drops)
    assert faulty.summary["faults"]["by_kind"] == {"model": len(drops)}
    assert faulty.summary["groups"] == clean.summary["groups"]
    # a server that is gone: the analysis stops, naming the faults, and resumes
    with Service(service_path, die_at=1), pytest.raises(FaultLimitError, match="traj .* faulted"):
        run_likelihood(
            lk, tmp_path / "stopped", progress=False, plots=False, n_boot=20, fault_backoff=0,
            max_fault_retries=1,
        )
    with Service(service_path):
        resumed = run_likelihood(lk, tmp_path / "stopped", progress=False, plots=False, n_boot=20)
    assert without_fault_fields(tmp_path / "stopped" / "results.jsonl", "id") == (
        without_fault_fields(tmp_path / "clean" / "results.jsonl", "id")
    )
    assert resumed.summary["faults"]["faulted"] == 1


def test_faults_injected_at_the_env_boundary_leave_frozenlake_runs_unchanged(
    tmp_path: Path,
) -> None:
    from agentenvs.wrappers.inject_faults import INJECT_FAULTS_SPEC

    common = dict(
        policy="frozenlake/noisy:error_rate=0.25,recover=0.5", task_ids=["4x4", "8x8"], n=6,
        budgets=[4, 12], mode="rerun", seed=2,
    )
    lake = {"success_rate": 0.8}
    clean = EvalConfig(env_id="agentenvs/FrozenLake-v0", env_kwargs=lake, **common)
    faulty = EvalConfig(
        env_id=INJECT_FAULTS_SPEC,
        env_kwargs={"env_id": "agentenvs/FrozenLake-v0", "rate": 0.3, "env_kwargs": lake},
        **common,
    )
    run_pass_at_k_t(clean, tmp_path / "clean", workers=0, progress=False)
    summary = run_pass_at_k_t(
        faulty, tmp_path / "faulty", workers=2, progress=False, fault_backoff=0,
        max_fault_retries=20,
    )

    def trajectories(run_dir: Path) -> list[str]:
        records = read_records(run_dir / TRAJECTORIES_NAME)
        for record in records:
            for name in ("run", "env_id", "faults"):
                record.pop(name, None)
        return sorted(json.dumps(r, sort_keys=True) for r in records)

    assert trajectories(tmp_path / "faulty") == trajectories(tmp_path / "clean")
    assert summary.faults["faults"] == len(fault_records(tmp_path / "faulty")) > 0
    assert all(f["message"].startswith("injected fault at") for f in fault_records(tmp_path / "faulty"))
