"""SkyRL-gym: agentenvs ids registered with skyrl_gym; episodes through its make/init/step/close
equal the same episodes in process; samples of one row diverge; envs are closed."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids

skyrl_gym = pytest.importorskip("skyrl_gym", reason="could not import skyrl_gym: pip install 'agentenvs[integrations]'")

from agentenvs.integrations.common import json_safe  # noqa: E402
from agentenvs.integrations.skyrl import register_skyrl_envs, skyrl_dataset  # noqa: E402


def test_every_id_is_registered_and_rows_have_skyrls_fields() -> None:
    ids = register_skyrl_envs()
    assert set(ids) == set(agentenvs.registered_ids())
    assert register_skyrl_envs() == ids  # idempotent
    rows = skyrl_dataset("agentenvs/FrozenLake-v0", seeds=range(3), task_ids=["4x4"], max_turns=5)
    assert len(rows) == 3
    for row in rows:
        assert row["env_class"] == "agentenvs/FrozenLake-v0"
        assert row["prompt"][0]["role"] == "system" and row["prompt"][1] == {"role": "user", "content": ""}
        assert row["extra_info"]["task_id"] == "4x4" and row["extra_info"]["max_turns"] == 5


def run_skyrl(row: dict, actions: list[str], env_config: dict) -> tuple[list, list]:
    env = skyrl_gym.make(row["env_class"], env_config=env_config, extras=row)
    prompt, meta = env.init(row["prompt"])
    out = [prompt[-1]["content"]]
    for action in actions:
        step = env.step(action)
        md = step["metadata"]
        out.append((md["observation"], step["reward"], md["terminated"], md["truncated"], md["info"]))
        if step["done"]:
            assert step["observations"] == []
            break
        assert step["observations"] == [{"role": "user", "content": md["observation"]}]
    env.close()
    return prompt, out


def test_episodes_equal_in_process_and_samples_diverge() -> None:
    register_skyrl_envs(["agentenvs/FrozenLake-v0"])
    config = {"map_name": "8x8"}
    row = skyrl_dataset("agentenvs/FrozenLake-v0", seeds=[4], task_ids=["8x8"], max_turns=10, **config)[0]
    actions = ["Right", "Right", "Down", "Right", "Down", "Down", "Right", "Down", "Down", "Right"]
    samples = [run_skyrl(row, actions, config) for _ in range(6)]
    prompt, first = samples[0]
    assert prompt[0] == row["prompt"][0]  # the rules once, as the system message
    env = gym.make("agentenvs/FrozenLake-v0", **config)
    obs, info = env.reset(seed=4, options={"task_id": "8x8", "max_turns": 10})
    assert obs == f"{prompt[0]['content']}\n\n{first[0]}"
    assert len({tuple(map(str, s[1])) for s in samples}) > 1  # each sample slips its own way
    assert len({s[1][0] for s in samples}) == 1  # from one start
    # with a non-slippery lake the episode is fixed, and equals the in-process one step by step
    calm = {"map_name": "8x8", "is_slippery": False}
    row = skyrl_dataset("agentenvs/FrozenLake-v0", seeds=[4], task_ids=["8x8"], max_turns=10, **calm)[0]
    _, got = run_skyrl(row, actions, calm)
    env = gym.make("agentenvs/FrozenLake-v0", **calm)
    env.reset(seed=4, options={"task_id": "8x8", "max_turns": 10})
    want = []
    for action in actions[: len(got) - 1]:
        o, r, te, tr, i = env.step(action)
        want.append((o, float(r), te, tr, json_safe(i)))
    assert got[1:] == want


def test_sql_episode_scores_through_skyrl_and_closes_its_database() -> None:
    register_skyrl_envs(["agentenvs/InterCodeSQL-v0"])
    rows = skyrl_dataset("agentenvs/InterCodeSQL-v0", seeds=[0, 1, 2])
    for row in rows:
        env = skyrl_gym.make(row["env_class"], extras=row)
        env.init(row["prompt"])
        gold = env.env.unwrapped.gold_query
        assert env.step(f"```sql\n{gold}\n```")["done"] is False
        last = env.step("submit")
        assert last["done"] and last["reward"] == 1.0
        assert env.get_metrics()["success"] == 1.0
        inner = env.env.unwrapped
        env.close()
        env.close()  # idempotent
        assert inner._episode is None  # the episode's database is gone
