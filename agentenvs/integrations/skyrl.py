"""SkyRL-gym: every agentenvs env as a registered ``BaseTextEnv``, and a dataset builder.

``register_skyrl_envs()`` registers each id (``"agentenvs/FrozenLake-v0"``, ...) with
``skyrl_gym``; SkyRL then builds an env per trajectory with
``skyrl_gym.make(env_class, env_config=..., extras=row)``, calls ``init(prompt)``, then
``step(model_output)`` until ``done``, then ``close()``. ``skyrl_dataset(env_id, ...)``
writes the rows SkyRL's trainer reads: ``prompt`` (system prompt as a system message and
the task as the user message), ``env_class``, ``reward_spec`` and ``extra_info`` with
the reset's ``task_id``/``seed``/``max_turns``.

Each step's observation comes back as one user message; the reward of a step is the
env's; ``metadata`` carries the env's info (JSON-safe).

BudgetMix: ``skyrl_dataset(..., budgets=[2, 4, 8])`` draws each row's ``max_turns``
(``agentenvs.integrations.process``); SkyRL samples every completion of a prompt from its
row, so a group shares the budget, and ``get_metrics`` reports it (``max_turns``).
Process reward: ``skyrl_dataset(..., process_weight=w)`` puts ``process_weight`` in each
row's ``extra_info``, and every step's reward becomes the env's plus ``w`` times the step's
``info["step_reward"]`` (an env that cannot grade steps raises on the first step): the
per-step rewards SkyRL's step-wise trajectories (``generator.step_wise_trajectories``)
train on, each step's advantage then coming from its own reward. The samples of one prompt share
its row (its seed): each env object therefore draws the env's randomness from a stream
of its own after the common reset, as ``GroupEnv`` does. ``close()`` closes the env
(shell, sandbox, container, database); a finalizer does it too if SkyRL never calls it.

Faults (``agentenvs.core.errors.Fault``: the env's infrastructure failed, not the
agent): ``init`` tries a faulting reset again on a fresh env (``RESET_TRIES`` times); a
reset that still faults, and a step that faults, close the env and raise the ``Fault``
out of ``init``/``step``, logged first (``agentenvs.integrations``). SkyRL-gym's step
output has no "no reward" (its ``reward`` is a float, and a 0 would teach the policy
that the fault was its failure), so the trajectory ends as an exception: SkyRL's
generator lets it out of the training step (which fails loudly, scoring nothing) unless
the trainer contains failed rollouts itself.
"""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym

from agentenvs.core.errors import Fault, MissingExtraError
from agentenvs.integrations.common import (
    json_safe,
    log_fault,
    reseed_rollout,
    reset_with_retries,
    split_prompt,
)
from agentenvs.integrations.process import BudgetSpec, check_process_reward, step_rewards

try:
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
except ImportError as exc:
    raise MissingExtraError("skyrl-gym", "integrations") from exc

_instances = itertools.count()


def _plain(config: Any) -> dict[str, Any]:
    """An env_config (a dict, an OmegaConf node or None) as a plain dict."""
    if config is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(config, DictConfig):
            return dict(OmegaConf.to_container(config, resolve=True))  # type: ignore[arg-type]
    except ImportError:  # pragma: no cover - omegaconf comes with SkyRL's trainer
        pass
    if isinstance(config, Mapping):
        return dict(config)
    raise TypeError(f"env_config must be a mapping, got {type(config).__name__}")


class AgentEnvsTextEnv(BaseTextEnv):
    """An agentenvs env behind SkyRL-gym's ``BaseTextEnv`` interface.

    Arguments (as SkyRL passes them):
        env_id: the agentenvs id (set by the registration).
        env_config: ``gym.make`` keyword arguments for the env (e.g. ``{"map_name": "8x8"}``).
        extras: the dataset row; ``extras["extra_info"]`` may hold ``task_id``, ``seed``
            and ``max_turns`` for the reset.
    """

    def __init__(self, env_id: str, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.env_id = env_id
        extras = dict(extras or {})
        info = dict(extras.get("extra_info") or {})
        self.task_id = info.get("task_id")
        self.seed = info.get("seed")
        self.episode_max_turns = info.get("max_turns")
        self.process_weight = float(info.get("process_weight") or 0.0)
        self._env_kwargs = _plain(env_config)
        self._holder: list[gym.Env | None] = [gym.make(env_id, **self._env_kwargs)]
        self._index = next(_instances)
        self._finalizer = weakref.finalize(self, _close_held, self._holder)
        self.max_turns = int(self.episode_max_turns or self.env.unwrapped.max_turns)  # type: ignore[attr-defined]
        self.total_reward = 0.0
        self.last_info: dict[str, Any] = {}

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        options: dict[str, Any] = {}
        if self.task_id is not None:
            options["task_id"] = self.task_id
        if self.episode_max_turns is not None:
            options["max_turns"] = int(self.episode_max_turns)
        seed = None if self.seed is None else int(self.seed)

        def attempt() -> tuple[str, dict[str, Any]]:
            if self._holder[0] is None:
                self._holder[0] = gym.make(self.env_id, **self._env_kwargs)
            return self._holder[0].reset(seed=seed, options=options or None)

        observation, info = reset_with_retries(
            attempt, functools.partial(_close_held, self._holder), where=self._where()
        )
        reseed_rollout(self.env, seed, self._index)
        self.turns = 0
        self.total_reward = 0.0
        self.last_info = json_safe(info)
        system, task = split_prompt(observation, info)
        messages = [dict(m) for m in prompt]
        if messages and messages[0].get("role") == "system":
            # the row carries the system prompt: fill in the task (never the rules twice)
            if len(messages) > 1 and messages[-1].get("role") == "user" and not messages[-1].get("content"):
                messages[-1]["content"] = task
            elif len(messages) == 1:
                messages.append({"role": "user", "content": task})
        else:
            if system:
                messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
            else:
                messages = [{"role": "user", "content": observation}]
        return messages, {"task_id": info.get("task_id"), "tools": info.get("tools")}

    @property
    def env(self) -> gym.Env:
        """The agentenvs env (raises once it was closed)."""
        env = self._holder[0]
        if env is None:
            raise RuntimeError(f"the {self.env_id} env of this trajectory is closed")
        return env

    def _where(self) -> str:
        return f"SkyRL trajectory {self._index} of {self.env_id} (seed {self.seed})"

    def step(self, action: str) -> BaseTextEnvStepOutput:
        try:
            observation, reward, terminated, truncated, info = self.env.step(action)
        except Fault as fault:
            log_fault(fault, f"{self._where()}, step {self.turns + 1}")
            self.close()
            raise
        self.turns += 1
        if self.process_weight:
            graded = step_rewards([info], self._where())[0]
            reward = float(reward) + self.process_weight * graded
        self.total_reward += float(reward)
        done = bool(terminated or truncated)
        self.last_info = json_safe(info)
        return BaseTextEnvStepOutput(
            observations=[] if done else [{"role": "user", "content": observation}],
            reward=float(reward),
            done=done,
            metadata={"info": self.last_info, "observation": observation,
                      "terminated": bool(terminated), "truncated": bool(truncated)},
            postprocessed_action=action,
        )

    def get_metrics(self) -> dict[str, Any]:
        return {
            "success": float(bool(self.last_info.get("success"))),
            "score": float(self.last_info.get("score") or 0.0),
            "turns": self.turns,
            "return": self.total_reward,
            "max_turns": self.max_turns,
        }

    def close(self) -> None:
        self._finalizer()


def _close_held(holder: list[gym.Env | None]) -> None:
    env, holder[0] = holder[0], None
    if env is not None:
        env.close()


def register_skyrl_envs(ids: Iterable[str] | None = None) -> list[str]:
    """Register agentenvs ids with ``skyrl_gym`` (idempotent); returns the ids."""
    import skyrl_gym
    from skyrl_gym.envs.registration import registry

    import agentenvs

    done = []
    for env_id in ids if ids is not None else agentenvs.registered_ids():
        gym.spec(env_id)
        if env_id not in registry:
            skyrl_gym.register(id=env_id, entry_point=AgentEnvsTextEnv, kwargs={"env_id": env_id})
        done.append(env_id)
    return done


def skyrl_dataset(
    env_id: str,
    *,
    task_ids: Iterable[str] | None = None,
    seeds: Iterable[int] = (0,),
    max_turns: int | None = None,
    budgets: BudgetSpec | None = None,
    budget_seed: int = 0,
    process_weight: float = 0.0,
    **env_kwargs: Any,
) -> list[dict[str, Any]]:
    """Rows in SkyRL's dataset format, one per (task, seed).

    ``budgets``/``budget_seed``: each row's budget drawn as ``task_rows`` draws it
    (BudgetMix; not with ``max_turns``). ``process_weight``: the weight of the steps'
    ``info["step_reward"]`` in each step's reward (0: the env's reward alone)."""
    from agentenvs.integrations.trl import task_rows

    check_process_reward(None, process_weight)
    rows = []
    for row in task_rows(env_id, task_ids=task_ids, seeds=seeds, max_turns=max_turns,
                         budgets=budgets, budget_seed=budget_seed, **env_kwargs):
        extra = {"task_id": row["task_id"], "seed": row["seed"]}
        if row.get("max_turns") is not None:
            extra["max_turns"] = row["max_turns"]
        if process_weight:
            extra["process_weight"] = float(process_weight)
        rows.append({
            "data_source": "agentenvs",
            "prompt": row["prompt"],
            "env_class": env_id,
            "reward_spec": {"method": "env", "ground_truth": None},
            "extra_info": extra,
        })
    return rows


__all__ = ["AgentEnvsTextEnv", "register_skyrl_envs", "skyrl_dataset"]
