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
