"""Envs for the contract checker's tests that are not the suite's full envs.

``GuessDigitEnv`` is a plain ``gymnasium.Env`` with str observations and actions
(Gymnasium's ``Text`` spaces), knowing nothing of ``agentenvs``; its ``Broken*``
variants each break a rule that applies to any env. ``MinimalTextEnv`` subclasses
``TextEnv`` and implements only what the base needs to run an episode.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from agentenvs.core.env import TextEnv, Transition

CHARSET = string.ascii_letters + string.digits + " .,:'"


class GuessDigitEnv(gym.Env[str, str]):
    """Guess the digit drawn at reset; each wrong guess says higher or lower."""

    metadata = {"render_modes": []}  # noqa: RUF012 - as Gymnasium's envs declare it
    max_guesses = 6

    def __init__(self) -> None:
        self.observation_space = spaces.Text(200, charset=CHARSET)
        self.action_space = spaces.Text(8, min_length=0, charset=CHARSET)
        self._secret = 0
        self._guesses = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._secret = self._draw()
        self._guesses = 0
        return "Guess a digit from 0 to 9.", {"guesses": 0}

    def _draw(self) -> int:
        return int(self.np_random.integers(10))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._guesses += 1
        text = action.strip()
        if len(text) != 1 or text not in string.digits:
            obs, reward, solved = "Answer with one digit.", 0.0, False
        elif int(text) == self._secret:
            obs, reward, solved = "Right.", 1.0, True
        else:
            obs = "Higher." if int(text) < self._secret else "Lower."
            reward, solved = 0.0, False
        truncated = not solved and self._guesses >= self.max_guesses
        return obs, reward, solved, truncated, {"guesses": self._guesses}


class BrokenGlobalRandomEnv(GuessDigitEnv):
    """Draws its digit from the global ``random``, not from the seeded ``np_random``."""

    def _draw(self) -> int:
        return random.randrange(10)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        # a game number from the global stream too, so that two resets never agree by
        # chance (one digit in ten would, and a check would then miss the broken seeding)
        game = random.getrandbits(48)
        return f"Guess a digit from 0 to 9. Hint: not {(self._secret + 1) % 10}. Game {game}.", info


class BrokenEmptyGuessEnv(GuessDigitEnv):
    """Crashes on the empty string, which its action space holds."""

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if action == "":
            raise IndexError("string index out of range")
        return super().step(action)


class MinimalTextEnv(TextEnv):
    """Count up to a task's target by answering "up": only the hooks an episode needs
    (``task_ids``, ``_load_task``, ``_apply``, ``_state_key``); no ``_get_state`` or
    ``_set_state`` (so no snapshots) and no ``error_action``."""

    @property
    def task_ids(self) -> Sequence[str]:
        return ("count-3", "count-4")

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        self._target = int(task_id.split("-")[1])
        self._count = int(self.np_random.integers(0, 2))
        return f"You are at {self._count}; reach {self._target}. Answer 'up'."

    def _apply(self, action: str) -> Transition:
        if action.strip().lower() != "up":
            return Transition("Answer 'up'.", action_valid=False)
        self._count += 1
        if self._count >= self._target:
            return Transition("Done.", 1.0, terminated=True, success=True, score=1.0)
        return Transition(f"You are at {self._count}.", score=self._count / self._target)

    def _state_key(self) -> str:
        return f"{self._target}:{self._count}"


class PartialInfoEnv(GuessDigitEnv):
    """Reports the suite's ``turn`` key, but none of the others."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        obs, _ = super().reset(seed=seed, options=options)
        return obs, {"turn": 0}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, _ = super().step(action)
        return obs, reward, terminated, truncated, {"turn": self._guesses}
