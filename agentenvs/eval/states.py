"""States to analyse: rebuilt from stored trajectories as snapshots, ordinary or after an error.

The step-quality and error-state analyses start from *states*: an env at some turn of
some trajectory, with the chat history that led there. ``collect_states`` rebuilds them
from a run's ``trajectories.jsonl`` (the Pass@(K,T) runner's format): every trajectory is
replayed in a fresh env (``gym.make(env_id, **env_kwargs)``, reset with the
trajectory's seed, task and budget), each replayed observation is checked against the
stored one (``ReplayMismatchError`` on any difference: an env that changed, or records
of another config), and the env is snapshotted after t steps.

States are drawn uniformly over the pairs (trajectory, t) with t = 0 .. turns-1 (every
state in which the agent had to act) through one seeded permutation. A drawn state whose
previous action was a mistake (``action_regret`` > 0: below the oracle's best on envs
with one, below full score elsewhere), whoever made it, is a *self-made error state*
(kind ``self_error``), reported apart from ordinary states: after its own mistake a
policy faces what it faces after an injected one, and counting such states as ordinary
would credit recovery to ordinary play. An *error state*
takes such a state, steps the env with its own ``error_action(rng)`` as the next action,
and keeps the result; when that action ends the episode there is nothing left to
recover, so the next pair of the permutation is taken instead. The injected action must
be an error (``agentenvs.wrappers.inject_error.draw_error_action``: regret above
``REGRET_TOL``, candidates drawn again up to a bound); a state where none is taken is
skipped the same way, and counted. Each error state records its ``error_regret`` and
``error_redraws``; ``injected_error_summary`` sums them up for the analysis summary. Ordinary and error states
walk the same permutation, so both kinds start from largely the same states.

A state is stored as one JSONL record (snapshot bytes base64-encoded, the messages, the
tools), so an analysis can hand it to a worker process and resume from its file.
``run_jobs`` is that driver: it runs the records not yet in a results file on the
executors of ``agentenvs.eval.executors`` (this process, a local pool, Ray actors) and
appends each result as one atomic line; an item whose env or policy raises ``Fault`` is
retried with its seeds, never scored (``run_with_fault_retries``, ``agentenvs.eval.faults``).
"""

from __future__ import annotations

import base64
import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agentenvs.core import info as keys
from agentenvs.core.errors import AgentEnvsError
from agentenvs.core.regret import REGRET_TOL, action_regret
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot
from agentenvs.eval.faults import (
    DEFAULT_FAULT_BACKOFF,
    DEFAULT_MAX_FAULT_RETRIES,
    FAULTS_NAME,
    Faulted,
    FaultLimitError,
    FaultTally,
    describe,
    retry_faults,
    ride_out_worker_loss,
)
from agentenvs.eval.records import (
    JsonlAppender,
    RunFileError,
    dumps_line,
    iter_numbered_records,
    iter_records,
    stable_seed,
    unique_records,
)
from agentenvs.policy.base import Conversation

STATES_NAME = "states.jsonl"
#: the kinds of states analysed: drawn from trajectories (``ordinary`` or, after the
#: trajectory's own mistake, ``self_error``) and after an injected error (``error``)
KINDS = ("ordinary", "self_error", "error")
#: the kinds a config asks for: a drawn state is labelled ordinary or self_error
DRAWN_KINDS = ("ordinary", "error")


class ReplayMismatchError(AgentEnvsError):
    """A stored trajectory does not replay to the observations it recorded."""


@dataclass
class State:
    """One state of one trajectory: the env (as a snapshot) and the history that led there.

    ``turn`` counts the steps taken (for an error state, the injected one included);
    ``turns_left`` is what remains of the budget. ``source`` names the trajectory.
    """

    state_id: str
    kind: str
    env_id: str
    task_id: str
    turn: int
    turns_left: int
    snapshot: bytes
    messages: list[dict[str, str]]
    tools: list[dict[str, Any]] | None = None
    source: dict[str, Any] = field(default_factory=dict)
    error_action: str | None = None
    previous_regret: float | None = None
    error_regret: float | None = None
    error_redraws: int | None = None

    def to_record(self) -> dict[str, Any]:
        return {
            "state_id": self.state_id,
            "kind": self.kind,
            "env_id": self.env_id,
            "task_id": self.task_id,
            "turn": self.turn,
            "turns_left": self.turns_left,
            "source": self.source,
            "error_action": self.error_action,
            "previous_regret": self.previous_regret,
            "error_regret": self.error_regret,
            "error_redraws": self.error_redraws,
            "tools": self.tools,
            "messages": self.messages,
            "snapshot": base64.b64encode(self.snapshot).decode("ascii"),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> State:
        return cls(
            state_id=str(record["state_id"]),
            kind=str(record["kind"]),
            env_id=str(record["env_id"]),
            task_id=str(record["task_id"]),
            turn=int(record["turn"]),
            turns_left=int(record["turns_left"]),
            snapshot=base64.b64decode(record["snapshot"]),
            messages=list(record["messages"]),
            tools=record.get("tools"),
            source=dict(record.get("source") or {}),
            error_action=record.get("error_action"),
            previous_regret=record.get("previous_regret"),
            error_regret=record.get("error_regret"),
            error_redraws=record.get("error_redraws"),
        )

    def restore_into(self, env: gym.Env) -> Conversation:
        """Restore the env to this state; return a fresh copy of the history, bound to it."""
        restore_snapshot(env, Snapshot.from_bytes(self.snapshot))
        return self.conversation(env)

    def conversation(self, env: gym.Env | None = None) -> Conversation:
        messages = [dict(m) for m in self.messages]  # callers append to their own copy
        return Conversation(
            messages=messages,
            tools=self.tools,
            env=None if env is None else env.unwrapped,
        )


def trajectory_id(record: dict[str, Any]) -> str:
    """A readable name of a runner trajectory: ``task#sample@budget``."""
    return f"{record['task_id']}#{int(record['sample'])}@{int(record['budget'])}"


def _mismatch(record: dict[str, Any], turn: int, stored: str, replayed: str) -> ReplayMismatchError:
    at = next(
        (i for i, (x, y) in enumerate(zip(stored, replayed, strict=False)) if x != y),
        min(len(stored), len(replayed)),
    )
    where = "the initial observation" if turn == 0 else f"the observation after step {turn}"
    return ReplayMismatchError(
        f"trajectory {trajectory_id(record)} (seed {record['seed']}) does not replay: "
        f"{where} differs at character {at}: stored {stored[at:at + 60]!r}, "
        f"replayed {replayed[at:at + 60]!r}. Was the run made with another env version "
        "or other env kwargs?"
    )


def replay(
    env: gym.Env, record: dict[str, Any], steps: int
) -> tuple[Conversation, dict[str, Any]]:
    """Replay the first ``steps`` actions of a stored trajectory, checking every observation.

    Returns the history (bound to ``env``, which is left in the state after ``steps``
    steps) and the info of the last reset or step.
    """
    stored_steps = record["steps"]
    if not 0 <= steps <= len(stored_steps):
        raise ValueError(f"trajectory {trajectory_id(record)} has {len(stored_steps)} steps, not {steps}")
    observation, info = env.reset(
        seed=int(record["seed"]),
        options={"task_id": record["task_id"], "max_turns": int(record["budget"])},
    )
    if observation != record["initial_observation"]:
        raise _mismatch(record, 0, record["initial_observation"], observation)
    conversation = Conversation.start(observation, info, env=env.unwrapped)
    for turn, step in enumerate(stored_steps[:steps], start=1):
        observation, _, _, _, info = env.step(step["action"])
        if observation != step["observation"]:
            raise _mismatch(record, turn, step["observation"], observation)
        conversation.add_turn(step["action"], observation)
    return conversation, info


def candidate_points(records: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    """Every (trajectory index, t) whose state asked the agent for an action."""
    return [(i, t) for i, record in enumerate(records) for t in range(len(record["steps"]))]


def _state_from_env(
    env: gym.Env,
    conversation: Conversation,
    record: dict[str, Any],
    *,
    state_id: str,
    kind: str,
    env_id: str,
    t: int,
    error_action: str | None = None,
    previous_regret: float | None = None,
    error_regret: float | None = None,
    error_redraws: int | None = None,
) -> State:
    inner: Any = env.unwrapped
    return State(
        state_id=state_id,
        kind=kind,
        env_id=env_id,
        task_id=str(record["task_id"]),
        turn=int(inner.turn),
        turns_left=int(inner.turns_left),
        snapshot=take_snapshot(env).to_bytes(),
        messages=[dict(m) for m in conversation.messages],
        tools=conversation.tools,
        source={
            "trajectory": trajectory_id(record),
            "policy": record.get("policy"),
            "sample": int(record["sample"]),
            "budget": int(record["budget"]),
            "seed": int(record["seed"]),
            "t": t,
            "success": bool(record.get("success", False)),
        },
        error_action=error_action,
        previous_regret=previous_regret,
        error_regret=error_regret,
        error_redraws=error_redraws,
    )


def _replay_with_regret(
    env: gym.Env, record: dict[str, Any], t: int
) -> tuple[Conversation, float | None]:
    """``replay`` to step t, plus the regret of the action that led there (None at t=0)."""
    if t == 0:
        return replay(env, record, 0)[0], None
    conversation, _ = replay(env, record, t - 1)
    last = record["steps"][t - 1]
    regret = action_regret(env, last["action"])
    observation, *_ = env.step(last["action"])
    if observation != last["observation"]:
        raise _mismatch(record, t, last["observation"], observation)
    conversation.add_turn(last["action"], observation)
    return conversation, regret


def collect_states(
    records: Sequence[dict[str, Any]],
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    n_states: int,
    seed: int = 0,
    kinds: Sequence[str] = ("ordinary",),
    progress: bool = False,
    error_draws: dict[str, int] | None = None,
) -> list[State]:
    """Up to ``n_states`` states of each kind, drawn uniformly over (trajectory, t).

    ``records`` are runner trajectories. Fewer states come back when there are not
    enough candidates (or, for error states, not enough that survive the error). The
    ``n_states`` drawn for ``ordinary`` are labelled ``ordinary`` or ``self_error``
    (after the trajectory's own mistake, see ``action_regret``). ``error_draws``, when
    given, is cleared and filled with the error draws' tally: ``tried`` (states where an
    error was drawn), ``no_error`` (skipped: no candidate was an error), ``ended`` (skipped:
    the error ended the episode) and ``redraws`` (candidates rejected, in all of them).
    """
    unknown = set(kinds) - set(DRAWN_KINDS)
    if unknown:
        raise ValueError(f"unknown state kind(s) {sorted(unknown)}; choose from {DRAWN_KINDS}")
    if n_states < 1:
        raise ValueError(f"n_states must be >= 1, got {n_states}")
    from agentenvs.wrappers.inject_error import draw_error_action

    tally = error_draws if error_draws is not None else {}
    tally.clear()
    tally.update(tried=0, no_error=0, ended=0, redraws=0)
    points = candidate_points(records)
    order = np.random.default_rng(stable_seed(seed, "states")).permutation(len(points))
    env = gym.make(env_id, **(env_kwargs or {}))
    states: list[State] = []
    from tqdm.auto import tqdm

    bar = tqdm(
        total=n_states * len(kinds), disable=not progress, file=sys.stderr,
        desc="collecting states", unit="state", dynamic_ncols=True,
    )
    try:
        with bar:
            for kind in kinds:
                taken = 0
                for index in order:
                    if taken >= n_states:
                        break
                    traj, t = points[int(index)]
                    record = records[traj]
                    base_id = f"{trajectory_id(record)}:t{t}"
                    if kind == "ordinary":
                        conversation, regret = _replay_with_regret(env, record, t)
                        mistake = regret is not None and regret > REGRET_TOL
                        state = _state_from_env(
                            env, conversation, record, state_id=base_id,
                            kind="self_error" if mistake else "ordinary",
                            env_id=env_id, t=t, previous_regret=regret,
                        )
                    else:
                        conversation, _ = replay(env, record, t)
                        rng = np.random.default_rng(stable_seed(seed, base_id, "error_action"))
                        draw = draw_error_action(env, rng)
                        tally["tried"] += 1
                        tally["redraws"] += draw.redraws
                        if draw.action is None:
                            tally["no_error"] += 1
                            continue  # every action here is as good as the best: no error
                        observation, _, terminated, truncated, _ = env.step(draw.action)
                        if terminated or truncated:
                            tally["ended"] += 1
                            continue  # nothing left to recover from
                        conversation.add_turn(draw.action, observation)
                        state = _state_from_env(
                            env, conversation, record, state_id=f"{base_id}+error", kind=kind,
                            env_id=env_id, t=t, error_action=draw.action,
                            error_regret=draw.regret, error_redraws=draw.redraws,
                        )
                    states.append(state)
                    taken += 1
                    bar.update(1)
    finally:
        env.close()
    return states


def injected_error_summary(
    state_records: Iterable[dict[str, Any]], error_draws: dict[str, int] | None = None
) -> dict[str, Any]:
    """The injected errors of a states file: how many, their regret (least and mean:
    every one is above ``REGRET_TOL``), the candidates rejected before them, and, from
    the collection's ``error_draws`` tally when given, the states skipped because no
    candidate was an error or because the error ended the episode."""
    kept = [r for r in state_records if r.get("kind") == "error"]
    regrets = [float(r["error_regret"]) for r in kept if r.get("error_regret") is not None]
    out: dict[str, Any] = {
        "states": len(kept),
        "regret_min": min(regrets) if regrets else None,
        "regret_mean": float(np.mean(regrets)) if regrets else None,
        "redraws_kept": sum(int(r.get("error_redraws") or 0) for r in kept),
        "regret_tol": REGRET_TOL,
    }
    if error_draws is not None:
        out.update({k: int(v) for k, v in error_draws.items()})
    return out


def write_states(path: str | os.PathLike[str], states: Iterable[State]) -> None:
    """Write a states file whole (temp file, then rename): it exists only once complete."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        for state in states:
            fh.write(dumps_line(state.to_record()))
    os.replace(tmp, path)


def read_states(path: str | os.PathLike[str]) -> list[State]:
    return [State.from_record(r) for r in iter_records(path)]


def load_trajectories(run_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A runner run's config and trajectories, in a stable order (task, budget, sample)."""
    from agentenvs.eval.records import TRAJECTORIES_NAME, read_manifest, read_trajectories

    config = read_manifest(run_dir)["config"]
    records = read_trajectories(Path(run_dir) / TRAJECTORIES_NAME)
    if not records:
        raise RunFileError(f"{run_dir}: no trajectories yet")
    order = {t: i for i, t in enumerate(config["task_ids"])}
    # the file's order depends on which worker finished first; the sample must not
    records.sort(key=lambda r: (order.get(r["task_id"], len(order)), r["task_id"], r["budget"], r["sample"]))
    return config, records


def continuation_successes(
    env: gym.Env, policy: Any, state: State, rollouts: int, seed: int, slot: str
) -> list[bool]:
    """Whether each of ``rollouts`` continuations of ``policy`` from ``state`` succeeded."""
    wins: list[bool] = []
    for j in range(rollouts):
        conversation = state.restore_into(env)
        inner: Any = env.unwrapped
        # a fresh env stream per rollout (else every rollout would see the same slips),
        # shared by both policies' j-th rollout
        inner.np_random = np.random.default_rng(stable_seed(seed, state.state_id, "continue", j))
        success = False
        turn = 0
        while not inner.done:
            turn += 1
            action = policy.sample(
                [conversation], 1, seed=stable_seed(seed, state.state_id, "continue", slot, j, turn)
            )[0][0]
            observation, _, _, _, info = env.step(action)
            success = bool(info.get(keys.SUCCESS, False))
            conversation.add_turn(action, observation)
        wins.append(success)
    return wins


# ---------------------------------------------------------------- the job driver
def done_ids(path: str | os.PathLike[str], key: str) -> set[str]:
    """Ids (``record[key]``) of the results already in a JSONL file."""
    return {str(r[key]) for r in read_results_file(path, key)}


def read_results_file(path: str | os.PathLike[str], key: str) -> list[dict[str, Any]]:
    """An analysis' results file, one record per ``record[key]`` (a repeated line is
    counted once, with a warning); a record without ``key`` raises naming its line."""
    def checked() -> Iterable[tuple[int, dict[str, Any]]]:
        for number, record in iter_numbered_records(path):
            if key not in record:
                raise RunFileError(f"{path}:{number}: field {key!r} is missing")
            yield number, record

    return unique_records(checked(), lambda r: str(r[key]), path)


def run_jobs(
    items: Sequence[tuple[str, Any]],
    out_path: str | os.PathLike[str],
    *,
    setup: Callable[[], Any],
    fn: Callable[[Any, Any], bytes | Faulted],
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    chunk_size: int | None = None,
    progress: bool = True,
    desc: str = "",
    unit: str = "item",
    already: int = 0,
    start_method: str = "spawn",
    max_fault_retries: int = DEFAULT_MAX_FAULT_RETRIES,
    fault_backoff: float = DEFAULT_FAULT_BACKOFF,
    max_fault_rate: float | None = None,
) -> int:
    """Run ``fn(worker_state, payload)`` for every ``(key, payload)`` and append each
    returned JSONL line to ``out_path`` as it arrives.

    Workers come from ``agentenvs.eval.executors`` (this process when ``workers`` is 0,
    a local process pool, or Ray actors with ``backend="ray"``); each builds its state
    once with ``setup()``. ``setup`` and ``fn`` must pickle by reference. Returns how
    many items ran; ``already`` only starts the progress bar further on.

    Faults (``agentenvs.eval.faults``): ``fn`` retries its item past faults and returns
    ``Faulted`` for one out of retries; its line goes to ``faults.jsonl`` beside
    ``out_path`` and the run stops with ``FaultLimitError``. A lost worker's items run
    again on new workers, at most ``max_fault_retries`` times in a row without progress;
    ``max_fault_rate`` bounds the faults per attempt, as for the runner.
    """
    if not items:
        return 0
    from tqdm.auto import tqdm

    from agentenvs.eval.executors import Job, make_executor

    bar = tqdm(
        total=len(items) + already, initial=already, disable=not progress, file=sys.stderr,
        desc=desc, unit=unit, dynamic_ncols=True,
    )
    written: set[Any] = set()
    tally = FaultTally(max_fault_rate)
    with (
        JsonlAppender(out_path) as out,
        JsonlAppender(Path(out_path).with_name(FAULTS_NAME)) as fault_log,
        bar,
    ):

        def run_rest() -> None:
            jobs = [Job(key, fn, payload) for key, payload in items if key not in written]
            if not jobs:
                return
            with make_executor(
                backend, workers, address=address, start_method=start_method
            ) as executor:
                results = executor.run(setup, jobs, chunk_size=chunk_size)
                with contextlib.closing(results):  # a stop stops the workers now
                    for key, line in results:
                        if key in written:  # never twice, whatever a backend retried
                            continue
                        if isinstance(line, Faulted):
                            tally.add(line.faults, finished=False)
                            fault_log.write(line.line)
                            raise FaultLimitError(
                                f"{unit} {key} faulted in every attempt "
                                f"({len(line.faults)}; max_fault_retries {max_fault_retries}), "
                                f"so it has no result and the analysis stops: "
                                f"{describe(line.faults)}. What finished is kept and the "
                                f"faults are in {FAULTS_NAME}: run the same command again "
                                "to resume",
                                line.faults,
                            )
                        faults = _faults_of(line)
                        tally.add(faults, finished=True)
                        written.add(key)
                        out.write(line)  # one whole line per write: a kill tears only the last
                        bar.update(1)
                        if faults:
                            tally.check_rate(faults)

        def log_loss(record: dict[str, Any]) -> None:
            tally.add([record], finished=False)
            fault_log.write(dumps_line({"type": "worker", "fault": record}))

        ride_out_worker_loss(
            run_rest, progress=lambda: len(written), max_retries=max_fault_retries,
            backoff=fault_backoff, log_loss=log_loss,
        )
    return len(written)


def _faults_of(line: bytes) -> list[dict[str, Any]]:
    """The ``faults`` of a result line (cheap: most lines have none)."""
    if b'"faults":' not in line:
        return []
    import json

    return list(json.loads(line).get("faults") or [])


def run_with_fault_retries(
    worker: Any,
    attempt: Callable[[], dict[str, Any]],
    names: dict[str, Any],
) -> bytes | Faulted:
    """What an analysis' job function returns: ``attempt()``'s result as a JSONL line,
    with the faults retried before it; or, out of retries, ``Faulted`` whose line (for
    ``faults.jsonl``) holds ``names`` (the item's id and task) and the faults. ``worker``
    gives the bounds (``max_fault_retries``, ``fault_backoff``) and ``drop_env(fault)``,
    run after each fault."""
    result, faults = retry_faults(
        attempt, max_retries=worker.max_fault_retries, backoff=worker.fault_backoff,
        after_fault=worker.drop_env,
    )
    if isinstance(result, Faulted):
        line = dumps_line({"type": "item", **names, "faults": faults})
        return Faulted(result.faults, line)
    if faults:
        result["faults"] = faults
    return dumps_line(result)


def import_modules(names: Iterable[str]) -> None:
    """Import modules that register envs or policies (plugins), in this process."""
    import importlib

    for name in names:
        importlib.import_module(name)


#: the info keys a state's source trajectory must carry for a replay
REQUIRED_KEYS = ("task_id", "sample", "budget", "seed", "initial_observation", "steps")


def check_records(records: Sequence[dict[str, Any]], where: str) -> None:
    for record in records:
        missing = [k for k in REQUIRED_KEYS if k not in record]
        if missing:
            raise RunFileError(f"{where}: a trajectory lacks {missing}; not a runner file?")


__all__ = [
    "DRAWN_KINDS",
    "continuation_successes",
    "KINDS",
    "action_regret",
    "STATES_NAME",
    "ReplayMismatchError",
    "State",
    "candidate_points",
    "check_records",
    "collect_states",
    "done_ids",
    "import_modules",
    "injected_error_summary",
    "load_trajectories",
    "read_states",
    "replay",
    "run_jobs",
    "trajectory_id",
    "write_states",
]
