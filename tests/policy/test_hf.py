"""HFPolicy on a tiny random Llama: exact scores, batching, seeded sampling, stops, episodes."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import agentenvs  # noqa: E402,F401 - registers the env ids and policies
from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t  # noqa: E402
from agentenvs.policy.base import Conversation, ScoringPolicy  # noqa: E402
from agentenvs.policy.hf import HFPolicy, derive_seed  # noqa: E402
from agentenvs.policy.registry import make_policy  # noqa: E402

ACTIONS = ["<answer>Left</answer>", "<answer>Down</answer>", "Up", "x", "a much longer answer, then <answer>Right</answer>"]


def frozenlake_conversations(count: int) -> list[Conversation]:
    """Conversations of different lengths (so batches need padding)."""
    env = gym.make("agentenvs/FrozenLake-v0")
    conversations = []
    for i in range(count):
        observation, info = env.reset(seed=i)
        conv = Conversation.start(observation, info)
        for _ in range(i % 3):  # invalid moves: the episode goes on, the history grows
            observation, *_ = env.step("<answer>Stay</answer>")
            conv.add_turn("<answer>Stay</answer>", observation)
        conversations.append(conv)
    env.close()
    return conversations


def independent_logprob(model: Any, tokenizer: Any, conv: Conversation, action: str) -> float:
    """log p(action + <|im_end|> | history) by one plain forward pass, no policy code."""
    prefix = tokenizer.apply_chat_template(conv.messages, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(
        [*conv.messages, {"role": "assistant", "content": action}], tokenize=False
    )
    assert full.endswith("<|im_end|>\n")
    prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"]
    ids = tokenizer(full[: -len("\n")], add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    logprobs = logits.log_softmax(-1)
    return sum(float(logprobs[t - 1, ids[t]]) for t in range(len(prefix_ids), len(ids)))


def test_is_a_scoring_policy(hf_policy: HFPolicy) -> None:
    assert isinstance(hf_policy, ScoringPolicy)
    assert hf_policy.device == "cpu"
    end_ids = {hf_policy.tokenizer.convert_tokens_to_ids(t) for t in ("</s>", "<|im_end|>")}
    assert set(hf_policy.eos_ids) == end_ids


def test_score_equals_an_independent_forward_pass(hf_policy: HFPolicy, tiny_model: Any, tiny_tokenizer: Any) -> None:
    convs = frozenlake_conversations(3)
    pairs = [(c, a) for c in convs for a in ACTIONS[:3]]
    scores = hf_policy.score([c for c, _ in pairs], [a for _, a in pairs])
    for (conv, action), score in zip(pairs, scores, strict=True):
        assert score.total == pytest.approx(independent_logprob(tiny_model, tiny_tokenizer, conv, action), abs=1e-5)
        assert score.total == pytest.approx(sum(score.token_logprobs), abs=1e-9)
        assert "".join(score.tokens) == action + "<|im_end|>"
        assert score.nll_per_token > 0
    # different actions from one state get different scores
    assert len({round(s.total, 6) for s in scores[:3]}) == 3
    assert hf_policy.share_prefix  # three actions per history went through the shared pass


def test_batch_scoring_equals_one_by_one(hf_policy: HFPolicy, tiny_model: Any, tiny_tokenizer: Any) -> None:
    convs = frozenlake_conversations(5)
    actions = ACTIONS
    batched = hf_policy.score(convs, actions)  # batch_size 4: two padded batches
    single = HFPolicy(tiny_model, tiny_tokenizer, batch_size=1)
    for conv, action, score in zip(convs, actions, batched, strict=True):
        (alone,) = single.score([conv], [action])
        assert score.tokens == alone.tokens
        assert score.token_logprobs == pytest.approx(alone.token_logprobs, abs=1e-5)
        assert score.total == pytest.approx(alone.total, abs=1e-5)


def test_actions_after_one_history_share_its_pass(hf_policy: HFPolicy, tiny_model: Any, tiny_tokenizer: Any) -> None:
    conv = frozenlake_conversations(3)[2]  # a history of several turns
    actions = ACTIONS + ["<answer>Up</answer>", "y"]  # 7 actions: batches of 4 and 3
    plain = HFPolicy(tiny_model, tiny_tokenizer, batch_size=4, share_prefix=False)
    shared = HFPolicy(tiny_model, tiny_tokenizer, batch_size=4)
    mixed_convs = [conv] * len(actions) + frozenlake_conversations(1)  # plus one unshared
    mixed_actions = [*actions, "z"]
    got, want = shared.score(mixed_convs, mixed_actions), plain.score(mixed_convs, mixed_actions)
    assert shared.share_prefix  # the shared path ran, no fallback
    for a, b in zip(got, want, strict=True):
        assert a.tokens == b.tokens
        assert a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-5)
    assert got[0].total == pytest.approx(independent_logprob(tiny_model, tiny_tokenizer, conv, actions[0]), abs=1e-5)


class WithoutLogitsToKeep(torch.nn.Module):
    """A model whose forward has no ``logits_to_keep`` (as older remote code)."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner
        self.generation_config = inner.generation_config

    @property
    def device(self) -> Any:
        return self.inner.device

    def forward(self, input_ids: Any, attention_mask: Any = None, position_ids: Any = None, use_cache: bool = False) -> Any:
        return self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=use_cache)


def test_a_model_without_logits_to_keep_scores_the_same(hf_policy: HFPolicy, tiny_model: Any, tiny_tokenizer: Any) -> None:
    policy = HFPolicy(WithoutLogitsToKeep(tiny_model), tiny_tokenizer, share_prefix=False)
    convs = frozenlake_conversations(2)
    got, want = policy.score(convs, ACTIONS[:2]), hf_policy.score(convs, ACTIONS[:2])
    assert not policy._keeps_logits
    assert [s.total for s in got] == pytest.approx([s.total for s in want], abs=1e-5)


def test_score_checks_its_arguments(hf_policy: HFPolicy) -> None:
    with pytest.raises(ValueError, match="2 conversations but 1 actions"):
        hf_policy.score(frozenlake_conversations(2), ["x"])
    assert hf_policy.score([], []) == []


def test_sampling_is_seeded_and_returns_n_per_conversation(hf_policy: HFPolicy) -> None:
    convs = frozenlake_conversations(3)
    first = hf_policy.sample(convs, 4, seed=7)
    assert [len(samples) for samples in first] == [4, 4, 4]
    assert all(isinstance(text, str) for samples in first for text in samples)
    assert hf_policy.sample(convs, 4, seed=7) == first
    other = hf_policy.sample(convs, 4, seed=8)
    assert other != first
    assert len({text for samples in first for text in samples}) > 6  # samples differ
    # a conversation's samples do not depend on the batch it came in
    assert hf_policy.sample(convs[:1], 4, seed=7) == first[:1]
    # global torch RNG untouched
    state = torch.random.get_rng_state()
    hf_policy.sample(convs[:1], 1, seed=1)
    assert torch.equal(state, torch.random.get_rng_state())


def test_greedy_sampling_is_deterministic_without_a_seed(hf_policy: HFPolicy) -> None:
    conv = frozenlake_conversations(1)
    a = hf_policy.generate([hf_policy.formatter.prompt_ids(conv[0])], 3, temperature=0.0)[0]
    assert len({g.text for g in a}) == 1
    greedy = hf_policy.generate([hf_policy.formatter.prompt_ids(conv[0])], 1, temperature=0.0)[0][0]
    assert greedy == a[0]


def test_top_p_narrows_the_choice(hf_policy: HFPolicy) -> None:
    ids = hf_policy.formatter.prompt_ids(frozenlake_conversations(1)[0])
    narrow = hf_policy.generate([ids], 8, seed=0, top_p=1e-6, max_new_tokens=3)[0]
    greedy = hf_policy.generate([ids], 1, temperature=0.0, max_new_tokens=3)[0][0]
    assert {g.token_ids for g in narrow} == {greedy.token_ids}


def test_token_budget_and_finish_reason(hf_policy: HFPolicy) -> None:
    ids = hf_policy.formatter.prompt_ids(frozenlake_conversations(1)[0])
    for g in hf_policy.generate([ids], 3, seed=0, max_new_tokens=5)[0]:
        assert len(g.token_ids) <= 5
        assert g.finish_reason in ("length", "stop")
        assert hf_policy.tokenizer.decode(g.token_ids, skip_special_tokens=True) == g.text


def test_stop_strings_are_honoured(hf_policy: HFPolicy) -> None:
    conv = frozenlake_conversations(1)
    ids = hf_policy.formatter.prompt_ids(conv[0])
    free = hf_policy.generate([ids], 6, seed=3, max_new_tokens=12)[0]
    checked = 0
    for j, g in enumerate(free):
        text = g.text
        # a stop string from the middle of this sample's own text
        cut = next((i for i in range(2, len(text) - 1) if text[i : i + 2].isascii() and text[i : i + 2].isalpha()), None)
        if cut is None:
            continue
        stop = text[cut : cut + 2]
        stopped = hf_policy.generate([ids], 6, seed=3, max_new_tokens=12, stop=[stop])[0][j]
        # same draws up to the stop, which is cut with all that follows
        assert stopped.text == text[: text.find(stop)]
        assert stopped.finish_reason == "stop"
        assert stop not in stopped.text
        checked += 1
    assert checked >= 3
    policy = HFPolicy(hf_policy.model, hf_policy.tokenizer, stop="a", max_new_tokens=12)
    assert all("a" not in s for s in policy.sample(conv, 6, seed=3)[0])


def test_end_of_turn_token_ends_generation(tiny_model: Any, tiny_tokenizer: Any) -> None:
    model = copy.deepcopy(tiny_model)
    end = tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")
    # a head that always prefers the end-of-turn token
    head = torch.nn.Linear(model.config.hidden_size, model.config.vocab_size, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[end] = 10.0
    model.lm_head = head
    policy = HFPolicy(model, tiny_tokenizer, temperature=0.0, max_new_tokens=8)
    (g,) = policy.generate([policy.formatter.prompt_ids(frozenlake_conversations(1)[0])])[0]
    assert (g.text, g.token_ids, g.finish_reason) == ("", (), "stop")
    assert policy.sample(frozenlake_conversations(2), 2, seed=0) == [["", ""], ["", ""]]


def test_arguments_are_checked(tiny_model: Any, tiny_tokenizer: Any) -> None:
    with pytest.raises(ValueError, match="temperature"):
        HFPolicy(tiny_model, tiny_tokenizer, temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        HFPolicy(tiny_model, tiny_tokenizer, top_p=0)
    with pytest.raises(ValueError, match="batch_size"):
        HFPolicy(tiny_model, tiny_tokenizer, batch_size=0)
    with pytest.raises(ValueError, match="dtype"):
        HFPolicy(tiny_model, tiny_tokenizer, dtype="float8")
    with pytest.raises(ValueError, match="tokenizer"):
        HFPolicy(tiny_model)
    with pytest.raises(ValueError, match="n must be"):
        HFPolicy(tiny_model, tiny_tokenizer).sample(frozenlake_conversations(1), 0)


def test_derive_seed_is_stable() -> None:
    assert derive_seed(1, 2, 3) == derive_seed(1, 2, 3)
    assert derive_seed(1, 2, 3) != derive_seed(1, 3, 2)
    assert 0 <= derive_seed(2**70, "x") < 2**63


def test_spec_loads_a_saved_model(tiny_model_dir: Path, hf_policy: HFPolicy) -> None:
    spec = f"hf:model={tiny_model_dir},dtype=float32,device=cpu,max_new_tokens=12,batch_size=4"
    policy = make_policy(spec)
    assert isinstance(policy, HFPolicy) and policy.name == spec
    convs = frozenlake_conversations(2)
    assert policy.sample(convs, 2, seed=5) == hf_policy.sample(convs, 2, seed=5)
    ours, theirs = policy.score(convs, ACTIONS[:2]), hf_policy.score(convs, ACTIONS[:2])
    assert [s.total for s in ours] == pytest.approx([s.total for s in theirs], abs=1e-6)


def test_bfloat16_scores_close_to_float32(tiny_model_dir: Path, hf_policy: HFPolicy) -> None:
    policy = HFPolicy(tiny_model_dir, dtype="bfloat16")
    assert policy.model.dtype == torch.bfloat16
    convs = frozenlake_conversations(2)
    low, high = policy.score(convs, ACTIONS[:2]), hf_policy.score(convs, ACTIONS[:2])
    for a, b in zip(low, high, strict=True):
        assert a.total == pytest.approx(b.total, rel=0.05, abs=0.5)


def test_frozenlake_episode_with_garbage_actions(hf_policy: HFPolicy) -> None:
    env = gym.make("agentenvs/FrozenLake-v0")
    observation, info = env.reset(seed=0, options={"max_turns": 4})
    conv = Conversation.start(observation, info)
    done, turns = False, 0
    while not done:
        turns += 1
        (action,) = hf_policy.sample([conv], 1, seed=turns)[0]
        observation, reward, terminated, truncated, info = env.step(action)
        assert isinstance(observation, str) and observation
        conv.add_turn(action, observation)
        done = terminated or truncated
    env.close()
    assert turns <= 4 and info["turn"] == turns
    # the random model's text is almost never a move; the env says so and goes on
    assert not info["action_valid"] or reward in (0.0, 1.0)


def test_pass_at_k_t_runner_drives_a_model_spec(tiny_model_dir: Path, tmp_path: Path) -> None:
    config = EvalConfig(
        env_id="agentenvs/FrozenLake-v0",
        policy=f"hf:model={tiny_model_dir},device=cpu,max_new_tokens=8",
        task_ids=["4x4"],
        n=2,
        budgets=[1, 3],
        mode="derive",  # a model policy declares that it does not read the budget
        seed=0,
    )
    runs = []
    for name in ("a", "b"):
        summary = run_pass_at_k_t(config, tmp_path / name, workers=0, progress=False)
        assert (summary.total, summary.ran) == (2, 2)
        runs.append([json.loads(line) for line in summary.trajectories_path.read_text().splitlines()])
    for record in runs[0]:
        assert record["policy"] == config.policy
        assert 1 <= record["turns"] <= 3
        assert all(isinstance(step["action"], str) for step in record["steps"])
    # the same seeded run gives the same actions
    actions = [[[s["action"] for s in r["steps"]] for r in run] for run in runs]
    assert actions[0] == actions[1]


def test_modules_import_without_torch() -> None:
    code = (
        "import sys, agentenvs, agentenvs.policy.hf, agentenvs.policy.vllm, "
        "agentenvs.policy.openai_compat, agentenvs.policy.serve, agentenvs.policy.chat; "
        "print([m for m in ('torch', 'transformers', 'vllm') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- sampling follows scoring
def _first_token_draws(policy: Any, prompt: list[int], n: int, **options: Any) -> Counter:
    (gens,) = policy.generate([prompt], n, seed=3, max_new_tokens=1, **options)
    return Counter(g.token_ids[0] if g.token_ids else "end" for g in gens)


def test_the_models_generation_config_does_not_change_sampling(
    tiny_model: Any, tiny_tokenizer: Any, hf_policy: Any
) -> None:
    """Repetition penalties and n-gram bans in a model's generation_config must not reach
    sampling: samples then follow the distribution that scoring computes."""
    import copy

    from agentenvs.policy.hf import HFPolicy

    model = copy.deepcopy(tiny_model)
    model.generation_config.repetition_penalty = 1.8
    model.generation_config.no_repeat_ngram_size = 1
    model.generation_config.top_k = 3
    model.generation_config.bad_words_ids = [[5], [6]]
    configured = HFPolicy(model, tiny_tokenizer, max_new_tokens=12, batch_size=4)
    conv = Conversation(messages=[{"role": "user", "content": "Go <answer>Left</answer>"}])
    for seed in range(4):
        assert configured.sample([conv], 4, seed=seed) == hf_policy.sample([conv], 4, seed=seed)


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_sampled_tokens_follow_the_scored_distribution(
    tiny_model: Any, tiny_tokenizer: Any, temperature: float, top_p: float
) -> None:
    """Thousands of first tokens, drawn with a seed, against the probabilities that
    ``token_logprobs`` (the scoring path) gives, tempered and cut to the nucleus."""
    import math

    from agentenvs.policy.hf import HFPolicy

    policy = HFPolicy(tiny_model, tiny_tokenizer, batch_size=500)
    conv = Conversation(messages=[{"role": "user", "content": "Which move? <answer>"}])
    prompt = policy.formatter.prompt_ids(conv)
    n = 4000
    draws = _first_token_draws(policy, prompt, n, temperature=temperature, top_p=top_p)
    vocab = len(tiny_tokenizer)
    logprobs = policy.token_logprobs([[*prompt, t] for t in range(vocab)], [len(prompt)] * vocab)
    scored = np.array([lp[0] for lp in logprobs])
    p = np.exp(scored / temperature)
    p /= p.sum()
    order = np.argsort(-p)
    keep = np.cumsum(p[order]) - p[order] < top_p
    nucleus = np.zeros_like(p)
    nucleus[order[keep]] = p[order[keep]]
    nucleus /= nucleus.sum()
    expected: Counter = Counter()
    for token, prob in enumerate(nucleus):
        expected["end" if token in policy.eos_ids else token] += prob
    for token in draws:
        assert expected[token] > 0, f"token {token} is outside the distribution"
    for token, prob in expected.most_common(6):
        sigma = math.sqrt(prob * (1 - prob) / n)
        assert abs(draws[token] / n - prob) < 5 * sigma + 1e-3, (token, draws[token] / n, prob)


def _threads(state: Any, payload: Any) -> int:
    import torch

    return torch.get_num_threads()


def test_pool_workers_share_the_cpus_between_them(tiny_model_dir: Path) -> None:
    """Each of w pool workers runs torch on cpus // w threads (at least one), not on every
    core: workers that each use all cores only wait on each other."""
    import functools

    from agentenvs.eval.executors import Job, LocalPoolExecutor, worker_threads
    from agentenvs.policy.hf import HFPolicy

    setup = functools.partial(HFPolicy, str(tiny_model_dir), device="cpu")
    with LocalPoolExecutor(2) as executor:
        seen = dict(executor.run(setup, [Job(i, _threads, None) for i in range(4)], chunk_size=1))
    assert set(seen.values()) == {worker_threads(2)}
    assert worker_threads(2) == max(1, len(os.sched_getaffinity(0)) // 2)
    assert worker_threads(10_000) == 1


def test_two_specs_of_one_model_share_it(tiny_model_dir: Path) -> None:
    from agentenvs.cli import _default_workers, _workers_for
    from agentenvs.policy.registry import make_policies

    base = f"hf:model={tiny_model_dir},device=cpu,max_new_tokens=6"
    policies = make_policies({"a": base, "b": base + ",temperature=0.5", "s": "frozenlake/random"})
    assert policies["a"].model is policies["b"].model  # one copy in memory
    assert policies["b"].temperature == 0.5 and policies["b"].name.endswith("temperature=0.5")
    alone = make_policy(base + ",temperature=0.5")
    conv = Conversation(messages=[{"role": "user", "content": "Go"}])
    assert policies["b"].sample([conv], 3, seed=2) == alone.sample([conv], 3, seed=2)
    other = make_policies({"a": base, "b": base.replace("device=cpu", "device=cpu,dtype=float32")})
    assert other["a"].model is not other["b"].model
    # the CLI runs one worker per model policy unless told otherwise
    assert _workers_for(None, base) == 1 and _workers_for(3, base) == 3
    assert _workers_for(None, "frozenlake/random") == _default_workers()
