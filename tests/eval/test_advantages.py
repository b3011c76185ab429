"""Group-relative advantages: GRPO and GiGPO on groups small enough to compute by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agentenvs.eval.advantages import (
    START_KEY,
    Trajectory,
    discounted_returns,
    episode_advantages,
    gigpo_advantages,
    grpo_advantages,
    step_advantages,
    step_groups,
)


def test_episode_advantages_by_hand() -> None:
    # returns 1, 0, 0, 1: mean 0.5, sample std sqrt(4 * 0.25 / 3) = 1/sqrt(3)
    adv = episode_advantages([1.0, 0.0, 0.0, 1.0], eps=0.0)
    assert adv == pytest.approx([math.sqrt(3) / 2, -math.sqrt(3) / 2, -math.sqrt(3) / 2, math.sqrt(3) / 2])
    # returns 1, 0, 0, 0: mean 0.25, sample std sqrt((0.5625 + 3 * 0.0625) / 3) = 0.5
    assert episode_advantages([1, 0, 0, 0], eps=0.0) == pytest.approx([1.5, -0.5, -0.5, -0.5])
    assert episode_advantages([1, 0, 0, 0], normalize_std=False) == pytest.approx([0.75, -0.25, -0.25, -0.25])


def test_episode_advantages_degenerate_groups() -> None:
    # all equal: no signal, and no division by zero
    assert episode_advantages([1.0, 1.0, 1.0]) == pytest.approx([0.0, 0.0, 0.0])
    # a group of one is its own mean
    assert episode_advantages([0.7]) == pytest.approx([0.0])
    # eps keeps a tiny spread finite: (x - mean) / (std + eps)
    adv = episode_advantages([0.0, 2e-6], eps=1e-6)
    std = np.std([0.0, 2e-6], ddof=1)
    assert adv == pytest.approx([-1e-6 / (std + 1e-6), 1e-6 / (std + 1e-6)])
    with pytest.raises(ValueError):
        episode_advantages([])
    with pytest.raises(ValueError):
        episode_advantages([1.0, 0.0], eps=-1.0)


def test_discounted_returns_by_hand() -> None:
    assert discounted_returns([0, 0, 1], gamma=0.5) == pytest.approx([0.25, 0.5, 1.0])
    assert discounted_returns([1, 0, 2], gamma=0.9) == pytest.approx([1 + 0.81 * 2, 1.8, 2.0])
    assert discounted_returns([], gamma=0.9).shape == (0,)
    with pytest.raises(ValueError):
        discounted_returns([1.0], gamma=1.5)


def _hand_group() -> list[Trajectory]:
    # three rollouts from start S; "A" is reached by all, "B" by two, "C" by one
    return [
        Trajectory([0.0, 0.0, 1.0], ["S", "A", "B"]),  # wins at step 3
        Trajectory([0.0, 0.0], ["S", "A"]),  # falls at step 2
        Trajectory([0.0, 0.0, 0.0], ["S", "B", "C"]),  # truncated
    ]


def test_step_groups_collect_equal_states() -> None:
    groups = step_groups(_hand_group())
    assert groups == {
        "S": [(0, 0), (1, 0), (2, 0)],
        "A": [(0, 1), (1, 1)],
        "B": [(0, 2), (2, 1)],
        "C": [(2, 2)],
    }


def test_step_advantages_by_hand() -> None:
    gamma = 0.5
    # returns-to-go: traj0 [0.25, 0.5, 1], traj1 [0, 0], traj2 [0, 0, 0]
    # S: {0.25, 0, 0}: mean 1/12, std sqrt(((1/6)^2 + 2 (1/12)^2) / 2) = sqrt(1/48)
    s_std = math.sqrt(1 / 48)
    # A: {0.5, 0}: mean 0.25, std sqrt(2 * 0.0625) = sqrt(0.125);  B: {1, 0}: std sqrt(0.5)
    adv = step_advantages(_hand_group(), gamma=gamma, eps=0.0)
    assert adv[0] == pytest.approx([(0.25 - 1 / 12) / s_std, 0.25 / math.sqrt(0.125), 0.5 / math.sqrt(0.5)])
    assert adv[1] == pytest.approx([(-1 / 12) / s_std, -0.25 / math.sqrt(0.125)])
    assert adv[2] == pytest.approx([(-1 / 12) / s_std, -0.5 / math.sqrt(0.5), 0.0])  # C is alone
    # without the std: plain differences from each anchor group's mean
    plain = step_advantages(_hand_group(), gamma=gamma, normalize_std=False)
    assert plain[0] == pytest.approx([0.25 - 1 / 12, 0.25, 0.5])
    assert plain[1] == pytest.approx([-1 / 12, -0.25])
    assert plain[2] == pytest.approx([-1 / 12, -0.5, 0.0])


def test_gigpo_combines_episode_and_step_advantages() -> None:
    group = _hand_group()
    # episode returns 1, 0, 0: mean 1/3, no std -> 2/3, -1/3, -1/3
    combined = gigpo_advantages(group, step_weight=0.5, gamma=0.5, normalize_std=False)
    assert combined[0] == pytest.approx(2 / 3 + 0.5 * np.array([0.25 - 1 / 12, 0.25, 0.5]))
    assert combined[1] == pytest.approx(-1 / 3 + 0.5 * np.array([-1 / 12, -0.25]))
    assert combined[2] == pytest.approx(-1 / 3 + 0.5 * np.array([-1 / 12, -0.5, 0.0]))


def test_grpo_broadcasts_the_episode_advantage() -> None:
    group = _hand_group()
    adv = grpo_advantages(group, eps=0.0)
    # returns 1, 0, 0: mean 1/3, sample std sqrt((4/9 + 2/9) / 2) = 1/sqrt(3)
    a_win, a_lose = (2 / 3) * math.sqrt(3), (-1 / 3) * math.sqrt(3)
    assert adv[0] == pytest.approx([a_win] * 3)
    assert adv[1] == pytest.approx([a_lose] * 2)
    assert adv[2] == pytest.approx([a_lose] * 3)
    assert [len(a) for a in adv] == [3, 2, 3]


def test_explicit_episode_return_wins_over_the_reward_sum() -> None:
    group = [Trajectory([0.0], ["S"], episode_return=0.4), Trajectory([0.0], ["S"])]
    assert group[0].episode_return == 0.4
    assert grpo_advantages(group, normalize_std=False)[0] == pytest.approx([0.2])


def test_trajectory_from_env_infos_and_runner_records() -> None:
    reset_info = {"state_key": "s0"}
    infos = [{"state_key": "s1"}, {"state_key": "s2"}, {"state_key": "s3"}]
    traj = Trajectory.from_steps(reset_info, infos, [0.0, 0.0, 1.0])
    assert traj.state_keys == ("s0", "s1", "s2")  # the state each action was taken from
    assert traj.episode_return == 1.0
    record = {
        "reward_sum": 1.0,
        "steps": [{"reward": r, "info": i} for r, i in zip([0.0, 0.0, 1.0], infos, strict=True)],
    }
    from_record = Trajectory.from_record(record)
    assert from_record.state_keys == (START_KEY, "s1", "s2")
    assert from_record.rewards == (0.0, 0.0, 1.0)


def test_bad_trajectories_are_refused() -> None:
    with pytest.raises(ValueError, match="one state key per step"):
        Trajectory([0.0, 1.0], ["S"])
    with pytest.raises(ValueError):
        Trajectory([float("nan")], ["S"])
    with pytest.raises(ValueError):
        step_advantages([])
    with pytest.raises(TypeError):
        step_advantages([([0.0], ["S"])])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        gigpo_advantages(_hand_group(), step_weight=float("inf"))


def test_gigpo_on_a_real_group() -> None:
    """State keys from GroupEnv group steps across rollouts that meet in the same cell."""
    import agentenvs  # noqa: F401
    from agentenvs.wrappers import GroupEnv

    env = GroupEnv("agentenvs/FrozenLake-v0", group_size=6, map_name="4x4", max_turns=6)
    try:
        obs, infos = env.reset(seed=11)
        history = {a: ([infos[a]], []) for a in env.agents}
        moves = ["Down", "Right", "Down", "Right", "Down", "Right"]
        turn = 0
        while env.agents:
            actions = {a: f"<answer>{moves[turn]}</answer>" for a in env.agents}
            _, rewards, _, _, step_infos = env.step(actions)
            for a in actions:
                history[a][0].append(step_infos[a])
                history[a][1].append(rewards[a])
            turn += 1
        group = [Trajectory.from_steps(h[0][0], h[0][1:], h[1]) for h in history.values()]
    finally:
        env.close()
    groups = step_groups(group)
    # every rollout's first action is from the start cell
    first = group[0].state_keys[0]
    assert len(groups[first]) >= 6
    adv = gigpo_advantages(group)
    assert [a.shape for a in adv] == [(len(t),) for t in group]
    assert all(np.isfinite(a).all() for a in adv)
