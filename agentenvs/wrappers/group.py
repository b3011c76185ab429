"""GroupEnv: the K rollouts of one GRPO group as a PettingZoo ``ParallelEnv``.

GRPO-style trainers sample a *group* of K trajectories from the same start and compare
them with each other. ``GroupEnv`` runs such a group: its agents are the rollouts
(``"rollout_0"`` ... ``"rollout_{K-1}"``), each with its own env instance, all started
from one state, each stepped with its own action and each finishing on its own.
PettingZoo's converters (``parallel_to_aec``) and test harness apply unchanged.

This module imports pettingzoo (the ``pettingzoo`` extra); ``agentenvs.wrappers`` loads it
only on first use of ``GroupEnv``, so ``import agentenvs`` stays light.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from agentenvs.core.env import TextEnv
from agentenvs.core.errors import MissingExtraError
from agentenvs.core.rng import stream_rng
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot
from agentenvs.wrappers.budget import _check_seed

try:
    from pettingzoo.utils.env import ParallelEnv
except ImportError as exc:
    raise MissingExtraError("pettingzoo", "pettingzoo") from exc

#: the reset option naming a ``Snapshot`` to start every rollout from
SNAPSHOT_OPTION = "snapshot"
#: info key: the seed the group's episode was started with (drawn when reset had none)
GROUP_SEED = "group_seed"

# mixed into seeds so the group's draws never coincide with an env's own from the same seed
_GROUP_STREAM = 0x47525550  # "GRUP": episode seeds for unseeded resets
_ROLLOUT_STREAM = 0x524F4C4C  # "ROLL": each rollout's env RNG after the common start

EnvFactory = Callable[..., gym.Env]


def rollout_name(index: int) -> str:
    return f"rollout_{index}"


class GroupEnv(ParallelEnv[str, str, str]):
    """K rollouts of one task, as the agents of a PettingZoo ``ParallelEnv``.

    Arguments:
        env: an env id for ``gym.make`` or a factory returning a (possibly wrapped) env
            whose ``unwrapped`` is an agentenvs ``TextEnv``; called K times.
        group_size: K, the number of rollouts.
        **env_kwargs: passed to ``gym.make`` or to the factory.

    Starting state: ``reset(seed, options)`` resets rollout 0's env with the seed and
    options (``task_id``, ``max_turns``, ...: whatever the env accepts) and restores a
    snapshot of it into every other rollout, so all K start from the same task, budget
    and state, wrappers included (a ``BudgetMix`` inside the factory samples one budget
    for the whole group). ``options={"snapshot": snap}`` starts all K from ``snap``
    instead (an error state, a state found by search); it cannot be combined with env
    options. An option that neither the group nor the env knows is ignored with a
    warning, as PettingZoo's envs ignore unknown options (its API test passes one).

    Divergence: right after the common start every rollout's env RNG (the base env's
    ``np_random``) is replaced by a generator seeded from (episode seed, rollout index).
    Rollouts therefore diverge through the env's own randomness (slips, sampled
    feedback) even under identical actions, and a seeded group replays exactly. The
    episode seed is ``reset``'s seed, or drawn from the group's generator when reset has
    none (that generator is itself reseeded by every seeded reset); it is reported as
    ``info["group_seed"]``. Wrapper state (a sampled budget, an error-injection
    schedule) is copied, not reseeded: it stays common to the group.

    Spaces: each rollout's observation and action spaces are its env's (``FreeText``).

    Stepping: ``step(actions)`` takes one action per live rollout. A rollout that
    terminates or truncates leaves ``agents`` after that step (its last results are in
    that step's dicts) while the others go on.

    Information: each rollout's info is its env's (``state_key`` included, equal across
    rollouts in equal states, which is what GiGPO-style step grouping needs), plus
    ``group_seed``. A snapshot start has no env reset, so its info is built from the
    restored env (standard keys, ``system_prompt``/``tools``), without wrapper keys.

    ``rollout_env(agent)`` is the live env of one rollout (for scripted policies that read
    the env, or to snapshot one rollout and branch from it).
    """

    metadata: dict[str, Any] = {"name": "agentenvs_group_v0", "is_parallelizable": True}

    def __init__(self, env: str | EnvFactory, group_size: int, **env_kwargs: Any) -> None:
        if isinstance(group_size, bool) or not isinstance(group_size, int | np.integer) or group_size < 1:
            raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
        if isinstance(env, str):
            env_id = env

            def factory(**kwargs: Any) -> gym.Env:
                return gym.make(env_id, **kwargs)

        elif callable(env):
            factory = env
        else:
            raise TypeError(f"env must be an env id or a factory, got {type(env).__name__}")
        self.possible_agents: list[str] = [rollout_name(i) for i in range(int(group_size))]
        self.agents: list[str] = []
        self._envs: dict[str, gym.Env] = {}
        try:
            for agent in self.possible_agents:
                made = factory(**env_kwargs)
                if not isinstance(made, gym.Env) or not isinstance(made.unwrapped, TextEnv):
                    raise TypeError(
                        "GroupEnv needs envs whose unwrapped env is an agentenvs TextEnv "
                        f"(for snapshots and state keys), got {type(made).__name__}"
                    )
                self._envs[agent] = made
        except BaseException:
            self.close()
            raise
        first = self._envs[self.possible_agents[0]]
        # the same space objects every call: PettingZoo seeds spaces through them
        self.observation_spaces = {a: e.observation_space for a, e in self._envs.items()}
        self.action_spaces = {a: e.action_space for a, e in self._envs.items()}
        self.render_mode: str | None = first.render_mode
        self.metadata = {**self.metadata, "render_modes": list(first.metadata.get("render_modes", []))}
        self._rng = stream_rng(_GROUP_STREAM)
        self._episode_seed: int | None = None
        self._last_obs: dict[str, str] = {}
        self._closed = False

    # ---------------------------------------------------------------- spaces and access
    def observation_space(self, agent: str) -> gym.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gym.Space:
        return self.action_spaces[agent]

    @property
    def group_size(self) -> int:
        return len(self.possible_agents)

    @property
    def episode_seed(self) -> int | None:
        """The seed the current group was started with (see the class doc)."""
        return self._episode_seed

    def rollout_env(self, agent: str) -> gym.Env:
        """The env of one rollout, as the factory made it (wrappers included)."""
        return self._envs[agent]

    # ---------------------------------------------------------------- reset
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        seed = _check_seed(seed)
        # a reset that raises (bad options, an unknown task, a bad snapshot) changes nothing
        rng, rng_saved, seed_saved = self._rng, self._rng.bit_generator.state, self._episode_seed
        try:
            return self._reset(seed, options)
        except BaseException:
            rng.bit_generator.state = rng_saved
            self._rng, self._episode_seed = rng, seed_saved
            raise

    def _reset(
        self, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        if seed is not None:
            self._rng = stream_rng(_GROUP_STREAM, seed)
            episode_seed = seed
        else:
            episode_seed = int(self._rng.integers(2**63))
        self._episode_seed = episode_seed
        options = dict(options or {})
        snapshot = options.pop(SNAPSHOT_OPTION, None)
        env_options = self._env_options(options)
        leader = self.possible_agents[0]
        if snapshot is not None:
            if env_options:
                raise ValueError(
                    f"a snapshot start takes no env options, got {sorted(env_options)}: "
                    "the snapshot already fixes the task and the budget"
                )
            if not isinstance(snapshot, Snapshot):
                raise TypeError(f"options['snapshot'] must be a Snapshot, got {type(snapshot).__name__}")
            if isinstance(snapshot.base, dict) and snapshot.base.get("done"):
                raise ValueError("the snapshot is of a finished episode: nothing left to play")
            for env in self._envs.values():
                restore_snapshot(env, snapshot)
            inner = self._envs[leader].unwrapped
            assert isinstance(inner, TextEnv)
            observation = inner._last_obs
            # no env reset ran, so build its reset info from the restored env
            info = inner._info(action_valid=True)
            info.update(inner._reset_info())
        else:
            observation, info = self._envs[leader].reset(seed=episode_seed, options=env_options)
            common = take_snapshot(self._envs[leader])
            for agent in self.possible_agents[1:]:
                restore_snapshot(self._envs[agent], common)
        for index, agent in enumerate(self.possible_agents):
            # after the identical start, each rollout gets its own deterministic stream
            self._envs[agent].unwrapped.np_random = stream_rng(_ROLLOUT_STREAM, episode_seed, index)
        self.agents = list(self.possible_agents)
        observations = dict.fromkeys(self.agents, observation)
        infos = {}
        for agent in self.agents:
            infos[agent] = copy.deepcopy(info)
            infos[agent][GROUP_SEED] = episode_seed
        self._last_obs = dict(observations)
        return observations, infos

    def _env_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        inner = self._envs[self.possible_agents[0]].unwrapped
        accepted = {"task_id", "max_turns"} | set(getattr(inner, "extra_options", ()))
        unknown = sorted(set(options) - accepted)
        if unknown:
            warnings.warn(
                f"GroupEnv.reset ignores option(s) {unknown}: neither the group "
                f"('{SNAPSHOT_OPTION}') nor the env ({sorted(accepted)}) takes them",
                stacklevel=3,
            )
        return {k: v for k, v in options.items() if k in accepted}

    # ---------------------------------------------------------------- step
    def step(
        self, actions: dict[str, str]
    ) -> tuple[
        dict[str, str],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        live = set(self.agents)
        stray = sorted(set(actions) - live)
        if stray:
            raise ValueError(f"actions for rollouts that are not live: {stray}; live: {self.agents}")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"every live rollout needs an action; missing {missing}")
        observations: dict[str, str] = {}
        rewards: dict[str, float] = {}
        terminations: dict[str, bool] = {}
        truncations: dict[str, bool] = {}
        infos: dict[str, dict[str, Any]] = {}
        for agent in self.agents:
            obs, reward, terminated, truncated, info = self._envs[agent].step(actions[agent])
            info[GROUP_SEED] = self._episode_seed
            observations[agent] = obs
            rewards[agent] = float(reward)
            terminations[agent] = bool(terminated)
            truncations[agent] = bool(truncated)
            infos[agent] = info
        self._last_obs.update(observations)
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos

    # ---------------------------------------------------------------- the rest
    def render(self) -> str | None:
        """``ansi``: the last observation of every rollout, labelled; ``human``: printed."""
        if self.render_mode not in ("ansi", "human"):
            return None
        text = "\n\n".join(f"[{agent}]\n{obs}" for agent, obs in self._last_obs.items())
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        if getattr(self, "_closed", False):
            return
        self._closed = True
        for env in getattr(self, "_envs", {}).values():
            env.close()

    def state_keys(self) -> dict[str, str]:
        """Every rollout's current ``state_key`` (live or finished)."""
        return {a: e.unwrapped.state_key() for a, e in self._envs.items()}  # type: ignore[attr-defined]


__all__ = ["GROUP_SEED", "SNAPSHOT_OPTION", "GroupEnv", "rollout_name"]
