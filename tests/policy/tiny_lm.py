"""Builders of a tiny Llama-like model and a tokenizer trained here, offline.

Nothing is downloaded: the tokenizer is a byte-level BPE trained on FrozenLake text (so
prompts stay short and any text round-trips), wrapped in ``PreTrainedTokenizerFast`` with
a ChatML template; the model is a 2-layer ``LlamaForCausalLM`` with seeded random weights.
Used by the model-policy tests and benchmarks.
"""

from __future__ import annotations

from typing import Any

CHATML_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nTools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]


def frozenlake_corpus() -> list[str]:
    import gymnasium as gym

    import agentenvs  # noqa: F401 - registers the env ids

    env = gym.make("agentenvs/FrozenLake-v0")
    texts = []
    for seed in range(8):
        observation, info = env.reset(seed=seed)
        texts += [observation, info.get("system_prompt") or ""]
        observation, *_ = env.step("<answer>Left</answer>")
        texts.append(observation)
    env.close()
    moves = [f"<answer>{m}</answer>" for m in ("Left", "Down", "Right", "Up")]
    return texts + moves * 20 + ["hello world, this is a tiny test corpus. STOP here."] * 5


def build_tokenizer(chat_template: str | None = CHATML_TEMPLATE) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(frozenlake_corpus(), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    return tokenizer


def build_model(tokenizer: Any, seed: int = 0) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        # larger-than-default output weights so the random model's distribution is not
        # flat: samples then differ by seed and log-probs differ by action
        torch.nn.init.normal_(model.lm_head.weight, std=0.5)
    return model.eval()


#: ChatML that drops the reasoning of earlier assistant turns, as Qwen3's template does:
#: an assistant message before the last user message keeps only what follows ``</think>``
THINK_DROPPING_TEMPLATE = (
    "{% set ns = namespace(last_user=-1) %}"
    "{% for message in messages %}{% if message['role'] == 'user' %}"
    "{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
    "{% for message in messages %}"
    "{% set content = message['content'] %}"
    "{% if message['role'] == 'assistant' and loop.index0 < ns.last_user "
    "and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1].lstrip('\\n') %}{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{{ content }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_merging_tokenizer() -> Any:
    """A byte-level BPE with one merge, ``a`` + ``b`` -> ``ab``: sampled ids ``a``, ``b``
    decode to ``"ab"``, which encodes to the one id of ``ab``, so decoding and encoding
    again does not give back what was sampled."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[char] = len(vocab)
    vocab["ab"] = len(vocab)
    raw = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")]))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def bias_output(model: Any, bias: dict[int, float], others: float = 0.0) -> Any:
    """``model`` with an output bias: ``bias[token]`` for the tokens given, ``others`` for
    the rest, so a random model draws mostly the tokens a test needs."""
    import torch

    head = model.lm_head
    biased = torch.nn.Linear(head.in_features, head.out_features, bias=True)
    with torch.no_grad():
        biased.weight.copy_(head.weight)
        biased.bias.fill_(others)
        for token, value in bias.items():
            biased.bias[token] = value
    model.lm_head = biased
    return model.eval()


def think_policy(conversation: str = "tokens", template: str = "think", **kwargs: Any) -> Any:
    """An HF policy over the tiny model that draws only added tokens (``<think>``,
    ``</think>``, ``<a>``, ``<b>``) and the end of turn, so its ids always come back from
    their text, and ``</think>`` often, so that ``THINK_DROPPING_TEMPLATE`` rewrites its
    history (``template="chatml"``: the plain one, which never does); registered as a
    policy by tests."""
    from agentenvs.policy.hf import HFPolicy

    tokenizer = build_tokenizer(THINK_DROPPING_TEMPLATE if template == "think" else CHATML_TEMPLATE)
    words = ["<think>", "</think>", "<a>", "<b>"]
    tokenizer.add_tokens(words)
    bias = {tokenizer.convert_tokens_to_ids(w): 0.0 for w in words}
    bias[tokenizer.convert_tokens_to_ids("<|im_end|>")] = -1.0
    model = bias_output(build_model(tokenizer), bias, others=-30.0)
    options = {"max_new_tokens": 8, "batch_size": 4, **kwargs}
    return HFPolicy(model, tokenizer, conversation=conversation, **options)
