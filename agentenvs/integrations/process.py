"""BudgetMix and process rewards for the trainer integrations, free of any framework.

- **A budget per row.** ``budgets=`` of ``for_trl``, ``make_rollout_func``,
  ``skyrl_dataset`` and verifiers' ``AgentEnvsConfig`` draws each dataset row's turn
  budget (as ``BudgetMix`` draws an episode's: ``agentenvs.wrappers.budget.budget_sampler``)
  from a sequence of ints, a mapping ``{budget: weight}`` or a callable ``f(rng)``; the
  draw depends only on ``budget_seed``, the row's task id and its seed (``row_budget``), so
  a dataset is the same in every process. Every trainer makes a GRPO group from the
  completions of one row, so all of a group share its budget: the row's ``max_turns``,
  which its reset receives. Whether the agent sees the budget is the env's
  ``show_budget`` flag (an env keyword of the same builders).
- **Step rewards into the trajectory's reward.** Envs that can grade a step exactly put
  it in ``info["step_reward"]`` (``agentenvs.core.info.STEP_REWARD``). ``process_return``
  turns an episode's step rewards into the one number a trajectory-level trainer (TRL's
  GRPO) takes: the episode return plus ``weight`` times their sum or mean.
- **Step-level advantages.** ``group_advantages`` gives GiGPO's (or GRPO's) advantage of
  every step of one group's trajectories from their step records
  (``agentenvs.eval.advantages``), for trainers that take advantages per token.
  ``step_records`` is the record of one rollout that TRL's ``make_rollout_func`` returns
  (the state each action left from, rewards, step rewards, each step's span of tokens);
  ``records_advantages`` and ``token_advantages`` turn a group of them into per-token
  advantages (``agentenvs.integrations.trl_gigpo.GiGPOTrainer`` hands them to TRL's loss).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from agentenvs.core import info as keys
from agentenvs.core.rng import stream_rng

#: how ``process_return`` folds an episode's step rewards into one number
PROCESS_REWARDS = ("sum", "mean")

#: mixed into the seeds of row budgets, so they never equal an env's own draws
_ROW_BUDGET_STREAM = 0x524F5742  # "ROWB"

BudgetSpec = Sequence[int] | Mapping[int, float] | Callable[[np.random.Generator], int]


def _task_seed(task_id: Any) -> int:
    raw = str(task_id).encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little") >> 1


def budget_drawer(budgets: BudgetSpec, budget_seed: int = 0) -> Callable[[Any, int], int]:
    """``draw(task_id, seed) -> budget`` for the rows of a dataset (``row_budget``).

    The spec is checked here, before any row is built: a bad one raises ``ValueError``
    or ``TypeError`` saying what is wrong."""
    from agentenvs.wrappers.budget import budget_sampler

    if isinstance(budget_seed, bool) or not isinstance(budget_seed, int) or budget_seed < 0:
        raise ValueError(f"budget_seed must be a non-negative int, got {budget_seed!r}")
    sampler = budget_sampler(budgets)

    def draw(task_id: Any, seed: int) -> int:
        return row_budget(sampler, budget_seed, task_id, seed)

    return draw


def row_budget(
    sampler: Callable[[np.random.Generator], int], budget_seed: int, task_id: Any, seed: int
) -> int:
    """The budget of the row (``task_id``, ``seed``): one draw of ``sampler`` from a
    generator seeded by ``budget_seed``, the task id and the seed, nothing else."""
    return sampler(stream_rng(_ROW_BUDGET_STREAM, budget_seed, _task_seed(task_id), int(seed)))


def check_process_reward(how: str | None, weight: float = 1.0) -> None:
    """Raise ``ValueError`` unless ``how`` is None or one of ``PROCESS_REWARDS`` and
    ``weight`` a finite number."""
    if how is not None and how not in PROCESS_REWARDS:
        raise ValueError(f"process_reward must be None or one of {PROCESS_REWARDS}, got {how!r}")
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not np.isfinite(weight):
        raise ValueError(f"process_weight must be a finite number, got {weight!r}")


def step_rewards(step_infos: Sequence[Mapping[str, Any]], where: str = "the env") -> list[float]:
    """Each step's ``info["step_reward"]``; ``ValueError`` naming ``where`` when a step has
    none (the env cannot grade steps: see ``agentenvs.core.info.STEP_REWARD``)."""
    out = []
    for number, info in enumerate(step_infos, 1):
        value = info.get(keys.STEP_REWARD)
        if value is None:
            raise ValueError(
                f"step {number} of {where} has no info[{keys.STEP_REWARD!r}]: this env does "
                "not grade single steps, so it cannot give a process reward"
            )
        out.append(float(value))
    return out


def process_return(
    episode_return: float, rewards: Sequence[float], *, how: str = "mean", weight: float = 1.0
) -> float:
    """``episode_return + weight * fold(rewards)``, ``fold`` being ``sum`` or ``mean``
    (``how``); an episode of no steps adds 0."""
    check_process_reward(how, weight)
    if not rewards:
        return float(episode_return)
    folded = float(np.sum(rewards)) if how == "sum" else float(np.mean(rewards))
    return float(episode_return) + float(weight) * folded


def group_advantages(
    group: Sequence[tuple[Mapping[str, Any], Sequence[Mapping[str, Any]], Sequence[float]]],
    *,
    estimator: str = "gigpo",
    step_weight: float = 1.0,
    gamma: float = 0.95,
) -> list[np.ndarray]:
    """The advantage of every step of one group: ``group[i]`` is trajectory i's reset
    info, step infos and step rewards. ``estimator``: ``"gigpo"`` (episode-level GRPO plus
    ``step_weight`` times the step-level advantage over steps from equal ``state_key``s)
    or ``"grpo"`` (the episode's advantage on every step)."""
    from agentenvs.eval.advantages import Trajectory, gigpo_advantages, grpo_advantages

    trajectories = [
        Trajectory.from_steps(reset, steps, rewards) if steps else Trajectory([], [])
        for reset, steps, rewards in group
    ]
    if estimator == "grpo":
        return grpo_advantages(trajectories)
    if estimator != "gigpo":
        raise ValueError(f"estimator must be 'gigpo' or 'grpo', got {estimator!r}")
    return gigpo_advantages(trajectories, step_weight=step_weight, gamma=gamma)


def step_records(
    reset_info: Mapping[str, Any] | None,
    step_infos: Sequence[Mapping[str, Any]],
    rewards: Sequence[float],
    spans: Sequence[tuple[int, int]],
) -> dict[str, list[Any]]:
    """One rollout's step records, JSON-able: per step ``state_keys`` (the ``state_key`` of
    the state its action was taken from: the reset info's, then the previous step's),
    ``rewards`` (the env's), ``step_rewards`` (``info["step_reward"]``, None where the env
    gives none) and ``spans`` (``[start, end)`` of the step's action in the rollout's
    tokens: an empty span for an action no token was sampled for)."""
    if not len(step_infos) == len(rewards) == len(spans):
        raise ValueError(
            f"one reward and one span per step: {len(step_infos)} steps, {len(rewards)} "
            f"rewards, {len(spans)} spans"
        )
    before = [reset_info or {}, *step_infos[:-1]]
    return {
        "state_keys": [str(info.get(keys.STATE_KEY, "")) for info in before][: len(step_infos)],
        "rewards": [float(r) for r in rewards],
        "step_rewards": [
            None if info.get(keys.STEP_REWARD) is None else float(info[keys.STEP_REWARD])
            for info in step_infos
        ],
        "spans": [[int(start), int(end)] for start, end in spans],
    }


def records_advantages(
    records: Sequence[Mapping[str, Any]],
    returns: Sequence[float | None],
    *,
    step_weight: float = 1.0,
    gamma: float = 0.95,
    process_weight: float = 0.0,
    normalize_std: bool = True,
) -> list[np.ndarray]:
    """GiGPO's advantage of every step of one group's rollouts (``step_records``).

    The episode level normalizes ``returns`` (the trainer's reward of each rollout) over
    the group; the step level groups steps by the state they left from and normalizes
    their discounted returns-to-go of ``reward + process_weight * step_reward`` (a
    ``process_weight`` other than 0 needs every step's ``step_reward``). A rollout whose
    return is None or NaN (a faulted one) is left out of both groups: its steps get 0.
    """
    from agentenvs.eval.advantages import Trajectory, gigpo_advantages

    if len(records) != len(returns):
        raise ValueError(f"one return per record: {len(records)} records, {len(returns)} returns")
    out = [np.zeros(len(r["rewards"]), dtype=np.float64) for r in records]
    finite = {
        i: float(ret) for i, ret in enumerate(returns) if ret is not None and np.isfinite(ret)
    }
    kept = list(finite)
    if not kept:
        return out
    trajectories = []
    for i in kept:
        record = records[i]
        rewards = np.asarray(record["rewards"], dtype=np.float64)
        if process_weight:
            graded = step_rewards(
                [{keys.STEP_REWARD: v} for v in record["step_rewards"]], f"rollout {i}"
            )
            rewards = rewards + float(process_weight) * np.asarray(graded, dtype=np.float64)
        trajectories.append(Trajectory(rewards, record["state_keys"], finite[i]))
    found = gigpo_advantages(
        trajectories, step_weight=step_weight, gamma=gamma, normalize_std=normalize_std
    )
    for i, advantages in zip(kept, found, strict=True):
        out[i] = advantages
    return out


def token_advantages(
    record: Mapping[str, Any], advantages: Sequence[float] | np.ndarray, length: int
) -> np.ndarray:
    """``length`` per-token advantages of one rollout: each step's advantage on the tokens
    of its span, 0 elsewhere (observation tokens, padding)."""
    out = np.zeros(int(length), dtype=np.float64)
    for (start, end), value in zip(record["spans"], advantages, strict=True):
        out[max(int(start), 0) : min(int(end), out.size)] = float(value)
    return out


__all__ = [
    "PROCESS_REWARDS",
    "budget_drawer",
    "check_process_reward",
    "group_advantages",
    "process_return",
    "records_advantages",
    "row_budget",
    "step_records",
    "step_rewards",
    "token_advantages",
]
