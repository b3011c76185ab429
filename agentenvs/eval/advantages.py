"""Group-relative advantages for multi-turn RL: GRPO (episode level) and GiGPO (step level).

A *group* is the K trajectories sampled from one start (one task, one seed, one budget:
what ``GroupEnv`` produces). Each trajectory is a ``Trajectory``: the reward of every
step and the ``state_key`` of the state each action was taken *from*.

- ``episode_advantages``: GRPO's ``A_i = (R_i - mean(R)) / (std(R) + eps)`` over the
  group's episode returns (``normalize_std=False`` keeps only the mean, as Dr. GRPO and
  GiGPO's ``mean_norm`` do).
- ``step_advantages``: GiGPO's step-level advantage (Feng et al., 2025, "Group-in-Group
  Policy Optimization for LLM Agent Training"). Steps of the group's trajectories that
  start from the same state (equal ``state_key``, the *anchor state*) form a step group;
  within it, each step's discounted return-to-go ``G_t = sum_k gamma^k r_{t+k}`` is
  normalized the same way. A step whose state no other step shares gets 0.
- ``gigpo_advantages``: ``A = A_episode + step_weight * A_step`` per step (GiGPO's
  combination, ``step_weight`` being its ω; ``step_weight=0`` is GRPO broadcast to steps).

Conventions, as in verl / verl-agent's GRPO and GiGPO code: the standard deviation is the
sample one (``n - 1`` in the denominator), ``eps = 1e-6``, and a group of one gets
advantage 0 (its own mean). Only numpy is needed; convert to tensors in the trainer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentenvs.core import info as keys

DEFAULT_EPS = 1e-6
DEFAULT_GAMMA = 0.95
#: the anchor key of the first step when a record does not say where the episode began:
#: every trajectory of a group starts in the same state, so one shared key is exact
START_KEY = "<start>"


@dataclass(frozen=True)
class Trajectory:
    """One finished trajectory of a group.

    ``rewards[t]`` is the reward of step t; ``state_keys[t]`` the ``state_key`` of the
    state step t's action was taken from (the reset info's key for t = 0, then the key
    in step t-1's info). ``episode_return`` defaults to the sum of the rewards.
    """

    rewards: tuple[float, ...]
    state_keys: tuple[Hashable, ...]
    episode_return: float

    def __init__(
        self,
        rewards: Sequence[float],
        state_keys: Sequence[Hashable],
        episode_return: float | None = None,
    ) -> None:
        rewards_t = tuple(float(r) for r in rewards)
        keys_t = tuple(state_keys)
        if len(rewards_t) != len(keys_t):
            raise ValueError(
                f"one state key per step: {len(rewards_t)} rewards but {len(keys_t)} state keys"
            )
        if not all(np.isfinite(rewards_t)):
            raise ValueError(f"rewards must be finite, got {rewards_t}")
        value = float(sum(rewards_t)) if episode_return is None else float(episode_return)
        if not np.isfinite(value):
            raise ValueError(f"episode_return must be finite, got {episode_return!r}")
        object.__setattr__(self, "rewards", rewards_t)
        object.__setattr__(self, "state_keys", keys_t)
        object.__setattr__(self, "episode_return", value)

    def __len__(self) -> int:
        return len(self.rewards)

    @classmethod
    def from_steps(
        cls,
        reset_info: Mapping[str, Any],
        step_infos: Sequence[Mapping[str, Any]],
        rewards: Sequence[float],
        episode_return: float | None = None,
    ) -> Trajectory:
        """From what an env returned: the reset info and every step's info and reward."""
        before = [reset_info, *step_infos[:-1]]
        return cls(rewards, [info[keys.STATE_KEY] for info in before], episode_return)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Trajectory:
        """From a trajectory record of the Pass@(K,T) runner (``trajectories.jsonl``).

        Records keep each step's info after the step, not the reset info, so the first
        step's anchor is ``START_KEY`` (valid within a group: all of it starts there).
        """
        steps = record["steps"]
        state_keys = [START_KEY] + [s["info"][keys.STATE_KEY] for s in steps[:-1]]
        return cls([s["reward"] for s in steps], state_keys, record.get("reward_sum"))


def _normalize(values: np.ndarray, normalize_std: bool, eps: float) -> np.ndarray:
    if values.size < 2:
        return np.zeros_like(values)
    centred = values - values.mean()
    if not normalize_std:
        return centred
    return centred / (values.std(ddof=1) + eps)


def _check(eps: float, gamma: float | None = None) -> None:
    if not eps >= 0:
        raise ValueError(f"eps must be non-negative, got {eps!r}")
    if gamma is not None and not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")


def episode_advantages(
    returns: Sequence[float] | np.ndarray,
    *,
    normalize_std: bool = True,
    eps: float = DEFAULT_EPS,
) -> np.ndarray:
    """GRPO's group-normalized advantage of each episode return of one group."""
    _check(eps)
    values = np.asarray(returns, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"returns must be a non-empty 1-D sequence, got shape {values.shape}")
    return _normalize(values, normalize_std, eps)


def discounted_returns(rewards: Sequence[float] | np.ndarray, gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """``G_t = r_t + gamma * G_{t+1}`` for every step of one trajectory."""
    _check(0.0, gamma)
    out = np.zeros(len(rewards), dtype=np.float64)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


def _group_list(group: Sequence[Trajectory]) -> list[Trajectory]:
    trajectories = list(group)
    if not trajectories:
        raise ValueError("a group needs at least one trajectory")
    for traj in trajectories:
        if not isinstance(traj, Trajectory):
            raise TypeError(f"a group holds Trajectory objects, got {type(traj).__name__}")
    return trajectories


def step_groups(group: Sequence[Trajectory]) -> dict[Hashable, list[tuple[int, int]]]:
    """The anchor-state groups: ``state_key -> [(trajectory index, step index), ...]``."""
    found: dict[Hashable, list[tuple[int, int]]] = defaultdict(list)
    for i, traj in enumerate(_group_list(group)):
        for t, key in enumerate(traj.state_keys):
            found[key].append((i, t))
    return dict(found)


def step_advantages(
    group: Sequence[Trajectory],
    *,
    gamma: float = DEFAULT_GAMMA,
    normalize_std: bool = True,
    eps: float = DEFAULT_EPS,
) -> list[np.ndarray]:
    """GiGPO's step-level advantage of every step, one array per trajectory."""
    _check(eps, gamma)
    trajectories = _group_list(group)
    returns = [discounted_returns(t.rewards, gamma) for t in trajectories]
    out = [np.zeros(len(t), dtype=np.float64) for t in trajectories]
    for members in step_groups(trajectories).values():
        values = np.array([returns[i][t] for i, t in members])
        for (i, t), adv in zip(members, _normalize(values, normalize_std, eps), strict=True):
            out[i][t] = adv
    return out


def gigpo_advantages(
    group: Sequence[Trajectory],
    *,
    step_weight: float = 1.0,
    gamma: float = DEFAULT_GAMMA,
    normalize_std: bool = True,
    eps: float = DEFAULT_EPS,
) -> list[np.ndarray]:
    """``A_episode(trajectory) + step_weight * A_step(step)`` for every step."""
    if not np.isfinite(step_weight):
        raise ValueError(f"step_weight must be finite, got {step_weight!r}")
    trajectories = _group_list(group)
    episode = episode_advantages(
        [t.episode_return for t in trajectories], normalize_std=normalize_std, eps=eps
    )
    if step_weight == 0:
        return [np.full(len(t), a) for t, a in zip(trajectories, episode, strict=True)]
    steps = step_advantages(trajectories, gamma=gamma, normalize_std=normalize_std, eps=eps)
    return [a + step_weight * s for a, s in zip(episode, steps, strict=True)]


def grpo_advantages(
    group: Sequence[Trajectory], *, normalize_std: bool = True, eps: float = DEFAULT_EPS
) -> list[np.ndarray]:
    """GRPO: each trajectory's episode advantage, repeated for every one of its steps."""
    return gigpo_advantages(group, step_weight=0.0, normalize_std=normalize_std, eps=eps)


__all__ = [
    "DEFAULT_EPS",
    "DEFAULT_GAMMA",
    "START_KEY",
    "Trajectory",
    "discounted_returns",
    "episode_advantages",
    "gigpo_advantages",
    "grpo_advantages",
    "step_advantages",
    "step_groups",
]
