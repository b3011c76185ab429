"""Step quality from the same state: replayed states, pair counting, scoring from a state,
resume, worker-count independence, another env, and the CLI."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from agentenvs.cli import main
from agentenvs.core import TextEnv, Transition
from agentenvs.core.errors import AgentEnvsError
from agentenvs.core.snapshot import take_snapshot
from agentenvs.eval.records import read_records
from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t
from agentenvs.eval.states import (
    ReplayMismatchError,
    State,
    collect_states,
    load_trajectories,
    replay,
)
from agentenvs.eval.step_quality import (
    AnalysisConfigError,
    StepQualityConfig,
    compare_scores,
    run_step_quality,
    score_from_state,
)

ENV = "agentenvs/FrozenLake-v0"
ENV_KWARGS = {"success_rate": 0.8}
TASKS = ["4x4", "8x8", "random:size=4,p=0.8,seed=0", "random:size=4,p=0.8,seed=1"]
A = "frozenlake/noisy:error_rate=0.25,recover=0.9"
B = "frozenlake/noisy:error_rate=0.25,recover=0.3"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("run") / "noisy"
    config = EvalConfig(
        env_id=ENV, policy=B, task_ids=TASKS, n=4, budgets=[12], env_kwargs=ENV_KWARGS,
    )
    run_pass_at_k_t(config, path, workers=0, progress=False)
    return path


def sq_config(run_dir: Path, **overrides: Any) -> StepQualityConfig:
    base: dict[str, Any] = dict(
        env_id=ENV, policy_a=A, policy_b=B, env_kwargs=ENV_KWARGS, run_dir=str(run_dir),
        n_states=24, n_actions=8, seed=3,
    )
    base.update(overrides)
    return StepQualityConfig(**base)


def test_compare_scores_counts_ties_apart() -> None:
    a = [1.0, 0.5, 0.5]
    b = [0.5, 0.5 + 1e-12, 0.0]
    # pairs: (1,.5)A (1,.5)A (1,0)A ; (.5,.5)tie (.5,.5+eps)tie (.5,0)A ; same again
    assert compare_scores(a, b) == (5 / 9, 0.0, 4 / 9)
    assert compare_scores(b, a) == (0.0, 5 / 9, 4 / 9)
    # a tolerance of 0 tells 0.5 from 0.5 + 1e-12
    assert compare_scores(a, b, tie_tol=0.0) == (5 / 9, 2 / 9, 2 / 9)
    assert compare_scores([0.3] * 4, [0.3] * 4) == (0.0, 0.0, 1.0)


def test_states_are_the_replayed_states_of_their_trajectories(run_dir: Path) -> None:
    _, records = load_trajectories(run_dir)
    states = collect_states(records, ENV, ENV_KWARGS, n_states=30, seed=1)
    assert len(states) == 30 and len({s.state_id for s in states}) == 30
    fresh = gym.make(ENV, **ENV_KWARGS)
    check = gym.make(ENV, **ENV_KWARGS)
    by_traj = {f"{r['task_id']}#{r['sample']}@{r['budget']}": r for r in records}
    for state in states:
        state = State.from_record(json.loads(json.dumps(state.to_record())))  # through JSON
        record = by_traj[state.source["trajectory"]]
        t = state.source["t"]
        assert state.kind in ("ordinary", "self_error") and state.turn == t
        assert 0 <= t < record["turns"]
        # self-made error states follow the trajectory's own mistake, by the exact oracle
        replay(check, record, max(t - 1, 0))
        if t:
            q = check.unwrapped.q_values()
            regret = q.max() - check.unwrapped.score_action(record["steps"][t - 1]["action"])
            assert state.previous_regret == pytest.approx(regret, abs=1e-12)
            assert (state.kind == "self_error") == (regret > 1e-9)
        else:
            assert state.previous_regret is None and state.kind == "ordinary"
        conversation = state.restore_into(fresh)
        replay(check, record, t)
        assert fresh.unwrapped.state_key() == check.unwrapped.state_key()
        assert fresh.unwrapped.turns_left == check.unwrapped.turns_left == state.turns_left
        assert conversation.env is fresh.unwrapped
        if t:
            assert conversation.messages[-1]["content"] == record["steps"][t - 1]["observation"]
        else:
            # the first user message is the reset observation less the system prompt it
            # starts with (the system message shows the rules once)
            system = conversation.messages[0]["content"]
            assert conversation.messages[0]["role"] == "system"
            assert record["initial_observation"] == (
                f"{system}\n\n{conversation.messages[-1]['content']}"
            )
        assert len([m for m in conversation.messages if m["role"] == "assistant"]) == t
        # the restored env steps on exactly as the trajectory did
        observation, *_ = fresh.step(record["steps"][t]["action"])
        assert observation == record["steps"][t]["observation"]
    kinds = {s.kind for s in states}
    assert kinds == {"ordinary", "self_error"}  # B errs 25% of the time: both occur
    # the same seed draws the same states; another seed others
    again = collect_states(records, ENV, ENV_KWARGS, n_states=30, seed=1)
    assert [s.state_id for s in again] == [s.state_id for s in states]
    other = collect_states(records, ENV, ENV_KWARGS, n_states=30, seed=2)
    assert [s.state_id for s in other] != [s.state_id for s in states]


def test_replay_mismatch_fails_loudly(run_dir: Path) -> None:
    _, records = load_trajectories(run_dir)
    long = next(r for r in records if r["turns"] >= 3)
    tampered = copy.deepcopy(long)
    tampered["steps"][1]["observation"] += " (edited)"
    with pytest.raises(ReplayMismatchError, match="after step 2"):
        replay(gym.make(ENV, **ENV_KWARGS), tampered, 3)
    with pytest.raises(ReplayMismatchError):
        collect_states([tampered], ENV, ENV_KWARGS, n_states=long["turns"], seed=0)
    # other env kwargs: the rules text of the first observation differs
    with pytest.raises(ReplayMismatchError, match="initial observation"):
        collect_states(records, ENV, {"success_rate": 0.5}, n_states=5, seed=0)
    # and an analysis refuses a run of another config before replaying anything
    with pytest.raises(AnalysisConfigError, match="would not replay"):
        run_step_quality(
            sq_config(run_dir, env_kwargs={"success_rate": 0.5}),
            run_dir.parent / "mismatch", workers=0, progress=False, plots=False,
        )


class CounterEnv(TextEnv):
    """A counter; ``score_action`` has a side effect the analysis must undo."""

    def __init__(self, *, advance_when_scoring: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.advance_when_scoring = advance_when_scoring

    @property
    def task_ids(self) -> list[str]:
        return ["count"]

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        self.count = 0
        return "count"

    def _apply(self, action: str) -> Transition:
        self.count += len(action)
        return Transition(str(self.count), score=float(self.count))

    def _get_state(self) -> Any:
        return {"count": self.count}

    def _set_state(self, state: Any) -> None:
        self.count = state["count"]

    def _state_key(self) -> str:
        return str(self.count)

    def error_action(self, rng: np.random.Generator) -> str:
        return "x"

    def score_action(self, action: str) -> float:
        self.count += len(action)  # a careless scorer: changes the state it scores
        if self.advance_when_scoring:
            self._turn += 1
        return float(self.count)


def test_scoring_restores_the_state_between_actions() -> None:
    env = CounterEnv()
    env.reset(seed=0)
    env.step("ab")
    snap = take_snapshot(env)
    # every action scored from count 2, equal texts once; the env is left as it was
    assert score_from_state(env, snap, ["a", "abc", "a", "ab"]) == [3.0, 5.0, 3.0, 4.0]
    assert env.count == 2 and env.turn == 1
    bad = CounterEnv(advance_when_scoring=True)
    bad.reset(seed=0)
    with pytest.raises(AgentEnvsError, match="advanced the env"):
        score_from_state(bad, take_snapshot(bad), ["a"])


def test_frozenlake_scores_are_the_oracle_q_values(run_dir: Path) -> None:
    config = sq_config(run_dir, n_states=10)
    result = run_step_quality(config, run_dir.parent / "q", workers=0, progress=False, plots=False)
    env = gym.make(ENV, **ENV_KWARGS)
    states = {s.state_id: s for s in map(State.from_record, read_records(result.out_dir / "states.jsonl"))}
    for record in read_records(result.out_dir / "results.jsonl"):
        states[record["state_id"]].restore_into(env)
        q = env.unwrapped.q_values()
        names = ["Left", "Down", "Right", "Up"]
        for action, score in zip(record["actions_a"] + record["actions_b"],
                                 record["scores_a"] + record["scores_b"], strict=True):
            assert score == q[names.index(action.removeprefix("<answer>").removesuffix("</answer>"))]
        assert len(record["actions_a"]) == len(record["actions_b"]) == 8
        assert record["a_better"] + record["b_better"] + record["ties"] == pytest.approx(1.0)


def test_resumed_and_parallel_runs_give_the_one_go_results(run_dir: Path, tmp_path: Path) -> None:
    config = sq_config(run_dir, kinds=("ordinary", "error"), continuations=2)
    whole = run_step_quality(config, tmp_path / "whole", workers=0, progress=False, plots=False)
    half = run_step_quality(config, tmp_path / "resumed", workers=0, progress=False, plots=False,
                            limit=whole.n_states // 2)
    assert half.ran == whole.n_states // 2
    rest = run_step_quality(config, tmp_path / "resumed", workers=0, progress=False)
    assert rest.ran == whole.n_states - whole.n_states // 2
    parallel = run_step_quality(config, tmp_path / "parallel", workers=2, chunk_size=5,
                                progress=False, plots=False)

    def results(d: str) -> list[dict[str, Any]]:
        return sorted(read_records(tmp_path / d / "results.jsonl"), key=lambda r: r["state_id"])

    assert results("whole") == results("resumed") == results("parallel")
    assert len(results("whole")) == whole.n_states
    assert whole.summary == rest.summary == parallel.summary
    assert (tmp_path / "resumed" / "error_states.png").exists()
    # a finished analysis runs nothing more; another config is refused
    assert run_step_quality(config, tmp_path / "whole", workers=0, progress=False, plots=False).ran == 0
    with pytest.raises(AnalysisConfigError, match="another config"):
        run_step_quality(sq_config(run_dir, seed=4), tmp_path / "whole", workers=0, progress=False)


def test_step_quality_on_intercode_sql(tmp_path: Path) -> None:
    """Any env with score_action works: gold against a policy that opens with a wrong query."""
    env = gym.make("agentenvs/InterCodeSQL-v0")
    tasks = list(env.unwrapped.task_ids)[:5]
    config = StepQualityConfig(
        env_id="agentenvs/InterCodeSQL-v0", policy_a="intercode_sql/gold",
        policy_b="intercode_sql/noisy:error_rate=1.0", reference="intercode_sql/gold",
        task_ids=tasks, episodes=1, budget=4, n_states=20, n_actions=4,
    )
    result = run_step_quality(config, tmp_path / "sql", workers=0, progress=False, n_boot=200)
    group = result.summary["kinds"]["ordinary"]["all"]
    records = read_records(tmp_path / "sql" / "results.jsonl")
    first_turn = [r for r in records if r["turn"] == 0]
    assert first_turn, "the gold trajectories start at turn 0"
    for r in first_turn:  # the wrong statement scores below the gold query every time
        assert r["a_better"] == 1.0 and r["mean_score_a"] == 1.0 and r["mean_score_b"] < 1.0
    assert group["b_better"]["mean"] == 0.0
    assert group["verdict"] == "A better"
    assert (tmp_path / "sql" / "step_quality.png").exists()
    assert (tmp_path / "sql" / "reference" / "trajectories.jsonl").exists()


def test_cli_step_quality(run_dir: Path, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "cli"
    args = ["step-quality", "--run", str(run_dir), "--a", A, "--b", B, "--states", "12",
            "--actions", "4", "--workers", "0", "--out", str(out), "--no-progress", "--n-boot", "100"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "P(A better)" in printed and "A's share of decided pairs" in printed
    assert "| ordinary | " in printed and "bootstrap over tasks" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["run_dir"] == str(run_dir.resolve())
    assert (out / "step_quality.png").exists()
    # the env comes from the run; naming another is an error, reported with exit code 2
    assert main([*args, "--env", "agentenvs/InterCodeSQL-v0"]) == 2
    assert "ran agentenvs/FrozenLake-v0" in capsys.readouterr().err


def test_states_after_the_policys_own_mistake_are_error_states(run_dir: Path, tmp_path: Path) -> None:
    """In a run of a noisy policy, the states right after its own mistakes carry the
    difference between a recovering and a non-recovering policy; counted as ordinary
    they would make ordinary play look different. Reported as three groups."""
    config = sq_config(run_dir, n_states=80, n_actions=8, seed=0)
    result = run_step_quality(config, tmp_path / "sq", workers=0, progress=False, plots=False,
                              n_boot=500)
    kinds = result.summary["kinds"]
    assert set(kinds) == {"ordinary", "self_error"}
    ordinary, self_error = kinds["ordinary"]["all"], kinds["self_error"]["all"]
    assert ordinary["n_states"] + self_error["n_states"] == 80
    assert self_error["n_states"] >= 5
    assert self_error["verdict"] == "A better"
    assert self_error["a_share_of_decided"]["low"] > 0.7
    assert ordinary["verdict"] == "no clear difference"
    gap = lambda g: g["a_better"]["mean"] - g["b_better"]["mean"]  # noqa: E731
    assert gap(self_error) > gap(ordinary) + 0.3


def test_intervals_resample_tasks_not_states() -> None:
    """States of one task move together; an interval over states would be too narrow."""
    from agentenvs.eval.step_quality import summarize_group

    rng = np.random.default_rng(0)
    task_effect = rng.normal(0, 0.2, size=8)
    results = []
    for task in range(8):
        for i in range(25):
            a = float(np.clip(0.5 + task_effect[task] + rng.normal(0, 0.02), 0, 1))
            results.append({"state_id": f"{task}:{i}", "task_id": f"task{task}", "a_better": a,
                            "b_better": 1 - a, "ties": 0.0, "mean_score_a": a,
                            "mean_score_b": 1 - a})
    clustered = summarize_group(results, n_boot=2000, seed=1)
    as_if_iid = summarize_group([{**r, "task_id": r["state_id"]} for r in results],
                                n_boot=2000, seed=1)
    assert clustered["n_tasks"] == 8 and clustered["n_states"] == 200
    assert clustered["interval"] == "expanded percentile bootstrap over tasks"
    width = lambda g: g["a_minus_b"]["high"] - g["a_minus_b"]["low"]  # noqa: E731
    assert width(clustered) > 3 * width(as_if_iid)
    share = clustered["a_share_of_decided"]
    assert share["low"] < share["mean"] < share["high"]
    one_task = summarize_group([{**r, "task_id": "t"} for r in results[:10]], n_boot=100)
    assert one_task["verdict"] == "no interval" and "low" not in one_task["a_minus_b"]
