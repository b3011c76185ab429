"""A tiny chat model built here, offline: what the trainer snippets of the docs run with.

Nothing is downloaded. ``tiny_qwen3(env_id)`` gives ``(model, tokenizer)``: a 2-layer
Qwen3 (``Qwen3ForCausalLM``, seeded random weights, hidden size 64) and a byte-level BPE
tokenizer trained on the env's own text, with TRL's Qwen3 chat template, so TRL
recognises it and parses its tool calls. It learns nothing useful in a few steps: it is
there so that a pipeline (TRL's ``GRPOTrainer``, ``agentenvs serve-model``, verifiers)
runs end to end on a CPU in seconds. Put your model in its place for real training:
``AutoModelForCausalLM.from_pretrained(NAME)`` and ``AutoTokenizer.from_pretrained(NAME)``.

``python -m agentenvs.integrations.tiny_model DIR`` saves one to a folder (the model's
``config.json`` and weights, the tokenizer), which ``agentenvs serve-model --model
hf:model=DIR`` serves.

Needs ``transformers``, ``tokenizers`` and ``trl`` (``pip install 'agentenvs[hf,integrations]'``).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: the special tokens of Qwen3's chat template (tool calls, tool answers, thinking)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                  "<tool_response>", "</tool_response>", "<think>", "</think>"]


def env_corpus(env_id: str, seeds: Iterable[int] = range(8), **env_kwargs: Any) -> list[str]:
    """Text to train the tokenizer on: the env's system prompt and first observations
    (``seeds`` resets of its first tasks), in text and tool mode."""
    import gymnasium as gym

    import agentenvs  # noqa: F401 - registers the env ids
    from agentenvs.integrations.common import action_tools, tool_mode_system_prompt

    env = gym.make(env_id, **env_kwargs)
    texts: list[str] = []
    try:
        task_ids = list(env.unwrapped.task_ids)[:8]  # type: ignore[attr-defined]
        for i, seed in enumerate(seeds):
            observation, info = env.reset(seed=seed, options={"task_id": task_ids[i % len(task_ids)]})
            system = info.get("system_prompt") or ""
            texts += [observation, system, tool_mode_system_prompt(env_id, env, system)]
        texts += [f'{{"name": "{tool.name}", "arguments": {{}}}}' for tool in action_tools(env_id)]
    finally:
        env.close()
    return texts


def build_tokenizer(corpus: list[str], vocab_size: int = 800) -> Any:
    """A byte-level BPE tokenizer trained on ``corpus`` (any text still round-trips), with
    Qwen3's special tokens and TRL's Qwen3 chat template; pads on the left."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_chat_template

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    raw.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>",
                                        additional_special_tokens=SPECIAL_TOKENS[1:])
    tokenizer.chat_template = qwen3_chat_template  # TRL recognises it: tool calls get parsed
    tokenizer.padding_side = "left"
    return tokenizer


def build_model(tokenizer: Any, seed: int = 0) -> Any:
    """A 2-layer ``Qwen3ForCausalLM`` for ``tokenizer``'s vocabulary, weights drawn from
    ``seed`` (the global torch generator is left as it was)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=32, max_position_embeddings=4096,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Qwen3ForCausalLM(config)


def tiny_qwen3(env_id: str = "agentenvs/FrozenLake-v0", *, seed: int = 0,
               extra_text: Iterable[str] = (), **env_kwargs: Any) -> tuple[Any, Any]:
    """``(model, tokenizer)``: a tiny Qwen3 and a tokenizer trained on ``env_id``'s text
    (plus ``extra_text``), both built here in a few seconds (see the module docstring)."""
    tokenizer = build_tokenizer(env_corpus(env_id, **env_kwargs) + list(extra_text))
    return build_model(tokenizer, seed), tokenizer


def save_tiny_qwen3(path: str | Path, env_id: str = "agentenvs/FrozenLake-v0", *, seed: int = 0) -> Path:
    """Save ``tiny_qwen3(env_id, seed=seed)`` to the folder ``path`` (made if missing), in
    the layout ``from_pretrained`` and ``agentenvs serve-model`` read; returns it."""
    model, tokenizer = tiny_qwen3(env_id, seed=seed)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m agentenvs.integrations.tiny_model",
        description="Save a tiny Qwen3 (random weights, a tokenizer trained on an env's text) "
                    "to a folder, for agentenvs serve-model and from_pretrained.")
    parser.add_argument("path", type=Path, help="the folder to write")
    parser.add_argument("--env", default="agentenvs/FrozenLake-v0", help="whose text the tokenizer learns")
    parser.add_argument("--seed", type=int, default=0, help="seeds the weights")
    args = parser.parse_args(argv)
    print(save_tiny_qwen3(args.path, args.env, seed=args.seed))


if __name__ == "__main__":
    main()
