"""Likelihood analysis: per-action NLL and cumulative LLR equal hand-computed sums.

The scorers are smoothed character unigram models over the history's text, defined
here: their ``score`` is exact and simple enough to recompute by hand. Worker processes
find them through ``imports=["test_likelihood"]`` (this module registers them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentenvs.cli import main
from agentenvs.eval.likelihood import (
    LikelihoodConfig,
    histories,
    run_likelihood,
    trajectory_likelihood,
)
from agentenvs.eval.records import TRAJECTORIES_NAME, read_records
from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t
from agentenvs.eval.states import ReplayMismatchError, load_trajectories
from agentenvs.eval.step_quality import AnalysisConfigError
from agentenvs.policy.base import ActionScore, Conversation, ScoringPolicy
from agentenvs.policy.registry import make_policy, register_policy

ENV = "agentenvs/FrozenLake-v0"
ENV_KWARGS = {"success_rate": 0.8}
VOCAB = 256


class CharUnigramScorer:
    """log p(action | history) = Σ_c log((count_history(c) + α) / (len(history) + α·V))."""

    name = "test/char-unigram"

    def __init__(self, alpha: float = 1.0) -> None:
        self.alpha = float(alpha)

    def sample(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[str]]:
        rng = np.random.default_rng(seed)
        moves = ["<answer>Left</answer>", "<answer>Right</answer>"]
        return [[moves[int(rng.integers(2))] for _ in range(n)] for _ in conversations]

    def score(
        self, conversations: Sequence[Conversation], actions: Sequence[str]
    ) -> list[ActionScore]:
        out = []
        for conversation, action in zip(conversations, actions, strict=True):
            history = "".join(m["content"] for m in conversation.messages)
            denominator = len(history) + self.alpha * VOCAB
            logps = tuple(math.log((history.count(c) + self.alpha) / denominator) for c in action)
            out.append(ActionScore(total=sum(logps), tokens=tuple(action), token_logprobs=logps))
        return out


register_policy("test/char-unigram", f"{__name__}:CharUnigramScorer")


def hand_logp(history: str, action: str, alpha: float) -> float:
    return sum(
        math.log((history.count(c) + alpha) / (len(history) + alpha * VOCAB)) for c in action
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for name, policy in (
        ("oracle", "frozenlake/oracle"),
        ("noisy", "frozenlake/noisy:error_rate=0.4,recover=0.3"),
    ):
        config = EvalConfig(
            env_id=ENV, policy=policy, task_ids=["4x4", "random:size=4,p=0.8,seed=0"], n=4,
            budgets=[6], env_kwargs=ENV_KWARGS,
        )
        run_pass_at_k_t(config, root / name, workers=0, progress=False)
        out[name] = root / name
    return out


def test_the_test_scorer_is_a_scoring_policy() -> None:
    assert isinstance(make_policy("test/char-unigram:alpha=0.5"), ScoringPolicy)


def test_nll_and_llr_equal_hand_computed_sums(runs: dict[str, Path]) -> None:
    _, records = load_trajectories(runs["noisy"])
    a, b = CharUnigramScorer(0.5), CharUnigramScorer(2.0)
    for record in records:
        result = trajectory_likelihood(record, a, b)
        history = record["initial_observation"]
        logp_a, logp_b, nll_a = [], [], []
        for step in record["steps"]:
            action = step["action"]
            logp_a.append(hand_logp(history, action, 0.5))
            logp_b.append(hand_logp(history, action, 2.0))
            nll_a.append(-logp_a[-1] / len(action))
            history += action + step["observation"]
        assert result["logp_a"] == logp_a
        assert result["logp_b"] == logp_b
        assert result["tokens_a"] == [len(s["action"]) for s in record["steps"]]
        assert result["nll_a"] == nll_a
        assert result["mean_nll_a"] == sum(nll_a) / len(nll_a)
        assert result["nll_per_token_a"] == -sum(logp_a) / sum(len(s["action"]) for s in record["steps"])
        expected = list(accumulate(x - y for x, y in zip(logp_a, logp_b, strict=True)))
        assert result["llr_cumulative"] == expected
        assert result["success"] == record["success"]


def test_env_history_adds_the_system_prompt_and_checks_the_reset(runs: dict[str, Path]) -> None:
    import gymnasium as gym

    _, records = load_trajectories(runs["oracle"])
    record = records[0]
    env = gym.make(ENV, **ENV_KWARGS)
    convs = histories(record, env=env)
    assert convs[0].messages[0]["role"] == "system"
    system, first = convs[0].messages[0]["content"], convs[0].messages[1]["content"]
    assert record["initial_observation"] == f"{system}\n\n{first}"  # the rules shown once
    assert len(convs) == len(record["steps"])
    for t in range(1, len(convs)):  # history t ends with the observation of step t
        assert convs[t].messages[-2]["content"] == record["steps"][t - 1]["action"]
        assert convs[t].messages[-1]["content"] == record["steps"][t - 1]["observation"]
    a = CharUnigramScorer(1.0)
    result = trajectory_likelihood(record, a, env=env)
    assert result["logp_a"][0] == hand_logp(system + first, record["steps"][0]["action"], 1.0)
    assert "llr_cumulative" not in result
    # a reset that does not give the stored first observation is refused
    other = gym.make(ENV, success_rate=0.5)
    with pytest.raises(ReplayMismatchError):
        histories(record, env=other)


def test_run_resumes_to_the_same_results_and_summarizes(runs: dict[str, Path], tmp_path: Path) -> None:
    config = LikelihoodConfig(
        run_dirs=[str(runs["oracle"]), str(runs["noisy"])],
        model_a="test/char-unigram:alpha=0.5", model_b="test/char-unigram:alpha=2.0",
    )
    whole = run_likelihood(config, tmp_path / "whole", progress=False, n_boot=200)
    part = run_likelihood(config, tmp_path / "part", progress=False, n_boot=200, limit=5, plots=False)
    assert part.ran == 5
    rest = run_likelihood(config, tmp_path / "part", progress=False, n_boot=200)
    assert rest.ran == whole.ran - 5
    by_id = lambda d: sorted(read_records(d / "results.jsonl"), key=lambda r: r["id"])  # noqa: E731
    assert by_id(tmp_path / "whole") == by_id(tmp_path / "part")
    assert whole.summary == rest.summary
    n_traj = sum(len(read_records(runs[k] / TRAJECTORIES_NAME)) for k in runs)
    assert whole.n_trajectories == n_traj
    groups = whole.summary["groups"]
    assert set(groups) == {"frozenlake/oracle", "frozenlake/noisy:error_rate=0.4,recover=0.3"}
    noisy = groups["frozenlake/noisy:error_rate=0.4,recover=0.3"]
    assert noisy["all"]["n_trajectories"] == noisy["success"]["n_trajectories"] + noisy["failure"]["n_trajectories"]
    finals = [r["llr_cumulative"][-1] for r in read_records(tmp_path / "whole" / "results.jsonl")
              if r["run_label"].startswith("frozenlake/noisy")]
    assert noisy["all"]["final_llr"]["mean"] == pytest.approx(float(np.mean(finals)))
    assert (tmp_path / "whole" / "likelihood.png").stat().st_size > 10_000
    with pytest.raises(AnalysisConfigError):
        run_likelihood(
            LikelihoodConfig(run_dirs=[str(runs["oracle"])], model_a="test/char-unigram"),
            tmp_path / "whole", progress=False,
        )


def test_cli_likelihood_in_a_worker_process(runs: dict[str, Path], tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "lk"
    code = main([
        "likelihood", str(runs["oracle"]), str(runs["noisy"]), "--model-a", "test/char-unigram:alpha=0.5",
        "--model-b", "test/char-unigram:alpha=2.0", "--out", str(out), "--workers", "1",
        "--import", __name__, "--no-progress", "--n-boot", "100",
    ])
    assert code == 0
    printed = capsys.readouterr().out
    assert "final cumulative LLR" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model_b"] == "test/char-unigram:alpha=2.0"
    # the worker's numbers equal this process's
    _, records = load_trajectories(runs["noisy"])
    theirs = next(r for r in read_records(out / "results.jsonl") if r["id"].endswith(
        f"{records[0]['task_id']}#{records[0]['sample']}@{records[0]['budget']}") and r["run"] == "noisy")
    mine = trajectory_likelihood(
        records[0], CharUnigramScorer(0.5), CharUnigramScorer(2.0),
        env=__import__("gymnasium").make(ENV, **ENV_KWARGS),
    )
    assert theirs["llr_cumulative"] == mine["llr_cumulative"]
    assert theirs["logp_a"] == mine["logp_a"]


def test_likelihood_under_a_tiny_hf_model(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """HFPolicy as the scorer: each step's log-probability is one plain forward pass of
    the model over the chat-templated history and action (the adapter tests' tiny model)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import gymnasium as gym

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "policy"))
    from tiny_lm import build_model, build_tokenizer

    from agentenvs.policy.hf import HFPolicy

    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    scorer = HFPolicy(model, tokenizer, max_new_tokens=8, batch_size=4)
    _, records = load_trajectories(runs["noisy"])
    record = max(records, key=lambda r: r["turns"])
    env = gym.make(ENV, **ENV_KWARGS)
    result = trajectory_likelihood(record, scorer, CharUnigramScorer(1.0), env=env)
    convs = histories(record, env=env)

    def plain_logprob(conv: Conversation, action: str) -> tuple[float, int]:
        prefix = tokenizer.apply_chat_template(conv.messages, tokenize=False, add_generation_prompt=True)
        full = tokenizer.apply_chat_template(
            [*conv.messages, {"role": "assistant", "content": action}], tokenize=False
        )
        prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"]
        ids = tokenizer(full.removesuffix("\n"), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logprobs = model(torch.tensor([ids])).logits[0].double().log_softmax(-1)
        return sum(float(logprobs[t - 1, ids[t]]) for t in range(len(prefix_ids), len(ids))), len(ids) - len(prefix_ids)

    expected = [plain_logprob(c, s["action"]) for c, s in zip(convs, record["steps"], strict=True)]
    assert result["logp_a"] == pytest.approx([lp for lp, _ in expected], abs=1e-4)
    assert result["tokens_a"] == [n for _, n in expected]
    assert result["mean_nll_a"] == pytest.approx(
        sum(-lp / n for lp, n in expected) / len(expected), abs=1e-4
    )
    logp_b = [hand_logp("".join(m["content"] for m in c.messages), s["action"], 1.0)
              for c, s in zip(convs, record["steps"], strict=True)]
    cumulative = list(accumulate(a - b for (a, _), b in zip(expected, logp_b, strict=True)))
    assert result["llr_cumulative"] == pytest.approx(cumulative, abs=1e-3)
