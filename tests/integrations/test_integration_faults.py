"""A faulted rollout earns no reward in any trainer integration, and the fault is in the log.

The env is the real FrozenLake behind ``FaultAt``, which raises the ``Fault`` an
infrastructure failure raises (a container removed from outside) at the resets and steps
a ``Plan`` chooses, before FrozenLake sees the call. The integration code is the real one:
TRL's env objects, reward functions and rollout function (with a GRPO step of the real
``GRPOTrainer``), SkyRL-gym's registered env, verifiers' episode loop. Each test also
checks that every env made was closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.errors import Fault

FAULTY_ID = "faulty/FrozenLake-v0"


@dataclass
class Plan:
    """Which resets fault (``resets``, one entry per reset call, in order) and at which step
    each new env faults (``steps``, one entry per env made; ``None``: never)."""

    resets: list[bool] = field(default_factory=list)
    steps: list[int | None] = field(default_factory=list)
    made: int = 0
    closed: int = 0
    faults: int = 0


PLANS: dict[str, Plan] = {}


def fault() -> Fault:
    return Fault(
        "the episode's container was removed from outside",
        kind="container",
        evidence="the engine reports the container removed",
    )


class FaultAt(gym.Wrapper):
    def __init__(self, env: gym.Env, plan: str) -> None:
        super().__init__(env)
        self.plan = PLANS[plan]
        self.plan.made += 1
        self.fault_step = self.plan.steps.pop(0) if self.plan.steps else None
        self.steps = 0

    def reset(self, **kwargs: Any) -> Any:
        self.steps = 0
        if self.plan.resets and self.plan.resets.pop(0):
            self.plan.faults += 1
            raise fault()
        return super().reset(**kwargs)

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps == self.fault_step:
            self.plan.faults += 1
            raise fault()
        return super().step(action)

    def close(self) -> None:
        self.plan.closed += 1
        super().close()


def make_faulty(plan: str, **kwargs: Any) -> gym.Env:
    return FaultAt(gym.make("agentenvs/FrozenLake-v0", **kwargs), plan)


if FAULTY_ID not in gym.registry:  # registered as the bundled envs are
    gym.register(FAULTY_ID, entry_point=make_faulty, order_enforce=False, disable_env_checker=True)


@pytest.fixture()
def plan(request: pytest.FixtureRequest) -> Iterator[str]:
    name = request.node.name
    PLANS[name] = Plan()
    yield name
    made = PLANS.pop(name)
    assert made.closed == made.made, f"{made.made} envs made, {made.closed} closed"


def fault_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "agentenvs.integrations" and "agentenvs fault in" in r.getMessage()
    ]


# ---------------------------------------------------------------- TRL
trl = pytest.importorskip(
    "trl", reason="could not import trl: pip install 'agentenvs[integrations]'"
)


def test_trl_faulted_rollouts_have_no_reward_and_are_logged(
    plan: str, caplog: pytest.LogCaptureFixture
) -> None:
    from agentenvs.integrations.trl import FAULT_NOTICE, agentenvs_reward, for_trl

    caplog.set_level(logging.WARNING, "agentenvs.integrations")
    kwargs = {"plan": plan, "is_slippery": False}
    setup = for_trl(FAULTY_ID, task_ids=["4x4"], seeds=[0], max_turns=6, **kwargs)
    row = setup.dataset[0]
    script = ["Right", "Right", "Down", "Down", "Down", "Right"]  # 4x4: the goal

    def play(rollout: Any) -> list[str]:
        return [rollout.move(direction=d) for d in script]

    clean = setup.environment_factory()
    clean.reset(**row)
    clean_answers = play(clean)
    PLANS[plan].steps = [3]  # the next env faults at its third step
    stepped = setup.environment_factory()
    stepped.reset(**row)
    stepped_answers = play(stepped)
    PLANS[plan].resets = [True, True, True]  # every try of the next reset faults
    never = setup.environment_factory()
    assert never.reset(**row) == FAULT_NOTICE
    assert play(never) == [FAULT_NOTICE] * len(script)
    PLANS[plan].resets = [True]  # one fault, then the reset goes through
    retried = setup.environment_factory()
    retried.reset(**row)
    retried_answers = play(retried)

    assert stepped_answers[:2] == clean_answers[:2]
    assert stepped_answers[2:] == [FAULT_NOTICE] * 4  # nothing after the fault reaches an env
    assert retried_answers == clean_answers
    metrics: dict[str, float] = {}
    extra: dict[str, list[Any]] = {}
    rewards = agentenvs_reward(
        environments=[clean, stepped, never, retried],
        log_metric=metrics.__setitem__,
        log_extra=extra.__setitem__,
    )
    assert rewards[0] == 1.0 and rewards == [1.0, None, None, 1.0]
    assert metrics == {"agentenvs/faulted_rollouts": 2.0}
    assert extra["agentenvs_fault"] == [None, "container", "container", None]
    assert PLANS[plan].faults == 5
    logs = fault_logs(caplog)
    assert len(logs) == 5 and all('"kind": "container"' in line for line in logs)
    assert sum("step 3" in line for line in logs) == 1


def test_trl_dataset_rides_out_a_faulted_reset_and_gives_up_loudly(
    plan: str, caplog: pytest.LogCaptureFixture
) -> None:
    from agentenvs.integrations.trl import task_rows

    caplog.set_level(logging.WARNING, "agentenvs.integrations")
    clean = task_rows("agentenvs/FrozenLake-v0", task_ids=["4x4", "8x8"], seeds=[0, 1])
    PLANS[plan].resets = [False, True, False]
    assert task_rows(FAULTY_ID, task_ids=["4x4", "8x8"], seeds=[0, 1], plan=plan) == clean
    assert len(fault_logs(caplog)) == 1
    PLANS[plan].resets = [True] * 3
    with pytest.raises(Fault):
        task_rows(FAULTY_ID, task_ids=["4x4"], seeds=[0], plan=plan)


def test_trl_rollout_func_gives_faulted_groups_no_reward_in_a_grpo_step(
    plan: str, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("torch", reason="could not import torch: pip install 'agentenvs[hf]'")
    import importlib.util
    from pathlib import Path

    from trl import GRPOConfig, GRPOTrainer

    from agentenvs.integrations.trl import make_rollout_func, reward_from_rollout

    caplog.set_level(logging.WARNING, "agentenvs.integrations")
    example_path = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo.py"
    spec = importlib.util.spec_from_file_location("trl_grpo_example_faults", example_path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    rollout_func, dataset = make_rollout_func(
        FAULTY_ID, task_ids=["4x4"], seeds=range(2), max_turns=3, max_new_tokens=8, plan=plan
    )
    tokenizer = example.build_tokenizer([m["content"] for r in dataset for m in r["prompt"]])
    model = example.build_model(tokenizer, 0)
    config = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=32,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_steps=1,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=dataset,
        reward_funcs=[reward_from_rollout],
        rollout_func=rollout_func,
    )
    # a group whose first step faults: every rollout of it is left without a reward
    PLANS[plan].steps = [1, None, None, None]
    out = rollout_func([dataset[0]["prompt"]] * 4, trainer)
    assert out["env_reward"] == [None] * 4 and out["env_fault"] == ["container"] * 4
    assert reward_from_rollout(env_reward=out["env_reward"]) == [None] * 4
    # a group whose reset faults once is tried again and plays as usual
    PLANS[plan].resets = [True]
    out = rollout_func([dataset[1]["prompt"]] * 4, trainer)
    assert None not in out["env_reward"] and out["env_fault"] == [None] * 4
    # in the trainer: every reset faults, the step still trains, the faults are its metric
    PLANS[plan].resets = [True] * 6
    trainer.train()
    assert trainer.state.global_step == 1
    logged = next(
        entry for entry in trainer.state.log_history if "agentenvs/faulted_rollouts" in entry
    )
    assert logged["agentenvs/faulted_rollouts"] == 4.0
    assert len(fault_logs(caplog)) == 1 + 1 + 3  # the step, the retried reset, the 3 tries


# ---------------------------------------------------------------- SkyRL-gym
def test_skyrl_a_faulted_step_raises_closes_and_logs(
    plan: str, caplog: pytest.LogCaptureFixture
) -> None:
    skyrl_gym = pytest.importorskip("skyrl_gym")
    from agentenvs.integrations.skyrl import register_skyrl_envs

    caplog.set_level(logging.WARNING, "agentenvs.integrations")
    register_skyrl_envs([FAULTY_ID])
    extras = {"extra_info": {"task_id": "4x4", "seed": 0}}
    PLANS[plan].resets = [True]
    PLANS[plan].steps = [None, 2]  # the env made after the faulted reset faults at step 2
    env = skyrl_gym.make(FAULTY_ID, env_config={"plan": plan}, extras=extras)
    prompt, _ = env.init([{"role": "user", "content": ""}])
    assert "Map" in prompt[-1]["content"] or prompt[-1]["content"]
    first = env.step("<answer>Right</answer>")
    assert not first["done"]
    with pytest.raises(Fault, match="removed from outside"):
        env.step("<answer>Right</answer>")
    assert PLANS[plan].closed == PLANS[plan].made == 2
    env.close()  # SkyRL's own close after the failure: harmless
    assert len(fault_logs(caplog)) == 2
    PLANS[plan].resets = [True] * 3
    doomed = skyrl_gym.make(FAULTY_ID, env_config={"plan": plan}, extras=extras)
    with pytest.raises(Fault):
        doomed.init([{"role": "user", "content": ""}])


# ---------------------------------------------------------------- verifiers
def test_verifiers_a_faulted_episode_is_an_env_error_without_a_reward(
    plan: str, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("verifiers")
    from verifiers.v1.errors import EnvError

    from agentenvs.integrations.verifiers import EnvFault, play_episode

    caplog.set_level(logging.WARNING, "agentenvs.integrations")
    info = {
        "env": FAULTY_ID,
        "env_kwargs": {"plan": plan, "is_slippery": False},
        "task_id": "4x4",
        "seed": 0,
        "max_turns": 6,
    }
    moves = iter(["Right", "Right", "Down", "Down", "Down", "Right"])

    async def turn(text: str | None) -> str | None:
        return f"<answer>{next(moves)}</answer>"

    PLANS[plan].resets = [True]  # retried: the episode plays as if nothing failed
    outcome = asyncio.run(play_episode(info, turn))
    assert outcome["success"] and outcome["reward"] == 1.0
    moves = iter(["Right", "Right", "Down", "Down", "Down", "Right"])
    PLANS[plan].steps = [4]
    with pytest.raises(EnvFault, match=r"agentenvs fault \(container, infrastructure\)") as info_:
        asyncio.run(play_episode(info, turn))
    assert isinstance(info_.value, EnvError) and info_.value.record["kind"] == "container"
    PLANS[plan].resets = [True] * 3
    with pytest.raises(EnvFault):
        asyncio.run(play_episode(info, turn))
    assert len(fault_logs(caplog)) == 1 + 1 + 3
