"""InjectError: replace the agent's action with a plausible wrong one.

The resulting state is an *error state*; what an agent does next measures how well it
recovers. The wrong action comes from the env itself (``env.unwrapped.error_action(rng)``),
so it is plausible for the current state: a move toward a hole, buggy code, a bad query.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from agentenvs.core import info as keys
from agentenvs.core.rng import check_rng_state, rng_from_state, rng_state, stream_rng
from agentenvs.core.snapshot import Snapshot, restore_snapshot, take_snapshot
from agentenvs.wrappers.budget import _check_seed

INJECTED_ACTION = "injected_action"
ORIGINAL_ACTION = "original_action"

_INJECT_STREAM = 0x494E4A45  # "INJE": keeps these draws apart from the env's own


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

    Information on every step: ``error_injected`` (bool); when it fires also
    ``injected_action`` (what the env received) and ``original_action`` (the agent's).
    The reset info carries ``error_injected=False``.
    """

    def __init__(
        self,
        env: gym.Env[str, str],
        *,
        turn: int | None = None,
        probability: float | None = None,
        seed: int | None = None,
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
        if not callable(getattr(env.unwrapped, "error_action", None)):
            raise TypeError(
                f"{type(env.unwrapped).__name__} has no error_action(rng): "
                "InjectError needs an agentenvs env"
            )
        self.turn = None if turn is None else int(turn)
        self.probability = None if probability is None else float(probability)
        self._seed = _check_seed(seed)
        self._rng = stream_rng(_INJECT_STREAM, self._seed)
        self._steps = 0  # steps taken in this episode
        self._injections = 0  # errors injected in this episode

    @property
    def injections(self) -> int:
        """How many actions were replaced in the current episode."""
        return self._injections

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
        info[keys.ERROR_INJECTED] = False
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._steps += 1
        if not self._fires():
            obs, reward, terminated, truncated, info = self.env.step(action)
            info[keys.ERROR_INJECTED] = False
            return obs, reward, terminated, truncated, info
        injected = self.env.unwrapped.error_action(self._rng)  # type: ignore[attr-defined]
        self._injections += 1
        obs, reward, terminated, truncated, info = self.env.step(injected)
        info[keys.ERROR_INJECTED] = True
        info[INJECTED_ACTION] = injected
        info[ORIGINAL_ACTION] = action
        return obs, reward, terminated, truncated, info

    # ---------------------------------------------------------------- snapshots
    def wrapper_state(self) -> dict[str, Any]:
        return {
            "rng": rng_state(self._rng),
            "steps": self._steps,
            "injections": self._injections,
        }

    def check_wrapper_state(self, state: Any) -> None:
        if not isinstance(state, dict) or set(state) != {"rng", "steps", "injections"}:
            raise ValueError("an InjectError state is a dict with 'rng', 'steps', 'injections'")
        for name in ("steps", "injections"):
            value = state[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        check_rng_state(state["rng"])

    def restore_wrapper_state(self, state: dict[str, Any]) -> None:
        self._rng = rng_from_state(state["rng"], self._rng)
        self._steps = int(state["steps"])
        self._injections = int(state["injections"])

    def snapshot(self) -> Snapshot:
        """Snapshot the whole chain under (and including) this wrapper."""
        return take_snapshot(self)

    def restore(self, snapshot: Snapshot) -> None:
        restore_snapshot(self, snapshot)
