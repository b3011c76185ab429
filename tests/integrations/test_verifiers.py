"""verifiers: the taskset loads through verifiers' own loaders by id, tasks carry the rules
once, and episodes played through the env's loop equal the same episodes in process."""

from __future__ import annotations

import asyncio

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids

pytest.importorskip("verifiers.v1", reason="could not import verifiers: pip install 'agentenvs[integrations]'")

from verifiers.v1.utils.loaders import (  # noqa: E402
    environment_class,
    load_environment,
    load_taskset,
    taskset_class,
)

from agentenvs.integrations.verifiers import (  # noqa: E402
    AgentEnvsConfig,
    AgentEnvsEnv,
    AgentEnvsEnvConfig,
    AgentEnvsTaskset,
    play_episode,
)

TASKSET_ID = "agentenvs_verifiers"


def test_verifiers_finds_the_taskset_and_env_by_id() -> None:
    assert taskset_class(TASKSET_ID) is AgentEnvsTaskset
    assert environment_class(TASKSET_ID) is AgentEnvsEnv
    config = AgentEnvsEnvConfig(taskset=AgentEnvsConfig(id=TASKSET_ID, env="agentenvs/FrozenLake-v0"))
    env = load_environment(config)
    assert isinstance(env, AgentEnvsEnv)
    assert type(env._harnesses["player"]).__name__ == "NullHarness"  # a chat agent, no shell


def test_tasks_carry_the_system_prompt_once_and_the_reset_arguments() -> None:
    config = AgentEnvsConfig(id=TASKSET_ID, env="agentenvs/FrozenLake-v0", task_ids=["4x4", "8x8"],
                             seeds=[0, 1], max_turns=7)
    tasks = list(load_taskset(config))
    assert [t.data.info["task_id"] for t in tasks] == ["4x4", "4x4", "8x8", "8x8"]
    env = gym.make("agentenvs/FrozenLake-v0")
    for task in tasks:
        info = task.data.info
        obs, reset_info = env.reset(seed=info["seed"], options={"task_id": info["task_id"], "max_turns": 7})
        assert task.data.system_prompt == reset_info["system_prompt"]
        assert obs == f"{task.data.system_prompt}\n\n{task.data.prompt}"
    env.close()


def test_episodes_through_the_env_loop_equal_in_process_ones() -> None:
    config = AgentEnvsConfig(id=TASKSET_ID, env="agentenvs/InterCodeSQL-v0", seeds=[0, 1, 2, 3])
    tasks = list(load_taskset(config).take(6))
    probe = gym.make("agentenvs/InterCodeSQL-v0")

    def script(info: dict) -> list[str]:
        probe.reset(seed=info["seed"], options={"task_id": info["task_id"]})
        return ["SELECT * FROM no_such_table", f"```sql\n{probe.unwrapped.gold_query}\n```", "submit"]

    async def play_all() -> list[tuple[dict, list[str | None]]]:
        async def one(task) -> tuple[dict, list[str | None]]:
            replies = iter(script(task.data.info))
            seen: list[str | None] = []

            async def turn(text: str | None) -> str | None:
                seen.append(text)
                return next(replies, None)

            return await play_episode(task.data.info, turn), seen

        return await asyncio.gather(*(one(t) for t in tasks))

    results = asyncio.run(play_all())
    for task, (outcome, seen) in zip(tasks, results, strict=True):
        env = gym.make("agentenvs/InterCodeSQL-v0")
        env.reset(seed=task.data.info["seed"], options={"task_id": task.data.info["task_id"]})
        observations = [None]
        total = 0.0
        for action in script(task.data.info):
            obs, reward, terminated, truncated, _ = env.step(action)
            total += reward
            observations.append(obs)
            if terminated or truncated:
                break
        env.close()
        assert seen == observations[:-1]  # each observation became the next user turn
        assert outcome == {"reward": total, "success": True, "score": 1.0, "turns": 3, "stopped": "terminated"}
    probe.close()


def test_a_model_that_stops_ends_the_episode_and_the_env_is_closed() -> None:
    closed = []
    original = gym.Env.close

    async def main() -> dict:
        async def turn(text: str | None) -> str | None:
            return None if text is not None else "SELECT 1"

        return await play_episode({"env": "agentenvs/InterCodeSQL-v0", "seed": 0}, turn)

    def spy(self):  # type: ignore[no-untyped-def]
        closed.append(type(self.unwrapped).__name__)
        return original(self)

    gym.Env.close = spy  # type: ignore[method-assign]
    try:
        outcome = asyncio.run(main())
    finally:
        gym.Env.close = original  # type: ignore[method-assign]
    assert outcome["stopped"] == "model" and outcome["turns"] == 1
    assert "InterCodeSQLEnv" in closed


def test_an_eval_selects_five_tasks_unless_told_and_says_so_while_a_trainer_gets_all(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from verifiers.v1.configs.select import SelectCLIConfig

    config = AgentEnvsConfig(id=TASKSET_ID, env="agentenvs/FrozenLake-v0", seeds=[0, 1])
    taskset = load_taskset(config)
    every = [t.data.id for t in taskset]  # a trainer iterates the taskset itself
    probe = gym.make("agentenvs/FrozenLake-v0")
    ids = len(probe.unwrapped.task_ids)
    probe.close()
    assert len(every) == ids * 2 > 5

    chosen = [t.data.id for t in taskset.select(SelectCLIConfig())]  # vf-eval without -n
    assert chosen == every[:5]
    assert capsys.readouterr().err == (
        f"agentenvs/FrozenLake-v0: running 5 of {ids * 2} tasks ({ids} task ids × 2 seeds) × -r rollouts "
        f"each (default 1) = 5 episodes at -r 1; -n N for more (-n {ids * 2}: all)\n"
    )
    assert [t.data.id for t in taskset.select(SelectCLIConfig(limit=7, skip=2))] == every[2:9]
    assert "running 7 of" in capsys.readouterr().err
    everything = [t.data.id for t in taskset.select(SelectCLIConfig(limit=ids * 2))]
    assert everything == every
    said = capsys.readouterr().err
    assert f"running {ids * 2} of {ids * 2} tasks" in said and "for more" not in said

    unlimited = load_taskset(config.model_copy(update={"eval_limit": None}))
    assert [t.data.id for t in unlimited.select(SelectCLIConfig())] == every
