"""TRL's environments mode: tools with the schemas TRL renders, per-rollout streams,
BFCL's functions as tools, rewards and clean-up; GRPO steps with a tiny model."""

from __future__ import annotations

import gc
import inspect
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids

pytest.importorskip("trl", reason="could not import trl: pip install 'agentenvs[integrations]'")
pytest.importorskip("datasets", reason="could not import datasets: pip install 'agentenvs[integrations]'")

from transformers.utils import get_json_schema  # noqa: E402

from agentenvs.integrations.trl import (  # noqa: E402
    agentenvs_reward,
    environment_class,
    for_trl,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo.py"


def tool_methods(obj: object) -> dict[str, object]:
    # exactly how TRL finds an environment's tools
    return {
        name: getattr(obj, name)
        for name, _ in inspect.getmembers(type(obj), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    }


@pytest.mark.parametrize(
    ("env_id", "tools"),
    [
        ("agentenvs/FrozenLake-v0", {"move"}),
        ("agentenvs/InterCodeSQL-v0", {"execute_sql", "submit"}),
        ("agentenvs/DeepCoderMT-v0", {"run_tests"}),
        ("agentenvs/TerminalBench-v0", {"run_command", "submit"}),
        ("agentenvs/BFCLMultiTurn-v0", {"act"}),
    ],
)
def test_only_the_actions_are_tools_and_their_schemas_render(env_id: str, tools: set[str]) -> None:
    obj = environment_class(env_id)()
    methods = tool_methods(obj)
    assert set(methods) == tools
    for name, method in methods.items():
        schema = get_json_schema(method)["function"]
        assert schema["name"] == name and schema["description"]
    if env_id.endswith("FrozenLake-v0"):
        params = get_json_schema(obj.move)["function"]["parameters"]  # type: ignore[attr-defined]
        assert params["properties"]["direction"]["enum"] == ["Left", "Down", "Right", "Up"]
        assert params["required"] == ["direction"]


def test_tools_step_the_env_like_text_actions_and_the_reward_is_the_return() -> None:
    cls = environment_class("agentenvs/InterCodeSQL-v0")
    obj = cls()
    row = {"prompt": [{"role": "system", "content": "x"}, {"role": "user", "content": ""}], "task_id": None, "seed": 3}
    task_text = obj.reset(**row)
    env = gym.make("agentenvs/InterCodeSQL-v0")
    obs, info = env.reset(seed=3)
    assert obs == f"{info['system_prompt']}\n\n{task_text}"
    gold = env.unwrapped.gold_query
    assert obj.execute_sql(query=gold) == env.step(f"```sql\n{gold}\n```")[0]
    answer = obj.submit()
    assert answer.startswith(env.step("submit")[0]) and "Outcome: solved" in answer
    assert obj.submit().startswith("The episode is over")
    assert agentenvs_reward(environments=[obj]) == [1.0]
    assert obj._closed  # the episode's env is closed once its reward is read
    env.close()


def test_rollouts_of_one_row_diverge_and_replay() -> None:
    cls = environment_class("agentenvs/FrozenLake-v0", map_name="8x8", max_turns=12)
    row = {"task_id": "8x8", "seed": 7}

    def play(objs: list) -> list[list[str]]:
        out = []
        for obj in objs:
            first = obj.reset(**row)
            out.append([first] + [obj.move(direction="Right") for _ in range(6)])
        return out

    objs = [cls() for _ in range(6)]
    runs = play(objs)
    assert len({run[0] for run in runs}) == 1  # the same start for the whole group
    assert len({tuple(run) for run in runs}) > 1  # then each rollout slips its own way
    # objects with the same indices replay the same episodes from the same row
    twins = [cls() for _ in range(6)]
    for obj, twin in zip(objs, twins, strict=True):
        twin._index = obj._index
    assert play(twins) == play(objs) == runs
    for obj in twins:
        obj._close()
    for obj in objs:
        obj._close()


def test_envs_trl_never_closes_are_closed_when_collected() -> None:
    cls = environment_class("agentenvs/InterCodeSQL-v0", close_after_episode=False)
    obj = cls()
    obj.reset(seed=0)
    inner = obj._holder[0].unwrapped
    closed = []
    original = inner.close
    inner.close = lambda: (closed.append(True), original())  # observe the real close
    agentenvs_reward(environments=[obj])
    assert not closed and not obj._closed  # kept open when asked to
    del obj
    gc.collect()
    assert closed == [True]


def test_bfcl_functions_become_tools_per_task_and_gold_calls_score_one() -> None:
    setup = for_trl("agentenvs/BFCL-v0")
    assert isinstance(setup.environment_factory, dict)
    env = gym.make("agentenvs/BFCL-v0", underscore_to_dot=True, max_turns=1)
    n_tools = n_defaults = n_renamed = 0
    rewards = []
    for row in setup.rows:
        obj = setup.environment_factory[row["environment"]]()
        obj.reset(**row)
        _, info = env.reset(seed=row["seed"], options={"task_id": row["task_id"]})
        methods = tool_methods(obj)
        declared = {t["function"]["name"]: t["function"] for t in info["tools"]}
        assert set(methods) == set(declared), row["task_id"]
        for name, method in methods.items():
            schema = get_json_schema(method)["function"]["parameters"]
            want = declared[name]["parameters"]
            renamed = {p if p.isidentifier() and p not in ("async", "lambda") else p + "_": p for p in want["properties"]}
            assert {renamed.get(p, p) for p in schema["properties"]} <= set(want["properties"]) | set(renamed)
            assert {renamed.get(p, p) for p in schema.get("required", [])} == set(want.get("required", []))
            n_tools += 1
            n_renamed += sum(p.endswith("_") for p in schema["properties"])
            for pname, pschema in want["properties"].items():
                if "default" in pschema:
                    n_defaults += 1
                    key = next(k for k, v in renamed.items() if v == pname)
                    assert f"(default: {json.dumps(pschema['default'])})" in schema["properties"][key]["description"]
        # the gold calls, made through the tool methods as TRL would (by python names)
        if "irrelevance" not in info["category"]:
            for name, args in env.unwrapped.gold_calls():
                method = methods[name]
                params = inspect.signature(method).parameters
                by_schema = {p.rstrip("_") if p.rstrip("_") not in params else p: p for p in params}
                method(**{by_schema.get(k, k): v for k, v in args.items()})
        rewards.append(agentenvs_reward(environments=[obj])[0])
    # the bundled entries: 269 functions, 71 parameters with a default, one named `async`
    assert (n_tools, n_defaults, n_renamed) == (269, 71, 1)
    assert sum(rewards) / len(rewards) > 0.9, rewards.count(0.0)
    env.close()


def test_grpo_trainer_accepts_the_setup() -> None:
    pytest.importorskip("torch", reason="could not import torch: pip install 'agentenvs[hf]'")
    import importlib.util

    spec = importlib.util.spec_from_file_location("trl_grpo_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    from trl import GRPOConfig, GRPOTrainer

    setup = for_trl("agentenvs/FrozenLake-v0", seeds=range(2), map_name="4x4")
    tokenizer = example.build_tokenizer([m["content"] for r in setup.rows for m in r["prompt"]])
    model = example.build_model(tokenizer, 0)
    config = GRPOConfig(output_dir="unused", max_steps=1, per_device_train_batch_size=2, num_generations=2,
                        report_to=[], use_cpu=True, save_strategy="no")
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, train_dataset=setup.dataset,
                          reward_funcs=setup.reward_funcs, environment_factory=setup.environment_factory)
    assert [t.__name__ for t in trainer.tools] == ["move"]
    assert trainer.reward_func_names == ["agentenvs_reward"]


@pytest.mark.slow
def test_the_example_trains_two_grpo_steps_on_cpu() -> None:
    pytest.importorskip("torch", reason="could not import torch: pip install 'agentenvs[hf]'")
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--quick"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["grpo_steps"] == 2
    assert summary["envs_left_open"] == 0
    assert len(summary["mean_reward"]) == 2


def test_rollout_func_plays_groupenv_groups_for_free_text_actions(tmp_path) -> None:
    pytest.importorskip("torch", reason="could not import torch: pip install 'agentenvs[hf]'")
    import importlib.util

    from trl import GRPOConfig, GRPOTrainer

    from agentenvs.integrations.trl import make_rollout_func, reward_from_rollout

    spec = importlib.util.spec_from_file_location("trl_grpo_example_rf", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    rollout_func, dataset = make_rollout_func(
        "agentenvs/FrozenLake-v0", task_ids=["4x4"], seeds=range(4), max_turns=3, max_new_tokens=8
    )
    assert len(dataset) == 4 and dataset[0]["prompt"][1]["content"].startswith("Map:")
    tokenizer = example.build_tokenizer([m["content"] for r in dataset for m in r["prompt"]])
    model = example.build_model(tokenizer, 0)
    config = GRPOConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=48, report_to=[], use_cpu=True, save_strategy="no", logging_steps=1)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, train_dataset=dataset,
                          reward_funcs=[reward_from_rollout], rollout_func=rollout_func)
    # one group of 4 rollouts of one row: same start, own streams, an episode each
    out = rollout_func([dataset[0]["prompt"]] * 4, trainer)
    assert len(out["completion_ids"]) == 4 and len(out["env_reward"]) == 4
    for ids, logps, mask in zip(out["completion_ids"], out["logprobs"], out["env_mask"], strict=True):
        assert len(ids) == len(logps) == len(mask) <= 48
        assert mask[0] == 1 and all(lp == 0.0 for lp, m in zip(logps, mask, strict=True) if m == 0)
        assert any(lp < 0 for lp, m in zip(logps, mask, strict=True) if m == 1)
    observation_turns = [tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
                         for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True)]
    assert any("Map:" in text or "Invalid" in text for text in observation_turns)  # env answers in the stream
    trainer.train()
    assert trainer.state.global_step == 2


# what only text mode says: <answer> tags, fenced blocks, `submit` replies, text formats
TEXT_MODE = (
    "<answer>", "</answer>", "```sql", "```bash", "python block", "code block", "delimiters",
    "backticks", "reply `submit`", "plain SQL", "output your final", "Reply with", "Terminus JSON",
    "Python-style list",
)  # fmt: skip


def _text_mode_phrases(text: str) -> list[str]:
    return [phrase for phrase in TEXT_MODE if phrase in text]


@pytest.mark.parametrize(
    ("env_id", "calls"),
    [
        ("agentenvs/FrozenLake-v0", [("move", ("Diagonal",)), ("move", ("",)), ("move", ("x" * 500,))]),
        ("agentenvs/InterCodeSQL-v0", [("execute_sql", ("",)), ("execute_sql", ("```",)), ("submit", ())]),
        pytest.param(
            "agentenvs/DeepCoderMT-v0", [("run_tests", ("",)), ("run_tests", ("print(1)",))],
            marks=pytest.mark.bwrap,
        ),
        pytest.param(
            "agentenvs/TerminalBench-v0", [("run_command", ("",)), ("run_command", ("true",)), ("submit", ())],
            marks=pytest.mark.bwrap,
        ),
    ],
)  # fmt: skip
def test_tool_mode_prompts_and_errors_speak_of_the_tools(env_id: str, calls: list) -> None:
    env = gym.make(env_id)
    first = env.unwrapped.task_ids[0]
    env.close()
    setup = for_trl(env_id, seeds=range(2), task_ids=[first])
    seen = []
    for row in setup.rows:
        seen.append(row["prompt"][0]["content"])
        obj = setup.environment_factory()
        seen.append(obj.reset(**row))
        seen.append(obj.reset(seed=row["seed"], task_id=row["task_id"]))  # no prompt: all of it
        seen += [getattr(obj, name)(*args) for name, args in calls]
        obj._close()
    tools = set(tool_methods(setup.environment_factory()))
    prompt = f"{seen[0]}\n\n{seen[1]}"  # what the model sees first names the tools
    assert any(f"`{tool}`" in prompt for tool in tools), prompt
    for text in seen:
        assert not _text_mode_phrases(text), (_text_mode_phrases(text), text)
    # text mode (rollout_func's rows) keeps the env's own format
    from agentenvs.integrations.trl import task_rows

    text_rows = task_rows(env_id, seeds=[0], task_ids=[first])
    env = gym.make(env_id)
    _, info = env.reset(seed=0, options={"task_id": first})
    assert text_rows[0]["prompt"][0]["content"] == info["system_prompt"]
    env.close()


def test_bfcl_tool_mode_prompts_speak_of_the_tools_and_act_envs_say_what_act_takes() -> None:
    setup = for_trl("agentenvs/BFCL-v0")
    for row in setup.rows:
        obj = setup.environment_factory[row["environment"]]()
        for text in (row["prompt"][0]["content"], obj.reset(**row)):
            assert not _text_mode_phrases(text), (_text_mode_phrases(text), text)
        obj._close()
    assert "Call them as tools" in setup.rows[0]["prompt"][0]["content"]
    # an env whose one tool is `act` takes its turns as text: the prompt says so first
    env = gym.make("agentenvs/BFCLMultiTurn-v0")
    multi = for_trl("agentenvs/BFCLMultiTurn-v0", task_ids=env.unwrapped.task_ids[:1])
    env.close()
    assert multi.rows[0]["prompt"][0]["content"].startswith("You act through the `act` tool")


def test_the_row_count_is_tasks_times_seeds_as_documented() -> None:
    import re

    from agentenvs.integrations import trl
    from agentenvs.integrations.trl import task_rows

    env = gym.make("agentenvs/FrozenLake-v0")
    n_tasks = len(env.unwrapped.task_ids)
    env.close()
    assert len(task_rows("agentenvs/FrozenLake-v0", seeds=range(2))) == 2 * n_tasks
    assert len(task_rows("agentenvs/FrozenLake-v0", seeds=range(3), task_ids=["4x4"])) == 3
    root = Path(__file__).resolve().parents[2]
    docs = {
        "README.md": (root / "README.md").read_text(),
        "docs/integrations.md": (root / "docs" / "integrations.md").read_text(),
        "for_trl": trl.for_trl.__doc__ or "",
        "task_rows": trl.task_rows.__doc__ or "",
        "module": trl.__doc__ or "",
    }
    for where, text in docs.items():
        rule = r"(\d+) maps ×\s+`*seeds=range\((\d+)\)`*\s+(?:give|are)\s+([\d,]+) rows"
        stated = re.search(rule, text)
        assert stated, f"{where} does not state the row count rule"
        maps, seeds, rows = int(stated[1]), int(stated[2]), int(stated[3].replace(",", ""))
        assert (maps, rows) == (n_tasks, n_tasks * seeds), where


def test_tools_take_positional_arguments_with_the_same_schema() -> None:
    obj = environment_class("agentenvs/FrozenLake-v0", map_name="4x4", is_slippery=False)()
    twin = environment_class("agentenvs/FrozenLake-v0", map_name="4x4", is_slippery=False)()
    for o in (obj, twin):
        o.reset(task_id="4x4", seed=0)
    assert obj.move("Right") == twin.move(direction="Right")
    assert list(inspect.signature(obj.move).parameters) == ["direction"]
    assert get_json_schema(obj.move)["function"]["parameters"] == {
        "type": "object",
        "properties": {
            "direction": {
                "type": "string",
                "enum": ["Left", "Down", "Right", "Up"],
                "description": "The direction to move",
            }
        },
        "required": ["direction"],
    }
    with pytest.raises(TypeError, match="multiple values"):
        obj.move("Right", direction="Down")
    with pytest.raises(TypeError, match="takes 1 arguments"):
        obj.move("Right", "Down")
    obj._close()
    twin._close()
    # BFCL's functions: positional arguments in the signature's order, recorded by name
    setup = for_trl("agentenvs/BFCL-v0")
    row = next(r for r in setup.rows if r["task_id"] == setup.rows[0]["task_id"])
    cls = setup.environment_factory[row["environment"]]
    by_name, by_position = cls(), cls()
    by_name.reset(**row)
    by_position.reset(**row)
    name, method = next(iter(tool_methods(by_name).items()))
    params = [p for p in inspect.signature(method).parameters.values()]
    values = {p.name: f"v{i}" for i, p in enumerate(params)}
    assert getattr(by_position, name)(*values.values()) == getattr(by_name, name)(**values)
    assert by_position._calls == by_name._calls and by_name._calls
    by_name._close()
    by_position._close()
