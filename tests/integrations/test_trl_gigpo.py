"""GiGPO inside TRL's own trainer: ``GiGPOTrainer`` hands ``GRPOTrainer``'s loss one
advantage per token, GiGPO's for the step each token's action belongs to, computed from
``make_rollout_func``'s step records."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import numpy as np
import pytest

import agentenvs  # noqa: F401 - registers the ids

pytest.importorskip("trl", reason="could not import trl: pip install 'agentenvs[integrations]'")
pytest.importorskip("torch", reason="could not import torch: pip install 'agentenvs[hf]'")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo.py"
MOVES = ("Left", "Down", "Right", "Up")


def _example():
    spec = importlib.util.spec_from_file_location("trl_grpo_example_gigpo", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def _teach_answers(model, tokenizer, dataset, steps: int = 40) -> None:
    """A few supervised steps toward ``<answer>MOVE</answer>`` replies of any move, so the
    tiny model's rollouts take valid, differing moves (states and step rewards that vary)."""
    import torch

    rng = random.Random(0)
    prompt = tokenizer.apply_chat_template(
        list(dataset[0]["prompt"]), add_generation_prompt=True, tokenize=False
    )
    p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    optim = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        batch = []
        for _ in range(4):
            reply = f"<answer>{rng.choice(MOVES)}</answer><|im_end|>"
            batch.append(tokenizer(reply, add_special_tokens=False)["input_ids"])
        width = max(len(c) for c in batch)
        ids = torch.full((len(batch), len(p_ids) + width), tokenizer.pad_token_id)
        labels = torch.full_like(ids, -100)
        mask = torch.zeros_like(ids)
        for i, c_ids in enumerate(batch):
            n = len(p_ids) + len(c_ids)
            ids[i, :n] = torch.tensor(p_ids + c_ids)
            labels[i, len(p_ids) : n] = torch.tensor(c_ids)
            mask[i, :n] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optim.zero_grad()
        loss.backward()
        optim.step()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_gigpo_trainer_hands_the_loss_gigpos_advantage_of_every_token(tmp_path) -> None:
    import torch
    from trl import GRPOConfig

    from agentenvs.eval.advantages import Trajectory, gigpo_advantages
    from agentenvs.integrations.trl import make_rollout_func, reward_from_rollout
    from agentenvs.integrations.trl_gigpo import GiGPOTrainer

    example = _example()
    rollout_func, dataset = make_rollout_func(
        "agentenvs/FrozenLake-v0",
        task_ids=["4x4"],
        seeds=range(2),
        max_turns=6,
        max_new_tokens=8,
        is_slippery=False,
        process_reward="sum",
    )
    corpus = [m["content"] for r in dataset for m in r["prompt"]]
    corpus += [f"<answer>{m}</answer>" for m in MOVES] * 20
    tokenizer = example.build_tokenizer(corpus)
    model = example.build_model(tokenizer, 0)
    _teach_answers(model, tokenizer, dataset)

    seen: list[dict] = []  # what the loss received, batch by batch

    class Recording(GiGPOTrainer):
        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            seen.append(
                {
                    "records": [row["env_steps"] for row in inputs],
                    "rewards": [row["env_reward"] for row in inputs],
                    "generated": output["advantages"].clone(),
                    "completion_ids": output["completion_ids"].clone(),
                    "mask": (output["completion_mask"] * output["tool_mask"]).clone(),
                    "in_loss": [],
                }
            )
            return output

        def _compute_loss(self, model, inputs):
            seen[-1]["in_loss"].append(
                (inputs["completion_ids"].clone(), inputs["advantages"].clone())
            )
            return super()._compute_loss(model, inputs)

    config = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=160,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_steps=1,
        seed=0,
    )
    trainer = Recording(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=dataset,
        reward_funcs=[reward_from_rollout],
        rollout_func=rollout_func,
        step_weight=1.0,
        gamma=0.9,
        process_weight=1.0,
    )
    trainer.train()
    assert trainer.state.global_step == 2 and len(seen) == 2

    varied = 0
    for batch in seen:
        records, rewards = batch["records"], batch["rewards"]
        length = batch["generated"].shape[1]
        want = torch.zeros(len(records), length)
        for start in range(0, len(records), 4):  # one group: the 4 completions of a row
            group = [
                Trajectory(
                    np.add(r["rewards"], r["step_rewards"]), r["state_keys"], rewards[start + i]
                )
                for i, r in enumerate(records[start : start + 4])
            ]
            for i, steps in enumerate(gigpo_advantages(group, step_weight=1.0, gamma=0.9)):
                record = records[start + i]
                assert len(steps) == len(record["spans"]) >= 1
                for (s, e), value in zip(record["spans"], steps, strict=True):
                    want[start + i, s:e] = float(value)
        # every token of an action carries its step's advantage; observations and padding 0
        assert torch.allclose(batch["generated"], want, atol=1e-5)
        assert torch.all(batch["generated"][batch["mask"] == 0] == 0)
        # the loss saw the same rows (TRL shuffles and splits the batch before it)
        rows = {
            tuple(ids.tolist()): adv for ids, adv in zip(batch["completion_ids"], want, strict=True)
        }
        got = [
            (ids, adv)
            for ids_b, adv_b in batch["in_loss"]
            for ids, adv in zip(ids_b, adv_b, strict=True)
        ]
        assert len(got) == len(records)
        for ids, adv in got:
            assert torch.allclose(adv, rows[tuple(ids.tolist())], atol=1e-5)
        # within a completion the advantage changes from turn to turn: not one scalar
        for r, adv in zip(records, want, strict=True):
            values = {round(float(adv[s:e].mean()), 6) for s, e in r["spans"] if e > s}
            varied += len(values) > 1
    assert varied, "no completion had two steps with different advantages"
