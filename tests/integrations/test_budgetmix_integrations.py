"""BudgetMix and process rewards in the trainer integrations: per-row budgets drawn and
seeded, shared by a group, shown when asked and kept in the records; step rewards folded
into TRL's reward; two GRPO steps through TRL's own GRPOTrainer with each."""

from __future__ import annotations

import copy
import importlib.util
import random
from pathlib import Path

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.integrations.process import process_return
from agentenvs.integrations.trl import task_rows

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo.py"
FL = "agentenvs/FrozenLake-v0"


def test_row_budgets_are_drawn_from_the_set_seeded_and_shown_when_asked() -> None:
    rows = task_rows(
        FL, task_ids=["4x4", "8x8"], seeds=range(12), budgets=[2, 4, 8], show_budget=True
    )
    budgets = [r["max_turns"] for r in rows]
    assert set(budgets) == {2, 4, 8}
    again = task_rows(
        FL, task_ids=["8x8", "4x4"], seeds=range(12), budgets=[2, 4, 8], show_budget=True
    )
    by_row = {(r["task_id"], r["seed"]): r["max_turns"] for r in again}
    # a row's budget depends on its task, seed and budget_seed only, not on the others
    assert budgets == [by_row[(r["task_id"], r["seed"])] for r in rows]
    other = task_rows(
        FL, task_ids=["4x4", "8x8"], seeds=range(12), budgets=[2, 4, 8], budget_seed=1
    )
    assert [r["max_turns"] for r in other] != budgets
    weighted = task_rows(FL, task_ids=["4x4"], seeds=range(40), budgets={3: 0.0, 5: 1.0})
    assert {r["max_turns"] for r in weighted} == {5}
    from agentenvs.integrations.trl import environment_class

    obj = environment_class(FL, show_budget=True)()
    for row in rows[:6]:
        text = obj.reset(**row)
        assert text.rstrip().endswith(f"[{row['max_turns']} turns left]")
    obj._close()
    hidden = environment_class(FL)()
    assert "turns left" not in hidden.reset(**rows[0])
    hidden._close()
    with pytest.raises(ValueError, match="not both"):
        task_rows(FL, task_ids=["4x4"], budgets=[2], max_turns=3)
    with pytest.raises(ValueError, match="positive integer"):
        task_rows(FL, task_ids=["4x4"], budgets=[0, 2])


def test_the_process_reward_is_the_return_plus_the_folded_step_rewards() -> None:
    pytest.importorskip(
        "datasets", reason="could not import datasets: pip install 'agentenvs[integrations]'"
    )
    from agentenvs.integrations.trl import agentenvs_reward, for_trl

    moves = ["Right", "Right", "Down", "Down", "Down", "Right", "Left", "Up"]
    setup = for_trl(
        FL, task_ids=["4x4"], seeds=[3], max_turns=8, process_reward="mean", process_weight=2.0
    )
    plain = for_trl(FL, task_ids=["4x4"], seeds=[3], max_turns=8)
    assert setup.reward_funcs[0].__name__ == "agentenvs_process_reward_mean"
    objs = [setup.environment_factory(), plain.environment_factory()]
    for obj in objs:
        # the same stream for both, fixed (a rollout's stream is its instance number, which
        # depends on how many rollouts the process made before): one whose slips walk into
        # a worse move than the oracle's
        obj._index = 1
        obj.reset(**setup.rows[0])
    for move in moves:
        for obj in objs:
            obj.move(direction=move)
    grades = [s[5]["step_reward"] for s in objs[0]._steps]
    assert grades and all(g <= 0 for g in grades) and any(g < 0 for g in grades)
    episode = sum(s[2] for s in objs[0]._steps)
    got = setup.reward_funcs[0](environments=[objs[0]])
    assert got == [pytest.approx(episode + 2.0 * sum(grades) / len(grades))]
    assert got == [pytest.approx(process_return(episode, grades, how="mean", weight=2.0))]
    assert agentenvs_reward(environments=[objs[1]]) == [episode]
    with pytest.raises(ValueError, match="process_reward"):
        for_trl(FL, task_ids=["4x4"], process_reward="median")


def test_an_env_that_cannot_grade_steps_refuses_a_process_reward() -> None:
    pytest.importorskip(
        "datasets", reason="could not import datasets: pip install 'agentenvs[integrations]'"
    )
    from agentenvs.integrations.trl import for_trl

    env = gym.make("agentenvs/BFCLMultiTurn-v0")
    first = env.unwrapped.task_ids[0]
    env.close()
    setup = for_trl("agentenvs/BFCLMultiTurn-v0", task_ids=[first], process_reward="sum")
    obj = setup.environment_factory()
    obj.reset(**setup.rows[0])
    obj.act(action="nothing to call")
    with pytest.raises(ValueError, match="does not grade single steps"):
        setup.reward_funcs[0](environments=[obj])


def _example():
    spec = importlib.util.spec_from_file_location("trl_grpo_example_budgets", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


@pytest.mark.slow
@pytest.mark.timeout(600)  # two TRL steps of a tiny model: minutes on a loaded 2-core machine
@pytest.mark.parametrize("change", ["budgets", "process_reward"])
def test_grpo_trainer_trains_two_steps_with_budgetmix_or_a_process_reward(
    change: str, tmp_path
) -> None:
    pytest.importorskip("trl", reason="could not import trl: pip install 'agentenvs[integrations]'")
    pytest.importorskip("torch", reason="could not import torch: pip install 'agentenvs[hf]'")
    from trl import GRPOConfig, GRPOTrainer

    from agentenvs.integrations.trl import for_trl

    example = _example()
    # the one argument a user changes
    extra = (
        {"budgets": [2, 4, 8], "show_budget": True}
        if change == "budgets"
        else {"process_reward": "mean"}
    )
    if change != "budgets":
        extra["max_turns"] = 4
    setup = for_trl(FL, task_ids=["4x4"], seeds=range(8), **extra)
    assert setup.env_id == FL  # what the example's warm-up reads
    corpus = [m["content"] for r in setup.rows for m in r["prompt"]]
    corpus += example.demonstration(setup, random.Random(1)) * 4
    tokenizer = example.build_tokenizer(corpus)
    model = example.build_model(tokenizer, 0)
    example.warm_up(model, tokenizer, setup, 80, 0)  # so the model calls `move`
    config = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=64,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_steps=1,
        max_tool_calling_iterations=4,
        beta=0.0,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=setup.dataset,
        reward_funcs=setup.reward_funcs,
        environment_factory=setup.environment_factory,
    )
    trainer.train()
    assert trainer.state.global_step == 2
    # TRL's completions table (its last batch: one group of 4) keeps each rollout's budget
    budgets = list(trainer._logs["extra"]["agentenvs_max_turns"])
    assert len(budgets) == 4 and len(set(budgets)) == 1, budgets  # a group shares its row's budget
    envs = [e for pool in trainer._environment_pool.values() for e in pool]
    if change == "budgets":
        assert set(budgets) <= {2, 4, 8}
        assert all(len(e._steps) <= e._max_turns for e in envs)
        return
    assert trainer.reward_func_names == ["agentenvs_process_reward_mean"]
    assert set(budgets) == {4}
    # the last batch's logged rewards are the return plus the mean step grade of each rollout
    logged = list(trainer._logs["rewards"]["agentenvs_process_reward_mean"])[-4:]
    want = sorted(
        process_return(sum(s[2] for s in e._steps), [s[5]["step_reward"] for s in e._steps])
        for e in envs
    )
    assert sorted(logged) == pytest.approx(want)
    assert any(e._steps for e in envs)  # the model moved: step grades took part


def test_skyrl_rows_draw_budgets_and_steps_carry_the_process_reward() -> None:
    skyrl_gym = pytest.importorskip(
        "skyrl_gym", reason="could not import skyrl_gym: pip install 'agentenvs[integrations]'"
    )
    from agentenvs.integrations.skyrl import register_skyrl_envs, skyrl_dataset

    register_skyrl_envs([FL])
    rows = skyrl_dataset(
        FL,
        task_ids=["8x8"],
        seeds=range(10),
        budgets=[3, 6, 9],
        process_weight=0.5,
        show_budget=True,
    )
    want = [
        r["max_turns"] for r in task_rows(FL, task_ids=["8x8"], seeds=range(10), budgets=[3, 6, 9])
    ]
    assert [r["extra_info"]["max_turns"] for r in rows] == want and len(set(want)) > 1
    row = rows[0]
    env = skyrl_gym.make(FL, env_config={"show_budget": True}, extras=row)
    prompt, _ = env.init(row["prompt"])
    assert prompt[-1]["content"].endswith(f"[{want[0]} turns left]")
    twin = gym.make(FL, show_budget=True)
    twin.reset(seed=row["extra_info"]["seed"], options={"task_id": "8x8", "max_turns": want[0]})
    steps = 0
    for move in ["Right", "Down", "Up", "Left", "Down", "Right", "Down", "Down", "Right"]:
        twin.unwrapped.np_random = copy.deepcopy(env.env.unwrapped.np_random)  # the same slips
        _, reward, _, _, info = twin.step(move)
        out = env.step(move)
        steps += 1
        assert out["reward"] == pytest.approx(reward + 0.5 * info["step_reward"])
        if out["done"]:
            break
    assert steps <= want[0] and env.get_metrics()["max_turns"] == want[0]
    env.close()
    twin.close()


def test_verifiers_tasks_draw_budgets_and_traces_keep_them() -> None:
    pytest.importorskip(
        "verifiers.v1", reason="could not import verifiers: pip install 'agentenvs[integrations]'"
    )
    from verifiers.v1.utils.loaders import load_taskset

    from agentenvs.integrations.verifiers import AgentEnvsConfig

    config = AgentEnvsConfig(
        id="agentenvs_verifiers",
        env=FL,
        task_ids=["4x4"],
        seeds=list(range(10)),
        budgets=[2, 5],
        env_kwargs={"show_budget": True},
    )
    tasks = list(load_taskset(config))
    budgets = [t.data.info["max_turns"] for t in tasks]
    assert budgets == [
        r["max_turns"] for r in task_rows(FL, task_ids=["4x4"], seeds=range(10), budgets=[2, 5])
    ]
    assert set(budgets) == {2, 5}
    for task in tasks:
        assert task.data.prompt.rstrip().endswith(f"[{task.data.info['max_turns']} turns left]")
