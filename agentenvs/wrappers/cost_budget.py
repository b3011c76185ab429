"""LimitCost: a budget in completion tokens or wall-clock seconds, beside the turn budget.

A deployed agent is paid for in tokens and waited for in seconds, not in turns. This
wrapper gives an episode a budget ``B`` in one of those units, counts what each step
costs, ends the episode (``truncated``) once the budget is spent and, when asked, tells
the agent what is left ("[120 tokens left]"), as the envs' own ``show_budget`` does for
turns. The env's turn budget still applies: whichever runs out first ends the episode.

What a step costs:

- ``tokens``: the completion tokens the policy drew for the action. The caller that
  knows them (the runner, from a model policy's ``Sample.completion_ids``) says so with
  ``charge(cost)`` before ``step``; without a charge the action's text is counted by
  ``text_tokens``, the documented rule for policies that draw no tokens (scripted ones):
  one token per 4 characters of the action, rounded up, at least 1.
- ``seconds``: the time the policy took to produce the action (``charge``, measured by
  the caller) plus the wall-clock time of the env's ``step`` (measured here with
  ``clock``). Seconds depend on the machine, its load and the model server: a seconds
  budget compares policies run on the same machine, never across machines.

When the budget runs out:

- An action whose cost is known before the step (tokens; the policy's seconds) and that
  would take the total past ``B`` is not executed: the episode ends ``truncated`` with an
  observation saying so, and does not succeed.
- A step that spends the budget exactly ends the episode ``truncated`` after it (unless it
  ended on its own); a step whose env time takes the seconds past ``B`` ends it too, and a
  success at that step does not count (``info["success"]`` is False, ``budget_exceeded``
  True): the answer came too late.

So a trajectory succeeds within ``B`` exactly when it first succeeded at a step where the
cumulative cost was at most ``B``, which is what derive mode reads off a run at the
largest budget (``agentenvs.eval.budget_units``).

Information (on reset and every step): ``budget_unit``, ``budget`` (``None``: no cost
budget this episode, only counting), ``budget_used``, ``budget_left``, and on a step
``step_cost`` and ``budget_exceeded``.

Arguments:
    env: the env (its own turn budget stays in force).
    unit: ``"tokens"`` or ``"seconds"``.
    budget: the default budget of an episode (``None``: count only); one episode can set
        its own with ``reset(options={"cost_budget": B})``.
    show_budget: append "[N tokens left]" / "[S s left]" to every observation.
    count_tokens: the rule for an action nobody charged (default ``text_tokens``).
    clock: the clock of the env's step time, in seconds (default ``time.perf_counter``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from agentenvs.core import info as keys
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot

COST_UNITS = ("tokens", "seconds")
#: the reset option that sets one episode's cost budget
COST_BUDGET_OPTION = "cost_budget"
BUDGET_UNIT = "budget_unit"
BUDGET = "budget"
BUDGET_USED = "budget_used"
BUDGET_LEFT = "budget_left"
STEP_COST = "step_cost"
BUDGET_EXCEEDED = "budget_exceeded"
#: characters per token of the text rule (the usual rule of thumb for English and code)
CHARS_PER_TOKEN = 4


def text_tokens(text: str) -> int:
    """The documented token count of an action nobody drew tokens for: one token per
    ``CHARS_PER_TOKEN`` characters, rounded up, and at least 1 (an empty reply still
    costs its end-of-turn token)."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def _check_budget(budget: Any, unit: str) -> float | None:
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not budget > 0:
        raise ValueError(f"a {unit} budget must be a positive number or None, got {budget!r}")
    if not math.isfinite(budget):
        raise ValueError(f"a {unit} budget must be finite, got {budget!r}")
    return float(budget) if unit == "seconds" else int(budget)


def format_left(left: float, unit: str) -> str:
    """``120 tokens left`` / ``3.5 s left``: what the agent is shown."""
    if unit == "tokens":
        value = int(left)
        return f"{value} token{'s' if value != 1 else ''} left"
    return f"{left:.1f} s left"


class LimitCost(gym.Wrapper[str, str, str, str]):
    """End an episode once its budget of completion tokens or seconds is spent (module
    docstring: what a step costs, what happens at the limit, the info keys)."""

    def __init__(
        self,
        env: gym.Env[str, str],
        unit: str,
        budget: float | None = None,
        *,
        show_budget: bool = False,
        count_tokens: Callable[[str], int] = text_tokens,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__(env)
        if unit not in COST_UNITS:
            raise ValueError(f"unit must be one of {COST_UNITS}, got {unit!r}")
        if not callable(count_tokens) or not callable(clock):
            raise TypeError("count_tokens and clock must be callables")
        self.unit = unit
        self.default_budget = _check_budget(budget, unit)
        self.show_budget = bool(show_budget)
        self._count_tokens = count_tokens
        self._clock = clock
        self._budget: float | None = self.default_budget
        self._used: float = 0
        self._charged: float | None = None
        self._last_info: dict[str, Any] = {}

    # ---------------------------------------------------------------- the budget
    @property
    def budget(self) -> float | None:
        """This episode's budget (``None``: counting only)."""
        return self._budget

    @property
    def used(self) -> float:
        """What the episode has spent so far."""
        return self._used

    @property
    def left(self) -> float | None:
        return None if self._budget is None else max(self._budget - self._used, 0)

    def charge(self, cost: float) -> None:
        """The cost of the next action as its producer measured it: the completion tokens
        it drew, or the seconds it took. Applies to the next ``step`` only."""
        if isinstance(cost, bool) or not isinstance(cost, int | float) or cost < 0:
            raise ValueError(f"a cost must be a non-negative number, got {cost!r}")
        self._charged = int(cost) if self.unit == "tokens" else float(cost)

    def _annotate(self, info: dict[str, Any]) -> dict[str, Any]:
        info[BUDGET_UNIT] = self.unit
        info[BUDGET] = self._budget
        info[BUDGET_USED] = self._used
        info[BUDGET_LEFT] = self.left
        return info

    def _show(self, observation: str, done: bool) -> str:
        if self.show_budget and not done and self._budget is not None:
            return f"{observation}\n[{format_left(self.left or 0, self.unit)}]"
        return observation

    # ---------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
        options = dict(options or {})
        budget = (
            _check_budget(options.pop(COST_BUDGET_OPTION), self.unit)
            if COST_BUDGET_OPTION in options
            else self.default_budget
        )
        obs, info = self.env.reset(seed=seed, options=options)
        self._budget, self._used, self._charged = budget, 0, None
        self._last_info = self._annotate(dict(info))
        return self._show(obs, False), self._last_info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        charged, self._charged = self._charged, None
        if self.unit == "tokens":
            before = self._count_tokens(action) if charged is None else charged
        else:
            before = 0.0 if charged is None else charged
        if self._budget is not None and self._used + before > self._budget:
            # the action costs more than is left: it is not carried out
            info = self._annotate(dict(self._last_info))
            info[keys.SUCCESS] = False
            info[STEP_COST] = 0
            info[BUDGET_EXCEEDED] = True
            observation = (
                f"[the {self.unit} budget is spent: this action needs {_amount(before, self.unit)}"
                f", {format_left(self.left or 0, self.unit)}; the episode ends]"
            )
            return observation, 0.0, False, True, info
        started = self._clock()
        obs, reward, terminated, truncated, info = self.env.step(action)
        cost = before if self.unit == "tokens" else before + max(self._clock() - started, 0.0)
        self._used += cost
        exceeded = self._budget is not None and self._used > self._budget
        if exceeded:
            info[keys.SUCCESS] = False  # the answer came after the budget ran out
        if self._budget is not None and self._used >= self._budget and not terminated:
            truncated = True
        if exceeded:
            truncated = True
        info = self._annotate(info)
        info[STEP_COST] = cost
        info[BUDGET_EXCEEDED] = exceeded
        self._last_info = info
        return self._show(obs, terminated or truncated), reward, terminated, truncated, info

    # ---------------------------------------------------------------- snapshots
    def wrapper_state(self) -> dict[str, Any]:
        return {"budget": self._budget, "used": self._used, "last_info": dict(self._last_info)}

    def check_wrapper_state(self, state: Any) -> None:
        if not isinstance(state, dict) or set(state) != {"budget", "used", "last_info"}:
            raise ValueError("a LimitCost state is a dict with 'budget', 'used' and 'last_info'")
        _check_budget(state["budget"], self.unit)
        used = state["used"]
        if isinstance(used, bool) or not isinstance(used, int | float) or used < 0:
            raise ValueError(f"used must be a non-negative number, got {used!r}")

    def restore_wrapper_state(self, state: dict[str, Any]) -> None:
        self._budget, self._used = state["budget"], state["used"]
        self._last_info, self._charged = dict(state["last_info"]), None

    def snapshot(self) -> Snapshot:
        """Snapshot the whole chain under (and including) this wrapper."""
        return take_snapshot(self)

    def restore(self, snapshot: Snapshot) -> None:
        restore_snapshot(self, snapshot)


def _amount(value: float, unit: str) -> str:
    return f"{int(value)} tokens" if unit == "tokens" else f"{value:.1f} s"
