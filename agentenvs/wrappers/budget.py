"""BudgetMix: a turn budget drawn afresh for every episode.

Training with a varying budget (the paper's BudgetMix) keeps a policy from over-fitting
to one horizon. The wrapper samples the budget at each reset and hands it to the env
through ``options["max_turns"]``, which every agentenvs env accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from agentenvs.core.rng import check_rng_state, rng_from_state, rng_state, stream_rng
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot

BUDGET_SAMPLED = "budget_sampled"

#: mixed into seeds so a wrapper's draws never coincide with the env's own draws from the
#: same reset seed (an env drawing its task from seed s must not correlate with the budget)
_BUDGET_STREAM = 0x42554447  # "BUDG"


def _check_seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
    return int(seed)


def budget_sampler(
    budgets: Sequence[int] | Mapping[int, float] | Callable[[np.random.Generator], int],
    weights: Sequence[float] | None = None,
) -> Callable[[np.random.Generator], int]:
    """``f(rng) -> int``: one budget drawn as ``BudgetMix`` draws it, from a sequence of
    positive ints (uniformly, or by ``weights``), a mapping ``{budget: weight}`` or a
    callable given the generator (its result checked). Raises on an invalid spec."""
    if isinstance(budgets, Mapping):
        if weights is not None:
            raise ValueError("weights come from the mapping's values: do not pass both")
        budgets, weights = list(budgets.keys()), list(budgets.values())
    if callable(budgets):
        if weights is not None:
            raise ValueError("weights apply only to a sequence of budgets, not a callable")
        sampler = budgets

        def checked(rng: np.random.Generator) -> int:
            value = sampler(rng)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"the budget sampler returned {value!r}, not a positive integer")
            return int(value)

        return checked
    values = BudgetMix._check_budgets(budgets)
    probs = None if weights is None else BudgetMix._check_weights(weights, len(values))
    return lambda rng: values[int(rng.choice(len(values), p=probs))]


class BudgetMix(gym.Wrapper[str, str, str, str]):
    """Sample each episode's turn budget and pass it to the env as ``options["max_turns"]``.

    Arguments:
        budgets: either a sequence of positive ints to draw from (uniformly, or by
            ``weights``), or a callable ``f(rng) -> int`` given the wrapper's
            ``np.random.Generator``.
        weights: non-negative weights, one per budget (only with a sequence).
        seed: seeds the wrapper's own generator.

    Seeding: ``reset(seed=s)`` reseeds the wrapper's generator from ``s`` (mixed with
    ``seed`` when that was given), so the same reset seed gives the same budget in any
    process; unseeded resets keep drawing from the same generator.

    ``budget_sampler`` draws the same way outside an env: the trainer integrations use it
    to give each dataset row (each GRPO group) its budget.

    An explicit ``max_turns`` in the caller's ``reset`` options wins over the sample; a
    budget is still drawn, so later episodes get the same budgets either way.

    Information: ``info["budget_sampled"]`` (on reset and every step) is the budget this
    wrapper set for the episode, or ``None`` when the caller's ``max_turns`` overrode it.
    """

    def __init__(
        self,
        env: gym.Env[str, str],
        budgets: Sequence[int] | Callable[[np.random.Generator], int],
        weights: Sequence[float] | None = None,
        *,
        seed: int | None = None,
    ) -> None:
        super().__init__(env)
        self._seed = _check_seed(seed)
        self._sampler: Callable[[np.random.Generator], int] | None = None
        self._budgets: tuple[int, ...] = ()
        self._probs: np.ndarray | None = None
        if callable(budgets):
            if weights is not None:
                raise ValueError("weights apply only to a sequence of budgets, not a callable")
            self._sampler = budgets
        else:
            self._budgets = self._check_budgets(budgets)
            if weights is not None:
                self._probs = self._check_weights(weights, len(self._budgets))
        self._rng = stream_rng(_BUDGET_STREAM, self._seed)
        self._episode_budget: int | None = None

    # ---------------------------------------------------------------- validation
    @staticmethod
    def _check_budgets(budgets: Any) -> tuple[int, ...]:
        if isinstance(budgets, str | bytes) or not isinstance(budgets, Sequence):
            raise TypeError(
                f"budgets must be a sequence of positive ints or a callable, got {budgets!r}"
            )
        if len(budgets) == 0:
            raise ValueError("budgets must not be empty")
        for b in budgets:
            if isinstance(b, bool) or not isinstance(b, int | np.integer) or b < 1:
                raise ValueError(f"every budget must be a positive integer, got {b!r}")
        return tuple(int(b) for b in budgets)

    @staticmethod
    def _check_weights(weights: Any, n: int) -> np.ndarray:
        try:
            w = np.asarray(weights, dtype=float)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"weights must be a sequence of numbers, got {weights!r}") from exc
        if w.shape != (n,):
            raise ValueError(f"weights must have one entry per budget ({n}), got {weights!r}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError(f"weights must be finite, non-negative and not all zero: {weights!r}")
        return w / w.sum()

    # ---------------------------------------------------------------- sampling
    @property
    def episode_budget(self) -> int | None:
        """The budget this wrapper set for the current episode (None when overridden)."""
        return self._episode_budget

    def sample_budget(self) -> int:
        """Draw one budget from the wrapper's generator."""
        if self._sampler is not None:
            value = self._sampler(self._rng)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"the budget sampler returned {value!r}, not a positive integer")
            return int(value)
        index = int(self._rng.choice(len(self._budgets), p=self._probs))
        return self._budgets[index]

    # ---------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
        # a reset that raises (a bad seed or option, an unknown task) changes nothing:
        # the generator's draw and the episode's budget are put back
        rng, rng_saved, episode_budget = self._rng, rng_state(self._rng), self._episode_budget
        try:
            if seed is not None:
                self._rng = stream_rng(_BUDGET_STREAM, _check_seed(seed), self._seed)
            budget = self.sample_budget()
            options = dict(options or {})
            if "max_turns" in options:
                self._episode_budget = None
            else:
                options["max_turns"] = budget
                self._episode_budget = budget
            obs, info = self.env.reset(seed=seed, options=options)
        except BaseException:
            rng.bit_generator.state = rng_saved
            self._rng, self._episode_budget = rng, episode_budget
            raise
        info[BUDGET_SAMPLED] = self._episode_budget
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        info[BUDGET_SAMPLED] = self._episode_budget
        return obs, reward, terminated, truncated, info

    # ---------------------------------------------------------------- snapshots
    def wrapper_state(self) -> dict[str, Any]:
        return {"rng": rng_state(self._rng), "episode_budget": self._episode_budget}

    def check_wrapper_state(self, state: Any) -> None:
        if not isinstance(state, dict) or set(state) != {"rng", "episode_budget"}:
            raise ValueError("a BudgetMix state is a dict with 'rng' and 'episode_budget'")
        budget = state["episode_budget"]
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise ValueError(f"episode_budget must be None or a positive int, got {budget!r}")
        check_rng_state(state["rng"])

    def restore_wrapper_state(self, state: dict[str, Any]) -> None:
        self._rng = rng_from_state(state["rng"], self._rng)
        self._episode_budget = state["episode_budget"]

    def snapshot(self) -> Snapshot:
        """Snapshot the whole chain under (and including) this wrapper."""
        return take_snapshot(self)

    def restore(self, snapshot: Snapshot) -> None:
        restore_snapshot(self, snapshot)
