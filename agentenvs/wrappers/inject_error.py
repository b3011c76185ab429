"""InjectError: replace the agent's action with a plausible wrong one.

The resulting state is an *error state*; what an agent does next measures how well it
recovers. The wrong action comes from the env itself (``env.unwrapped.error_action(rng)``),
so it is plausible for the current state: a move toward a hole, buggy code, a bad query.

An injected error is an error: its regret (``agentenvs.core.regret.action_regret``, the
best action's value minus its own by the env's scoring: on FrozenLake
``max_a Q(s, a) - Q(s, injected)`` under the exact oracle, on DeepCoder-MT one minus the
share of tests the program passes) must exceed ``REGRET_TOL`` (1e-9). A candidate that
does not is drawn again, up to ``max_draws`` candidates in all (``draw_error_action``);
when none qualifies, as in a state where every action is equally good, no error is
injected and that is reported, never a harmless action passed off as a mistake.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from agentenvs.core import info as keys
from agentenvs.core.regret import REGRET_TOL, action_regret
from agentenvs.core.rng import check_rng_state, rng_from_state, rng_state, stream_rng
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot
from agentenvs.wrappers.budget import _check_seed

INJECTED_ACTION = "injected_action"
ORIGINAL_ACTION = "original_action"
INJECTED_REGRET = "injected_regret"
ERROR_REDRAWS = "error_redraws"
ERROR_UNAVAILABLE = "error_unavailable"

#: candidates ``draw_error_action`` tries before it gives up on a state
MAX_ERROR_DRAWS = 8

_INJECT_STREAM = 0x494E4A45  # "INJE": keeps these draws apart from the env's own


@dataclass(frozen=True)
class ErrorDraw:
    """The outcome of ``draw_error_action``: the error (None when no candidate was one),
    its regret (0.0 without one) and how many candidates were rejected before it (all
    of them without one)."""

    action: str | None
    regret: float
    redraws: int


def draw_error_action(
    env: gym.Env[Any, Any], rng: np.random.Generator, *, max_draws: int = MAX_ERROR_DRAWS
) -> ErrorDraw:
    """Draw the env's ``error_action(rng)`` until one has a regret above ``REGRET_TOL``
    in the env's current state, at most ``max_draws`` times; the env is not advanced.
    Every draw comes from ``rng``, so the same generator state gives the same result."""
    if isinstance(max_draws, bool) or not isinstance(max_draws, int) or max_draws < 1:
        raise ValueError(f"max_draws must be a positive integer, got {max_draws!r}")
    error_action = env.unwrapped.error_action  # type: ignore[attr-defined]
    for draw in range(max_draws):
        action = error_action(rng)
        regret = action_regret(env, action)
        if regret > REGRET_TOL:
            return ErrorDraw(action, regret, draw)
    return ErrorDraw(None, 0.0, max_draws)


class InjectError(gym.Wrapper[str, str, str, str]):
    """At a chosen turn, or at random, step the env with its own error action instead.

    Arguments (exactly one of ``turn`` and ``probability``):
        turn: the 1-based step of each episode whose action is replaced (``turn=1``
            replaces the first action after reset).
        probability: the chance that any one step's action is replaced.
        seed: seeds the wrapper's generator, which decides when ``probability`` fires
            and is handed to ``error_action``. ``reset(seed=s)`` reseeds it from ``s``
            (mixed with ``seed`` when given), so the same reset seed injects the same
            errors in any process.
        max_draws: candidates drawn at most per injection (see the module doc).

    Information on every step: ``error_injected`` (bool). When it fires also
    ``error_redraws`` (candidates rejected as no worse than the best action); when an
    error was injected ``injected_action`` (what the env received), ``injected_regret``
    (its regret) and ``original_action`` (the agent's); when none of the candidates was
    an error, ``error_unavailable=True`` and the agent's own action is stepped. The reset
    info carries ``error_injected=False``.
    """

    def __init__(
        self,
        env: gym.Env[str, str],
        *,
        turn: int | None = None,
        probability: float | None = None,
        seed: int | None = None,
        max_draws: int = MAX_ERROR_DRAWS,
    ) -> None:
        super().__init__(env)
        if (turn is None) == (probability is None):
            raise ValueError("give exactly one of turn=k or probability=p")
        if turn is not None and (
            isinstance(turn, bool) or not isinstance(turn, int | np.integer) or turn < 1
        ):
            raise ValueError(f"turn must be a positive integer (1 = first step), got {turn!r}")
        if probability is not None:
            if isinstance(probability, bool) or not isinstance(probability, int | float):
                raise TypeError(f"probability must be a number, got {probability!r}")
            if not (math.isfinite(probability) and 0.0 <= probability <= 1.0):
                raise ValueError(f"probability must be within [0, 1], got {probability!r}")
        if isinstance(max_draws, bool) or not isinstance(max_draws, int) or max_draws < 1:
            raise ValueError(f"max_draws must be a positive integer, got {max_draws!r}")
        if not callable(getattr(env.unwrapped, "error_action", None)):
            raise TypeError(
                f"{type(env.unwrapped).__name__} has no error_action(rng): "
                "InjectError needs an agentenvs env"
            )
        self.turn = None if turn is None else int(turn)
        self.probability = None if probability is None else float(probability)
        self.max_draws = max_draws
        self._seed = _check_seed(seed)
        self._rng = stream_rng(_INJECT_STREAM, self._seed)
        self._steps = 0  # steps taken in this episode
        self._injections = 0  # errors injected in this episode
        self._redraws = 0  # candidates rejected in this episode
        self._unavailable = 0  # firings in this episode with no error to inject

    @property
    def injections(self) -> int:
        """How many actions were replaced in the current episode."""
        return self._injections

    @property
    def redraws(self) -> int:
        """How many candidate errors were rejected (regret too small) in this episode."""
        return self._redraws

    @property
    def unavailable(self) -> int:
        """How many times in this episode the wrapper fired but found no error to inject."""
        return self._unavailable

    def _fires(self) -> bool:
        if self.turn is not None:
            return self._steps == self.turn
        # draw on every step so the stream does not depend on the agent's actions
        return bool(self._rng.random() < self.probability)

    # ---------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        rng, rng_saved = self._rng, rng_state(self._rng)
        try:
            if seed is not None:
                self._rng = stream_rng(_INJECT_STREAM, _check_seed(seed), self._seed)
            obs, info = self.env.reset(seed=seed, options=options)
        except BaseException:  # a reset that raises changes nothing
            rng.bit_generator.state = rng_saved
            self._rng = rng
            raise
        self._steps = 0
        self._injections = 0
        self._redraws = 0
        self._unavailable = 0
        info[keys.ERROR_INJECTED] = False
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._steps += 1
        if not self._fires():
            obs, reward, terminated, truncated, info = self.env.step(action)
            info[keys.ERROR_INJECTED] = False
            return obs, reward, terminated, truncated, info
        draw = draw_error_action(self.env, self._rng, max_draws=self.max_draws)
        self._redraws += draw.redraws
        if draw.action is None:
            self._unavailable += 1
            obs, reward, terminated, truncated, info = self.env.step(action)
            info[keys.ERROR_INJECTED] = False
            info[ERROR_UNAVAILABLE] = True
            info[ERROR_REDRAWS] = draw.redraws
            return obs, reward, terminated, truncated, info
        self._injections += 1
        obs, reward, terminated, truncated, info = self.env.step(draw.action)
        info[keys.ERROR_INJECTED] = True
        info[INJECTED_ACTION] = draw.action
        info[INJECTED_REGRET] = draw.regret
        info[ERROR_REDRAWS] = draw.redraws
        info[ORIGINAL_ACTION] = action
        return obs, reward, terminated, truncated, info

    # ---------------------------------------------------------------- snapshots
    def wrapper_state(self) -> dict[str, Any]:
        return {
            "rng": rng_state(self._rng),
            "steps": self._steps,
            "injections": self._injections,
            "redraws": self._redraws,
            "unavailable": self._unavailable,
        }

    def check_wrapper_state(self, state: Any) -> None:
        required, counts = {"rng", "steps", "injections"}, {"redraws", "unavailable"}
        # a state saved before the redraw counts existed has none: they restore as 0
        if not isinstance(state, dict) or not required <= set(state) <= required | counts:
            raise ValueError(
                "an InjectError state is a dict with 'rng', 'steps', 'injections' "
                "(and 'redraws', 'unavailable')"
            )
        for name in ("steps", "injections", *sorted(counts & set(state))):
            value = state[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        check_rng_state(state["rng"])

    def restore_wrapper_state(self, state: dict[str, Any]) -> None:
        self._rng = rng_from_state(state["rng"], self._rng)
        self._steps = int(state["steps"])
        self._injections = int(state["injections"])
        self._redraws = int(state.get("redraws", 0))
        self._unavailable = int(state.get("unavailable", 0))

    def snapshot(self) -> Snapshot:
        """Snapshot the whole chain under (and including) this wrapper."""
        return take_snapshot(self)

    def restore(self, snapshot: Snapshot) -> None:
        restore_snapshot(self, snapshot)
