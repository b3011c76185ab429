"""Error states: injected through env.step, skipped when they end the episode, paired
continuations, the CLI, and the reproduction of the paper's pattern on FrozenLake."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from agentenvs.cli import main
from agentenvs.eval.error_states import (
    continuation_successes,
    error_states_config,
    run_error_states,
)
from agentenvs.eval.records import stable_seed
from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t
from agentenvs.eval.states import candidate_points, collect_states, load_trajectories, replay
from agentenvs.eval.step_quality import summary_markdown
from agentenvs.policy.base import Conversation

ENV = "agentenvs/FrozenLake-v0"
ENV_KWARGS = {"success_rate": 0.8}
#: RL-like: recovers after a mistake 90% of the time; base-like: 30%; same error rate
RL_LIKE = "frozenlake/noisy:error_rate=0.25,recover=0.9"
BASE_LIKE = "frozenlake/noisy:error_rate=0.25,recover=0.3"
TASKS = ["4x4", "8x8"] + [f"random:size=4,p=0.8,seed={s}" for s in (0, 1, 2, 4, 5, 6)]


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    path = tmp_path_factory.mktemp("run") / "oracle"
    config = EvalConfig(
        env_id=ENV, policy="frozenlake/oracle", task_ids=TASKS[:4], n=3, budgets=[10],
        env_kwargs=ENV_KWARGS,
    )
    run_pass_at_k_t(config, path, workers=0, progress=False)
    return load_trajectories(path)[1]


def test_error_states_follow_the_env_error_action_and_never_end_the_episode(
    records: list[dict[str, Any]],
) -> None:
    points = candidate_points(records)
    env = gym.make(ENV, **ENV_KWARGS)
    survivors = set()
    no_error = 0
    for traj, t in points:  # by hand: which states survive their error action
        record = records[traj]
        replay(env, record, t)
        state_id = f"{record['task_id']}#{record['sample']}@{record['budget']}:t{t}"
        q = env.unwrapped.q_values()
        if q.max() - q.min() <= 1e-9:  # every move as good as the best: no error to inject
            no_error += 1
            continue
        rng = np.random.default_rng(stable_seed(7, state_id, "error_action"))
        _, _, terminated, truncated, _ = env.step(env.unwrapped.error_action(rng))
        if not (terminated or truncated):
            survivors.add(state_id + "+error")
    assert 0 < len(survivors) < len(points)  # some errors end the episode (holes, last turn)
    draws: dict[str, int] = {}
    states = collect_states(
        records, ENV, ENV_KWARGS, n_states=len(points), seed=7, kinds=("error",),
        error_draws=draws,
    )
    assert {s.state_id for s in states} == survivors
    assert draws["tried"] == len(points) and draws["no_error"] == no_error
    assert draws["ended"] == len(points) - no_error - len(survivors)
    for state in states:
        conversation = state.restore_into(env)
        inner = env.unwrapped
        assert not inner.done and state.turns_left >= 1
        assert state.turn == state.source["t"] + 1
        assert conversation.messages[-2] == {"role": "assistant", "content": state.error_action}
        assert inner.last_action == state.error_action.removeprefix("<answer>").removesuffix("</answer>")
    # a lowest-Q move below the best was played: every error state carries its regret
    for state in states:
        state.restore_into(env)
        assert env.unwrapped.last_regret > 1e-9
        assert state.error_regret == pytest.approx(env.unwrapped.last_regret, abs=1e-12)


class Constant:
    """Always the same move: continuations differ only by the env's random stream."""

    name = "constant"

    def sample(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[str]]:
        return [["<answer>Down</answer>"] * n for _ in conversations]


def test_continuations_share_the_env_stream_across_policies(records: list[dict[str, Any]]) -> None:
    states = collect_states(records, ENV, ENV_KWARGS, n_states=12, seed=1, kinds=("error",))
    env = gym.make(ENV, **ENV_KWARGS)
    outcomes = []
    for state in states:
        a = continuation_successes(env, Constant(), state, 6, seed=5, slot="a")
        b = continuation_successes(env, Constant(), state, 6, seed=5, slot="b")
        assert a == b  # rollout j of each policy saw the same slips
        assert a == continuation_successes(env, Constant(), state, 6, seed=5, slot="a")
        outcomes.extend(a)
    assert len(outcomes) == 72


SEEDS = (0, 1, 2, 3)


def test_reproduces_the_paper_pattern_on_frozenlake(tmp_path: Path) -> None:
    """From ordinary states the recovering policy is not better; from error states it is,
    and it succeeds more often when continuing from them: over several seeds, with the
    spread printed (``pytest -s``), not one chosen seed.

    Ordinary states come from oracle rollouts, where both policies act alike. At 95%
    confidence an identical pair shows a "difference" for about one seed in twenty, so
    ordinary states may say "A better" for at most one of the seeds; the error-state gap
    must hold for every seed.
    """
    rows = []
    for seed in SEEDS:
        config = error_states_config(
            ENV, RL_LIKE, BASE_LIKE, env_kwargs=ENV_KWARGS, reference="frozenlake/oracle",
            task_ids=TASKS, episodes=6, budget=16, n_states=150, n_actions=16, continuations=4,
            seed=seed,
        )
        result = run_error_states(config, tmp_path / f"es{seed}", workers=0, progress=False,
                                  n_boot=1000, plots=seed == SEEDS[0])
        ordinary = result.summary["kinds"]["ordinary"]["all"]
        error = result.summary["kinds"]["error"]["all"]
        # oracle rollouts make no mistakes: every drawn state is ordinary
        assert "self_error" not in result.summary["kinds"]
        assert ordinary["n_states"] == error["n_states"] == 150
        assert ordinary["n_tasks"] == error["n_tasks"] == len(TASKS)
        rows.append((seed, ordinary, error))
        # every injected error is one; the states without any are counted, not faked
        injected = result.summary["injected_errors"]
        assert injected["states"] == 150 and injected["regret_min"] > 1e-9
        assert injected["tried"] == 150 + injected["no_error"] + injected["ended"]
        assert injected["redraws"] >= injected["no_error"] > 0
        assert "Injected errors: 150" in summary_markdown(result.summary)

        # error states: A picks the better action far more often, the interval excludes 0
        assert error["verdict"] == "A better", seed
        assert error["a_minus_b"]["low"] > 0.2, seed
        assert error["a_share_of_decided"]["low"] > 0.8, seed
        assert error["mean_score_a"]["mean"] > error["mean_score_b"]["mean"] + 0.1, seed
        cont = error["continuation"]
        assert cont["rollouts_per_state"] == 4 and cont["n_states"] == 150
        assert cont["verdict"] == "A better", seed
        assert "continuation" not in ordinary
        # ordinary states: about equal action quality
        assert abs(ordinary["mean_score_a"]["mean"] - ordinary["mean_score_b"]["mean"]) < 0.03

    ordinary_gaps = np.array([o["a_minus_b"]["mean"] for _, o, _ in rows])
    error_gaps = np.array([e["a_minus_b"]["mean"] for _, _, e in rows])
    cont_gaps = np.array([e["continuation"]["a_minus_b"]["mean"] for _, _, e in rows])
    print(f"\nover seeds {SEEDS}: P(A better) - P(B better) from ordinary states "
          f"{ordinary_gaps.mean():+.3f} (range {ordinary_gaps.min():+.3f} .. {ordinary_gaps.max():+.3f}), "
          f"from error states {error_gaps.mean():+.3f} ({error_gaps.min():+.3f} .. "
          f"{error_gaps.max():+.3f}); continuation success A - B {cont_gaps.mean():+.3f} "
          f"({cont_gaps.min():+.3f} .. {cont_gaps.max():+.3f})")
    assert sum(o["verdict"] != "no clear difference" for _, o, _ in rows) <= 1
    assert abs(ordinary_gaps.mean()) < 0.05 and error_gaps.min() > 0.3
    assert (tmp_path / f"es{SEEDS[0]}" / "error_states.png").stat().st_size > 20_000


def test_cli_error_states(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "cli"
    code = main([
        "error-states", "--env", ENV, "--env-kwargs", json.dumps(ENV_KWARGS),
        "--reference", "frozenlake/oracle", "--tasks", "first:3", "--episodes", "2",
        "--budget", "8", "--a", RL_LIKE, "--b", BASE_LIKE, "--states", "10", "--actions", "4",
        "--continuations", "2", "--continue-ordinary", "--workers", "0", "--out", str(out),
        "--no-progress", "--n-boot", "100",
    ])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| injected error |" in printed and "continuing from" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert {"ordinary", "error"} <= set(summary["kinds"]) <= {"ordinary", "self_error", "error"}
    assert "continuation" in summary["kinds"]["ordinary"]["all"]
    assert (out / "error_states.png").exists() and (out / "reference" / "manifest.json").exists()
    # a reference without an env, or two sources, are usage errors
    assert main(["error-states", "--reference", "frozenlake/oracle", "--a", RL_LIKE, "--b",
                 BASE_LIKE, "--out", str(tmp_path / "x"), "--workers", "0"]) == 2
    assert main(["error-states", "--a", RL_LIKE, "--b", BASE_LIKE, "--out",
                 str(tmp_path / "x"), "--workers", "0"]) == 2


def test_error_states_are_informative_on_intercode_sql(tmp_path: Path) -> None:
    """The SQL noisy policies err at any turn, so after an injected wrong statement the
    one that errs less is the better one, rather than every pair being a tie."""
    sql = "agentenvs/InterCodeSQL-v0"
    tasks = list(gym.make(sql).unwrapped.task_ids)[:8]
    config = error_states_config(
        sql, "intercode_sql/noisy:error_rate=0.1", "intercode_sql/noisy:error_rate=0.7",
        reference="intercode_sql/gold", task_ids=tasks, episodes=1, budget=4, n_states=12,
        n_actions=8, continuations=2, seed=0,
    )
    result = run_error_states(config, tmp_path / "sql", workers=0, progress=False, plots=False,
                              n_boot=500)
    error = result.summary["kinds"]["error"]["all"]
    assert error["n_states"] >= 8
    assert error["ties"]["mean"] < 0.8  # not all ties, as when errors came only at turn 0
    assert error["a_better"]["mean"] > error["b_better"]["mean"] + 0.2
    assert error["verdict"] == "A better"
