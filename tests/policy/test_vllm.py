"""VLLMPolicy without vLLM (it needs a GPU): the missing-extra error, the conversion of
vLLM's output objects, and the adapter's calls against a stand-in ``vllm`` module.

The stand-ins mirror the documented fields of ``vllm.outputs.RequestOutput``
(``prompt_token_ids``, ``prompt_logprobs``, ``outputs``), ``CompletionOutput`` (``index``,
``text``, ``token_ids``) and ``vllm.logprobs.Logprob`` (``logprob``, ``rank``,
``decoded_token``); the stand-in engine computes prompt log-probs with the tiny HF model,
so the adapter's indexing is checked against ``HFPolicy.score``.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentenvs.core.errors import MissingExtraError
from agentenvs.policy.base import Conversation
from agentenvs.policy.chat import ScoredSequence
from agentenvs.policy.vllm import VLLMPolicy, score_from_prompt_logprobs, texts_from_outputs


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = "stop"


@dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    prompt_logprobs: list[dict[int, Logprob] | None] | None = None


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_without_vllm_the_error_names_the_extra() -> None:
    with pytest.raises(MissingExtraError, match=r"agentenvs\[vllm\]"):
        VLLMPolicy("some/model")


def test_texts_follow_the_completion_index() -> None:
    outputs = [
        RequestOutput([1], [CompletionOutput(1, "b"), CompletionOutput(0, "a</answer>tail")]),
        RequestOutput([2], [CompletionOutput(0, "c")]),
    ]
    assert texts_from_outputs(outputs) == [["a</answer>tail", "b"], ["c"]]
    assert texts_from_outputs(outputs, ["</answer>"]) == [["a", "b"], ["c"]]


def test_score_from_prompt_logprobs() -> None:
    ids = [5, 6, 7, 8]
    prompt_logprobs = [
        None,
        {6: Logprob(-0.5, 2, "b"), 1: Logprob(-0.1, 1, "z")},
        {7: Logprob(-1.0, 1, "c")},
        {9: Logprob(-0.2, 1, "y"), 8: Logprob(-2.0, 4, None)},
    ]
    out = RequestOutput(ids, [CompletionOutput(0, "")], prompt_logprobs)
    score = score_from_prompt_logprobs(out, ScoredSequence(ids, action_start=2))
    assert score.total == pytest.approx(-3.0)
    assert score.token_logprobs == (-1.0, -2.0)
    assert score.tokens == ("c", "8")  # no decoded text and no tokenizer: the id
    with pytest.raises(ValueError, match="no log-prob for prompt token"):
        score_from_prompt_logprobs(out, ScoredSequence([5, 6, 7, 3], action_start=3))
    with pytest.raises(ValueError, match="prompt_logprobs"):
        score_from_prompt_logprobs(RequestOutput(ids, []), ScoredSequence(ids, 1))


class FakeLLM:
    """Stands in for ``vllm.LLM``: records calls; prompt log-probs from a real HF model."""

    def __init__(self, hf_policy: Any) -> None:
        self.hf = hf_policy
        self.calls: list[tuple[list[dict[str, Any]], Any]] = []

    def get_tokenizer(self) -> Any:
        return self.hf.tokenizer

    def generate(self, prompts: list[dict[str, Any]], params: Any, use_tqdm: bool = True) -> list[RequestOutput]:
        self.calls.append((prompts, params))
        outputs = []
        for p, prompt in enumerate(prompts):
            ids = prompt["prompt_token_ids"]
            sp = params[p] if isinstance(params, list) else params
            if sp.kwargs.get("prompt_logprobs") is not None:
                (values,) = self.hf.token_logprobs([ids], [1])
                logprobs = [None] + [{t: Logprob(v, 1, None)} for t, v in zip(ids[1:], values, strict=True)]
                outputs.append(RequestOutput(ids, [CompletionOutput(0, "x")], logprobs))
            else:
                n = sp.kwargs["n"]
                completions = [CompletionOutput(i, f"p{p}s{i}") for i in reversed(range(n))]
                outputs.append(RequestOutput(ids, completions))
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


def test_adapter_calls_on_a_stand_in_engine(fake_vllm: Any, hf_policy: Any) -> None:
    llm = FakeLLM(hf_policy)
    policy = VLLMPolicy(llm=llm, max_new_tokens=7, temperature=0.5, top_p=0.9, stop="</answer>")
    convs = [Conversation.start("Map:\nP_\n_G", {}), Conversation.start("Map:\n_P\n_G", {"system_prompt": "s"})]
    assert policy.sample(convs, 3, seed=4) == [["p0s0", "p0s1", "p0s2"], ["p1s0", "p1s1", "p1s2"]]
    prompts, params = llm.calls[-1]
    assert [p["prompt_token_ids"] for p in prompts] == [hf_policy.formatter.prompt_ids(c) for c in convs]
    kwargs = [sp.kwargs for sp in params]
    assert {k: kwargs[0][k] for k in ("n", "temperature", "top_p", "max_tokens", "stop")} == {
        "n": 3, "temperature": 0.5, "top_p": 0.9, "max_tokens": 7, "stop": ["</answer>"]
    }
    assert kwargs[0]["seed"] != kwargs[1]["seed"]  # one seed per conversation
    policy.sample(convs, 1, seed=4)
    assert [sp.kwargs["seed"] for sp in llm.calls[-1][1]] == [k["seed"] for k in kwargs]
    policy.sample(convs, 1)
    assert [sp.kwargs["seed"] for sp in llm.calls[-1][1]] == [None, None]

    actions = ["<answer>Left</answer>", "garbage"]
    scores, expected = policy.score(convs, actions), hf_policy.score(convs, actions)
    for got, want in zip(scores, expected, strict=True):
        assert got.token_logprobs == pytest.approx(want.token_logprobs, abs=1e-5)
        assert got.tokens == want.tokens  # decoded by the tokenizer where vLLM gave none
    assert llm.calls[-1][1].kwargs["prompt_logprobs"] == 1


def test_engines_ignore_the_models_generation_config_and_share_the_gpu(
    fake_vllm: Any, hf_policy: Any
) -> None:
    """The engine is built with vLLM's defaults, not the model's generation_config;
    penalties are off in every request; two engines in one process split the memory,
    and specs that differ only in sampling share one engine."""
    from agentenvs.policy.registry import make_policies
    from agentenvs.policy.vllm import NEUTRAL_SAMPLING

    built: list[dict[str, Any]] = []

    class LLM(FakeLLM):
        def __init__(self, **kwargs: Any) -> None:
            built.append(kwargs)
            super().__init__(hf_policy)

    fake_vllm.LLM = LLM  # type: ignore[attr-defined]
    policies = make_policies({"a": "vllm:model=/m/rl", "b": "vllm:model=/m/base"})
    assert [b["model"] for b in built] == ["/m/rl", "/m/base"]
    assert all(b["generation_config"] == "vllm" for b in built)
    assert [b["gpu_memory_utilization"] for b in built] == [0.45, 0.45]
    conv = Conversation.start("Map:\nP_\n_G", {})
    policies["a"].sample([conv], 2, seed=1)
    (params,) = policies["a"].llm.calls[-1][1]
    assert {k: params.kwargs[k] for k in NEUTRAL_SAMPLING} == NEUTRAL_SAMPLING
    built.clear()
    same = make_policies({"a": "vllm:model=/m/x,temperature=1.0", "b": "vllm:model=/m/x,temperature=0.5"})
    assert len(built) == 1 and built[0]["gpu_memory_utilization"] == 0.9
    assert same["a"].llm is same["b"].llm and same["b"].temperature == 0.5
    assert same["b"].name == "vllm:model=/m/x,temperature=0.5"


def engine_error(name: str) -> type[Exception]:
    """An exception class as vLLM defines it (its module inside the ``vllm`` package)."""
    return type(name, (RuntimeError,), {"__module__": "vllm.v1.engine.exceptions"})


class FailingLLM(FakeLLM):
    """A stand-in engine whose ``generate`` raises ``error``, with vLLM's ``max_model_len``."""

    def __init__(self, hf_policy: Any, error: Exception | None, max_model_len: int = 4096) -> None:
        super().__init__(hf_policy)
        self.error = error
        config = types.SimpleNamespace(max_model_len=max_model_len)
        self.llm_engine = types.SimpleNamespace(model_config=config)

    def generate(self, prompts: list[dict[str, Any]], params: Any, use_tqdm: bool = True) -> list[RequestOutput]:
        if self.error is not None:
            raise self.error
        return super().generate(prompts, params, use_tqdm)


@pytest.mark.parametrize(
    "error",
    [engine_error("EngineDeadError")("engine core process died"),
     engine_error("EngineGenerateError")("request failed"),
     MemoryError()],
)
def test_a_dead_engine_is_a_model_fault(fake_vllm: Any, hf_policy: Any, error: Exception) -> None:
    from agentenvs.core.errors import Fault

    policy = VLLMPolicy(llm=FailingLLM(hf_policy, error))
    conv = Conversation.start("Map:\nP_\n_G", {})
    with pytest.raises(Fault) as info:
        policy.sample([conv], 2)
    assert info.value.kind == "model" and type(error).__name__ in info.value.evidence
    with pytest.raises(Fault):
        policy.score([conv], ["Up"])


def test_other_engine_errors_and_long_prompts_are_not_faults(fake_vllm: Any, hf_policy: Any) -> None:
    from agentenvs.core.errors import Fault
    from agentenvs.policy.chat import PromptTooLongError

    conv = Conversation.start("Map:\nP_\n_G", {})
    policy = VLLMPolicy(llm=FailingLLM(hf_policy, ValueError("a bad sampling parameter")))
    with pytest.raises(ValueError, match="bad sampling") as info:
        policy.sample([conv])
    assert not isinstance(info.value, Fault)
    length = len(hf_policy.formatter.prompt_ids(conv))
    llm = FailingLLM(hf_policy, None, max_model_len=length)
    with pytest.raises(PromptTooLongError, match="maximum model length"):
        VLLMPolicy(llm=llm).sample([conv])
    assert not llm.calls  # refused before the engine saw it
    assert VLLMPolicy(llm=FailingLLM(hf_policy, None, max_model_len=length + 1)).sample([conv])
