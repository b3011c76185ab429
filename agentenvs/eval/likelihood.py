"""Likelihood of stored trajectories under models: per-action NLL and cumulative LLR.

For every trajectory of one or more runner runs (``trajectories.jsonl``), each action
``a_t`` is scored given its history ``h_t`` (the chat up to that turn) by a scoring
model A (``ScoringPolicy.score``: the sum of the action's token log-probabilities), and
by a second model B when one is given. Per trajectory:

- ``nll_a``: ``-log p_A(a_t | h_t) / tokens(a_t)`` per step, and ``mean_nll_a`` its mean
  over the trajectory's actions (the paper's average action-level NLL);
  ``nll_per_token_a`` pools the tokens of every action instead;
- with B as well: the same for B and ``llr_cumulative[t] = Σ_{s<=t} (log p_A(a_s | h_s)
  - log p_B(a_s | h_s))``, the cumulative log-likelihood ratio along the trajectory.

Scored as sampled: where a trajectory's records hold its token ids (``agentenvs eval
--record-tokens``) under the scoring model's tokenizer (the record's ``token_space``
names it), each action is scored as the ids the model was given and drew (prompt ids,
completion ids), through the model's ``score_sequences``; otherwise the history and
action are rendered with the chat template and tokenized (re-tokenized text, which can
differ from what was sampled). Each result says which (``scored_on_a``/``_b``:
``"tokens"`` or ``"text"``) and the summary counts them per model.

Otherwise, the history a model scores is what the policy saw when it ran: with ``history="env"``
(default) the env is reset with the trajectory's seed, task and budget to recover the
system prompt and tools (the first observation is checked against the stored one);
``history="record"`` uses the stored observations alone, without an env.

``run_likelihood(config, out_dir)`` writes ``results.jsonl`` (one line per trajectory,
resumable), ``summary.json`` (per run and outcome: means with bootstrap CIs) and
``likelihood.png`` (``agentenvs.eval.analysis_report.plot_likelihood``). Model-backed
scorers usually run best in this process (``workers=0``) where they share one device.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import agentenvs  # noqa: F401 - registers env ids and policies in worker processes
from agentenvs.core.errors import Fault
from agentenvs.eval.faults import (
    DEFAULT_FAULT_BACKOFF,
    DEFAULT_MAX_FAULT_RETRIES,
    Faulted,
    close_quietly,
    fault_line,
    read_fault_summary,
)
from agentenvs.eval.records import (
    ensure_manifest,
    read_step_tokens,
    stable_seed,
    write_json_atomic,
)
from agentenvs.eval.states import (
    ReplayMismatchError,
    check_records,
    done_ids,
    import_modules,
    load_trajectories,
    read_results_file,
    run_jobs,
    run_with_fault_retries,
    trajectory_id,
)
from agentenvs.eval.step_quality import AnalysisConfigError, bootstrap_mean
from agentenvs.policy.base import ActionScore, Conversation, ScoringPolicy
from agentenvs.policy.chat import ScoredSequence
from agentenvs.policy.registry import make_policies

RESULTS_NAME = "results.jsonl"
SUMMARY_NAME = "summary.json"
HISTORIES = ("env", "record")


@dataclass
class LikelihoodConfig:
    """Which runs to score, with which models (``model_b`` optional: no LLR without it)."""

    run_dirs: Sequence[str]
    model_a: str
    model_b: str | None = None
    history: str = "env"
    imports: Sequence[str] = ()
    #: extra keyword arguments for make_policy of both models (e.g. a device)
    model_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.run_dirs = tuple(str(Path(d).resolve()) for d in self.run_dirs)
        self.imports = tuple(self.imports)
        self.model_kwargs = dict(self.model_kwargs)
        if not self.run_dirs:
            raise AnalysisConfigError("no runs to score")
        if self.history not in HISTORIES:
            raise AnalysisConfigError(f"history must be one of {HISTORIES}, got {self.history!r}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["run_dirs"] = list(self.run_dirs)
        data["imports"] = list(self.imports)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LikelihoodConfig:
        return cls(**data)


def histories(
    record: dict[str, Any], *, env: gym.Env | None = None
) -> list[Conversation]:
    """The history before each action of a stored trajectory (``env``: recover the
    system prompt and tools by a seeded reset, checked against the stored observation)."""
    first = record["initial_observation"]
    if env is not None:
        observation, info = env.reset(
            seed=int(record["seed"]),
            options={"task_id": record["task_id"], "max_turns": int(record["budget"])},
        )
        if observation != first:
            raise ReplayMismatchError(
                f"trajectory {trajectory_id(record)}: a reset with its seed gives another "
                "first observation than the stored one; was it run with other env kwargs?"
            )
        conversation = Conversation.start(first, info)
    else:
        conversation = Conversation(messages=[{"role": "user", "content": first}])
    out = []
    for step in record["steps"]:
        out.append(Conversation(messages=[dict(m) for m in conversation.messages], tools=conversation.tools))
        conversation.add_turn(step["action"], step["observation"])
    return out


def _score(model: ScoringPolicy, convs: list[Conversation], actions: list[str]) -> list[ActionScore]:
    scores = model.score(convs, actions)
    if len(scores) != len(actions):
        raise AnalysisConfigError(
            f"{model.name}.score returned {len(scores)} scores for {len(actions)} actions"
        )
    return list(scores)


def recorded_sequences(
    record: dict[str, Any], model: Any
) -> list[ScoredSequence] | None:
    """The recorded (prompt + completion) ids of every step, when the record has them
    for each step under ``model``'s tokenizer and ``model`` scores token sequences
    (``score_sequences``); else ``None`` (score the text)."""
    space = record.get("token_space")
    formatter = getattr(model, "formatter", None)
    if not isinstance(space, dict) or not callable(getattr(model, "score_sequences", None)):
        return None
    try:
        vocab = formatter.vocab_fingerprint if formatter is not None else None
    except Exception:  # a policy that cannot load its tokenizer scores text, or fails there
        return None
    if vocab is None or space.get("vocab") != vocab:
        return None
    steps = read_step_tokens(record, trajectory_id(record))  # RunFileError names the step
    if not steps or any(s is None or not s.completion_ids for s in steps):
        return None
    return [
        ScoredSequence(ids=[*s.prompt_ids, *s.completion_ids], action_start=len(s.prompt_ids))
        for s in steps
        if s is not None
    ]


def trajectory_likelihood(
    record: dict[str, Any],
    model_a: ScoringPolicy,
    model_b: ScoringPolicy | None = None,
    *,
    env: gym.Env | None = None,
) -> dict[str, Any]:
    """Per-step log-probabilities, NLLs and the cumulative LLR of one trajectory (each
    model on the recorded ids where it can, see ``recorded_sequences``)."""
    convs = histories(record, env=env)
    actions = [str(step["action"]) for step in record["steps"]]
    out: dict[str, Any] = {
        "task_id": record["task_id"],
        "sample": int(record["sample"]),
        "budget": int(record["budget"]),
        "success": bool(record.get("success", False)),
        "turns": len(actions),
    }
    totals: dict[str, list[float]] = {}
    for slot, model in (("a", model_a), ("b", model_b)):
        if model is None:
            continue
        sequences = recorded_sequences(record, model)
        if sequences is not None:
            scores = list(model.score_sequences(sequences))  # type: ignore[attr-defined]
        else:
            scores = _score(model, convs, actions)
        out[f"scored_on_{slot}"] = "text" if sequences is None else "tokens"
        logp = [float(s.total) for s in scores]
        tokens = [len(s.token_logprobs) for s in scores]
        nll = [s.nll_per_token for s in scores]
        totals[slot] = logp
        out[f"logp_{slot}"] = logp
        out[f"tokens_{slot}"] = tokens
        out[f"nll_{slot}"] = nll
        out[f"mean_nll_{slot}"] = sum(nll) / len(nll)
        out[f"nll_per_token_{slot}"] = -sum(logp) / max(sum(tokens), 1)
    if "b" in totals:
        steps = [la - lb for la, lb in zip(totals["a"], totals["b"], strict=True)]
        out["llr_cumulative"] = list(accumulate(steps))
    return out


# ---------------------------------------------------------------- workers
class ScoringWorker:
    """What a worker builds once: the scoring models, and an env per (env id, kwargs).
    A ``Fault`` while a trajectory is scored (a model server's error, an env's reset)
    scores it again from the start, with new envs."""

    def __init__(
        self,
        config_data: dict[str, Any],
        max_fault_retries: int = DEFAULT_MAX_FAULT_RETRIES,
        fault_backoff: float = DEFAULT_FAULT_BACKOFF,
    ) -> None:
        self.max_fault_retries = int(max_fault_retries)
        self.fault_backoff = float(fault_backoff)
        self.config = LikelihoodConfig.from_dict(config_data)
        import_modules(self.config.imports)
        specs = {"a": self.config.model_a}
        if self.config.model_b is not None:
            specs["b"] = self.config.model_b
        # one engine each, sized to fit together (or one shared where the specs allow)
        self.models = make_policies(specs, **self.config.model_kwargs)
        for model in self.models.values():
            if not callable(getattr(model, "score", None)):
                raise AnalysisConfigError(f"policy {model.name!r} cannot score actions (no score())")
        self.envs: dict[str, gym.Env] = {}

    def env_for(self, env_id: str, env_kwargs: dict[str, Any]) -> gym.Env:
        key = json.dumps([env_id, env_kwargs], sort_keys=True)
        if key not in self.envs:
            self.envs[key] = gym.make(env_id, **env_kwargs)
        return self.envs[key]

    def drop_env(self, fault: Fault) -> None:
        envs, self.envs = self.envs, {}
        for env in envs.values():
            close_quietly(env)

    def close(self) -> None:
        for env in self.envs.values():
            env.close()


def _score_trajectory(worker: ScoringWorker, item: dict[str, Any]) -> bytes | Faulted:
    def attempt() -> dict[str, Any]:
        history = worker.config.history == "env"
        env = worker.env_for(item["env_id"], item["env_kwargs"]) if history else None
        result = trajectory_likelihood(
            item["record"], worker.models["a"], worker.models.get("b"), env=env
        )
        return {"id": item["id"], "run": item["run"], "run_label": item["run_label"], **result}

    names = {"id": item["id"], "run": item["run"], "task_id": item["record"]["task_id"]}
    return run_with_fault_retries(worker, attempt, names)


# ---------------------------------------------------------------- the analysis
@dataclass
class LikelihoodResult:
    out_dir: Path
    n_trajectories: int
    ran: int
    seconds: float
    summary: dict[str, Any]
    files: list[Path]


def _prepare(config: LikelihoodConfig, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    ensure_manifest(
        out_dir, config.to_dict(), error=AnalysisConfigError, what="a likelihood analysis",
        analysis="likelihood",
    )


def work_items(config: LikelihoodConfig) -> list[dict[str, Any]]:
    """One item per trajectory with at least one action, across every run."""
    items = []
    for index, run_dir in enumerate(config.run_dirs):
        run_config, records = load_trajectories(run_dir)
        check_records(records, run_dir)
        label = str(run_config["policy"])
        for record in records:
            if not record["steps"]:
                continue
            items.append(
                {
                    "id": f"{index}:{trajectory_id(record)}",
                    "run": Path(run_dir).name,
                    "run_label": label,
                    "env_id": run_config["env_id"],
                    "env_kwargs": run_config.get("env_kwargs", {}),
                    "record": record,
                }
            )
    return items


def run_likelihood(
    config: LikelihoodConfig,
    out_dir: str | Path,
    *,
    workers: int = 0,
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
) -> LikelihoodResult:
    """Score (or resume scoring) every trajectory of the config's runs into ``out_dir``.

    A trajectory whose scoring raises ``Fault`` is scored again (the bounds as for
    ``run_pass_at_k_t``); it never enters the means, and one out of retries stops the
    analysis (``FaultLimitError``) until it is resumed. The summary's ``faults`` counts
    them."""
    out_dir = Path(out_dir)
    started = time.perf_counter()
    import_modules(config.imports)
    _prepare(config, out_dir)
    items = work_items(config)
    results_path = out_dir / RESULTS_NAME
    done = done_ids(results_path, "id")
    todo = [item for item in items if item["id"] not in done]
    if limit is not None:
        todo = todo[: max(0, limit - len(done))]
    ran = run_jobs(
        [(item["id"], item) for item in todo], results_path,
        setup=functools.partial(
            ScoringWorker, config.to_dict(), max_fault_retries, fault_backoff
        ),
        fn=_score_trajectory, workers=workers, backend=backend, address=address,
        chunk_size=chunk_size, progress=progress, desc=f"scoring with {config.model_a}",
        unit="traj", already=len(done), max_fault_retries=max_fault_retries,
        fault_backoff=fault_backoff, max_fault_rate=max_fault_rate,
    )
    results = read_results_file(results_path, "id")
    summary = summarize_likelihood(results, config=config, n_boot=n_boot)
    summary["faults"] = read_fault_summary(results, out_dir)
    files = [out_dir / SUMMARY_NAME]
    write_json_atomic(files[0], summary)
    if plots and results:
        from agentenvs.eval.analysis_report import plot_likelihood

        files.append(plot_likelihood(results, summary, out_dir / "likelihood.png"))
    return LikelihoodResult(
        out_dir=out_dir, n_trajectories=len(items), ran=ran,
        seconds=time.perf_counter() - started, summary=summary, files=files,
    )


def summarize_likelihood(
    results: Sequence[dict[str, Any]],
    *,
    config: LikelihoodConfig | None = None,
    n_boot: int = 1000,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Per run label and outcome (``success``/``failure``/``all``): NLL and LLR means."""
    summary: dict[str, Any] = {"groups": {}, "scored_on": {}}
    for slot in ("a", "b"):
        ways = [r[f"scored_on_{slot}"] for r in results if f"scored_on_{slot}" in r]
        if ways:
            summary["scored_on"][slot] = {w: ways.count(w) for w in ("tokens", "text")}
    if config is not None:
        summary.update(model_a=config.model_a, model_b=config.model_b, config=config.to_dict())
    for label in dict.fromkeys(r["run_label"] for r in results):
        mine = [r for r in results if r["run_label"] == label]
        entry = {}
        for outcome, group in (
            ("all", mine),
            ("success", [r for r in mine if r["success"]]),
            ("failure", [r for r in mine if not r["success"]]),
        ):
            entry[outcome] = _group_stats(group, n_boot, confidence, stable_seed(label, outcome))
        summary["groups"][label] = entry
    return summary


def _group_stats(
    group: Sequence[dict[str, Any]], n_boot: int, confidence: float, seed: int
) -> dict[str, Any]:
    from agentenvs.eval.passk import bootstrap_weights

    group = sorted(group, key=lambda r: str(r["id"]))  # resampling indexes by position
    n = len(group)
    out: dict[str, Any] = {"n_trajectories": n}
    if n == 0:
        return out
    weights = bootstrap_weights(n, n_boot, np.random.default_rng(seed)) if n_boot > 0 else None
    for slot in ("a", "b"):
        if f"mean_nll_{slot}" in group[0]:
            values = np.array([r[f"mean_nll_{slot}"] for r in group], dtype=np.float64)
            out[f"mean_nll_{slot}"] = bootstrap_mean(values, weights, confidence)
    if "llr_cumulative" in group[0]:
        finals = np.array([r["llr_cumulative"][-1] for r in group], dtype=np.float64)
        out["final_llr"] = bootstrap_mean(finals, weights, confidence)
        out["final_llr"]["median"] = float(np.median(finals))
    return out


def summary_markdown(summary: dict[str, Any]) -> str:
    """One row per run and outcome, units in the header; groups too small for their
    intervals to mean much are named under the table."""
    from agentenvs.eval.passk import MIN_TASKS_FOR_CI

    def cell(m: dict[str, float] | None) -> str:
        if not m:
            return "-"
        if "low" in m:
            return f"{m['mean']:.3f} [{m['low']:.3f}, {m['high']:.3f}]"
        return f"{m['mean']:.3f}"

    lines = [
        f"A = {summary.get('model_a')}; B = {summary.get('model_b')}",
        "",
        "| run | trajectories | n | mean NLL under A (nats/token) | mean NLL under B "
        "(nats/token) | final cumulative LLR (A - B, nats) |",
        "|---|---|---|---|---|---|",
    ]
    small = []
    for label, entry in summary["groups"].items():
        for outcome in ("success", "failure", "all"):
            g = entry[outcome]
            lines.append(
                f"| {label} | {outcome} | {g['n_trajectories']} | {cell(g.get('mean_nll_a'))} | "
                f"{cell(g.get('mean_nll_b'))} | {cell(g.get('final_llr'))} |"
            )
            if 0 < g["n_trajectories"] < MIN_TASKS_FOR_CI:
                small.append(f"{label} {outcome} ({g['n_trajectories']})")
    if small:
        lines += [
            "",
            f"Small groups: {', '.join(small)}. Intervals (a bootstrap over trajectories) "
            f"from fewer than {MIN_TASKS_FOR_CI} trajectories cover less than their nominal "
            "level, and a group of one has none; read their means as rough.",
        ]
    for slot, ways in summary.get("scored_on", {}).items():
        lines += [
            "",
            f"Scored under {slot.upper()}: {ways.get('tokens', 0)} trajectories on their "
            f"recorded token ids (as sampled), {ways.get('text', 0)} on re-tokenized text.",
        ]
    if "faults" in summary:
        lines += ["", f"Faults: {fault_line(summary['faults'])}."]
    return "\n".join(lines) + "\n"
