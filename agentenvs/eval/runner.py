"""The Pass@(K,T) runner: sample trajectories in worker processes, append them as JSONL.

``run_pass_at_k_t(config, run_dir)`` runs ``config.n`` trajectories per task of a policy
on an env, in one of two modes:

- ``derive``: one run per trajectory at the largest budget; the turn of first success
  gives c_T for every smaller T. Valid only when the agent cannot see its budget, so it
  is refused for envs made with ``show_budget=True``. (A scripted policy that reads the
  env's remaining turns itself would break it too: such a policy needs ``rerun``.)
- ``rerun``: a separate run per budget (needed when the budget is visible, or for a
  policy trained with a varying budget).

Every trajectory has a seed derived with a stable hash from (run seed, task id, sample
index[, budget in rerun mode]); it seeds ``env.reset`` and, mixed with the turn number,
every ``policy.sample`` call. A trajectory therefore depends on nothing but its seed:
the same run gives the same trajectories in any process, order or worker count.

Each worker process builds its env (``gym.make``) and policy (``make_policy``) once and
runs chunks of trajectories; the parent appends each finished trajectory to
``trajectories.jsonl`` as one atomic line. Restarting a run reads that file, ignores a
torn last line and skips what is done, so an interrupted-and-resumed run ends with
exactly the trajectories of an uninterrupted one. ``manifest.json`` holds the config;
resuming with another config is refused.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentenvs  # noqa: F401 - registers the env ids and policies in worker processes
from agentenvs.core import info as keys
from agentenvs.core.errors import AgentEnvsError
from agentenvs.eval.records import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    TRAJECTORIES_NAME,
    JsonlAppender,
    RunFileError,
    dumps_line,
    iter_records,
    read_manifest,
    stable_seed,
    write_json_atomic,
)
from agentenvs.policy.base import Conversation, Policy
from agentenvs.policy.registry import make_policy

MODES = ("derive", "rerun")
#: info keys stored per step by default: enough to replay success, score and state groups
DEFAULT_INFO_KEYS: tuple[str, ...] = (
    keys.TURN,
    keys.TURNS_LEFT,
    keys.SUCCESS,
    keys.SCORE,
    keys.ACTION_VALID,
    keys.STATE_KEY,
)


class RunConfigError(AgentEnvsError, ValueError):
    """A run that cannot go ahead as configured (bad mode, budget visible in derive, a
    resume whose config differs from the stored manifest)."""


@dataclass
class EvalConfig:
    """Everything that decides a run's trajectories (worker count and chunking do not)."""

    env_id: str
    policy: str
    task_ids: Sequence[str]
    n: int
    budgets: Sequence[int]
    mode: str = "derive"
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    info_keys: Sequence[str] = DEFAULT_INFO_KEYS

    def __post_init__(self) -> None:
        self.task_ids = tuple(str(t) for t in self.task_ids)
        self.budgets = tuple(sorted({int(b) for b in self.budgets}))
        self.info_keys = tuple(self.info_keys)
        self.env_kwargs = dict(self.env_kwargs)
        if self.mode not in MODES:
            raise RunConfigError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not self.task_ids:
            raise RunConfigError("no tasks to run")
        if len(set(self.task_ids)) != len(self.task_ids):
            raise RunConfigError("task ids must be unique")
        if not self.budgets or self.budgets[0] < 1:
            raise RunConfigError(f"budgets must be positive ints, got {self.budgets!r}")
        if int(self.n) < 1:
            raise RunConfigError(f"n must be >= 1, got {self.n}")
        self.n = int(self.n)
        self.seed = int(self.seed)
        if "max_turns" in self.env_kwargs:
            raise RunConfigError("set budgets, not env_kwargs['max_turns']: the runner owns it")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["task_ids"] = list(self.task_ids)
        data["budgets"] = list(self.budgets)
        data["info_keys"] = list(self.info_keys)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalConfig:
        return cls(**data)

    @property
    def run_id(self) -> str:
        """A short name of the config: equal configs share it across machines."""
        return f"{stable_seed(dumps_line(self.to_dict()).decode()):016x}"[:12]

    def work(self) -> list[WorkItem]:
        """Every trajectory of the run, task-major (a worker keeps one task's samples
        together, which suits policies that cache per task)."""
        items: list[WorkItem] = []
        budgets = self.budgets if self.mode == "rerun" else (max(self.budgets),)
        for task_id in self.task_ids:
            for budget in budgets:
                for sample in range(self.n):
                    if self.mode == "rerun":
                        seed = stable_seed(self.seed, task_id, sample, budget)
                    else:
                        seed = stable_seed(self.seed, task_id, sample)
                    items.append(WorkItem(task_id, sample, budget, seed))
        return items


@dataclass(frozen=True)
class WorkItem:
    task_id: str
    sample: int
    budget: int
    seed: int

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.task_id, self.sample, self.budget)


@dataclass
class RunSummary:
    run_dir: Path
    total: int
    already_done: int
    ran: int
    successes: int
    seconds: float

    @property
    def trajectories_path(self) -> Path:
        return self.run_dir / TRAJECTORIES_NAME


def record_key(record: dict[str, Any]) -> tuple[str, int, int]:
    return (str(record["task_id"]), int(record["sample"]), int(record["budget"]))


def make_env(config: EvalConfig) -> gym.Env:
    return gym.make(config.env_id, **config.env_kwargs)


def check_mode(config: EvalConfig, env: gym.Env) -> None:
    """Refuse ``derive`` when the agent is told its budget: its behaviour depends on T."""
    if config.mode == "derive" and getattr(env.unwrapped, "show_budget", False):
        raise RunConfigError(
            f"{config.env_id} shows the agent its turn budget (show_budget=True), so a run "
            "at the largest budget says nothing about smaller ones; use mode='rerun'"
        )


def run_episode(
    env: gym.Env, policy: Policy, item: WorkItem, info_keys: Sequence[str]
) -> dict[str, Any]:
    """One trajectory of ``item``: reset with its seed, then one seeded sample per turn."""
    first_observation, info = env.reset(
        seed=item.seed, options={"task_id": item.task_id, "max_turns": item.budget}
    )
    conversation = Conversation.start(first_observation, info, env=env.unwrapped)
    steps: list[dict[str, Any]] = []
    first_success: int | None = None
    reward_sum = 0.0
    terminated = truncated = False
    turn = 0
    while not (terminated or truncated):
        turn += 1
        action = policy.sample([conversation], 1, seed=stable_seed(item.seed, "turn", turn))[0][0]
        observation, reward, terminated, truncated, info = env.step(action)
        reward_sum += float(reward)
        if first_success is None and info.get(keys.SUCCESS):
            first_success = turn
        steps.append(
            {
                "action": action,
                "observation": observation,
                "reward": float(reward),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "info": {k: info[k] for k in info_keys if k in info},
            }
        )
        conversation.add_turn(action, observation)
    return {
        "task_id": item.task_id,
        "sample": item.sample,
        "budget": item.budget,
        "seed": item.seed,
        "success": bool(info.get(keys.SUCCESS, False)),
        "first_success_turn": first_success,
        "turns": turn,
        "score": float(info.get(keys.SCORE, 0.0)),
        "reward_sum": reward_sum,
        "terminated": bool(terminated),
        "truncated": bool(truncated),
        "initial_observation": first_observation,
        "steps": steps,
    }


# ---------------------------------------------------------------- worker processes
_WORKER: dict[str, Any] = {}


def _init_worker(config_data: dict[str, Any]) -> None:
    """Build the env and policy once per worker process; every chunk reuses them."""
    config = EvalConfig.from_dict(config_data)
    env = make_env(config)  # first: a "module:Env-v0" id imports the module that may
    policy = make_policy(config.policy)  # also register the policy
    _WORKER.update(config=config, env=env, policy=policy, meta=_run_meta(config))


def _run_meta(config: EvalConfig) -> dict[str, Any]:
    return {
        "run": config.run_id,
        "env_id": config.env_id,
        "policy": config.policy,
        "mode": config.mode,
    }


def _run_chunk(items: Sequence[WorkItem]) -> list[tuple[tuple[str, int, int], bool, bytes]]:
    """Run a chunk; serialize here so the parent only appends bytes."""
    config: EvalConfig = _WORKER["config"]
    out = []
    for item in items:
        record = run_episode(_WORKER["env"], _WORKER["policy"], item, config.info_keys)
        line = dumps_line({**_WORKER["meta"], **record})
        out.append((item.key, record["success"], line))
    return out


def _chunks(items: Sequence[WorkItem], size: int) -> Iterable[list[WorkItem]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


# ---------------------------------------------------------------- the run
def prepare_run_dir(config: EvalConfig, run_dir: Path) -> set[tuple[str, int, int]]:
    """Create or check the run directory; return the keys of trajectories already done."""
    run_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = run_dir / MANIFEST_NAME
    traj_path = run_dir / TRAJECTORIES_NAME
    # through JSON, so a tuple in env_kwargs compares equal to the list stored for it
    wanted = json.loads(dumps_line(config.to_dict()))
    if manifest_path.exists():
        stored = read_manifest(run_dir)["config"]
        if stored != wanted:
            diffs = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
            detail = "; ".join(f"{k}: stored {stored.get(k)!r}, asked {wanted.get(k)!r}" for k in diffs)
            raise RunConfigError(
                f"{run_dir} holds a run with another config ({detail}); resume with the same "
                "config or choose another output directory"
            )
    elif traj_path.exists() and traj_path.stat().st_size > 0:
        raise RunFileError(f"{traj_path} exists without {MANIFEST_NAME}; refusing to mix runs")
    else:
        write_json_atomic(
            manifest_path,
            {
                "format": FORMAT_VERSION,
                "config": wanted,
                "run_id": config.run_id,
                "agentenvs_version": agentenvs.__version__,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
        )
    expected = {item.key for item in config.work()}
    done: set[tuple[str, int, int]] = set()
    for record in iter_records(traj_path):
        key = record_key(record)
        if key not in expected:
            raise RunFileError(f"{traj_path}: trajectory {key} is not part of this run's config")
        done.add(key)
    return done


def run_pass_at_k_t(
    config: EvalConfig,
    run_dir: str | Path,
    *,
    workers: int = 1,
    chunk_size: int | None = None,
    progress: bool = True,
    start_method: str = "spawn",
    fsync: bool = False,
) -> RunSummary:
    """Run (or resume) every trajectory of ``config`` into ``run_dir``.

    ``workers`` is the number of worker processes; ``0`` runs in this process. Results
    do not depend on it, nor on ``chunk_size`` (trajectories per task sent to a worker;
    by default enough for ~16 chunks per worker, at most 64).
    """
    run_dir = Path(run_dir)
    started = time.perf_counter()
    env = make_env(config)
    try:
        check_mode(config, env)
        make_policy(config.policy)  # fail early here, not in every worker
        done = prepare_run_dir(config, run_dir)
        todo = [item for item in config.work() if item.key not in done]
        total = len(todo) + len(done)
        if chunk_size is None:
            chunk_size = max(1, min(64, math.ceil(len(todo) / (max(workers, 1) * 16))))
        successes = 0
        from tqdm.auto import tqdm

        bar = tqdm(
            total=total,
            initial=len(done),
            disable=not progress,
            file=sys.stderr,
            desc=f"{config.policy} on {config.env_id}",
            unit="traj",
            dynamic_ncols=True,
        )
        with JsonlAppender(run_dir / TRAJECTORIES_NAME, fsync=fsync) as out, bar:

            def consume(results: list[tuple[tuple[str, int, int], bool, bytes]]) -> None:
                nonlocal successes
                # whole lines in one write: a kill can tear only the last of them
                out.write(b"".join(line for _, _, line in results))
                successes += sum(success for _, success, _ in results)
                bar.update(len(results))

            if todo and workers <= 0:
                _init_worker(config.to_dict())
                try:
                    for chunk in _chunks(todo, chunk_size):
                        consume(_run_chunk(chunk))
                finally:
                    _WORKER.clear()
            elif todo:
                context = mp.get_context(start_method)
                pool = context.Pool(
                    min(workers, math.ceil(len(todo) / chunk_size)),
                    initializer=_init_worker,
                    initargs=(config.to_dict(),),
                )
                try:
                    for results in pool.imap_unordered(_run_chunk, _chunks(todo, chunk_size)):
                        consume(results)
                except BaseException:
                    pool.terminate()
                    raise
                else:
                    pool.close()
                finally:
                    pool.join()
    finally:
        env.close()
    return RunSummary(
        run_dir=run_dir,
        total=total,
        already_done=len(done),
        ran=len(todo),
        successes=successes,
        seconds=time.perf_counter() - started,
    )


def resolve_tasks(env_id: str, spec: str, env_kwargs: dict[str, Any] | None = None) -> list[str]:
    """Task ids from ``all``, ``first:N`` or a comma-separated list, checked against the env."""
    env = gym.make(env_id, **(env_kwargs or {}))
    try:
        known = list(env.unwrapped.task_ids)
    finally:
        env.close()
    spec = spec.strip()
    if spec == "all":
        return known
    if spec.startswith("first:"):
        count = int(spec.partition(":")[2])
        if count < 1:
            raise RunConfigError(f"first:N needs N >= 1, got {count}")
        return known[:count]
    chosen = [t.strip() for t in spec.split(",") if t.strip()]
    unknown = [t for t in chosen if t not in set(known)]
    if unknown:
        raise RunConfigError(f"unknown task id(s) {unknown} for {env_id}")
    return chosen
