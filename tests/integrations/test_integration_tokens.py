"""What each trainer integration passes of the tokens: TRL's rollout function returns the
trainer's model's own ids, their sampling log-probs and the mask of observation tokens
(checked against the model's distribution for a tiny model); TRL's environments mode,
SkyRL-gym and the env server take actions as text and give observations as text (the
trainer's engine tokenizes them and keeps the ids it sampled), which the tests pin."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

import agentenvs  # noqa: F401 - registers the ids

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo.py"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("trl_grpo_example_tokens", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trl_rollout_func_returns_the_models_own_ids_and_logprobs(tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="could not import trl: pip install 'agentenvs[integrations]'")
    torch = pytest.importorskip("torch", reason="could not import torch: pip install 'agentenvs[hf]'")
    from trl import GRPOConfig, GRPOTrainer

    from agentenvs.integrations.trl import make_rollout_func, reward_from_rollout

    temperature = 0.8
    rollout_func, dataset = make_rollout_func(
        "agentenvs/FrozenLake-v0", task_ids=["4x4"], seeds=range(2), max_turns=3,
        max_new_tokens=8, temperature=temperature,
    )
    example = _example()
    tokenizer = example.build_tokenizer([m["content"] for r in dataset for m in r["prompt"]])
    model = example.build_model(tokenizer, 0)
    config = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4,
                        num_generations=4, max_completion_length=48, report_to=[], use_cpu=True,
                        save_strategy="no", temperature=temperature)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config,
                          train_dataset=dataset, reward_funcs=[reward_from_rollout],
                          rollout_func=rollout_func)
    torch.manual_seed(0)
    out = rollout_func([dataset[0]["prompt"]] * 4, trainer)
    rendered = tokenizer.apply_chat_template(dataset[0]["prompt"], add_generation_prompt=True,
                                             tokenize=False)
    prompt = list(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    checked = 0
    for prompt_ids, ids, logps, mask in zip(
        out["prompt_ids"], out["completion_ids"], out["logprobs"], out["env_mask"], strict=True
    ):
        assert prompt_ids == prompt  # the rendered task, as TRL's own prompts are
        assert len(ids) == len(logps) == len(mask) and 0 in mask  # observations in between
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt_ids + ids])).logits[0].float()
        # the distribution each model token was drawn from: the trainer's temperature only
        own = (logits[len(prompt_ids) - 1 : -1] / temperature).log_softmax(-1)
        for position, (token, logp, model_token) in enumerate(zip(ids, logps, mask, strict=True)):
            if model_token:
                assert logp == pytest.approx(float(own[position, token]), abs=1e-4)
                checked += 1
            else:
                assert logp == 0.0
    assert checked > 8


def test_trl_environments_mode_exchanges_text() -> None:
    """TRL's environments mode calls tools with the text its engine decoded and appends
    what they return to the chat, which its template renders and tokenizes."""
    pytest.importorskip("trl", reason="could not import trl: pip install 'agentenvs[integrations]'")
    from agentenvs.integrations.trl import environment_class

    env = environment_class("agentenvs/FrozenLake-v0")()
    row = {"prompt": [{"role": "system", "content": "x"}, {"role": "user", "content": ""}],
           "task_id": "4x4", "seed": 0}
    assert isinstance(env.reset(**row), str)
    assert isinstance(env.move(direction="Left"), str)


def test_skyrl_gym_exchanges_text_messages() -> None:
    """SkyRL-gym's generator sends the decoded model output and gets chat messages back,
    which it tokenizes with its own template."""
    skyrl_gym = pytest.importorskip("skyrl_gym", reason="could not import skyrl_gym")
    from agentenvs.integrations.skyrl import register_skyrl_envs, skyrl_dataset

    register_skyrl_envs(["agentenvs/FrozenLake-v0"])
    (row,) = skyrl_dataset("agentenvs/FrozenLake-v0", seeds=[0], task_ids=["4x4"], max_turns=3)
    env = skyrl_gym.make(row["env_class"], env_config={}, extras=row)
    try:
        prompt, _ = env.init(row["prompt"])
        assert all(isinstance(m["content"], str) for m in prompt)
        step = env.step("<answer>Left</answer>")
        assert all(set(m) == {"role", "content"} and isinstance(m["content"], str)
                   for m in step["observations"])
        assert not [key for key in step if "token" in key]  # no ids go with them
    finally:
        env.close()


def test_env_server_messages_carry_text_and_no_token_ids() -> None:
    """The env server's wire format (OpenEnv's) holds an action's text and an observation's
    text: a client's model keeps the ids it sampled, none travel with the messages."""
    pytest.importorskip("pydantic", reason="could not import pydantic: pip install 'agentenvs[server]'")
    from agentenvs.server.models import TextAction, TextObservation

    action = TextAction.model_json_schema()
    assert action["required"] == ["text"] and action["properties"]["text"]["type"] == "string"
    for schema in (action, TextObservation.model_json_schema()):
        assert not [name for name in schema["properties"] if "token" in name or "logprob" in name]
