"""Token-exact turns on CPU: sampled ids and log-probs, token-in/token-out prompts, drift
of a chat template that rewrites history, and the record format of the ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.eval.records import (
    pack_floats,
    pack_ids,
    read_manifest,
    read_step_tokens,
    read_trajectories,
    step_tokens,
    unpack_floats,
    unpack_ids,
)
from agentenvs.policy.base import Conversation, Sample
from agentenvs.policy.chat import ScoredSequence
from agentenvs.policy.tokens import first_difference

torch = pytest.importorskip("torch")


def frozenlake_start(seed: int = 0) -> tuple[Any, Conversation]:
    env = gym.make("agentenvs/FrozenLake-v0")
    observation, info = env.reset(seed=seed)
    return env, Conversation.start(observation, info)


def play(policy: Any, turns: int, seed: int = 0) -> list[Sample]:
    """Samples of one FrozenLake episode driven token-in/token-out by ``policy``."""
    env, conversation = frozenlake_start(seed)
    samples = []
    try:
        for turn in range(turns):
            (sample,) = policy.sample_tokens([conversation], 1, seed=seed * 100 + turn)[0]
            samples.append(sample)
            observation, _, terminated, truncated, _ = env.step(sample.text)
            conversation.add_turn(sample.text, observation, sample)
            if terminated or truncated:
                break
    finally:
        env.close()
    return samples


def test_sampled_log_probs_equal_the_scored_ones(hf_policy: Any) -> None:
    """At temperature 1 (the sampler's distribution is the model's), scoring the recorded
    prompt + completion ids gives the sampler's log-probs, token by token."""
    samples = play(hf_policy, 4)
    assert len(samples) >= 2 and all(s.logprobs for s in samples)
    sequences = [
        ScoredSequence(ids=[*s.prompt_ids, *s.completion_ids], action_start=len(s.prompt_ids))
        for s in samples
    ]
    for sample, score in zip(samples, hf_policy.score_sequences(sequences), strict=True):
        assert len(score.token_logprobs) == len(sample.completion_ids) == len(sample.logprobs)
        assert score.total == pytest.approx(sum(sample.logprobs), abs=1e-3)
        assert score.token_logprobs == pytest.approx(sample.logprobs, abs=1e-4)


def test_log_probs_are_those_of_the_distribution_sampled_from(hf_policy: Any) -> None:
    """At temperature 0.5 the recorded log-probs are those of softmax(logits / 0.5)."""
    from agentenvs.policy.hf import HFPolicy

    hot = HFPolicy(hf_policy.model, hf_policy.tokenizer, max_new_tokens=6, temperature=0.5)
    _, conversation = frozenlake_start()
    (sample,) = hot.sample_tokens([conversation], 1, seed=3)[0]
    ids = torch.tensor([[*sample.prompt_ids, *sample.completion_ids]])
    with torch.inference_mode():
        logits = hot.model(input_ids=ids).logits[0].float()
    start = len(sample.prompt_ids)
    expected = [
        float((logits[start + i - 1] / 0.5).log_softmax(-1)[token])
        for i, token in enumerate(sample.completion_ids)
    ]
    assert list(sample.logprobs) == pytest.approx(expected, abs=1e-4)


def test_the_next_prompt_appends_the_sampled_ids_and_the_observation(hf_policy: Any) -> None:
    samples = play(hf_policy, 3)
    assert samples[0].prompt_from == "template"
    for before, after in zip(samples, samples[1:], strict=False):
        assert after.prompt_from == "tokens" and after.drift_checked
        context = (*before.prompt_ids, *before.completion_ids)
        assert after.prompt_ids[: len(context)] == context
        # what follows is the end of the turn (if not drawn) and the observation's turn
        tail = hf_policy.tokenizer.decode(list(after.prompt_ids[len(context) :]))
        assert tail.rstrip().endswith("<|im_start|>assistant")


@pytest.fixture(scope="module")
def merging() -> tuple[Any, Any]:
    """A policy whose tokenizer merges ``a`` + ``b`` and whose model draws only ``a``,
    ``b`` and the end of turn."""
    from tiny_lm import bias_output, build_merging_tokenizer, build_model

    from agentenvs.policy.hf import HFPolicy

    tokenizer = build_merging_tokenizer()
    favoured = {
        tokenizer.convert_tokens_to_ids(t): v
        for t, v in (("a", 0.0), ("b", 0.0), ("<|im_end|>", -4.0))
    }
    model = bias_output(build_model(tokenizer), favoured, others=-30.0)
    return HFPolicy(model, tokenizer, max_new_tokens=16, batch_size=8), tokenizer


def test_a_tokenizer_that_merges_scores_wrong_from_text_and_right_from_tokens(
    merging: tuple[Any, Any],
) -> None:
    policy, tokenizer = merging
    conversation = Conversation(messages=[{"role": "user", "content": "go"}])
    samples = policy.sample_tokens([conversation], 8, seed=1)[0]
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    split = [
        s
        for s in samples
        if s.completion_ids[-1] == end
        and tokenizer(s.text, add_special_tokens=False)["input_ids"] != list(s.completion_ids[:-1])
    ]
    assert split, "no sample drew a and b apart"
    for sample in split:
        as_sampled = sum(sample.logprobs)
        tokens = policy.score_sequences(
            [ScoredSequence([*sample.prompt_ids, *sample.completion_ids], len(sample.prompt_ids))]
        )[0]
        text = policy.score([conversation], [sample.text])[0]
        assert tokens.total == pytest.approx(as_sampled, abs=1e-3)
        assert abs(text.total - as_sampled) > 0.1  # the text path scores other ids


def test_token_mode_keeps_the_sampled_ids_where_the_template_mode_loses_them(
    merging: tuple[Any, Any],
) -> None:
    from agentenvs.policy.hf import HFPolicy

    policy, tokenizer = merging
    template = HFPolicy(policy.model, tokenizer, max_new_tokens=16, conversation="template")
    conversation = Conversation(messages=[{"role": "user", "content": "go"}])
    sample = next(
        s
        for s in policy.sample_tokens([conversation], 8, seed=1)[0]
        if tokenizer(s.text, add_special_tokens=False)["input_ids"] != list(s.completion_ids[:-1])
    )
    conversation.add_turn(sample.text, "again", sample)
    context = (*sample.prompt_ids, *sample.completion_ids)
    (by_tokens,) = policy.sample_tokens([conversation], 1, seed=2)[0]
    (by_template,) = template.sample_tokens([conversation], 1, seed=2)[0]
    assert by_tokens.prompt_ids[: len(context)] == context
    assert by_template.prompt_ids[: len(context)] != context
    assert by_template.prompt_from == "template" and not by_template.drift_checked
    # the drift check sees where re-rendering departs: inside the sampled completion
    assert by_tokens.drift is not None
    assert len(sample.prompt_ids) <= by_tokens.drift < len(context)
    assert by_tokens.drift == first_difference(by_tokens.prompt_ids, by_template.prompt_ids)


def test_a_sample_of_another_tokenizer_or_an_injected_action_restarts_from_the_template(
    hf_policy: Any,
) -> None:
    _, conversation = frozenlake_start()
    (sample,) = hf_policy.sample_tokens([conversation], 1, seed=0)[0]
    foreign = Sample(**{**sample.__dict__, "vocab": "another"})
    for given, action in ((foreign, sample.text), (sample, "<answer>Left</answer>")):
        conv = Conversation(messages=[dict(m) for m in conversation.messages])
        conv.add_turn(action, "next", given)
        (after,) = hf_policy.sample_tokens([conv], 1, seed=1)[0]
        assert after.prompt_from == "template"


def register_think_policy() -> None:
    from agentenvs.policy.registry import register_policy

    register_policy("tiny-think", "tiny_lm:think_policy")


def test_a_template_that_drops_reasoning_is_reported_as_drift(tmp_path: Path) -> None:
    from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t

    register_think_policy()
    rates = {}
    for template in ("think", "chatml"):
        config = EvalConfig(
            "agentenvs/FrozenLake-v0",
            f"tiny-think:template={template}",
            ["4x4"],
            n=4,
            budgets=[4],
        )
        summary = run_pass_at_k_t(config, tmp_path / template, workers=0, progress=False)
        manifest = read_manifest(tmp_path / template)
        assert manifest["tokens"] == summary.tokens
        rates[template] = summary.tokens["rate"]
        records = read_trajectories(tmp_path / template / "trajectories.jsonl")
        steps = [s for r in records for s in r["steps"]]
        assert summary.tokens["checked"] == sum(1 for s in steps if "drift" in s) > 0
        assert "tokens" not in steps[0]  # ids are kept only when asked
    # the policy's ids always come back from their text: the plain template never drifts,
    # the one that drops reasoning blocks does wherever an earlier turn wrote one
    assert rates["chatml"] == 0.0
    assert rates["think"] > 0.3


def test_the_runner_records_the_ids_compactly_and_they_read_back(
    hf_policy: Any, tmp_path: Path
) -> None:
    from agentenvs.eval.runner import WorkItem, run_episode

    env = gym.make("agentenvs/FrozenLake-v0")
    try:
        record = run_episode(env, hf_policy, WorkItem("4x4", 0, 3, 7), ("success",), True)
    finally:
        env.close()
    assert record["token_space"]["vocab"] == hf_policy.formatter.vocab_fingerprint
    assert record["token_space"]["logprobs"] == "sampled"
    steps = read_step_tokens(json.loads(json.dumps(record)))
    assert len(steps) == record["turns"] >= 2
    for step, raw in zip(steps, record["steps"], strict=True):
        assert step is not None and len(step.logprobs or ()) == len(step.completion_ids)
        assert hf_policy.tokenizer.decode(step.completion_ids, skip_special_tokens=True).startswith(
            raw["action"]
        )
    for before, after, raw in zip(steps, steps[1:], record["steps"][1:], strict=False):
        assert raw["tokens"]["shared"] == len(before.context)  # only the new ids are stored
        assert after.prompt_ids[: len(before.context)] == before.context


def test_packing_round_trips() -> None:
    ids = [0, 1, 2**32 - 1, 151_643]
    assert unpack_ids(pack_ids(ids)) == ids
    values = [-0.5, -12.25, 0.0]
    assert unpack_floats(pack_floats(values)) == values
    first = Sample("x", (1, 2, 3), (4, 5), (-0.5, -1.0))
    second = Sample("y", (1, 2, 3, 4, 5, 9), (7,), None)
    record = {
        "steps": [{"tokens": step_tokens(first)}, {"tokens": step_tokens(second, (1, 2, 3, 4, 5))}]
    }
    assert record["steps"][1]["tokens"]["shared"] == 5
    decoded = read_step_tokens(record)
    assert decoded[1] is not None and decoded[1].prompt_ids == [1, 2, 3, 4, 5, 9]
    assert decoded[1].logprobs is None and decoded[0].logprobs == [-0.5, -1.0]
