"""Budgets in turns, completion tokens or seconds: Pass@(K,B) for B in any of them.

``EvalConfig(budget_unit=...)`` (``agentenvs eval --budget-unit``) chooses what the
budgets count:

- ``turns`` (the default): the env's turn budget, as the rest of the suite uses it.
- ``tokens``: completion tokens the policy drew over the whole trajectory. A model
  policy that returns its sampled ids (``sample_tokens``: ``hf``, ``vllm``) is charged
  ``len(completion_ids)`` per step; a scripted policy, which draws no tokens, is charged
  by the documented text rule (``agentenvs.wrappers.cost_budget.text_tokens``: one token
  per 4 characters of the action, at least 1). A model policy that returns text alone
  (``openai``) has no token count to charge and is refused.
- ``seconds``: wall-clock seconds, per step the policy's sampling time plus the env's
  step time, recorded per step. They depend on the machine, its load and the model
  server, so a seconds budget only compares runs made on the same machine; budgets are
  whole seconds.

With a token or seconds budget the env keeps a turn cap (``max_turns``, default the
env's own), the same at every budget, and ``agentenvs.wrappers.cost_budget.LimitCost``
enforces the cost budget (what a step costs and what happens at the limit are written
there). A trajectory succeeds within ``B`` when it first succeeded at a step where its
cumulative cost was at most ``B``; each record keeps the cost of every step (``cost``),
the total (``cost_used``) and the cost at its first success (``first_success_cost``).

Modes, with the same validity rules as for turns (``check_budget_unit`` beside
``agentenvs.eval.runner.check_mode``):

- ``rerun`` runs every budget on its own; with ``show_budget`` the agent sees what is
  left ("[120 tokens left]"), so it can plan on it.
- ``derive`` runs once at the largest budget and reads every smaller one off the
  cumulative cost at first success. That stands for a run at ``B`` only when nothing
  before the budget is spent depends on ``B``: refused when the agent is shown its budget
  (``show_budget``, or the env's own ``show_budget``), when the policy conditions on its
  budget or does not declare whether it does (``conditions_on_budget``), exactly the
  conditions of turns.

Envs that grade when their turn budget runs out (``success_checked_at_budget_end``:
Terminal-Bench runs its tests then) cannot take a token or seconds budget in either mode:
a cost budget that ends the episode first would end it ungraded.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from agentenvs.core.errors import AgentEnvsError
from agentenvs.wrappers.cost_budget import COST_BUDGET_OPTION

BUDGET_UNITS = ("turns", "tokens", "seconds")


class BudgetUnitError(AgentEnvsError, ValueError):
    """A budget unit that cannot be used as configured (its message is one line)."""


def is_cost_unit(unit: str) -> bool:
    """Whether ``unit`` is enforced by the ``LimitCost`` wrapper (tokens, seconds)."""
    return unit in ("tokens", "seconds")


def check_unit_fields(unit: str, max_turns: int | None, show_budget: bool) -> None:
    """The config fields that go with a unit: a turn cap and a shown cost budget are for
    tokens and seconds (a turn budget is shown by the env's own ``show_budget``)."""
    if unit not in BUDGET_UNITS:
        raise BudgetUnitError(f"budget_unit must be one of {BUDGET_UNITS}, got {unit!r}")
    if unit == "turns" and max_turns is not None:
        raise BudgetUnitError(
            "max_turns is the turn cap of a token or seconds budget; with budget_unit "
            "'turns' the budgets are the turn budgets"
        )
    if unit == "turns" and show_budget:
        raise BudgetUnitError(
            "show_budget shows a token or seconds budget; a turn budget is shown by the "
            "env itself: env_kwargs {'show_budget': true}"
        )
    if max_turns is not None and (isinstance(max_turns, bool) or int(max_turns) < 1):
        raise BudgetUnitError(f"max_turns must be a positive int, got {max_turns!r}")


def wrap_env(env: gym.Env, unit: str, show_budget: bool) -> gym.Env:
    """``env`` with the unit's budget wrapper (none for turns)."""
    if not is_cost_unit(unit):
        return env
    from agentenvs.wrappers.cost_budget import LimitCost

    return LimitCost(env, unit, show_budget=show_budget)


def reset_options(task_id: str, budget: int, limit: Any, max_turns: int | None) -> dict[str, Any]:
    """The runner's reset options of a trajectory: its turn budget, or (``limit`` a
    ``LimitCost``) its cost budget and the turn cap (None: the env's own)."""
    if limit is None:
        return {"task_id": task_id, "max_turns": budget}
    options: dict[str, Any] = {"task_id": task_id, COST_BUDGET_OPTION: budget}
    if max_turns is not None:
        options["max_turns"] = max_turns
    return options


def charge_step(limit: Any, policy_seconds: float, sample: Any) -> None:
    """Charge ``limit`` (a ``LimitCost``, or None: nothing to do) with the next action's
    cost: the policy's seconds, or the completion tokens of its ``Sample`` (without one,
    the wrapper counts the action's text)."""
    if limit is None:
        return
    if limit.unit == "seconds":
        limit.charge(policy_seconds)
    elif sample is not None:
        if not sample.completion_ids:
            raise BudgetUnitError(
                "the policy returned a sample without its token ids (a server that answers "
                "text only), so a token budget cannot count it; use --budget-unit turns or "
                "seconds"
            )
        limit.charge(len(sample.completion_ids))


def check_budget_unit(
    env_id: str,
    unit: str,
    mode: str,
    show_budget: bool,
    env: gym.Env,
    policy: Any,
    policy_spec: str,
) -> None:
    """Refuse a token or seconds budget that the env or the policy cannot take, and
    derive mode where the agent is shown its cost budget (the rest of derive's rules
    are ``check_mode``'s, the same for every unit)."""
    if not is_cost_unit(unit):
        return
    inner = env.unwrapped
    if getattr(inner, "success_checked_at_budget_end", False):
        raise BudgetUnitError(
            f"{env_id} grades when its turn budget runs out (success_checked_at_budget_end), "
            f"so a {unit} budget that ends the episode first would end it ungraded; use "
            "--budget-unit turns"
        )
    if unit == "tokens" and policy is not None and _returns_text_only(policy, policy_spec):
        raise BudgetUnitError(
            f"policy {policy_spec} returns text without its sampled tokens, so a token "
            "budget has nothing to count; use a policy that returns tokens (hf, vllm), or "
            "--budget-unit turns or seconds"
        )
    if mode == "derive" and show_budget:
        raise BudgetUnitError(
            f"the agent is shown its {unit} budget (show_budget), so a run at the largest "
            "budget says nothing about smaller ones; use --mode rerun, one run per budget"
        )


def _returns_text_only(policy: Any, spec: str) -> bool:
    from agentenvs.policy.registry import is_model_policy

    return is_model_policy(spec) and not callable(getattr(policy, "sample_tokens", None))
