"""GRPO with TRL on an agentenvs env: a tiny language model calls the env's tools.

TRL's ``GRPOTrainer`` in environments mode: ``agentenvs.integrations.trl.for_trl`` gives
the environment factory (the env's actions as tools), the task dataset and the reward
function. The model is built here from a config (no weights are downloaded): a 2-layer
Qwen3 with a byte-level BPE tokenizer trained on the env's own text, and TRL's Qwen3
chat template (``agentenvs.integrations.tiny_model``), so TRL recognises it and parses the model's tool calls. A few seconds of
supervised warm-up on well-formed tool calls (random directions) teach the random model
the call format; GRPO then trains on real episodes of the env.

    python examples/trl_grpo.py                  # FrozenLake, 20 GRPO steps
    python examples/trl_grpo.py --quick          # 2 GRPO steps (CI)
    python examples/trl_grpo.py --env agentenvs/InterCodeSQL-v0 --quick

It prints one JSON line per GRPO step (loss, reward, tool calls) and a summary line.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any


def demonstration(setup: Any, rng: random.Random) -> list[str]:
    """Assistant turns that call each tool with plausible arguments (for the warm-up)."""
    from agentenvs.integrations.common import action_tools

    turns = []
    for tool in action_tools(setup.env_id):
        for _ in range(8):
            args = {}
            for name, _desc, choices in tool.params:
                args[name] = rng.choice(choices) if choices else rng.choice(["SELECT 1", "ls", "print(1)"])
            call = json.dumps({"name": tool.name, "arguments": args})
            turns.append(f"<tool_call>\n{call}\n</tool_call>")
    return turns


def build_tokenizer(corpus: list[str]) -> Any:
    """A byte-level BPE tokenizer trained on ``corpus``, with TRL's Qwen3 chat template
    (``agentenvs.integrations.tiny_model.build_tokenizer``)."""
    from agentenvs.integrations.tiny_model import build_tokenizer as tiny_tokenizer

    return tiny_tokenizer(corpus)


def build_model(tokenizer: Any, seed: int) -> Any:
    """A 2-layer Qwen3 for ``tokenizer`` (``agentenvs.integrations.tiny_model.build_model``)."""
    from agentenvs.integrations.tiny_model import build_model as tiny_model

    return tiny_model(tokenizer, seed)


def warm_up(model: Any, tokenizer: Any, setup: Any, steps: int, seed: int) -> float:
    """Supervised steps on (prompt, well-formed tool call) pairs; returns the last loss."""
    import torch

    rng = random.Random(seed)
    turns = demonstration(setup, rng)
    env = setup.environment_factory()
    tools = [getattr(env, name) for name in dir(type(env)) if not name.startswith("_") and name != "reset"]
    examples = []
    for row in setup.rows[:8]:
        messages = [row["prompt"][0], {"role": "user", "content": env.reset(**row)}]
        prompt = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
        for turn in turns[:4]:
            p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            c_ids = tokenizer(turn + "<|im_end|>", add_special_tokens=False)["input_ids"]
            examples.append((p_ids, c_ids))
    env._close()
    optim = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    loss_value = float("nan")
    pad = tokenizer.pad_token_id
    for _ in range(steps):
        batch = rng.sample(examples, min(4, len(examples)))
        width = max(len(p) + len(c) for p, c in batch)
        ids = torch.full((len(batch), width), pad)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (p_ids, c_ids) in enumerate(batch):
            n = len(p_ids) + len(c_ids)
            ids[i, :n] = torch.tensor(p_ids + c_ids)
            labels[i, len(p_ids) : n] = torch.tensor(c_ids)
            mask[i, :n] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optim.zero_grad()
        loss.backward()
        optim.step()
        loss_value = float(loss.detach())
    return loss_value


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="agentenvs/FrozenLake-v0")
    parser.add_argument("--quick", action="store_true", help="2 GRPO steps, a short warm-up (CI)")
    parser.add_argument("--steps", type=int, default=20, help="GRPO steps")
    parser.add_argument("--warmup-steps", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="trainer output dir (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.warmup_steps = 2, 60

    import torch
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from agentenvs.integrations.trl import for_trl

    torch.set_num_threads(1)
    env_kwargs: dict[str, Any] = {"map_name": "4x4"} if "FrozenLake" in args.env else {}
    setup = for_trl(args.env, seeds=range(16) if "FrozenLake" in args.env else (0,), max_turns=6, **env_kwargs)
    if "FrozenLake" not in args.env:
        setup = for_trl(args.env, task_ids=[r["task_id"] for r in setup.rows[:16]], max_turns=6)
    corpus = [m["content"] for r in setup.rows for m in r["prompt"]]
    probe = setup.environment_factory()
    corpus += [probe.reset(**r) for r in setup.rows[:16]] + demonstration(setup, random.Random(1)) * 4
    probe._close()
    tokenizer = build_tokenizer(corpus)
    model = build_model(tokenizer, args.seed)
    t0 = time.perf_counter()
    warm_loss = warm_up(model, tokenizer, setup, args.warmup_steps, args.seed)
    warm_s = time.perf_counter() - t0

    logs: list[dict[str, Any]] = []

    class Log(TrainerCallback):
        def on_log(self, _args, state, control, logs_=None, **kwargs):  # type: ignore[no-untyped-def]
            entry = kwargs.get("logs") or logs_ or {}
            if "loss" in entry:
                logs.append({k: v for k, v in entry.items() if isinstance(v, int | float)})
                print(json.dumps({"step": state.global_step, **logs[-1]}), flush=True)

    with tempfile.TemporaryDirectory(prefix="agentenvs-trl-") as tmp:
        config = GRPOConfig(
            output_dir=str(args.out or tmp), max_steps=args.steps, per_device_train_batch_size=4,
            num_generations=4, max_completion_length=96, learning_rate=5e-5, logging_steps=1,
            report_to=[], use_cpu=True, bf16=False, save_strategy="no", seed=args.seed,
            max_tool_calling_iterations=6, temperature=1.0, beta=0.0, shuffle_dataset=True,
        )
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config,
                              train_dataset=setup.dataset, reward_funcs=setup.reward_funcs,
                              environment_factory=setup.environment_factory, callbacks=[Log()])
        t1 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t1
        pools = trainer._environment_pool.values()
        envs_open = sum(not e._closed for pool in pools for e in pool)
        env_steps = sum(len(e._steps) for pool in trainer._environment_pool.values() for e in pool)
    summary = {
        "env": args.env, "grpo_steps": trainer.state.global_step, "warmup_loss": round(warm_loss, 4),
        "warmup_s": round(warm_s, 1), "train_s": round(train_s, 1),
        "mean_reward": [round(x.get("reward", float("nan")), 3) for x in logs],
        "tool_calls_per_step": [x.get("tools/call_frequency") for x in logs],
        "env_steps_last_batch": env_steps,
        "envs_left_open": envs_open,
    }
    print(json.dumps(summary), flush=True)
    return summary


if __name__ == "__main__":
    main()
