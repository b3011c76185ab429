"""Step quality from the same state: which of two policies picks the better action.

From each state (see ``agentenvs.eval.states``) both policies sample ``n_actions``
actions (16 as in the paper) from the same history; every action is scored from that
state with the env's ``score_action`` (exact Q on FrozenLake, the test pass rate on
DeepCoder-MT, the reward on InterCode-SQL, the checker on BFCL), each in its own fork of
the state (``fork_env``), several at once where scoring waits on a sandbox or a server. Over all ``n_actions``² pairs (one action of A, one of B) a state gives
P(A's action scores higher), P(B's scores higher) and P(tie) (within ``tie_tol``), which
sum to 1. These per-state values, and the mean score of each policy, are averaged over
states. States of one task are not independent (the same map, the same question), so
every figure is a ratio of per-task sums and its interval a percentile bootstrap over
*tasks* (clusters: a resample draws tasks with replacement and keeps all their states),
at a level widened for the number of tasks (``ratio_interval``), and the summary gives
the number of tasks beside the number of states; with fewer than two tasks there is no
interval. The difference P(A better) -
P(B better) is bootstrapped paired, and its interval decides the verdict.
``a_share_of_decided`` is A's share of the pairs that were not ties, sum(A better) /
sum(A better + B better), with its interval: the figure to compare with the paper's
"picks the better action" rates (read against 50%, as this share is; P(A better) counts
ties as not better and, with most pairs tied, is several times smaller). Coverage of
the intervals: ``benchmarks/step_quality_ci_coverage.py``.

States are reported in three groups (``agentenvs.eval.states``): ``ordinary``,
``self_error`` (after the trajectory's own mistake) and ``error`` (after an injected
one). Continuation rollouts, when configured for ``error`` states, run from self-made
error states too.

``run_step_quality(config, out_dir)`` does the whole analysis, resumably:

- ``manifest.json``: the config (resuming with another is refused);
- ``reference/``: when states come from rollouts of a reference policy, that run (the
  Pass@(K,T) runner's format, so it resumes too);
- ``states.jsonl``: the sampled states, written once, whole; with error states also
  ``error_draws.json``, the tally of the error draws (states skipped because no
  candidate was an error, candidates rejected), which ``summary.json`` reports under
  ``injected_errors`` with the injected errors' regrets;
- ``results.jsonl``: one line per analysed state, appended as workers finish (a
  restart skips the states already there);
- ``summary.json`` and ``step_quality.png`` (or ``error_states.png`` with error states).

Seeds are derived with ``stable_seed`` from (seed, state id, policy slot), so results do
not depend on worker count, chunking or order. The same analysis with error states and
continuation rollouts is ``agentenvs.eval.error_states``.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401 - registers env ids and policies in worker processes
from agentenvs.core.errors import AgentEnvsError, Fault, SnapshotError
from agentenvs.core.fork import fork_env, run_concurrently
from agentenvs.core.snapshot import Snapshot, restore_snapshot
from agentenvs.eval.faults import (
    DEFAULT_FAULT_BACKOFF,
    DEFAULT_MAX_FAULT_RETRIES,
    FAULTS_NAME,
    Faulted,
    FaultLimitError,
    close_quietly,
    describe,
    fault_line,
    read_fault_summary,
    retry_faults,
)
from agentenvs.eval.passk import bootstrap_weights, percentile_bounds
from agentenvs.eval.printing import (
    KIND_LABELS,
    decimals_for,
    format_number,
    printed_excludes_zero,
)
from agentenvs.eval.records import (
    JsonlAppender,
    dumps_line,
    ensure_manifest,
    iter_records,
    stable_seed,
    write_json_atomic,
)
from agentenvs.eval.states import (
    DRAWN_KINDS,
    KINDS,
    STATES_NAME,
    State,
    check_records,
    collect_states,
    continuation_successes,
    done_ids,
    import_modules,
    injected_error_summary,
    load_trajectories,
    read_results_file,
    read_states,
    run_jobs,
    run_with_fault_retries,
    write_states,
)
from agentenvs.policy.base import Policy
from agentenvs.policy.registry import make_policies

RESULTS_NAME = "results.jsonl"
SUMMARY_NAME = "summary.json"
#: the tally of the error draws while collecting states (see ``collect_states``)
ERROR_DRAWS_NAME = "error_draws.json"
REFERENCE_DIR = "reference"
#: scores closer than this are a tie (oracle values carry floating-point noise)
DEFAULT_TIE_TOL = 1e-9


class AnalysisConfigError(AgentEnvsError, ValueError):
    """An analysis that cannot run as configured, or a resume with another config."""


@dataclass
class StepQualityConfig:
    """Everything that decides an analysis' results (worker count does not).

    States come from ``run_dir`` (a runner run of the same env) or, when it is None,
    from ``episodes`` rollouts per task of ``reference`` with budget ``budget``.
    ``continuations`` > 0 adds, for states of the kinds in ``continue_kinds``, that many
    rollouts of each policy to the end of the episode (success rates when continuing).
    ``imports`` are modules every worker imports first (plugins that register policies).
    """

    env_id: str
    policy_a: str
    policy_b: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    run_dir: str | None = None
    reference: str | None = None
    task_ids: Sequence[str] = ()
    episodes: int = 8
    budget: int = 10
    n_states: int = 200
    n_actions: int = 16
    seed: int = 0
    kinds: Sequence[str] = ("ordinary",)
    continuations: int = 0
    continue_kinds: Sequence[str] = ("error",)
    tie_tol: float = DEFAULT_TIE_TOL
    imports: Sequence[str] = ()

    def __post_init__(self) -> None:
        self.env_kwargs = dict(self.env_kwargs)
        self.task_ids = tuple(str(t) for t in self.task_ids)
        self.kinds = tuple(self.kinds)
        self.continue_kinds = tuple(self.continue_kinds)
        self.imports = tuple(self.imports)
        if self.run_dir is not None:
            self.run_dir = str(Path(self.run_dir).resolve())
        if (self.run_dir is None) == (self.reference is None):
            raise AnalysisConfigError("give exactly one source of states: run_dir or reference")
        if self.reference is not None and not self.task_ids:
            raise AnalysisConfigError("a reference policy needs task_ids to roll out on")
        bad = [k for k in self.kinds if k not in DRAWN_KINDS]
        bad += [k for k in self.continue_kinds if k not in KINDS]
        if bad or not self.kinds:
            raise AnalysisConfigError(
                f"kinds must be among {DRAWN_KINDS} (continue_kinds among {KINDS}), "
                f"got {bad or 'none'}"
            )
        for name in ("n_states", "n_actions", "episodes", "budget"):
            if int(getattr(self, name)) < 1:
                raise AnalysisConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.continuations < 0:
            raise AnalysisConfigError(f"continuations must be >= 0, got {self.continuations}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("task_ids", "kinds", "continue_kinds", "imports"):
            data[name] = list(data[name])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepQualityConfig:
        return cls(**data)


# ---------------------------------------------------------------- one state
def compare_scores(
    scores_a: Sequence[float], scores_b: Sequence[float], tie_tol: float = DEFAULT_TIE_TOL
) -> tuple[float, float, float]:
    """(P(A better), P(B better), P(tie)) over every pair of one score of each."""
    a = np.asarray(scores_a, dtype=np.float64)[:, None]
    b = np.asarray(scores_b, dtype=np.float64)[None, :]
    diff = a - b
    pairs = diff.size
    a_better = int(np.count_nonzero(diff > tie_tol))
    b_better = int(np.count_nonzero(diff < -tie_tol))
    return a_better / pairs, b_better / pairs, (pairs - a_better - b_better) / pairs


#: forked children scoring actions at once, for envs whose scoring waits (sandboxes,
#: servers); in-process envs score one action after another, in forks of their own
DEFAULT_SCORE_CONCURRENCY = 8


def score_from_state(
    env: gym.Env,
    snapshot: Snapshot,
    actions: Sequence[str],
    *,
    concurrency: int | None = None,
    intervals: dict[str, tuple[float, float]] | None = None,
) -> list[float]:
    """``score_action`` of each action from the snapshot's state; equal texts scored once.

    No scoring sees another's effects: the env is restored to the snapshot, then each
    distinct action is scored in its own fork of it (``fork_env``), up to
    ``concurrency`` at once (default: ``DEFAULT_SCORE_CONCURRENCY`` for envs whose
    calls wait, else 1), each fork closed after. Where a score is an estimate (a foreign
    env's Monte-Carlo value: ``last_score_interval`` set), its interval is put in
    ``intervals`` (action text -> (low, high)) when a dict is given. The values are those of restoring
    before each scoring. An env with ``score_actions`` (DeepCoder-MT runs new programs
    concurrently itself) scores the batch from the restored env. An env whose
    ``score_action`` advanced the turn is a bug reported here.
    """
    inner: Any = env.unwrapped
    unique = list(dict.fromkeys(actions))
    restore_snapshot(env, snapshot)
    batch = getattr(inner, "score_actions", None)
    if callable(batch):
        values = [float(v) for v in batch(unique)]
        restore_snapshot(env, snapshot)
    else:
        if concurrency is None:
            concurrency = DEFAULT_SCORE_CONCURRENCY if _calls_wait(inner) else 1

        def score(action: str) -> float:
            child = fork_env(env, 1)[0]
            try:
                kid: Any = child.unwrapped
                turn = kid.turn
                value = float(kid.score_action(action))
                interval = getattr(kid, "last_score_interval", None)
                if intervals is not None and interval is not None:
                    intervals[action] = (float(interval[0]), float(interval[1]))
                if kid.turn != turn:
                    raise AgentEnvsError(
                        f"{type(kid).__name__}.score_action advanced the env (turn {turn} -> "
                        f"{kid.turn}); it must score without stepping"
                    )
                return value
            finally:
                child.close()

        values = run_concurrently(score, unique, concurrency, pool="score")
    by_text = dict(zip(unique, values, strict=True))
    return [by_text[a] for a in actions]


def _calls_wait(inner: Any) -> bool:
    """Whether the env's calls wait (``TextEnv.calls_wait`` of its spec's arguments)."""
    calls_wait = getattr(type(inner), "calls_wait", None)
    if calls_wait is None:
        return True
    spec = getattr(inner, "spec", None)
    try:
        return bool(calls_wait(**dict(getattr(spec, "kwargs", None) or {})))
    except Exception:  # arguments it does not take: assume it waits
        return True


def evaluate_state(
    env: gym.Env,
    policies: dict[str, Policy],
    state: State,
    config: StepQualityConfig,
) -> dict[str, Any]:
    """Sample, score and compare from one state; continuation rollouts when configured."""
    snapshot = Snapshot.from_bytes(state.snapshot)
    actions: dict[str, list[str]] = {}
    for slot, policy in policies.items():
        conversation = state.restore_into(env)
        seed = stable_seed(config.seed, state.state_id, "sample", slot)
        actions[slot] = [str(a) for a in policy.sample([conversation], config.n_actions, seed=seed)[0]]
    estimates: dict[str, tuple[float, float]] = {}
    scores = {
        slot: score_from_state(env, snapshot, acts, intervals=estimates)
        for slot, acts in actions.items()
    }
    a_better, b_better, ties = compare_scores(scores["a"], scores["b"], config.tie_tol)
    result: dict[str, Any] = {
        "state_id": state.state_id,
        "kind": state.kind,
        "env_id": state.env_id,
        "task_id": state.task_id,
        "turn": state.turn,
        "turns_left": state.turns_left,
        "a_better": a_better,
        "b_better": b_better,
        "ties": ties,
        "mean_score_a": float(np.mean(scores["a"])),
        "mean_score_b": float(np.mean(scores["b"])),
        "best_score": max(max(scores["a"]), max(scores["b"])),
        "actions_a": actions["a"],
        "actions_b": actions["b"],
        "scores_a": scores["a"],
        "scores_b": scores["b"],
    }
    if estimates:  # the scores are estimates: their mean 95% half-width goes with them
        result["score_half_width"] = float(
            np.mean([(hi - lo) / 2 for lo, hi in estimates.values()])
        )
    if config.continuations > 0 and _continues(state.kind, config.continue_kinds):
        for slot, policy in policies.items():
            wins = continuation_successes(env, policy, state, config.continuations, config.seed, slot)
            result[f"continue_success_{slot}"] = sum(wins) / len(wins)
            result[f"continue_wins_{slot}"] = wins
    return result


def _continues(kind: str, continue_kinds: Sequence[str]) -> bool:
    """Whether states of ``kind`` get continuation rollouts: self-made error states are
    error states, so they follow ``error``."""
    return kind in continue_kinds or (kind == "self_error" and "error" in continue_kinds)


# ---------------------------------------------------------------- workers
class StateWorker:
    """What a worker builds once (both policies; the env, again after a fault) and every
    state reuses. A ``Fault`` while a state is analysed (sampling, scoring an action, a
    continuation) runs the whole state again with its seeds, on a new env."""

    def __init__(
        self,
        config_data: dict[str, Any],
        max_fault_retries: int = DEFAULT_MAX_FAULT_RETRIES,
        fault_backoff: float = DEFAULT_FAULT_BACKOFF,
    ) -> None:
        self.config = StepQualityConfig.from_dict(config_data)
        import_modules(self.config.imports)
        from agentenvs.eval.runner import import_env_module

        import_env_module(self.config.env_id)  # a "module:Env-v0" id may register policies
        self._env: gym.Env | None = None
        # one model in memory when A and B differ only in how they sample from it
        self.policies = make_policies({"a": self.config.policy_a, "b": self.config.policy_b})
        self.max_fault_retries = int(max_fault_retries)
        self.fault_backoff = float(fault_backoff)

    @property
    def env(self) -> gym.Env:
        if self._env is None:
            self._env = gym.make(self.config.env_id, **self.config.env_kwargs)
        return self._env

    def drop_env(self, fault: Fault) -> None:
        env, self._env = self._env, None
        close_quietly(env)

    def close(self) -> None:
        if self._env is not None:
            self._env.close()


def _evaluate(worker: StateWorker, record: dict[str, Any]) -> bytes | Faulted:
    """One state (retried past faults), serialized here so the driver only appends bytes."""
    state = State.from_record(record)
    return run_with_fault_retries(
        worker,
        lambda: evaluate_state(worker.env, worker.policies, state, worker.config),
        {"state_id": state.state_id, "kind": state.kind, "task_id": state.task_id},
    )


# ---------------------------------------------------------------- the analysis
@dataclass
class AnalysisResult:
    out_dir: Path
    n_states: int
    ran: int
    seconds: float
    summary: dict[str, Any]
    files: list[Path]


def _prepare(config: StepQualityConfig, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    ensure_manifest(
        out_dir, config.to_dict(), error=AnalysisConfigError, what="an analysis",
        analysis="step_quality",
    )


def source_trajectories(
    config: StepQualityConfig,
    out_dir: Path,
    *,
    workers: int,
    progress: bool,
    backend: str = "local",
    address: str | None = None,
    faults: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The trajectories states are drawn from: the given run, or reference rollouts
    (``faults``: the runner's fault bounds for them)."""
    if config.run_dir is not None:
        run_config, records = load_trajectories(config.run_dir)
        if run_config["env_id"] != config.env_id or run_config.get("env_kwargs", {}) != json.loads(
            json.dumps(config.env_kwargs)
        ):
            raise AnalysisConfigError(
                f"{config.run_dir} ran {run_config['env_id']} with {run_config.get('env_kwargs')}, "
                f"not {config.env_id} with {config.env_kwargs}: states would not replay"
            )
        check_records(records, config.run_dir)
        return records
    from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t

    assert config.reference is not None
    run_config = EvalConfig(
        env_id=config.env_id,
        policy=config.reference,
        task_ids=config.task_ids,
        n=config.episodes,
        budgets=[config.budget],
        mode="rerun",  # one budget, and valid whether or not the budget is shown
        seed=stable_seed(config.seed, "reference"),
        env_kwargs=config.env_kwargs,
    )
    run_pass_at_k_t(
        run_config, out_dir / REFERENCE_DIR, workers=workers, progress=progress,
        backend=backend, address=address, **(faults or {}),
    )
    return load_trajectories(out_dir / REFERENCE_DIR)[1]


def run_step_quality(
    config: StepQualityConfig,
    out_dir: str | Path,
    *,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    chunk_size: int | None = None,
    progress: bool = True,
    plots: bool = True,
    n_boot: int = 1000,
    limit: int | None = None,
    max_fault_retries: int = DEFAULT_MAX_FAULT_RETRIES,
    fault_backoff: float = DEFAULT_FAULT_BACKOFF,
    max_fault_rate: float | None = None,
) -> AnalysisResult:
    """Run (or resume) the analysis into ``out_dir``; ``workers=0`` runs in this process,
    ``backend="ray"`` on Ray actors (``address``: the cluster), as the runner does.

    ``limit`` stops after that many states in total have results (the summary covers
    those), e.g. to look at a first part; running again without it finishes the rest.

    Faults: a state whose sampling, scoring or continuation raises ``Fault`` is analysed
    again with its seeds (``max_fault_retries``, ``fault_backoff``, ``max_fault_rate``
    as for ``run_pass_at_k_t``); it never counts as a loss of either policy, and one out
    of retries stops the analysis (``FaultLimitError``) until it is resumed. The summary's
    ``faults`` counts them (``agentenvs.eval.faults.fault_summary``).
    """
    out_dir = Path(out_dir)
    started = time.perf_counter()
    import_modules(config.imports)
    check_branching(config.env_id, config.env_kwargs, config.task_ids[0] if config.task_ids else None)
    _prepare(config, out_dir)
    states_path = out_dir / STATES_NAME
    if not states_path.exists():
        fault_bounds = dict(
            max_fault_retries=max_fault_retries, fault_backoff=fault_backoff,
            max_fault_rate=max_fault_rate,
        )
        records = source_trajectories(
            config, out_dir, workers=workers, progress=progress, backend=backend, address=address,
            faults=fault_bounds,
        )
        error_draws: dict[str, int] = {}
        states = _collect_riding_out_faults(
            out_dir, max_fault_retries, fault_backoff,
            lambda: collect_states(
                records, config.env_id, config.env_kwargs, n_states=config.n_states,
                seed=config.seed, kinds=config.kinds, progress=progress,
                error_draws=error_draws,
            ),
        )
        if not states:
            raise AnalysisConfigError("no states to analyse: the source trajectories are empty")
        if "error" in config.kinds:  # before the states: a states file implies its tally
            write_json_atomic(out_dir / ERROR_DRAWS_NAME, error_draws)
        write_states(states_path, states)
    state_records = list(iter_records(states_path))
    results_path = out_dir / RESULTS_NAME
    done = done_ids(results_path, "state_id")
    todo = [r for r in state_records if r["state_id"] not in done]
    if limit is not None:
        todo = todo[: max(0, limit - len(done))]
    ran = run_jobs(
        [(r["state_id"], r) for r in todo], results_path,
        setup=functools.partial(StateWorker, config.to_dict(), max_fault_retries, fault_backoff),
        fn=_evaluate, workers=workers, backend=backend, address=address, chunk_size=chunk_size,
        progress=progress, desc=f"{config.policy_a} vs {config.policy_b}", unit="state",
        already=len(done), max_fault_retries=max_fault_retries, fault_backoff=fault_backoff,
        max_fault_rate=max_fault_rate,
    )
    results = read_results_file(results_path, "state_id")
    summary = summarize(results, config=config, n_boot=n_boot, seed=config.seed)
    summary["faults"] = read_fault_summary(results, out_dir)
    if "error" in config.kinds:
        draws_path = out_dir / ERROR_DRAWS_NAME
        draws = json.loads(draws_path.read_text()) if draws_path.exists() else None
        summary["injected_errors"] = injected_error_summary(state_records, draws)
    files = [out_dir / SUMMARY_NAME]
    write_json_atomic(files[0], summary)
    if plots:
        from agentenvs.eval.analysis_report import plot_step_quality

        name = "error_states.png" if "error" in config.kinds else "step_quality.png"
        files.append(plot_step_quality(summary, out_dir / name))
    return AnalysisResult(
        out_dir=out_dir, n_states=len(state_records), ran=ran,
        seconds=time.perf_counter() - started, summary=summary, files=files,
    )


def check_branching(env_id: str, env_kwargs: dict[str, Any], task_id: str | None = None) -> None:
    """Refuse, before any work, an env whose states cannot be branched from: an adapted
    foreign env whose source does not replay (``ReplayTextEnv.check_replayable``), with
    the reason. Envs with their own snapshots pass unchecked here (the contract checks
    them)."""
    from agentenvs.envs.foreign.replay import ReplayTextEnv
    from agentenvs.envs.lookup import entry_point

    try:
        cls = entry_point(env_id)
    except Exception:  # noqa: BLE001 - an id gym.make reports better, later
        return
    if not (isinstance(cls, type) and issubclass(cls, ReplayTextEnv)):
        return  # built only for adapters: no other env is made here
    env = gym.make(env_id, **env_kwargs)
    try:
        check = getattr(env.unwrapped, "check_replayable", None)
        if callable(check):
            try:
                check(task_id)
            except SnapshotError as exc:
                raise AnalysisConfigError(
                    f"{env_id} cannot be analysed from the same state: {exc}"
                ) from None
    finally:
        env.close()


def _collect_riding_out_faults(
    out_dir: Path, max_fault_retries: int, fault_backoff: float, collect: Any
) -> list[State]:
    """Collect the states again from the start after a fault of the replays (the same
    seeds give the same states); the faults go to ``faults.jsonl`` as a ``stage``."""
    result, faults = retry_faults(collect, max_retries=max_fault_retries, backoff=fault_backoff)
    if faults:
        line = {"type": "stage", "stage": "collecting states", "faults": faults}
        with JsonlAppender(out_dir / FAULTS_NAME) as log:
            log.write(dumps_line(line))
    if isinstance(result, Faulted):
        raise FaultLimitError(
            f"collecting states faulted in every attempt ({len(faults)}): {describe(faults)}; "
            "run the same command again to resume",
            faults,
        )
    return result


def read_results(out_dir: str | Path) -> list[dict[str, Any]]:
    return list(iter_records(Path(out_dir) / RESULTS_NAME))


def states_of(out_dir: str | Path) -> list[State]:
    return read_states(Path(out_dir) / STATES_NAME)


# ---------------------------------------------------------------- summary
def cluster_weights(
    clusters: Sequence[str], n_boot: int, rng: np.random.Generator
) -> tuple[np.ndarray, int]:
    """``(n_boot, items)`` bootstrap weights that resample whole clusters (tasks): each
    item weighs as often as its cluster was drawn. Returns the weights and the number of
    clusters."""
    names = sorted(set(clusters))
    index = {name: i for i, name in enumerate(names)}
    of_item = np.array([index[c] for c in clusters], dtype=np.int64)
    per_cluster = bootstrap_weights(len(names), n_boot, rng)
    return per_cluster[:, of_item], len(names)


def bootstrap_mean(
    values: np.ndarray, weights: np.ndarray | None, confidence: float = 0.95
) -> dict[str, float]:
    """Mean of per-state values with percentile bounds from the resampling weights."""
    out = {"mean": float(np.mean(values)) if values.size else float("nan")}
    if weights is not None and values.size:
        boot = (weights @ values) / weights.sum(axis=1)
        low, high = percentile_bounds(boot, confidence)
        out.update(low=float(low), high=float(high))
    return out


def bootstrap_ratio(
    numerator: np.ndarray, denominator: np.ndarray, weights: np.ndarray | None,
    confidence: float = 0.95,
) -> dict[str, float]:
    """sum(numerator) / sum(denominator) with percentile bounds (resamples whose
    denominator is 0 have no ratio and are left out)."""
    total = float(denominator.sum())
    out = {"mean": float(numerator.sum()) / total if total > 0 else float("nan")}
    if weights is not None and numerator.size:
        den = weights @ denominator
        ok = den > 0
        if ok.any():
            boot = (weights[ok] @ numerator) / den[ok]
            low, high = percentile_bounds(boot, confidence)
            out.update(low=float(low), high=float(high))
    return out


METRICS = ("a_better", "b_better", "ties", "mean_score_a", "mean_score_b")
#: what each figure can be: shares of pairs lie in [0, 1], a difference of two in [-1, 1]
#: (mean scores are in the env's own units, unbounded here)
BOUNDS: dict[str, tuple[float, float]] = {
    "a_better": (0.0, 1.0), "b_better": (0.0, 1.0), "ties": (0.0, 1.0),
    "a_minus_b": (-1.0, 1.0), "a_share_of_decided": (0.0, 1.0),
}
#: how every interval of the summary is made (``ratio_interval``)
INTERVAL = "expanded percentile bootstrap over tasks"
#: below this many tasks the table calls the intervals approximate: at 95% nominal
#: ``benchmarks/step_quality_ci_coverage.py`` measured (60-83% ties, unequal states per
#: task) 0.931-0.964 from 50 tasks up, but down to 0.913 at 10 tasks with 83% ties (the
#: plain percentile interval: down to 0.867 at 10 tasks, 0.920 at 50)
MIN_TASKS_FOR_STEP_CI = 50


def cluster_totals(
    clusters: Sequence[str], columns: dict[str, np.ndarray]
) -> tuple[list[str], dict[str, np.ndarray], np.ndarray]:
    """Per-cluster sums of each column, the clusters sorted by name, and the number of
    items (states) of each: ``(names, totals, sizes)``."""
    names = sorted(set(clusters))
    index = {name: i for i, name in enumerate(names)}
    of_item = np.array([index[c] for c in clusters], dtype=np.int64)
    totals = {
        key: np.bincount(of_item, weights=np.asarray(col, dtype=np.float64), minlength=len(names))
        for key, col in columns.items()
    }
    sizes = np.bincount(of_item, minlength=len(names)).astype(np.float64)
    return names, totals, sizes


def _t_within(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with ``df`` degrees of freedom (a finite series in
    theta = atan(t / sqrt(df)), Abramowitz & Stegun 26.7.3-4)."""
    theta = math.atan(t / math.sqrt(df))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 0:  # sin(theta) (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...), to cos^(df-2)
        term = total = 1.0
        for k in range(1, df // 2):
            term *= cos2 * (2 * k - 1) / (2 * k)
            total += term
        return sin * total
    series = 0.0  # odd: 2/pi (theta + sin cos (1 + 2/3 cos^2 + ...)), to cos^(df-3)
    if df > 1:
        term = series = 1.0
        for k in range(1, (df - 1) // 2):
            term *= cos2 * (2 * k) / (2 * k + 1)
            series += term
    return 2 / math.pi * (theta + sin * math.cos(theta) * series)


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, by bisection on
    its distribution function (to 1e-10)."""
    if df < 1 or not 0.0 < p < 1.0:
        raise ValueError(f"need df >= 1 and 0 < p < 1, got df={df}, p={p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    target = 2 * p - 1
    low, high = 0.0, 1.0
    while _t_within(high, df) < target:
        low, high = high, 2 * high
    while high - low > 1e-10 * max(1.0, high):
        mid = (low + high) / 2
        low, high = (mid, high) if _t_within(mid, df) < target else (low, mid)
    return (low + high) / 2


def expanded_level(confidence: float, n_clusters: int) -> float:
    """The percentile level that makes a percentile bootstrap over ``n_clusters`` as wide
    as a t interval: the two-sided level of the normal quantile sqrt(G / (G - 1)) times
    t's quantile with G - 1 degrees of freedom (Hesterberg's expanded percentile
    interval). It is above ``confidence``, and tends to it as clusters grow."""
    g = n_clusters
    z = math.sqrt(g / (g - 1)) * t_quantile(0.5 + confidence / 2, g - 1)
    return 1.0 - 2.0 * (1.0 - NormalDist().cdf(z))


def ratio_interval(
    numerator: np.ndarray,
    denominator: np.ndarray,
    weights: np.ndarray | None,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> dict[str, float]:
    """sum(numerator) / sum(denominator) over clusters (tasks) with an expanded
    percentile bootstrap interval: the percentiles of the resampled ratios
    (``weights``: ``(n_boot, clusters)`` draw counts, ``agentenvs.eval.passk.
    bootstrap_weights``) at ``expanded_level`` rather than at ``confidence``. A mean
    over states is the ratio of per-task sums to per-task state counts; A's share of
    decided pairs that of A-better to A-better + B-better.

    The plain percentile interval is too narrow with few tasks (0.87-0.90 coverage at
    10 tasks, 95% nominal: ``benchmarks/step_quality_ci_coverage.py``): the spread of
    resamples of ten clusters understates the error, as a z interval with a
    standard deviation over n does. Widening the level as a t interval widens it
    corrects for that and keeps the percentile's asymmetry, and, unlike a studentized
    bootstrap, it never outruns the resamples (with eight tasks one of them near 0, a
    bootstrap-t interval of a difference spanned -0.16 to +0.71 around +0.27).
    Resamples with no denominator are left out. Returns ``mean`` and, with weights and
    two or more clusters, ``low`` and ``high`` clipped to ``bounds``.
    """
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    total = float(denominator.sum())
    ratio = float(numerator.sum()) / total if total > 0 else float("nan")
    out = {"mean": ratio}
    if weights is None or numerator.size < 2 or not np.isfinite(ratio):
        return out
    w = np.asarray(weights, dtype=np.float64)
    den = w @ denominator
    ok = den > 0
    if not ok.any():
        return out
    boot = (w[ok] @ numerator) / den[ok]
    tail = (1.0 - expanded_level(confidence, numerator.size)) / 2
    low, high = (float(v) for v in np.quantile(boot, [tail, 1.0 - tail]))
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    out.update(low=low, high=high)
    return out


def summarize_group(
    results: Sequence[dict[str, Any]],
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Means over states of one group, and A's share of decided pairs, each with a
    ``ratio_interval`` over their tasks (clusters); the A-minus-B
    differences are paired (the same resamples for A and B)."""
    # fix the order the file happened to have, so resamples do not depend on it
    results = sorted(results, key=lambda r: str(r["state_id"]))
    n = len(results)
    tasks = [str(r["task_id"]) for r in results]
    columns = {name: np.array([float(r[name]) for r in results]) for name in METRICS}
    names, totals, sizes = cluster_totals(tasks, columns)
    n_tasks = len(names)
    weights = None
    if n_boot > 0 and n_tasks >= 2:
        rng = np.random.default_rng(stable_seed(seed, "bootstrap", n, n_tasks))
        weights = bootstrap_weights(n_tasks, n_boot, rng)
    out: dict[str, Any] = {
        "n_states": n, "n_tasks": n_tasks, "confidence": confidence,
        "interval": INTERVAL if weights is not None else "none (fewer than 2 tasks)",
    }
    for name in METRICS:
        out[name] = ratio_interval(totals[name], sizes, weights, confidence, BOUNDS.get(name))
    a_tot, b_tot = totals["a_better"], totals["b_better"]
    out["a_minus_b"] = ratio_interval(
        a_tot - b_tot, sizes, weights, confidence, BOUNDS["a_minus_b"]
    )
    out["a_share_of_decided"] = ratio_interval(
        a_tot, a_tot + b_tot, weights, confidence, BOUNDS["a_share_of_decided"]
    )
    out["verdict"] = _verdict(out["a_minus_b"])
    with_cont = sorted(
        (r for r in results if "continue_success_a" in r), key=lambda r: str(r["state_id"])
    )
    if with_cont:
        cont_tasks = [str(r["task_id"]) for r in with_cont]
        cont_names, cont, cont_sizes = cluster_totals(cont_tasks, {
            slot: np.array([float(r[f"continue_success_{slot}"]) for r in with_cont])
            for slot in ("a", "b")
        })
        cw = None
        if n_boot > 0 and len(cont_names) >= 2:
            rng = np.random.default_rng(stable_seed(seed, "bootstrap-continue", len(with_cont)))
            cw = bootstrap_weights(len(cont_names), n_boot, rng)
        out["continuation"] = {
            "n_states": len(with_cont),
            "n_tasks": len(cont_names),
            "rollouts_per_state": len(with_cont[0]["continue_wins_a"]),
            "success_a": ratio_interval(cont["a"], cont_sizes, cw, confidence, (0.0, 1.0)),
            "success_b": ratio_interval(cont["b"], cont_sizes, cw, confidence, (0.0, 1.0)),
            "a_minus_b": ratio_interval(
                cont["a"] - cont["b"], cont_sizes, cw, confidence, (-1.0, 1.0)
            ),
        }
        out["continuation"]["verdict"] = _verdict(out["continuation"]["a_minus_b"])
    return out


def _verdict(diff: dict[str, float]) -> str:
    """A verdict only where the interval of A - B, as printed, excludes 0."""
    if "low" not in diff:
        return "no interval"
    decimals = decimals_for([diff["low"], diff["high"]])
    if printed_excludes_zero(diff["low"], diff["high"], decimals):
        return "A better" if diff["low"] > 0 else "B better"
    return "no clear difference"


def summarize(
    results: Sequence[dict[str, Any]],
    *,
    config: StepQualityConfig | None = None,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Per state kind: every env together (``all``) and each env apart (``by_env``)."""
    summary: dict[str, Any] = {"kinds": {}}
    if config is not None:
        summary.update(policy_a=config.policy_a, policy_b=config.policy_b, config=config.to_dict())
    for kind in KINDS:
        group = [r for r in results if r["kind"] == kind]
        if not group:
            continue
        entry = {"all": summarize_group(group, n_boot=n_boot, confidence=confidence, seed=seed)}
        envs = sorted({r["env_id"] for r in group})
        entry["by_env"] = {
            env_id: summarize_group(
                [r for r in group if r["env_id"] == env_id],
                n_boot=n_boot, confidence=confidence, seed=seed,
            )
            for env_id in envs
        }
        summary["kinds"][kind] = entry
    widths = [r["score_half_width"] for r in results if "score_half_width" in r]
    if widths:
        summary["score_estimate"] = {
            "states": len(widths),
            "mean_half_width": float(np.mean(widths)),
            "max_half_width": float(np.max(widths)),
        }
    return summary


#: what each column of the table is, said once under it
COLUMN_DEFINITIONS = (
    "P(A better): the share of all paired comparisons (each of A's sampled actions against "
    "each of B's from the same state, averaged over states) in which A's action scores "
    "higher; P(B better) the same for B; P(tie) the share scoring within the tie "
    "tolerance. The three sum to 1.",
    "A's share of decided pairs: A-better / (A-better + B-better), summed over states, ties "
    "left out; 0.5 means that where the two actions differ, each policy's is the better "
    "one equally often.",
    "The paper's figure (the RL model 'picks the better action' 46.8% of the time on "
    "DeepCoder-MT, 42.8% on FrozenLake, from ordinary states; 67.3% and 65.7% from error "
    "states) is read against 50%, as A's share of decided pairs is: compare the paper with "
    "that column, not with P(A better), which counts ties as not better. The paper does "
    "not say how it counted ties.",
)


def summary_markdown(summary: dict[str, Any]) -> str:
    """A small table of the summary: one row per state kind, with the interval of A - B
    that its verdict rests on (``agentenvs.eval.printing``: one number of decimals for
    the whole table), what each column is, which is the paper's figure, and, where ties
    make them differ, A's share of decided pairs beside P(A better)."""
    groups = [(kind, entry["all"]) for kind, entry in summary["kinds"].items()]
    numbers = [
        [m["mean"], m.get("low", 0.0), m.get("high", 0.0)]
        for _, g in groups
        for m in (
            *(g[k] for k in (*METRICS, "a_minus_b") if isinstance(g.get(k), dict)),
            *(g["continuation"][k] for k in ("success_a", "success_b", "a_minus_b")
              if "continuation" in g),
        )
    ]
    decimals = decimals_for(numbers, [high - low for _, low, high in numbers])

    def cell(m: dict[str, float], signed: bool = False) -> str:
        text = format_number(m["mean"], decimals, signed)
        if "low" in m:
            low, high = (format_number(m[b], decimals, signed) for b in ("low", "high"))
            text += f" [{low}, {high}]"
        return text

    a, b = summary.get("policy_a", "A"), summary.get("policy_b", "B")
    lines = [
        f"A = {a}; B = {b}",
        "",
        "| states | n (tasks) | A's share of decided pairs | P(A better) | P(B better) | P(tie) "
        "| mean score A | mean score B | P(A better) − P(B better) | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    conts = []
    differ = []
    for kind, g in groups:
        share = g["a_share_of_decided"]
        label = KIND_LABELS.get(kind, kind)
        lines.append(
            f"| {label} | {g['n_states']} ({g.get('n_tasks', '?')}) | "
            f"{cell(share) if isinstance(share, dict) else share} | {cell(g['a_better'])} | "
            f"{cell(g['b_better'])} | {cell(g['ties'])} | {cell(g['mean_score_a'])} | "
            f"{cell(g['mean_score_b'])} | {cell(g['a_minus_b'], True)} | {g['verdict']} |"
        )
        if isinstance(share, dict) and format_number(share["mean"], decimals) != format_number(
            g["a_better"]["mean"], decimals
        ):
            differ.append(
                f"{label} states: ties are {format_number(g['ties']['mean'], decimals)} of "
                f"the pairs, so A's share of decided pairs is {cell(share)} while P(A better) "
                f"is {cell(g['a_better'])}."
            )
        if "continuation" in g:
            conts.append((kind, g["continuation"]))
    if conts:
        lines += [
            "",
            "| continuing from | n (tasks) | success A | success B | A − B | verdict |",
            "|---|---|---|---|---|---|",
        ]
        for kind, c in conts:
            lines.append(
                f"| {KIND_LABELS.get(kind, kind)} states | {c['n_states']} "
                f"({c.get('n_tasks', '?')}) | {cell(c['success_a'])} | "
                f"{cell(c['success_b'])} | {cell(c['a_minus_b'], True)} | {c['verdict']} |"
            )
    lines += ["", *COLUMN_DEFINITIONS]
    if differ:
        lines += ["", *differ]
    lines += [
        "",
        "A verdict (A better, B better) only where the interval of A − B, as printed, "
        "excludes 0; otherwise no clear difference.",
    ]
    few = sorted(
        {g.get("n_tasks", 0) for _, g in groups if g.get("n_tasks", 0) < MIN_TASKS_FOR_STEP_CI}
    )
    if few:
        lines += [
            "",
            f"Intervals are approximate: with {', '.join(map(str, few))} tasks "
            f"(< {MIN_TASKS_FOR_STEP_CI}) they may cover less than their nominal level "
            "(in simulations with 10-20 tasks, 95% intervals held the truth 91-95% of the "
            "time, least where most pairs are ties), so two policies that act alike may get "
            "a verdict more often than one time in twenty.",
        ]
    lines += [
        "",
        "Intervals: 95% expanded percentile bootstrap over tasks (a resample keeps all "
        "the states of a drawn task; its percentiles are taken at a level widened for "
        "the number of tasks, as a t interval is).",
    ]
    estimate = summary.get("score_estimate")
    if estimate:
        lines += ["", (
            f"Action scores are Monte-Carlo estimates, not an oracle's (the env has none): "
            f"each the success rate of rollouts of the env's value policy after the action, "
            f"with a 95% half-width of {estimate['mean_half_width']:.3f} on average "
            f"(at most {estimate['max_half_width']:.3f}) over {estimate['states']} states. "
            "Two actions whose scores differ by less than that may be equally good: the "
            "tables count them by their estimates."
        )]
    if "faults" in summary:
        lines += ["", f"Faults: {fault_line(summary['faults'])}."]
    injected = summary.get("injected_errors")
    if injected and injected.get("states"):
        lines += ["", (
            f"Injected errors: {injected['states']}, each worse than the best action by more "
            f"than {injected['regret_tol']:g} (regret least {injected['regret_min']:.3g}, mean "
            f"{injected['regret_mean']:.3g})"
            + (
                f"; {injected['no_error']} drawn states had no action worse than the best and "
                f"gave none, {injected['ended']} whose error ended the episode were skipped, "
                f"{injected['redraws']} candidates were drawn again"
                if "no_error" in injected else ""
            )
            + "."
        )]
    return "\n".join(lines) + "\n"
