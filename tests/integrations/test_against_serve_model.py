"""Every integration against ``agentenvs serve-model`` itself: a tiny model built from a
config, saved to a temporary folder and served by the real command on a free loopback
port. verifiers' ``run_eval`` and ``vf-eval`` play episodes through it (streaming, as
verifiers' chat program asks), SkyRL-gym and an OpenEnv client (``agentenvs serve``) play
episodes whose actions it samples, and a checkpoint that TRL's ``GRPOTrainer`` trained is
evaluated through it by the ``openai`` policy. Each checks what the framework recorded
(errors, traces, rewards), not only that something ran.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policy"))  # tiny_lm, served_model

from served_model import ServedModel  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TASKSET_ID = "agentenvs_verifiers"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("torch", "transformers", "tokenizers"):
        pytest.importorskip(module, reason=f"could not import {module}: pip install 'agentenvs[hf]'")
    from tiny_lm import build_model, build_tokenizer

    tokenizer = build_tokenizer()
    path = tmp_path_factory.mktemp("served-tiny")
    build_model(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def served(model_dir: Path) -> Iterator[ServedModel]:
    with ServedModel(model_dir, options="max_new_tokens=16") as server:
        yield server


@pytest.fixture
def uv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uv", reason="could not import uv: pip install 'agentenvs[integrations]'")
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))


def _lake_taskset(seeds: list[int]) -> Any:
    from agentenvs.integrations.verifiers import AgentEnvsConfig

    return AgentEnvsConfig(id=TASKSET_ID, env="agentenvs/FrozenLake-v0", task_ids=["4x4"],
                           seeds=seeds, max_turns=2)


def _check_episode(trace: dict[str, Any] | Any) -> None:
    """A trace verifiers recorded without an error (a failed model call is one: it was
    ``ProviderError: upstream stream ended before its terminal event`` while the server
    ignored ``stream``), scored by the env."""
    get = trace.get if isinstance(trace, dict) else lambda key: getattr(trace, key)
    assert not get("errors"), get("errors")
    assert "agentenvs_reward" in get("rewards"), trace
    assert get("info")["agentenvs_turns"] >= 1


def test_verifiers_run_eval_plays_episodes_through_serve_model(
    served: ServedModel, uv_on_path: None, tmp_path: Path
) -> None:
    vf = pytest.importorskip("verifiers.v1", reason="pip install 'agentenvs[integrations]'")
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig

    from agentenvs.integrations.verifiers import AgentEnvsEnvConfig

    config = EvalConfig(env=AgentEnvsEnvConfig(taskset=_lake_taskset([0, 1, 2])), model=served.name,
                        push=False, rich=None, output_dir=tmp_path, max_concurrent=3,
                        client=vf.EvalClientConfig(base_url=served.url, api_key_var="AGENTENVS_MODEL_API_KEY"))
    episodes = asyncio.run(run_eval(config))
    assert len(episodes) == 3
    for episode in episodes:
        assert episode.ok, episode.errors
        assert not episode.errors
        [trace] = episode.traces
        _check_episode(trace)
        replies = [m for m in trace.branches[-1].messages if m.role == "assistant"]
        assert len(replies) == trace.info["agentenvs_turns"]  # every turn had a model reply


def test_vf_eval_command_plays_episodes_through_serve_model(
    served: ServedModel, uv_on_path: None, tmp_path: Path
) -> None:
    vf_eval = Path(sys.executable).with_name("vf-eval")
    if not vf_eval.exists():
        pytest.skip("no vf-eval next to this interpreter: pip install 'agentenvs[integrations]'")
    out = tmp_path / "out"
    proc = subprocess.run(
        [str(vf_eval), TASKSET_ID, "--env.taskset.env", "agentenvs/FrozenLake-v0",
         "--env.taskset.task-ids", '["4x4"]', "--env.taskset.seeds", "[0, 1]",
         "--env.taskset.max-turns", "2", "-m", served.name, "--client.base-url", served.url,
         "--client.api-key-var", "AGENTENVS_MODEL_API_KEY", "--no-push", "--output-dir", str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    [traces_file] = out.rglob("traces.jsonl")
    episodes = [json.loads(line) for line in traces_file.read_text().splitlines()]
    assert len(episodes) == 2
    for episode in episodes:
        assert episode["ok"] and not episode["errors"], episode["errors"]
        [trace] = episode["traces"]
        _check_episode(trace)


# ---------------------------------------------------------------- SkyRL-gym and OpenEnv
CALM = {"map_name": "4x4", "is_slippery": False}  # a fixed lake: episodes replay exactly


def _policy(served: ServedModel) -> Any:
    from agentenvs.policy.registry import make_policy

    return make_policy(f"openai:base_url={served.url},model={served.name}")


def _replay(seed: int, actions: list[str], max_turns: int) -> list[tuple[str, float, bool, bool]]:
    """The same episode in process with ``gym.make``."""
    env = gym.make("agentenvs/FrozenLake-v0", **CALM)
    env.reset(seed=seed, options={"task_id": "4x4", "max_turns": max_turns})
    out = []
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        out.append((obs, float(reward), terminated, truncated))
        if terminated or truncated:
            break
    env.close()
    return out


def test_skyrl_gym_episodes_with_actions_sampled_by_serve_model(served: ServedModel) -> None:
    skyrl_gym = pytest.importorskip("skyrl_gym", reason="pip install 'agentenvs[integrations]'")
    from agentenvs.integrations.skyrl import register_skyrl_envs, skyrl_dataset
    from agentenvs.policy.base import Conversation

    register_skyrl_envs(["agentenvs/FrozenLake-v0"])
    policy = _policy(served)
    rows = skyrl_dataset("agentenvs/FrozenLake-v0", seeds=[0, 1], task_ids=["4x4"], max_turns=3, **CALM)
    for seed, row in zip([0, 1], rows, strict=True):
        env = skyrl_gym.make(row["env_class"], env_config=dict(CALM), extras=row)
        prompt, _ = env.init(row["prompt"])
        conversation = Conversation(messages=[dict(m) for m in prompt])
        played, actions = [], []
        for turn in range(3):
            [[action]] = policy.sample([conversation], 1, seed=turn)
            out = env.step(action)
            md = out["metadata"]
            actions.append(action)
            played.append((md["observation"], float(out["reward"]), md["terminated"], md["truncated"]))
            if out["done"]:
                break
            conversation.messages += [{"role": "assistant", "content": action}, *out["observations"]]
        env.close()
        assert out["done"]  # ended by the env or the budget of 3 turns
        assert played == _replay(seed, actions, 3)


#: the env server's token (``agentenvs serve`` wants one on every endpoint but /health)
ENV_SERVER_TOKEN = "env-server-token-for-tests"


def _start_env_server(env_kwargs: dict[str, Any]) -> tuple[subprocess.Popen[str], str]:
    import re
    import urllib.request

    proc = subprocess.Popen(
        [sys.executable, "-m", "agentenvs.cli", "serve", "--env", "agentenvs/FrozenLake-v0",
         "--port", "0", "--env-kwargs", json.dumps(env_kwargs), "--token", ENV_SERVER_TOKEN],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if match is None:
        proc.kill()
        raise AssertionError(f"the env server did not start: {line}{proc.stdout.read()}")
    url = f"http://127.0.0.1:{match.group(1)}"
    for _ in range(600):
        try:
            urllib.request.urlopen(f"{url}/health", timeout=5).close()
            break
        except OSError:
            time.sleep(0.1)
    return proc, url


def test_openenv_client_episodes_with_actions_sampled_by_serve_model(served: ServedModel) -> None:
    pytest.importorskip("openenv.core.generic_client", reason="pip install 'agentenvs[integrations]'")
    from agentenvs.policy.base import Conversation
    from agentenvs.server.client import openenv_client

    policy = _policy(served)
    proc, url = _start_env_server(CALM)

    async def episode(seed: int) -> tuple[list[str], list[tuple[str, float, bool, bool]]]:
        async with openenv_client(url, token=ENV_SERVER_TOKEN) as client:
            result = await client.reset(seed=seed, task_id="4x4", max_turns=3)
            o = result.observation
            conversation = Conversation.start(o["text"], o["info"])
            actions, played = [], []
            while True:
                [[action]] = await asyncio.to_thread(policy.sample, [conversation], 1, seed=len(actions))
                result = await client.step({"text": action})
                o = result.observation
                actions.append(action)
                played.append((o["text"], float(result.reward), o["terminated"], o["truncated"]))
                if result.done:
                    return actions, played
                conversation.add_turn(action, o["text"])

    try:
        for seed in (0, 1):
            actions, played = asyncio.run(episode(seed))
            assert 1 <= len(actions) <= 3
            assert played == _replay(seed, actions, 3)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


# ---------------------------------------------------------------- TRL
def _example() -> Any:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo.py"
    spec = importlib.util.spec_from_file_location("trl_grpo_example_served", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trls_vllm_client_generates_through_serve_models_completions(served: ServedModel, model_dir: Path) -> None:
    """TRL's server mode generates with ``VLLMClient.generate``: ``/v1/completions`` on token
    ids with ``return_token_ids`` and ``return_tokens_as_token_ids``, which serve-model
    answers as vLLM does (its weight sync needs vLLM's NCCL engine: not served)."""
    pytest.importorskip("trl", reason="pip install 'agentenvs[integrations]'")
    requests = pytest.importorskip("requests")
    from transformers import AutoTokenizer
    from trl.generation.vllm_client import VLLMClient

    from agentenvs.policy.hf import HFPolicy

    # VLLMClient.__init__ refuses to run where vLLM is not installed; what it sets is this
    client = VLLMClient.__new__(VLLMClient)
    client.session, client.base_url, client.model = requests.Session(), served.root, served.name
    client.session.headers["Authorization"] = f"Bearer {served.api_key}"  # serve-model's key
    client.check_server(total_timeout=30)  # its /health probe
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompt = tokenizer("Map:\nP_\n_G", add_special_tokens=False)["input_ids"]
    out = client.generate([prompt], n=2, temperature=0.0, max_tokens=5, logprobs=0)
    local = HFPolicy(str(model_dir), device="cpu", max_new_tokens=5)
    [greedy] = local.generate([prompt], 1, temperature=0.0)[0]
    assert out["prompt_ids"] == [prompt]
    assert out["completion_ids"] == [list(greedy.sampled_ids if hasattr(greedy, "sampled_ids")
                                          else greedy.token_ids)] * 2
    [expected] = local.token_logprobs([prompt + out["completion_ids"][0]], [len(prompt)])
    for ids, lps, lp_ids in zip(out["completion_ids"], out["logprobs"], out["logprob_token_ids"], strict=True):
        assert lp_ids == [[t] for t in ids]
        assert [v for [v] in lps] == pytest.approx(expected, abs=1e-4)


def test_a_checkpoint_trained_by_trls_grpo_is_evaluated_through_serve_model(tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="pip install 'agentenvs[integrations]'")
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from agentenvs.integrations.trl import for_trl

    example = _example()
    setup = for_trl("agentenvs/FrozenLake-v0", seeds=range(2), map_name="4x4")
    tokenizer = example.build_tokenizer([m["content"] for r in setup.rows for m in r["prompt"]])
    model = example.build_model(tokenizer, 0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    config = GRPOConfig(output_dir=str(tmp_path / "trainer"), max_steps=1, per_device_train_batch_size=2,
                        num_generations=2, max_completion_length=16, max_tool_calling_iterations=2,
                        learning_rate=1e-2, report_to=[], use_cpu=True, bf16=False, save_strategy="no")
    def spread(completions: list[Any], **kwargs: Any) -> list[float]:
        # the tiny model's episodes all score 0, which gives GRPO no advantage to learn
        # from: this ranks each group's rollouts, so the step changes the weights
        return [float(i % 2) for i in range(len(completions))]

    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, train_dataset=setup.dataset,
                          reward_funcs=[*setup.reward_funcs, spread],
                          environment_factory=setup.environment_factory)
    trainer.train()
    assert trainer.state.global_step == 1
    checkpoint = tmp_path / "checkpoint"
    trainer.save_model(str(checkpoint))
    tokenizer.save_pretrained(checkpoint)
    after = trainer.model.state_dict()
    assert any(not torch.equal(before[k], after[k].cpu()) for k in before)  # GRPO changed the weights

    out = tmp_path / "run"
    with ServedModel(checkpoint, name="grpo-tiny", options="max_new_tokens=16") as served:
        proc = subprocess.run(
            [sys.executable, "-m", "agentenvs.cli", "eval", "--env", "agentenvs/FrozenLake-v0",
             "--policy", f"openai:base_url={served.url},model=grpo-tiny", "--tasks", "4x4",
             "--n", "2", "--budgets", "2", "--workers", "0", "--no-progress", "--out", str(out)],
            capture_output=True, text=True, timeout=600,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["turns"] >= 1 for r in records)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sampling"]["max_tokens"] == 16 and manifest["sampling"]["source"]["max_tokens"] == "server"
    assert not (out / "faults.jsonl").exists() or not (out / "faults.jsonl").read_text().strip()
