"""The Ray backend: the same trajectories as the local pool, resume, and dying workers.

One real local Ray instance (not local mode) serves the whole module: it starts in a
few seconds on a small machine, so every test shares it. Ray's workers import this
module by name (the env id ``test_ray:agentenvs/FrozenLake-v0`` and the job functions
below), so the instance puts this folder on their ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from agentenvs.core.errors import MissingExtraError
from agentenvs.envs.frozenlake.policies import NoisyOraclePolicy
from agentenvs.eval.executors import (
    InlineExecutor,
    Job,
    RayExecutor,
    WorkerLostError,
    make_executor,
)
from agentenvs.eval.records import TRAJECTORIES_NAME, read_records
from agentenvs.eval.runner import EvalConfig, resolve_tasks, run_pass_at_k_t
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import register_policy

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'agentenvs[ray]'")

HERE = Path(__file__).resolve().parent
FROZENLAKE = "agentenvs/FrozenLake-v0"
#: the same env, but gym.make imports this module first, which registers the policies below
FROZENLAKE_HERE = f"{Path(__file__).stem}:{FROZENLAKE}"
NOISY = "frozenlake/noisy:error_rate=0.3"


class CrashOncePolicy(NoisyOraclePolicy):
    """The noisy oracle, except that the first process to act while ``marker`` is missing
    creates it and dies at once, as a worker killed by the OOM killer would."""

    def __init__(self, marker: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.marker = marker

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return super().act(conversation, rng)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os._exit(17)


class FailOnTaskPolicy(NoisyOraclePolicy):
    """The noisy oracle that raises on ``task`` while the file ``switch`` exists (a bug
    that stops a run partway)."""

    def __init__(self, switch: str, task: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.switch, self.task = switch, task

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        if conversation.env.task_id == self.task and os.path.exists(self.switch):
            raise RuntimeError(f"policy bug on {self.task}")
        return super().act(conversation, rng)


register_policy("test_ray/crash-once", f"{__name__}:CrashOncePolicy")
register_policy("test_ray/fail-on-task", f"{__name__}:FailOnTaskPolicy")


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[dict[str, float]]:
    """A real 2-CPU Ray instance for this module; shut down after its last test."""
    started = time.perf_counter()
    python_path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    # through the environment the instance inherits, not a runtime_env: workers that Ray
    # starts ahead of time can then host the actors (a runtime_env needs fresh ones)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", python_path)
        ray.init(
            num_cpus=2,
            _node_ip_address="127.0.0.1",  # this machine only: stay on loopback
            include_dashboard=False,
            log_to_driver=False,  # a test that kills workers on purpose would fill the log
            object_store_memory=128 * 1024 * 1024,
        )
    try:
        yield {"startup_s": time.perf_counter() - started}
    finally:
        ray.shutdown()


def frozenlake_config(mode: str, **overrides: Any) -> EvalConfig:
    base: dict[str, Any] = dict(
        env_id=FROZENLAKE,
        policy=NOISY,
        task_ids=resolve_tasks(FROZENLAKE, "first:3"),
        n=4,
        budgets=[2, 4, 8],
        mode=mode,
        seed=5,
    )
    base.update(overrides)
    return EvalConfig(**base)


def sorted_lines(run_dir: Path) -> list[str]:
    return sorted((run_dir / TRAJECTORIES_NAME).read_text().splitlines())


def keys_of(run_dir: Path) -> Counter:
    return Counter(
        (r["task_id"], r["sample"], r["budget"]) for r in read_records(run_dir / TRAJECTORIES_NAME)
    )


@pytest.mark.parametrize("mode", ["derive", "rerun"])
def test_ray_gives_the_local_pools_records(ray_cluster: dict, tmp_path: Path, mode: str) -> None:
    # the noisy oracle plans on the turns left, which derive refuses; random play does not
    config = frozenlake_config(mode, **({"policy": "frozenlake/random"} if mode == "derive" else {}))
    local = run_pass_at_k_t(config, tmp_path / "local", workers=2, progress=False)
    remote = run_pass_at_k_t(config, tmp_path / "ray", workers=2, backend="ray", progress=False)
    expected = 3 * 4 * (3 if mode == "rerun" else 1)
    assert local.ran == remote.ran == expected
    assert remote.successes == local.successes
    assert sorted_lines(tmp_path / "ray") == sorted_lines(tmp_path / "local")
    assert max(keys_of(tmp_path / "ray").values()) == 1
    # the driver left the shared instance as it found it: connected, its actors gone
    assert ray.is_initialized()
    deadline = time.monotonic() + 120  # released asynchronously: a loaded machine is slow
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ray.available_resources().get("CPU", 0) == 2


def test_partial_ray_run_resumes_to_the_full_result(ray_cluster: dict, tmp_path: Path) -> None:
    switch = tmp_path / "bug-on"
    first, second, third = resolve_tasks(FROZENLAKE, "first:3")
    config = frozenlake_config(
        "rerun",
        env_id=FROZENLAKE_HERE,
        task_ids=[first, third, second],  # the failing task last
        policy=f"test_ray/fail-on-task:switch={switch},task={second},error_rate=0.3",
    )
    reference = run_pass_at_k_t(config, tmp_path / "reference", workers=0, progress=False)
    run_dir = tmp_path / "ray"
    switch.touch()
    # task-major work order: the last task's chunks go out after the first ones came back
    with pytest.raises(RuntimeError, match="policy bug"):
        run_pass_at_k_t(config, run_dir, workers=2, chunk_size=2, backend="ray", progress=False)
    written = keys_of(run_dir)
    assert 0 < sum(written.values()) < reference.total and max(written.values()) == 1
    assert all(task != second for task, _, _ in written)
    with open(run_dir / TRAJECTORIES_NAME, "ab") as fh:
        fh.write(b'{"task_id": "torn by a kill')  # no newline: the resume drops it
    switch.unlink()
    resumed = run_pass_at_k_t(config, run_dir, workers=2, chunk_size=2, backend="ray", progress=False)
    assert resumed.already_done == sum(written.values())
    assert resumed.already_done + resumed.ran == reference.total
    assert sorted_lines(run_dir) == sorted_lines(tmp_path / "reference")


def test_a_dying_worker_is_restarted_without_duplicates(ray_cluster: dict, tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    config = frozenlake_config(
        "rerun", env_id=FROZENLAKE_HERE, policy=f"test_ray/crash-once:marker={marker},error_rate=0.3"
    )
    marker.touch()  # the reference run must not crash: the local pool would hang on it
    run_pass_at_k_t(config, tmp_path / "local", workers=2, progress=False)
    marker.unlink()
    summary = run_pass_at_k_t(
        config, tmp_path / "ray", workers=2, chunk_size=3, backend="ray", progress=False
    )
    dead_pid = int(marker.read_text())  # a worker really did os._exit mid-chunk
    assert dead_pid > 0 and dead_pid != os.getpid()
    assert summary.ran == summary.total == 36
    assert max(keys_of(tmp_path / "ray").values()) == 1
    assert sorted_lines(tmp_path / "ray") == sorted_lines(tmp_path / "local")


# ---------------------------------------------------------------- the executor API
class StateWorker:
    """A worker's state for the snapshot jobs: one env, built once."""

    def __init__(self) -> None:
        import agentenvs  # noqa: F401 - registers the ids in a fresh worker

        self.env = gym.make(FROZENLAKE)
        self.pid = os.getpid()

    def close(self) -> None:
        self.env.close()


def step_from_snapshot(worker: StateWorker, payload: tuple[bytes, str]) -> tuple[str, float, int]:
    """Restore a snapshot shipped as bytes, take an action, say what happened and where."""
    from agentenvs import Snapshot, restore_snapshot

    snapshot, action = payload
    restore_snapshot(worker.env, Snapshot.from_bytes(snapshot))
    observation, reward, _, _, _ = worker.env.step(action)
    return observation, float(reward), worker.pid


def die(worker: StateWorker, payload: bytes) -> None:
    os._exit(3)


def snapshot_jobs() -> list[Job]:
    import agentenvs

    env = gym.make(FROZENLAKE)
    jobs = []
    for seed in range(4):
        env.reset(seed=seed)
        snap = agentenvs.take_snapshot(env).to_bytes()
        jobs += [Job((seed, a), step_from_snapshot, (snap, a)) for a in ("Left", "Down", "x")]
    env.close()
    return jobs


def test_executor_ships_snapshot_bytes_to_actors(ray_cluster: dict) -> None:
    jobs = snapshot_jobs()
    with InlineExecutor() as inline:
        expected = {k: v[:2] for k, v in inline.run(StateWorker, jobs)}
    with RayExecutor(workers=2) as executor:
        got = dict(executor.run(StateWorker, jobs, chunk_size=4))
    assert {k: v[:2] for k, v in got.items()} == expected
    assert len({pid for _, _, pid in got.values()} - {os.getpid()}) == 2  # two actors did it
    assert ray.is_initialized()  # it did not shut down an instance it did not start


def test_executor_gives_up_after_max_restarts(ray_cluster: dict) -> None:
    jobs = [Job(i, die, b"") for i in range(2)]
    with RayExecutor(workers=1, max_restarts=1) as executor:
        with pytest.raises(WorkerLostError, match="resuming is safe"):
            list(executor.run(StateWorker, jobs, chunk_size=1))


def test_executor_rejects_duplicate_keys_and_unknown_backends() -> None:
    with pytest.raises(ValueError, match="unique"):
        list(InlineExecutor().run(StateWorker, [Job(1, die, b""), Job(1, die, b"")]))
    with pytest.raises(ValueError, match="backend"):
        make_executor("dask")
    with pytest.raises(ValueError, match="address"):
        make_executor("local", 2, address="auto")


def test_cli_eval_on_ray(ray_cluster: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from agentenvs.cli import main

    args = ["eval", "--env", FROZENLAKE, "--policy", NOISY, "--tasks", "first:2", "--n", "2",
            "--budgets", "2,4", "--no-progress", "--workers", "2"]
    assert main([*args, "--out", str(tmp_path / "ray"), "--backend", "ray"]) == 0
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    assert sorted_lines(tmp_path / "ray") == sorted_lines(tmp_path / "local")
    assert len(sorted_lines(tmp_path / "ray")) == 8  # rerun by default: one run per budget
    assert main([*args, "--out", str(tmp_path / "x"), "--address", "auto"]) == 2
    assert "address is for backend='ray'" in capsys.readouterr().err


def test_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(MissingExtraError, match=r"agentenvs\[ray\]"):
        RayExecutor(workers=1)


def test_import_agentenvs_does_not_import_ray() -> None:
    code = (
        "import sys, agentenvs, agentenvs.cli, agentenvs.eval.runner, agentenvs.eval.executors; "
        "assert 'ray' not in sys.modules, 'ray imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ray_rides_out_faults_as_the_local_pool_does(ray_cluster: dict, tmp_path: Path) -> None:
    import shutil
    import tempfile

    from fault_service import Service
    from test_faults import fault_records, remote_config, without_faults

    folder = tempfile.mkdtemp(prefix="agentenvs-fs-")  # a Unix socket's path is short
    try:
        service = os.path.join(folder, "s")
        config = remote_config(service)
        with Service(service):
            run_pass_at_k_t(config, tmp_path / "reference", workers=0, progress=False)
        drops = [4, 50, 51, 120]  # calls the service drops: the env's or the policy's
        with Service(service, drop=drops):
            summary = run_pass_at_k_t(
                config, tmp_path / "ray", workers=2, backend="ray", chunk_size=4,
                progress=False, fault_backoff=0,
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert summary.ran == 36
    assert without_faults(tmp_path / "ray") == without_faults(tmp_path / "reference")
    assert len(fault_records(tmp_path / "ray")) == summary.faults["faults"] == len(drops)
