"""GiGPO in TRL: ``GiGPOTrainer``, a ``GRPOTrainer`` whose loss sees per-token advantages.

TRL's ``GRPOTrainer`` (1.x) scores a batch in ``_generate_and_score_completions``: one
reward per completion (``_calculate_rewards``), normalized within each group of
``num_generations`` completions of one prompt, one scalar advantage per completion. Its
loss takes advantages of shape ``(B,)`` or ``(B, T)`` (``_compute_loss`` unsqueezes only
the former), so a subclass may hand it one advantage per token. ``GiGPOTrainer`` does that
from the step records ``make_rollout_func`` returns (``env_steps``: the state each action
left from, the rewards, the span of each action's tokens): for every group it computes
GiGPO's advantage of every step (``agentenvs.integrations.process.records_advantages``,
i.e. ``agentenvs.eval.advantages.gigpo_advantages``) and puts it on the tokens of that
step's action; observation tokens (masked out of the loss by ``env_mask``) and padding
get 0.

- Episode level: the group-normalized reward TRL itself computed for each completion
  (the weighted sum of the reward functions, e.g. ``reward_from_rollout``'s return), so
  other reward functions still count. A completion every reward function left unscored
  (a faulted rollout) is out of its group and gets 0, as in TRL.
- Step level: steps of the group that left from equal ``state_key`` s form a step group;
  their discounted returns-to-go (``gamma``) of the env's rewards, plus
  ``process_weight`` times ``info["step_reward"]`` where asked, are normalized there
  (``step_weight`` is GiGPO's ω). A step whose state no other step shares gets 0.
- Scaling: the standard deviation divides unless ``GRPOConfig(scale_rewards="none")``
  (then means only, as Dr. GRPO); ``scale_rewards="batch"`` is read as per group.

Only ``rollout_func`` mode carries step records (TRL's environments mode runs its own
tool loop, whose turns this project cannot see); Liger's fused loss takes ``(B,)``
advantages only, so ``use_liger_kernel`` is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentenvs.integrations.process import records_advantages, token_advantages

try:
    import torch
    from trl import GRPOTrainer
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "GiGPOTrainer needs trl and torch: pip install 'agentenvs[integrations,hf]'"
    ) from exc


class GiGPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` with GiGPO's per-token advantages (see the module docstring).

    Arguments (keyword-only, besides ``GRPOTrainer``'s own):
        step_weight: GiGPO's ω, the weight of the step-level advantage (0: GRPO's
            episode advantage on every token of the completion's actions).
        gamma: the discount of the step-level returns-to-go, in [0, 1].
        process_weight: adds this times each step's ``info["step_reward"]`` to its reward
            in the step level (an env without the key raises ``ValueError``).

    ``last_advantages`` holds the last batch's per-token advantages (this process's rows,
    as the loss receives them before TRL shuffles and splits the batch).
    """

    def __init__(
        self,
        *args: Any,
        step_weight: float = 1.0,
        gamma: float = 0.95,
        process_weight: float = 0.0,
        **kwargs: Any,
    ) -> None:
        for name, value in (("step_weight", step_weight), ("process_weight", process_weight)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name} must be a number, got {value!r}")
            if not np.isfinite(value):
                raise ValueError(f"{name} must be finite, got {value!r}")
        if isinstance(gamma, bool) or not isinstance(gamma, int | float) or not 0 <= gamma <= 1:
            raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
        if kwargs.get("rollout_func") is None:
            raise ValueError(
                "GiGPOTrainer reads the step records of a rollout function: pass "
                "rollout_func= from agentenvs.integrations.trl.make_rollout_func"
            )
        super().__init__(*args, **kwargs)
        if getattr(self.args, "use_liger_kernel", False):
            raise ValueError("GiGPOTrainer: Liger's GRPO loss takes one advantage per completion")
        self.step_weight = float(step_weight)
        self.gamma = float(gamma)
        self.process_weight = float(process_weight)
        self.last_advantages: torch.Tensor | None = None
        self._rewards_per_func: torch.Tensor | None = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # type: ignore[no-untyped-def]
        # the rewards of every process's completions, as TRL normalizes them: kept for
        # the episode level
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._rewards_per_func = rewards
        return rewards

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        from accelerate.utils import gather_object

        self._rewards_per_func = None
        output = super()._generate_and_score_completions(inputs)
        records = [row.get("env_steps") for row in inputs]
        if any(record is None for record in records) or self._rewards_per_func is None:
            raise ValueError(
                "GiGPOTrainer needs each completion's step records ('env_steps'): use the "
                "rollout_func of agentenvs.integrations.trl.make_rollout_func"
            )
        per_func = self._rewards_per_func
        unscored = torch.isnan(per_func).all(dim=1)
        weights = self.reward_weights.to(per_func.device).unsqueeze(0)
        returns = (per_func * weights).nansum(dim=1)
        returns[unscored] = torch.nan
        every = gather_object(records)
        if len(every) != len(returns):
            raise ValueError(f"{len(every)} step records for {len(returns)} rewards")
        mode = "train" if self.model.training else "eval"
        size = self.num_generations if mode == "train" else self.num_generations_eval
        normalize = self.scale_rewards != "none"
        steps: list[np.ndarray] = []
        values = returns.tolist()
        for start in range(0, len(every), size):
            steps += records_advantages(
                every[start : start + size],
                values[start : start + size],
                step_weight=self.step_weight,
                gamma=self.gamma,
                process_weight=self.process_weight,
                normalize_std=normalize,
            )
        first = self.accelerator.process_index * len(inputs)
        length = output["completion_mask"].shape[1]
        rows = [
            token_advantages(every[i], steps[i], length) for i in range(first, first + len(inputs))
        ]
        advantages = torch.tensor(np.stack(rows), dtype=torch.float32)
        output["advantages"] = advantages.to(output["advantages"].device)
        self.last_advantages = output["advantages"]
        return output


__all__ = ["GiGPOTrainer"]
