"""The Pass@(K,T) runner: sample trajectories in worker processes, append them as JSONL.

``run_pass_at_k_t(config, run_dir)`` runs ``config.n`` trajectories per task of a policy
on an env, in one of two modes:

- ``rerun`` (the default, always valid): a separate run per budget.
- ``derive``: one run per trajectory at the largest budget; the turn of first success
  gives c_T for every smaller T. That is right only when nothing before turn T depends
  on T, so ``check_mode`` refuses it, saying why, when
  - the env shows the agent its budget (``show_budget=True``);
  - the policy conditions on the budget (``conditions_on_budget`` True, e.g. the
    FrozenLake oracle, which plans with Q for the turns left) or does not declare
    whether it does (``agentenvs.policy.base.conditions_on_budget``);
  - the env checks success anew when the budget runs out
    (``success_checked_at_budget_end``, e.g. Terminal-Bench runs the tests then), so
    success within T is not "first success at a turn <= T" of a longer episode.

Budgets count turns by default; ``budget_unit`` "tokens" or "seconds" makes them budgets of
completion tokens or wall-clock seconds, enforced by the ``LimitCost`` wrapper under a fixed
turn cap, with the same mode rules (``agentenvs.eval.budget_units``).

Model policies that return tokens (``sample_tokens``: HF, vLLM, OpenAI-compatible) drive
the conversation with them (token-in, token-out, see ``agentenvs.policy.tokens``); each
step of theirs records ``drift`` (where the chat template would have rewritten the
prompt), and with ``record_tokens`` the ids and log-probs themselves (``tokens``; format
in ``agentenvs.eval.records``). The manifest's ``tokens`` entry gives the drift rate.

A trajectory whose history the policy cannot format (``ChatTemplateError``) ends there,
unsuccessful, with the message in its record's ``error`` field; the run goes on.

Every trajectory has a seed derived with a stable hash from (run seed, task id, sample
index[, budget in rerun mode]); it seeds ``env.reset`` and, mixed with the turn number,
every ``policy.sample`` call. A trajectory therefore depends on nothing but its seed:
the same run gives the same trajectories in any process, order or worker count.

Each worker (a process of a local pool, or a Ray actor with ``backend="ray"``: see
``agentenvs.eval.executors``) builds its env (``gym.make``) and policy (``make_policy``)
once and runs chunks of trajectories; the driver alone appends each finished trajectory
to ``trajectories.jsonl`` as one whole line, once per trajectory key even when a chunk
was retried after its worker died. The lines finished within ``WRITE_BATCH_SECONDS``
go out in one write: an error, Ctrl-C or SIGTERM writes them before the run stops, a
SIGKILL loses at most that much finished work (run again by a resume). Restarting a run reads that file, ignores a
torn last line and skips what is done, so an interrupted-and-resumed run ends with
exactly the trajectories of an uninterrupted one. ``manifest.json`` holds the config
and, for a model policy, the sampling settings its requests take (``sampling``: max
tokens, temperature, top-p, stop, n and seed, the ``openai`` policy's as its server's
defaults resolve them); resuming with another config is refused.

Faults (``agentenvs.core.errors.Fault``, raised by the env or the policy: a killed
sandbox, a lost database, a model server's error) are never scored: the worker runs the
trajectory again with the same seed, at most ``max_fault_retries`` times with a short
backoff, so its record is the one a fault-free run writes, plus a ``faults`` field
listing what preceded it. A trajectory out of retries is no sample: it is written to
``faults.jsonl`` (not to the trajectories) and the run stops with ``FaultLimitError``
naming its faults; resuming runs it again. A worker process that dies is a fault of kind
``worker``: the work left runs on new workers. The manifest's ``faults`` entry, the
summary and the reports give the fault rate of the env and of each task; see
``agentenvs.eval.faults``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import signal
import sys
import threading
import time
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym

import agentenvs  # noqa: F401 - registers the env ids and policies in worker processes
from agentenvs.core import info as keys
from agentenvs.core.errors import AgentEnvsError, Fault
from agentenvs.core.suggest import did_you_mean, one_line
from agentenvs.eval.budget_units import (
    charge_step,
    check_budget_unit,
    check_unit_fields,
    reset_options,
    wrap_env,
)
from agentenvs.eval.executors import (
    BACKENDS,
    Executor,
    Job,
    capped_workers,
    default_chunk_size,
    make_executor,
)
from agentenvs.eval.faults import (
    DEFAULT_FAULT_BACKOFF,
    DEFAULT_MAX_FAULT_RETRIES,
    FAULTS_NAME,
    Faulted,
    FaultLimitError,
    FaultTally,
    check_bounds,
    close_quietly,
    describe,
    read_fault_summary,
    retry_faults,
    ride_out_worker_loss,
)
from agentenvs.eval.records import (
    MANIFEST_NAME,
    TRAJECTORIES_NAME,
    JsonlAppender,
    RunFileError,
    dumps_line,
    dumps_record,
    ensure_manifest,
    read_manifest,
    read_trajectories,
    stable_seed,
    step_tokens,
    token_space,
    token_summary,
    turn_seeds,
    write_json_atomic,
)
from agentenvs.policy.base import Conversation, Policy, conditions_on_budget
from agentenvs.policy.chat import ChatTemplateError
from agentenvs.policy.credentials import redact_spec, without_secrets
from agentenvs.policy.registry import (
    is_model_policy,
    make_policy,
    parse_policy_spec,
    policy_factory,
)
from agentenvs.wrappers.cost_budget import BUDGET_USED, STEP_COST, LimitCost

MODES = ("derive", "rerun")
#: trajectory lines finished within this many seconds go to the file in one write (at most
#: this much finished work is lost to a SIGKILL, and run again by a resume)
WRITE_BATCH_SECONDS = 0.2
#: info keys stored per step by default: enough to replay success, score and state groups,
#: and what a grading found the agent tampered with
DEFAULT_INFO_KEYS: tuple[str, ...] = (
    keys.TURN,
    keys.TURNS_LEFT,
    keys.SUCCESS,
    keys.SCORE,
    keys.ACTION_VALID,
    keys.STATE_KEY,
    keys.GRADING_FINDINGS,  # only where an env reports it
    keys.VERIFIER_TIMED_OUT,  # likewise
)


class RunConfigError(AgentEnvsError, ValueError):
    """A run that cannot go ahead as configured (bad mode, budget visible in derive, a
    resume whose config differs from the stored manifest)."""


class PolicyLoadError(AgentEnvsError, RuntimeError):
    """The policy could not be built where it runs (a worker, or this process): its model
    failed to load. The message is one line with the loader's last error; a traceback
    sent from the worker is the ``__cause__`` (shown with ``AGENTENVS_DEBUG=1``).

    Neither a fault nor the agent's: the run stops before any trajectory, as no retry
    loads a model that failed to load. A worker killed while loading (the OOM killer, a
    signal) sends nothing and stays a ``WorkerLostError``."""

    @classmethod
    def of(cls, spec: str, exc: BaseException | str) -> PolicyLoadError:
        error = exc if isinstance(exc, str) else loader_error(exc)
        return cls(
            f"policy {without_secrets(spec)} failed to load: {error}; nothing was run (fix the "
            "model or its options and run the command again)"
        )


class _WorkerTraceback(Exception):
    """A worker's traceback, as text, for the cause of the driver's error."""


def loader_error(exc: BaseException) -> str:
    """``Type: message`` of ``exc`` on one line, at most 400 characters."""
    text = f"{type(exc).__name__}: {one_line(exc)}"
    return text if len(text) <= 400 else text[:399] + "…"


@dataclass
class EvalConfig:
    """Everything that decides a run's trajectories (worker count and chunking do not)."""

    env_id: str
    policy: str
    task_ids: Sequence[str]
    n: int
    budgets: Sequence[int]
    mode: str = "rerun"
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    info_keys: Sequence[str] = DEFAULT_INFO_KEYS
    #: keep each model step's prompt and sampled token ids and log-probs in its record
    record_tokens: bool = False
    #: what the budgets count: turns, completion tokens or seconds
    #: (``agentenvs.eval.budget_units``)
    budget_unit: str = "turns"
    #: the turn cap of a token or seconds budget (None: the env's own max_turns)
    max_turns: int | None = None
    #: show the agent its token or seconds budget (a turn budget: the env's show_budget)
    show_budget: bool = False

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
        try:
            check_unit_fields(self.budget_unit, self.max_turns, self.show_budget)
        except ValueError as exc:
            raise RunConfigError(str(exc)) from None
        self.max_turns = None if self.max_turns is None else int(self.max_turns)
        self.show_budget = bool(self.show_budget)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["task_ids"] = list(self.task_ids)
        data["budgets"] = list(self.budgets)
        data["info_keys"] = list(self.info_keys)
        # runs from before these options keep their id and resume
        if not self.record_tokens:
            del data["record_tokens"]
        if self.budget_unit == "turns":
            del data["budget_unit"], data["max_turns"], data["show_budget"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalConfig:
        return cls(**data)

    def manifest_dict(self) -> dict[str, Any]:
        """``to_dict`` as a manifest holds it: a key given inline in the policy spec as
        ``***`` (the workers get ``to_dict``, key and all, never a file)."""
        return {**self.to_dict(), "policy": redact_spec(self.policy)}

    @property
    def shown_policy(self) -> str:
        """The policy spec as messages and records show it (no inline key)."""
        return redact_spec(self.policy)

    @property
    def run_id(self) -> str:
        """A short name of the config: equal configs share it across machines (a key
        given inline does not count: another key resumes the same run)."""
        return f"{stable_seed(dumps_line(self.manifest_dict()).decode()):016x}"[:12]

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
    """What a run did. ``faults`` is the fault summary of the whole run directory (every
    segment of a resumed run: ``agentenvs.eval.faults.fault_summary``); ``new_faults``
    counts the faults of this call alone."""

    run_dir: Path
    total: int
    already_done: int
    ran: int
    successes: int
    seconds: float
    faults: dict[str, Any] = field(default_factory=dict)
    new_faults: int = 0
    #: token-built prompts and their drift over the run directory (``token_summary``)
    tokens: dict[str, Any] = field(default_factory=dict)

    @property
    def trajectories_path(self) -> Path:
        return self.run_dir / TRAJECTORIES_NAME

    @property
    def fault_rate(self) -> float:
        """Faults per attempt over the run directory (0 without faults)."""
        return float(self.faults.get("rate", 0.0))

    @functools.cached_property
    def run_successes(self) -> int:
        """Successful trajectories of the whole run directory: those this call ran and
        those a resumed run found done (``successes`` counts this call's alone)."""
        return sum(bool(r.get("success")) for r in read_trajectories(self.trajectories_path))


def record_key(record: dict[str, Any]) -> tuple[str, int, int]:
    return (str(record["task_id"]), int(record["sample"]), int(record["budget"]))


def make_env(config: EvalConfig) -> gym.Env:
    """The run's env: ``gym.make``, wrapped in ``LimitCost`` for a token or seconds budget."""
    env = gym.make(config.env_id, **config.env_kwargs)
    return wrap_env(env, config.budget_unit, config.show_budget)


def check_mode(config: EvalConfig, env: gym.Env, policy: Any = None) -> None:
    """Refuse ``derive`` where a run at the largest budget cannot stand for smaller ones.

    ``policy`` is the built policy or its class (its ``conditions_on_budget``
    declaration is read); ``None`` checks the env only.
    """
    if config.mode != "derive":
        return
    inner = env.unwrapped
    fix = "use mode='rerun' (--mode rerun), one run per budget, which is always valid"
    if getattr(inner, "show_budget", False):
        raise RunConfigError(
            f"{config.env_id} shows the agent its turn budget (show_budget=True), so a run "
            f"at the largest budget says nothing about smaller ones; {fix}"
        )
    if getattr(inner, "success_checked_at_budget_end", False):
        raise RunConfigError(
            f"{config.env_id} checks success again when the budget runs out "
            "(success_checked_at_budget_end), so success within T turns is not the first "
            f"success at a turn <= T of a longer episode; {fix}"
        )
    if policy is not None:
        declared = conditions_on_budget(policy)
        if declared is None:
            raise RunConfigError(
                f"policy {config.shown_policy} does not declare whether its actions depend on the "
                "turn budget (a conditions_on_budget attribute), so derive mode cannot be "
                f"trusted with it; {fix}, or declare conditions_on_budget = False"
            )
        if declared:
            raise RunConfigError(
                f"policy {config.shown_policy} conditions on the turn budget (it plans on the "
                "turns left), so its play at the largest budget differs from its play at "
                f"smaller ones; {fix}"
            )


def sampling_settings(spec: str, seed: int) -> dict[str, Any] | None:
    """The sampling settings every request of a model policy takes (``None`` for a
    scripted policy): the ``openai`` policy's as it resolves them (argument, its server's
    defaults, built-in), another's from its spec and its class's defaults."""
    if not is_model_policy(spec):
        return None
    factory = policy_factory(spec)
    if hasattr(factory, "sampling_settings"):
        settings = make_policy(spec).sampling_settings()
    else:
        import inspect

        given = parse_policy_spec(spec)[1]
        params = inspect.signature(factory).parameters

        def value(name: str) -> Any:
            default = params[name].default if name in params else None
            return given.get(name, None if default is inspect.Parameter.empty else default)

        stop = value("stop")
        settings = {"max_tokens": value("max_new_tokens"), "temperature": value("temperature"),
                    "top_p": value("top_p"),
                    "stop": [stop] if isinstance(stop, str) else list(stop or [])}
    # one sample per request; its seed derives from the trajectory's and the turn
    return {**settings, "n": 1, "seed": {"run": seed, "per_request": "trajectory seed + turn"}}


def _policy_for_checks(spec: str) -> Any:
    """What the driver checks a policy on: a scripted one is built (its arguments fail
    here, not in every worker); a model policy's class is read without loading a model."""
    if is_model_policy(spec):
        return policy_factory(spec)
    return make_policy(spec)


def run_episode(
    env: gym.Env,
    policy: Policy,
    item: WorkItem,
    info_keys: Sequence[str],
    record_tokens: bool = False,
    max_turns: int | None = None,
) -> dict[str, Any]:
    """One trajectory of ``item``: reset with its seed, then one seeded sample per turn
    (with its tokens, from a policy that has ``sample_tokens``).

    On an env wrapped in ``LimitCost`` (a token or seconds budget) ``item.budget`` is the
    cost budget and ``max_turns`` the turn cap (None: the env's own); each step is charged
    its completion tokens (a ``Sample``'s ids; otherwise the wrapper's text rule) or the
    policy's seconds, and the record keeps the costs (``agentenvs.eval.budget_units``)."""
    limit = env if isinstance(env, LimitCost) else None
    first_observation, info = env.reset(
        seed=item.seed, options=reset_options(item.task_id, item.budget, limit, max_turns)
    )
    first_success_cost: float | None = None
    conversation = Conversation.start(first_observation, info, env=env.unwrapped)
    steps: list[dict[str, Any]] = []
    first_success: int | None = None
    reward_sum = 0.0
    terminated = truncated = False
    turn = 0
    error: str | None = None
    sample_tokens = getattr(policy, "sample_tokens", None)
    space: dict[str, Any] | None = None
    context: Sequence[int] = ()
    seed_of = turn_seeds(item.seed)  # stable_seed(item.seed, "turn", turn)
    kept = tuple(info_keys)
    started = 0.0
    while not (terminated or truncated):
        turn += 1
        sample = None
        if limit is not None:
            started = time.perf_counter()
        try:
            seed = seed_of(turn)
            if callable(sample_tokens):
                sample = sample_tokens([conversation], 1, seed=seed)[0][0]
                action = sample.text
            else:
                action = policy.sample([conversation], 1, seed=seed)[0][0]
        except ChatTemplateError as exc:
            # the history cannot be put to the model (e.g. a template that refuses a
            # role order): this trajectory ends here, unsuccessful, and the run goes on
            error = f"{type(exc).__name__}: {exc}"
            turn -= 1
            break
        if limit is not None:
            charge_step(limit, time.perf_counter() - started, sample)
        observation, reward, terminated, truncated, info = env.step(action)
        reward = float(reward)
        reward_sum += reward
        if first_success is None and info.get(keys.SUCCESS):
            first_success = turn
            if limit is not None:
                first_success_cost = info[BUDGET_USED]
        step = {
            "action": action,
            "observation": observation,
            "reward": reward,
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "info": {k: info[k] for k in kept if k in info},
        }
        if limit is not None:
            step["cost"] = info[STEP_COST]
        if sample is not None:
            if sample.drift_checked:
                step["drift"] = sample.drift
            if record_tokens and not sample.prompt_ids:
                step["tokens"] = None  # the model server answered text only
                context = ()
            elif record_tokens:
                step["tokens"] = step_tokens(sample, context)
                context = (*sample.prompt_ids, *sample.completion_ids)
                space = space or token_space(sample)
        steps.append(step)
        conversation.add_turn(action, observation, sample)
    record = {
        "task_id": item.task_id,
        "sample": item.sample,
        "budget": item.budget,
        "seed": item.seed,
        "success": bool(info.get(keys.SUCCESS, False)) and error is None,
        "first_success_turn": first_success,
        "turns": turn,
        "score": float(info.get(keys.SCORE, 0.0)),
        "reward_sum": reward_sum,
        "terminated": bool(terminated),
        "truncated": bool(truncated),
        "initial_observation": first_observation,
        "steps": steps,
    }
    if limit is not None:
        record.update(budget_unit=limit.unit, cost_used=limit.used,
                      first_success_cost=first_success_cost)
    if space is not None:
        record["token_space"] = space
    if error is not None:
        record["error"] = error
    return record


# ---------------------------------------------------------------- workers
class EpisodeOutcome(NamedTuple):
    """What a worker sends back for one trajectory: its JSONL line (the trajectory's
    record, or, when it ran out of fault retries, the line for ``faults.jsonl``)."""

    line: bytes
    success: bool
    faults: tuple[dict[str, Any], ...]
    faulted: bool
    #: the worker could not build the policy: its error line, and its traceback
    load_error: tuple[str, str] | None = None


def import_env_module(env_id: str) -> None:
    """Import the module of a ``module:Env-v0`` id (as ``gym.make`` would), which may
    register the env and policies, without building the env."""
    module, sep, _ = env_id.partition(":")
    if sep and module:
        importlib.import_module(module)


class EpisodeWorker:
    """What a worker builds once (the policy; the env, again after a fault) and every
    chunk reuses.

    A ``Fault`` out of an episode (its env's or its policy's) is retried here with the
    same seed (``retry_faults``); the env is closed and built anew before the retry, as
    a fault may have left it broken (a dead container, a lost connection), and a fault
    while building it is one more fault of that trajectory.
    """

    def __init__(
        self,
        config_data: dict[str, Any],
        max_fault_retries: int = DEFAULT_MAX_FAULT_RETRIES,
        fault_backoff: float = DEFAULT_FAULT_BACKOFF,
    ) -> None:
        self.config = EvalConfig.from_dict(config_data)
        import_env_module(self.config.env_id)  # first: it may register the policy
        #: why the policy could not be built here (every item then reports it)
        self.load_error: tuple[str, str] | None = None
        try:
            self.policy: Policy | None = make_policy(self.config.policy)
        except Fault:
            raise  # the model side's: the worker is lost and its work runs again
        except Exception as exc:  # noqa: BLE001 - reported to the driver, not died of
            import traceback

            self.policy = None
            self.load_error = (loader_error(exc), traceback.format_exc())
        self.env: gym.Env | None = None
        self.meta = _run_meta(self.config)
        self.max_fault_retries = int(max_fault_retries)
        self.fault_backoff = float(fault_backoff)

    def _episode(self, item: WorkItem) -> dict[str, Any]:
        assert self.policy is not None
        if self.env is None:
            self.env = make_env(self.config)
        return run_episode(
            self.env, self.policy, item, self.config.info_keys, self.config.record_tokens,
            self.config.max_turns,
        )

    def _drop_env(self, fault: Fault) -> None:
        env, self.env = self.env, None
        close_quietly(env)

    def run(self, item: WorkItem) -> EpisodeOutcome:
        """One trajectory (retried past faults), serialized here so the driver only
        appends bytes."""
        if self.load_error is not None:
            return EpisodeOutcome(b"", False, (), False, self.load_error)
        record, faults = retry_faults(
            lambda: self._episode(item), max_retries=self.max_fault_retries,
            backoff=self.fault_backoff, after_fault=self._drop_env,
        )
        if isinstance(record, Faulted):
            line = {"type": "item", **self.meta, **asdict(item), "faults": faults}
            return EpisodeOutcome(dumps_line(line), False, tuple(faults), True)
        if faults:
            record["faults"] = faults
        return EpisodeOutcome(
            dumps_record({**self.meta, **record}), record["success"], tuple(faults), False
        )

    def close(self) -> None:
        if self.env is not None:
            self.env.close()


def _run_meta(config: EvalConfig) -> dict[str, Any]:
    return {
        "run": config.run_id,
        "env_id": config.env_id,
        "policy": config.shown_policy,
        "mode": config.mode,
    }


def _run_item(worker: EpisodeWorker, item: WorkItem) -> EpisodeOutcome:
    return worker.run(item)


def _task_of(job: Job) -> str:
    """A job's task: kept workers get back the tasks whose caches they hold."""
    return job.payload.task_id


#: the most trajectories a chunk of whole tasks holds (the executors' own default cap)
MAX_TASK_CHUNK = 64


def task_chunk_size(items: Sequence[WorkItem], workers: int | None) -> int | None:
    """A chunk size that keeps each task's trajectories on one worker, or None (the
    executor's default) where that would not do.

    Envs and policies keep per-task work in their process: DeepCoder-MT its test results
    per program and its verified buggy programs, whose search costs many sandbox runs.
    A task whose samples are spread over every worker pays that once per worker; whole
    tasks per chunk pay it once. Used when ``items`` (task-major, as ``EvalConfig.work``
    orders them) leave every task the same count, that count is at most
    ``MAX_TASK_CHUNK``, and each worker still gets several chunks (four or more) to
    balance the load; otherwise None.
    """
    if not items or not workers or workers < 1:
        return None
    counts: dict[str, int] = {}
    previous = None
    for item in items:
        if item.task_id != previous and item.task_id in counts:
            return None  # not task-major
        counts[item.task_id] = counts.get(item.task_id, 0) + 1
        previous = item.task_id
    per_task = set(counts.values())
    if len(per_task) != 1:
        return None  # a resumed run: some tasks are partly done
    size = per_task.pop()
    default = default_chunk_size(len(items), workers)
    if default >= size:
        return default - default % size  # whole tasks, as many as the default holds
    if size <= MAX_TASK_CHUNK and len(counts) >= 4 * workers:
        return size
    return None


# ---------------------------------------------------------------- the run
def prepare_run_dir(config: EvalConfig, run_dir: Path) -> set[tuple[str, int, int]]:
    """Create or check the run directory; return the keys of trajectories already done.

    A directory that holds another config is refused where it holds a trajectory, and
    started anew where it holds none (a start that failed, e.g. a model that did not
    load: its manifest and fault log go, nothing else is touched), so the corrected
    command runs."""
    manifest_path = run_dir / MANIFEST_NAME
    traj_path = run_dir / TRAJECTORIES_NAME
    if not manifest_path.exists() and traj_path.exists() and traj_path.stat().st_size > 0:
        raise RunFileError(f"{traj_path} exists without {MANIFEST_NAME}; refusing to mix runs")
    sampling = sampling_settings(config.policy, config.seed)
    if manifest_path.exists():
        _replace_if_empty(config, run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ensure_manifest(run_dir, config.manifest_dict(), error=RunConfigError, run_id=config.run_id,
                    **({"sampling": sampling} if sampling else {}))
    expected = {item.key for item in config.work()}
    done: set[tuple[str, int, int]] = set()
    for record in read_trajectories(traj_path):
        key = record_key(record)
        if key not in expected:
            raise RunFileError(f"{traj_path}: trajectory {key} is not part of this run's config")
        done.add(key)
    return done


def _replace_if_empty(config: EvalConfig, run_dir: Path) -> None:
    """Refuse a run directory of another config that holds trajectories (one line: the
    folder, both policies, the way out); empty one that holds none."""
    stored = read_manifest(run_dir)["config"]
    wanted = json.loads(dumps_line(config.manifest_dict()))
    if stored == wanted:
        return
    records = sum(1 for _ in read_trajectories(run_dir / TRAJECTORIES_NAME))
    if records:
        differ = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
        if "policy" in differ:
            others = [k for k in differ if k != "policy"]
            what = (
                f"policy {stored.get('policy')!r}; this run asks policy {wanted.get('policy')!r}"
                + (f" (and other {', '.join(others)})" if others else "")
            )
        else:
            what = "another config (" + "; ".join(
                f"{k}: stored {stored.get(k)!r}, asked {wanted.get(k)!r}" for k in differ
            ) + ")"
        raise RunConfigError(
            f"{run_dir} holds {records} trajectories of {what}: give a new --out for this "
            "run, or run the stored config again to resume it"
        )
    for name in (MANIFEST_NAME, FAULTS_NAME, TRAJECTORIES_NAME):
        (run_dir / name).unlink(missing_ok=True)


def run_pass_at_k_t(
    config: EvalConfig,
    run_dir: str | Path,
    *,
    workers: int = 1,
    chunk_size: int | None = None,
    progress: bool = True,
    start_method: str = "spawn",
    fsync: bool = False,
    backend: str = "local",
    address: str | None = None,
    executor: Executor | None = None,
    max_fault_retries: int = DEFAULT_MAX_FAULT_RETRIES,
    fault_backoff: float = DEFAULT_FAULT_BACKOFF,
    max_fault_rate: float | None = None,
    allow_oversubscribe: bool = False,
) -> RunSummary:
    """Run (or resume) every trajectory of ``config`` into ``run_dir``.

    ``backend="local"`` (the default) runs ``workers`` worker processes on this machine
    (``0``: in this process), at most one per core it may use (``default_workers``: a
    larger count is cut to that, with an ``OversubscribeWarning``, unless
    ``allow_oversubscribe``); ``backend="ray"`` runs ``workers`` Ray actors (``0``: one
    per CPU of the cluster) on the Ray instance at ``address`` (or the one this process
    is connected to, or a new local one); see ``agentenvs.eval.executors``. Results do
    not depend on the backend, on ``workers`` nor on ``chunk_size`` (trajectories sent
    to a worker at a time; by default whole tasks where that still balances the load,
    see ``task_chunk_size``, else enough for ~16 chunks per worker, at most 64). Only
    this process writes the JSONL file. ``executor``: run on this one instead (e.g. a
    ``LocalPoolExecutor(keep_workers=True)`` that several runs share; the caller closes
    it), and ignore ``workers``, ``backend``, ``address`` and ``start_method``.

    Faults: a trajectory whose env or policy raises ``Fault`` is run again with its seed,
    at most ``max_fault_retries`` times, ``fault_backoff`` seconds apart (doubled each
    time); a lost worker's work runs again on new workers, at most ``max_fault_retries``
    times in a row without progress. Past either bound, or past ``max_fault_rate``
    (faults per attempt, judged after ``MIN_ATTEMPTS_FOR_RATE`` attempts; ``None``: no
    limit), the run stops with ``FaultLimitError`` naming the faults; what finished is
    kept and a resume re-runs the rest. None of these change the trajectories, so a
    resume may use other bounds.
    """
    if backend not in BACKENDS:
        raise RunConfigError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if address is not None and backend != "ray":
        raise RunConfigError("address is for backend='ray'")
    try:
        check_bounds(max_fault_retries, fault_backoff, max_fault_rate)
    except ValueError as exc:
        raise RunConfigError(str(exc)) from None
    if backend == "local" and executor is None:
        workers = capped_workers(workers, allow_oversubscribe=allow_oversubscribe)
    run_dir = Path(run_dir)
    started = time.perf_counter()
    env = make_env(config)
    try:
        policy = _policy_for_checks(config.policy)
        check_budget_unit(config.env_id, config.budget_unit, config.mode, config.show_budget,
                          env, policy, config.shown_policy)  # a BudgetUnitError: one line
        check_mode(config, env, policy)
        done = prepare_run_dir(config, run_dir)
    finally:
        env.close()
    todo = [item for item in config.work() if item.key not in done]
    total = len(todo) + len(done)
    successes = 0
    tally = FaultTally(max_fault_rate)
    from tqdm.auto import tqdm

    bar = tqdm(
        total=total,
        initial=len(done),
        disable=not progress,
        file=sys.stderr,
        desc=f"{config.shown_policy} on {config.env_id}",
        unit="traj",
        dynamic_ncols=True,
    )
    written: set[Hashable] = set()
    try:
        with (
            _flush_on_sigterm(),
            JsonlAppender(
                run_dir / TRAJECTORIES_NAME, fsync=fsync, batch_seconds=WRITE_BATCH_SECONDS
            ) as out,
            JsonlAppender(run_dir / FAULTS_NAME, fsync=fsync) as fault_log,
            bar,
        ):
            setup = functools.partial(
                EpisodeWorker, config.to_dict(), max_fault_retries, fault_backoff
            )

            def run_rest() -> None:
                nonlocal successes
                rest = [item for item in todo if item.key not in written]
                if not rest:
                    return
                jobs = [Job(item.key, _run_item, item) for item in rest]
                with (
                    contextlib.nullcontext(executor)
                    if executor is not None
                    else make_executor(backend, workers, address=address, start_method=start_method)
                ) as runner:
                    size = chunk_size or task_chunk_size(rest, runner.workers)
                    results = runner.run(setup, jobs, chunk_size=size, affinity=_task_of)
                    # closed here, not when collected: a stop must stop the workers now
                    with contextlib.closing(results):
                        for key, outcome in results:
                            if key in written:  # never twice, whatever a backend retried
                                continue
                            if outcome.load_error is not None:
                                error, trace = outcome.load_error
                                raise PolicyLoadError.of(config.policy, error) from (
                                    _WorkerTraceback(trace)
                                )
                            tally.add(outcome.faults, finished=not outcome.faulted)
                            # whole lines in one write: a kill can tear only the last one
                            if outcome.faulted:
                                fault_log.write(outcome.line)
                                raise _out_of_retries(key, outcome, max_fault_retries)
                            written.add(key)
                            out.write(outcome.line)
                            successes += outcome.success
                            bar.update(1)
                            if outcome.faults:
                                tally.check_rate(outcome.faults)

            def log_loss(record: dict[str, Any]) -> None:
                tally.add([record], finished=False)
                fault_log.write(dumps_line({"type": "worker", "fault": record}))

            ride_out_worker_loss(
                run_rest, progress=lambda: len(written), max_retries=max_fault_retries,
                backoff=fault_backoff, log_loss=log_loss,
            )
    finally:
        faults, tokens = _record_faults(run_dir)
    return RunSummary(
        run_dir=run_dir,
        total=total,
        already_done=len(done),
        ran=len(written),
        successes=successes,
        seconds=time.perf_counter() - started,
        faults=faults,
        new_faults=tally.faults,
        tokens=tokens,
    )


@contextlib.contextmanager
def _flush_on_sigterm() -> Iterator[None]:
    """SIGTERM ends the run as Ctrl-C does (``SystemExit`` here, where it would otherwise
    kill the process outright), so the trajectories gathered for the next write are
    written and the workers stopped; only where nothing else handles it and in the main
    thread."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _out_of_retries(
    key: Hashable, outcome: EpisodeOutcome, max_fault_retries: int
) -> FaultLimitError:
    task_id, sample, budget = key  # type: ignore[misc]
    tries = "it is not retryable" if not outcome.faults[-1].get("retryable", True) else (
        f"{len(outcome.faults)} attempts (max_fault_retries {max_fault_retries})"
    )
    return FaultLimitError(
        f"trajectory {task_id}#{sample}@{budget} faulted in every attempt ({tries}), so it "
        f"has no sample and the run stops: {describe(outcome.faults)}. What finished is "
        f"kept and the faults are in {FAULTS_NAME}: fix the infrastructure and run the same "
        "command again to resume",
        outcome.faults,
    )


def _record_faults(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Count the run directory's faults and its token drift (``token_summary``) and keep
    both in its manifest (``tokens`` only where a step was built from tokens)."""
    records = read_trajectories(run_dir / TRAJECTORIES_NAME)
    summary = read_fault_summary(records, run_dir)
    tokens = token_summary(records)
    manifest = read_manifest(run_dir)
    updated = {**manifest, "faults": summary}
    if tokens["checked"] or tokens["recorded"] or tokens["text_only"]:
        updated["tokens"] = tokens
    if updated != manifest:
        write_json_atomic(run_dir / MANIFEST_NAME, updated)
    return summary, tokens


def resolve_tasks(env_id: str, spec: str, env_kwargs: dict[str, Any] | None = None) -> list[str]:
    """Task ids from ``all``, ``first:N`` or a list (``agentenvs.core.task_list``: commas,
    ``random:size=8,p=0.8,seed=3`` kept whole), each one the env's ``reset`` accepts
    (beyond its listed tasks: FrozenLake's ``random:`` and ``desc:`` maps)."""
    from agentenvs.core.task_list import split_task_ids

    env = gym.make(env_id, **(env_kwargs or {}))
    try:
        known = list(env.unwrapped.task_ids)
        spec = spec.strip()
        chosen = [] if spec == "all" or spec.startswith("first:") else split_task_ids(spec)
        listed = set(known)
        why = {t: _task_id_problem(env.unwrapped, t) for t in chosen if t not in listed}
    finally:
        env.close()
    if spec == "all":
        return known
    if spec.startswith("first:"):
        count = int(spec.partition(":")[2])
        if count < 1:
            raise RunConfigError(f"first:N needs N >= 1, got {count}")
        return known[:count]
    unknown = [t for t, problem in why.items() if problem is not None]
    if unknown:
        shown = ", ".join(known[:8]) + (f", ... ({len(known)} in all)" if len(known) > 8 else "")
        detail = why[unknown[0]]  # the env's own words, where it says more than "unknown"
        raise RunConfigError(
            f"unknown task id(s) {unknown} for {env_id}{did_you_mean(unknown[0], known)} "
            + (f"{detail}" if detail else f"(its tasks: {shown})")
        )
    return chosen


def _task_id_problem(env: Any, task_id: str) -> str | None:
    """Why the env's ``reset`` would refuse ``task_id`` beyond not knowing it, in one line
    ("" when it says no more); None when it accepts it."""
    from agentenvs.core.env import short_repr

    check = getattr(env, "_check_task_id", None)
    if check is None:
        return ""
    try:
        check(task_id)
    except Exception as exc:  # noqa: BLE001 - the env's refusal, whatever its type
        text = one_line(exc)
        generic = f"unknown task_id {short_repr(task_id)} for {type(env).__name__}"
        return text.removeprefix(generic).strip(" ;")
    return None
