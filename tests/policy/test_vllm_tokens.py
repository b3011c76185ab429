"""VLLMPolicy's token path on a stand-in engine (vLLM needs a GPU): samples carry the ids
and log-probs of ``CompletionOutput``, and the next turn's prompt appends them."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentenvs.policy.base import Conversation
from agentenvs.policy.chat import ScoredSequence

pytest.importorskip("torch")


@dataclass
class Logprob:
    logprob: float


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str = "stop"
    stop_reason: Any = None


@dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    prompt_logprobs: list[dict[int, Logprob] | None] | None = None


class SamplingLLM:
    """Samples with the tiny HF model, answering as vLLM does: token ids with EOS, one
    ``{id: Logprob}`` per sampled token."""

    def __init__(self, hf_policy: Any) -> None:
        self.hf = hf_policy
        self.prompts: list[list[int]] = []
        self.llm_engine = types.SimpleNamespace(
            model_config=types.SimpleNamespace(
                max_model_len=4096, logprobs_mode="processed_logprobs"
            )
        )

    def get_tokenizer(self) -> Any:
        return self.hf.tokenizer

    def generate(self, prompts: list[dict[str, Any]], params: Any, use_tqdm: bool = True) -> Any:
        outputs = []
        if not isinstance(params, list):  # scoring: the prompt's log-probs
            for prompt in prompts:
                ids = prompt["prompt_token_ids"]
                (values,) = self.hf.token_logprobs([ids], [1])
                given = [None] + [{t: Logprob(v)} for t, v in zip(ids[1:], values, strict=True)]
                outputs.append(RequestOutput(ids, [], given))
            return outputs
        for prompt, sp in zip(prompts, params, strict=True):
            assert sp.kwargs["logprobs"] == 0
            ids = prompt["prompt_token_ids"]
            self.prompts.append(ids)
            (gens,) = self.hf.generate([ids], sp.kwargs["n"], seed=sp.kwargs["seed"])
            outputs.append(
                RequestOutput(
                    ids,
                    [
                        CompletionOutput(
                            j,
                            g.text,
                            list(g.sampled_ids),
                            [
                                {t: Logprob(v)}
                                for t, v in zip(g.sampled_ids, g.sampled_logprobs, strict=True)
                            ],
                            g.finish_reason,
                        )
                        for j, g in enumerate(gens)
                    ],
                )
            )
        return outputs


@pytest.fixture()
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("vllm")

    class SamplingParams:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs

    module.SamplingParams = SamplingParams  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


def test_token_in_token_out_on_the_engine(fake_vllm: Any, hf_policy: Any) -> None:
    from agentenvs.policy.vllm import VLLMPolicy

    llm = SamplingLLM(hf_policy)
    policy = VLLMPolicy(llm=llm, max_new_tokens=8)
    assert policy.logprob_kind == "sampled"
    conversation = Conversation.start("Map:\nP_\n_G", {})
    (first,) = policy.sample_tokens([conversation], 1, seed=0)[0]
    assert first.prompt_from == "template" and first.logprobs is not None
    conversation.add_turn(first.text, "Map:\n_P\n_G", first)
    (second,) = policy.sample_tokens([conversation], 1, seed=1)[0]
    context = (*first.prompt_ids, *first.completion_ids)
    assert second.prompt_from == "tokens" and second.prompt_ids[: len(context)] == context
    assert llm.prompts[-1] == list(second.prompt_ids)
    # scored on the engine's prompt log-probs path, the recorded ids give the sampler's
    scored = policy.score_sequences([ScoredSequence([*context], len(first.prompt_ids))])
    assert scored[0].total == pytest.approx(sum(first.logprobs), abs=1e-3)


def test_samples_from_outputs_cut_at_a_stop_string(hf_policy: Any) -> None:
    from agentenvs.policy.tokens import TurnPrompt, TurnPrompts
    from agentenvs.policy.vllm import samples_from_outputs

    tokenizer = hf_policy.tokenizer
    ids = tokenizer("<answer>Left</answer> and more", add_special_tokens=False)["input_ids"]
    keep = tokenizer("<answer>Left", add_special_tokens=False)["input_ids"]
    assert ids[: len(keep)] == keep
    completion = CompletionOutput(
        0,
        "<answer>Left</answer> and more",
        ids,
        [{t: Logprob(-1.0)} for t in ids],
        "stop",
        "</answer>",
    )
    turns = TurnPrompts(hf_policy.formatter)
    (row,) = samples_from_outputs(
        [RequestOutput([1, 2], [completion])],
        [TurnPrompt((1, 2), "template")],
        turns,
        tokenizer,
        ["</answer>"],
        "raw",
    )
    (sample,) = row
    assert sample.text == "<answer>Left" and sample.logprob_kind == "raw"
    assert sample.completion_ids[: len(keep)] == tuple(keep)
    assert len(sample.completion_ids) < len(ids) and len(sample.logprobs) == len(
        sample.completion_ids
    )
