"""GroupEnv: PettingZoo's parallel API and seed tests, identical starts, divergence,
snapshot starts, rollouts finishing on their own, wrappers shared by the group."""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings

import gymnasium as gym
import pytest
from _toy_env import LineWalkEnv
from pettingzoo.test import parallel_api_test, parallel_seed_test
from pettingzoo.utils import parallel_to_aec

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.core.snapshot import take_snapshot
from agentenvs.envs.frozenlake import FrozenLakeEnv
from agentenvs.wrappers import BUDGET_SAMPLED, BudgetMix, InjectError
from agentenvs.wrappers.group import GROUP_SEED, GroupEnv

LAKE = "agentenvs/FrozenLake-v0"


def lake_group(k: int = 4, **kwargs: object) -> GroupEnv:
    return GroupEnv(LAKE, group_size=k, **{"map_name": "4x4", "max_turns": 6, **kwargs})


def play(env: GroupEnv, action: str = "<answer>Right</answer>") -> list[dict]:
    """Step every live rollout with ``action`` until all are done; the per-step infos."""
    steps = []
    while env.agents:
        steps.append(env.step(dict.fromkeys(env.agents, action)))
    return steps


# ---------------------------------------------------------------- PettingZoo's harness
@pytest.mark.parametrize("kwargs", [{"map_name": "4x4"}, {"size": 4, "p": 0.8}, {}])
def test_parallel_api_test(kwargs: dict) -> None:
    # random text from FreeText.sample is an invalid move: episodes end by truncation
    env = GroupEnv(LAKE, group_size=3, max_turns=5, **kwargs)
    with warnings.catch_warnings():
        # the harness's own reset(options={"options": 1}) is ignored with a warning
        warnings.filterwarnings("ignore", message="GroupEnv.reset ignores")
        parallel_api_test(env, num_cycles=40)
    env.close()


def test_parallel_api_test_on_the_line_walk() -> None:
    env = GroupEnv(LineWalkEnv, group_size=5)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="GroupEnv.reset ignores")
        parallel_api_test(env, num_cycles=40)


def test_parallel_seed_test() -> None:
    # string actions and observations: data_equivalence compares them with ==
    parallel_seed_test(lambda: lake_group(4), num_cycles=20)
    parallel_seed_test(lambda: GroupEnv(LineWalkEnv, group_size=3), num_cycles=20)


def test_parallel_to_aec_converter() -> None:
    aec = parallel_to_aec(lake_group(3))
    aec.reset(seed=5)
    assert aec.agents == ["rollout_0", "rollout_1", "rollout_2"]
    turns = 0
    for _agent in aec.agent_iter(max_iter=200):
        obs, _, terminated, truncated, info = aec.last()
        assert isinstance(obs, str) and "state_key" in info
        aec.step(None if terminated or truncated else "<answer>Down</answer>")
        turns += 1
    assert not aec.agents and turns > 3


# ---------------------------------------------------------------- starts and divergence
def test_rollouts_start_identical() -> None:
    env = GroupEnv(LAKE, group_size=5, size=4, p=0.8)
    obs, infos = env.reset(seed=7)
    assert list(obs) == [f"rollout_{i}" for i in range(5)] == env.agents
    assert len(set(obs.values())) == 1
    for key in ("task_id", "state_key", "max_turns", "position", "system_prompt"):
        assert len({repr(info[key]) for info in infos.values()}) == 1, key
    assert {info[GROUP_SEED] for info in infos.values()} == {7}
    # each rollout has its own info dict
    infos["rollout_0"]["mutated"] = True
    assert "mutated" not in infos["rollout_1"]
    # the underlying states are equal, not only the text
    snaps = [take_snapshot(env.rollout_env(a)) for a in env.agents]
    assert len({pickle.dumps((s.state, s.base["turn"], s.base["task_id"])) for s in snaps}) == 1


def test_same_action_diverges_through_each_rollouts_rng() -> None:
    env = lake_group(8, max_turns=6)  # slippery: a move slips with probability 2/3
    env.reset(seed=3)
    first = env.step(dict.fromkeys(env.agents, "<answer>Right</answer>"))
    positions = {a: info["position"] for a, info in first[4].items()}
    assert len(set(positions.values())) > 1  # same action, different outcomes
    # ... and deterministically so: the same seed replays every rollout exactly
    again = lake_group(8, max_turns=6)
    again.reset(seed=3)
    assert again.step(dict.fromkeys(again.agents, "<answer>Right</answer>"))[4] == first[4]


def test_rollout_streams_depend_on_seed_and_index_only() -> None:
    def trace(k: int, seed: int) -> list:
        env = GroupEnv(LineWalkEnv, group_size=k)
        env.reset(seed=seed, options={"task_id": "line-7"})
        return [infos for _, _, _, _, infos in play(env, "right")]

    small, large = trace(2, 9), trace(4, 9)
    # rollouts 0 and 1 follow the same path whatever the group size
    for step_small, step_large in zip(small, large, strict=False):
        for agent in step_small:
            assert step_small[agent]["state_key"] == step_large[agent]["state_key"]
    assert trace(4, 10) != large


def test_unseeded_resets_draw_new_reproducible_episodes() -> None:
    def seeds(env: GroupEnv) -> list[int]:
        out = []
        for i in range(4):
            _, infos = env.reset(seed=21 if i == 0 else None)
            out.append(infos["rollout_0"][GROUP_SEED])
        return out

    a, b = seeds(lake_group(2)), seeds(lake_group(2))
    assert a == b and len(set(a)) == 4


def test_reset_passes_env_options_to_every_rollout() -> None:
    env = GroupEnv(LAKE, group_size=3)
    obs, infos = env.reset(seed=1, options={"task_id": "8x8", "max_turns": 4})
    assert {i["task_id"] for i in infos.values()} == {"8x8"}
    assert {i["max_turns"] for i in infos.values()} == {4}
    steps = play(env)
    assert len(steps) == 4 or not env.agents
    assert all(info["turn"] <= 4 for _, _, _, _, infos in steps for info in infos.values())


def test_unknown_options_warn_and_are_ignored() -> None:
    env = lake_group(2)
    with pytest.warns(UserWarning, match=r"ignores option\(s\) \['colour'\]"):
        env.reset(seed=0, options={"colour": "blue", "max_turns": 3})
    assert env.rollout_env("rollout_1").unwrapped.episode_max_turns == 3


# ---------------------------------------------------------------- snapshot starts
def test_snapshot_start() -> None:
    lake = gym.make(LAKE, map_name="4x4", max_turns=10)
    lake.reset(seed=4)
    # Left from column 0 of the 4x4 map bumps the edge or slips along it: never a hole
    lake.step("<answer>Left</answer>")
    lake.step("<answer>Left</answer>")
    snap = take_snapshot(lake)
    cell, turn = lake.unwrapped.position, lake.unwrapped.turn

    env = GroupEnv(LAKE, group_size=4, map_name="4x4", max_turns=10)
    obs, infos = env.reset(seed=8, options={"snapshot": snap})
    assert set(obs.values()) == {lake.unwrapped._last_obs}
    for info in infos.values():
        assert info["position"] == cell and info["turn"] == turn
        assert info["turns_left"] == 10 - turn and "system_prompt" in info
        assert info["state_key"] == lake.unwrapped.state_key()
    # the rollouts go on from the snapshot's turn, with the snapshot's budget
    steps = play(env)
    assert len(steps) <= 10 - turn
    # and diverge like any group; the same seed replays them
    again = GroupEnv(LAKE, group_size=4, map_name="4x4", max_turns=10)
    again.reset(seed=8, options={"snapshot": snap})
    assert play(again)[0][4] == steps[0][4]


def test_snapshot_start_refusals() -> None:
    lake = gym.make(LAKE, map_name="4x4", max_turns=1)
    lake.reset(seed=0)
    live = take_snapshot(lake)
    lake.step("<answer>Left</answer>")
    finished = take_snapshot(lake)
    env = lake_group(2, max_turns=1)
    with pytest.raises(ValueError, match="finished episode"):
        env.reset(options={"snapshot": finished})
    with pytest.raises(ValueError, match="takes no env options"):
        env.reset(options={"snapshot": live, "max_turns": 3})
    with pytest.raises(TypeError, match="must be a Snapshot"):
        env.reset(options={"snapshot": "not a snapshot"})
    other = GroupEnv(LineWalkEnv, group_size=2)
    with pytest.raises(Exception, match="cannot be restored"):
        other.reset(options={"snapshot": live})


# ---------------------------------------------------------------- finishing on their own
def test_rollouts_finish_independently() -> None:
    # 4x4: Left from the start bumps the edge (stays); Down twice then Right... each rollout
    # gets its own actions; one walks into the hole at (1, 1) on non-slippery ice
    env = GroupEnv(LAKE, group_size=3, map_name="4x4", is_slippery=False, max_turns=3)
    env.reset(seed=0)
    obs, rewards, terms, truncs, infos = env.step(
        {"rollout_0": "<answer>Right</answer>", "rollout_1": "Down", "rollout_2": "Left"}
    )
    assert set(obs) == {"rollout_0", "rollout_1", "rollout_2"}
    assert not any(terms.values())
    obs, rewards, terms, truncs, infos = env.step(
        {"rollout_0": "Down", "rollout_1": "Right", "rollout_2": "garbage"}
    )
    assert terms == {"rollout_0": True, "rollout_1": True, "rollout_2": False}  # both in (1, 1)
    assert infos["rollout_0"]["position"] == (1, 1) and not infos["rollout_2"]["action_valid"]
    assert env.agents == ["rollout_2"]
    with pytest.raises(ValueError, match="not live"):
        env.step({"rollout_0": "Down", "rollout_2": "Down"})
    with pytest.raises(ValueError, match="missing"):
        env.step({})
    obs, rewards, terms, truncs, infos = env.step({"rollout_2": "Down"})
    assert set(obs) == {"rollout_2"} and truncs == {"rollout_2": True}
    assert env.agents == []
    assert env.step({}) == ({}, {}, {}, {}, {})


def test_wrappers_are_shared_by_the_group() -> None:
    def factory() -> gym.Env:
        return BudgetMix(FrozenLakeEnv(map_name="4x4"), budgets=[3, 4, 5, 6, 7])

    env = GroupEnv(factory, group_size=4)
    budgets = set()
    for seed in range(6):
        _, infos = env.reset(seed=seed)
        per_rollout = {info[BUDGET_SAMPLED] for info in infos.values()}
        assert len(per_rollout) == 1  # one budget for the whole group
        assert {i["max_turns"] for i in infos.values()} == per_rollout
        budgets |= per_rollout
        steps = play(env, "garbage")  # invalid moves: every rollout truncates at the budget
        assert len(steps) == per_rollout.pop()
    assert len(budgets) > 1

    injected = GroupEnv(lambda: InjectError(FrozenLakeEnv(map_name="4x4"), turn=1), group_size=2)
    injected.reset(seed=0)
    _, _, _, _, infos = injected.step(dict.fromkeys(injected.agents, "<answer>Right</answer>"))
    assert all(info["error_injected"] for info in infos.values())


def test_render_and_state_keys() -> None:
    env = lake_group(2, render_mode="ansi")
    obs, infos = env.reset(seed=0)
    text = env.render()
    assert text is not None and "[rollout_0]" in text and "[rollout_1]" in text
    assert env.state_keys() == {a: i["state_key"] for a, i in infos.items()}
    assert lake_group(2).render() is None


def test_constructor_checks_and_close() -> None:
    with pytest.raises(ValueError, match="group_size"):
        GroupEnv(LAKE, group_size=0)
    with pytest.raises(TypeError, match="TextEnv"):
        GroupEnv(lambda: gym.make("CartPole-v1"), group_size=2)
    with pytest.raises(TypeError):
        GroupEnv(42, group_size=2)  # type: ignore[arg-type]
    env = lake_group(2)
    env.close()
    env.close()  # idempotent
    assert str(env) == "agentenvs_group_v0"


def test_import_agentenvs_stays_light() -> None:
    code = (
        "import sys, agentenvs, agentenvs.wrappers;"
        "assert 'pettingzoo' not in sys.modules, 'pettingzoo';"
        "from agentenvs.wrappers import GroupEnv;"
        "assert 'pettingzoo' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
