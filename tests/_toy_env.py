"""Small deterministic text envs for testing wrappers and the contract checker.

``LineWalkEnv`` walks on a line with random slips drawn from ``self.np_random``, so
the RNG is part of the state that snapshots must carry. The ``Broken*`` subclasses
each break one rule of the env contract, on purpose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agentenvs.core.env import TextEnv, Transition
from agentenvs.core.snapshot import Snapshot


class LineWalkEnv(TextEnv):
    """Walk from a random start to the right end of a line without falling off the left.

    Actions are "left" and "right" (case and surrounding space ignored); a valid move
    slips the other way with probability ``slip``. Reaching the right end terminates with
    reward 1; stepping left of 0 terminates with reward 0. Score: position / goal.
    """

    default_max_turns = 8
    slip = 0.4

    @property
    def task_ids(self) -> Sequence[str]:
        return ("line-5", "line-7")

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        self._length = int(task_id.split("-")[1])
        self._pos = int(self.np_random.integers(1, self._length - 1))
        return self._describe()

    def _describe(self) -> str:
        return (
            f"You are at {self._pos} on a line from 0 to {self._length - 1}; the goal is "
            f"{self._length - 1}. Answer 'left' or 'right'."
        )

    def action_format(self) -> str:
        return "Answer with 'left' or 'right'."

    def _apply(self, action: str) -> Transition:
        move = action.strip().lower()
        if move not in ("left", "right"):
            shown = action[:40]
            return Transition(
                observation=f"Invalid action {shown!r}. {self.action_format()}",
                action_valid=False,
            )
        delta = -1 if move == "left" else 1
        if self.np_random.random() < self.slip:
            delta = -delta
        self._pos += delta
        goal = self._length - 1
        if self._pos < 0:
            return Transition("You fell off the line.", terminated=True, success=False, score=0.0)
        if self._pos >= goal:
            self._pos = goal
            return Transition(
                "You reached the goal!", 1.0, terminated=True, success=True, score=1.0
            )
        return Transition(self._describe(), score=self._pos / goal)

    def _get_state(self) -> dict[str, int]:
        return {"pos": self._pos, "length": self._length}

    def _set_state(self, state: dict[str, int]) -> None:
        self._pos = int(state["pos"])
        self._length = int(state["length"])

    def _state_key(self) -> str:
        return f"{self._length}:{self._pos}"

    def error_action(self, rng: np.random.Generator) -> str:
        # a step toward the edge, spelled the way a model might
        return str(rng.choice(["left", "Left", " LEFT "]))


class BrokenSnapshotRngEnv(LineWalkEnv):
    """Its restore forgets the RNG: the slips after a restore differ."""

    def restore(self, snapshot: Snapshot) -> None:
        current = self.np_random.bit_generator.state
        super().restore(snapshot)
        self.np_random.bit_generator.state = current


class BrokenEmptyActionEnv(LineWalkEnv):
    """Raises on an empty action instead of explaining it."""

    def _apply(self, action: str) -> Transition:
        if action == "":
            raise ValueError("empty action")
        return super()._apply(action)


class BrokenHistoryLeakEnv(LineWalkEnv):
    """Tells the agent how many episodes it has played: history leaks across resets."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._episodes = 0

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        self._episodes += 1
        return f"Episode {self._episodes}. " + super()._load_task(task_id, options)


class BrokenTerminatesOnBudgetEnv(LineWalkEnv):
    """Ends the episode as terminated (not truncated) when the budget runs out."""

    def _apply(self, action: str) -> Transition:
        transition = super()._apply(action)
        if self.turn >= self.episode_max_turns:
            transition.terminated = True
        return transition


class BrokenErrorActionEnv(LineWalkEnv):
    """Draws its error action from the env's own RNG, not the one it is given."""

    def error_action(self, rng: np.random.Generator) -> str:
        return str(self.np_random.choice(["left", "Left"]))


class BrokenScoreActionEnv(LineWalkEnv):
    """Scores an action by really taking it: the env advances."""

    def score_action(self, action: str) -> float:
        _, _, _, _, info = self.step(action)
        return float(info["score"])


class BrokenInfoEnv(LineWalkEnv):
    """Reports score as a string and success as an int."""

    def _extra_info(self) -> dict[str, Any]:
        return {"score": "0.5", "success": 0}


class BrokenAcrossProcessesEnv(LineWalkEnv):
    """Starts where ``hash()`` of the task id says: same in one process, not across."""

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        obs = super()._load_task(task_id, options)
        self._pos = 1 + hash(task_id) % (self._length - 2)
        # the full hash in the text too, so two processes cannot agree by chance
        return f"{self._describe()} (salt {hash(task_id) & 0xFFFFFFFF})" if obs else obs


class BrokenAtomicResetEnv(LineWalkEnv):
    """Takes the new budget before it knows the reset will succeed."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        budget = (options or {}).get("max_turns") if isinstance(options, dict) else None
        if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0:
            self._episode_max_turns = budget
        return super().reset(seed=seed, options=options)


class BrokenAtomicRestoreEnv(LineWalkEnv):
    """Writes the turn counter before it checks the snapshot."""

    def restore(self, snapshot: Snapshot) -> None:
        base = getattr(snapshot, "base", None)
        if isinstance(base, dict) and isinstance(base.get("turn"), int):
            self._turn = base["turn"]
        super().restore(snapshot)


class FilesEnv(TextEnv):
    """A tiny file system with modes: ``touch P``, ``chmod MODE P``, ``mkdir P``, ``ls``."""

    default_max_turns = 20

    @property
    def task_ids(self) -> Sequence[str]:
        return ("files",)

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        self._files: dict[str, list[Any]] = {"readme": ["file", 0o644]}
        return "A file system. Commands: touch P, chmod MODE P, mkdir P, ls."

    def _apply(self, action: str) -> Transition:
        parts = action.split()
        if parts == ["ls"]:
            return Transition("\n".join(f"{p} {k} {m:o}" for p, (k, m) in sorted(self._files.items())))
        if len(parts) == 2 and parts[0] in ("touch", "mkdir"):
            self._files[parts[1]] = ["file" if parts[0] == "touch" else "dir", 0o644]
            return Transition("ok")
        if len(parts) == 3 and parts[0] == "chmod" and parts[2] in self._files:
            try:
                self._files[parts[2]][1] = int(parts[1], 8) & 0o7777
            except ValueError:
                pass
            else:
                return Transition("ok")
        return Transition("unknown command", action_valid=False)

    def _get_state(self) -> dict[str, list[Any]]:
        return {p: list(v) for p, v in self._files.items()}

    def _set_state(self, state: Any) -> None:
        self._files = {p: list(v) for p, v in state.items()}

    def _check_state(self, state: Any, base: Mapping[str, Any]) -> None:
        if not isinstance(state, dict) or not all(
            isinstance(p, str) and isinstance(v, list) and len(v) == 2 and v[0] in ("file", "dir")
            and isinstance(v[1], int) and not isinstance(v[1], bool) and 0 <= v[1] <= 0o7777
            for p, v in state.items()
        ):
            raise ValueError("not a FilesEnv state")

    def _state_key(self) -> str:
        return repr(sorted(self._files.items()))

    def error_action(self, rng: np.random.Generator) -> str:
        return "chmod 000 readme"


class BrokenFileModesEnv(FilesEnv):
    """Restores files without their modes (as unpacking an archive without -p would)."""

    def _set_state(self, state: Any) -> None:
        self._files = {p: [v[0], 0o755 if v[0] == "dir" else 0o644] for p, v in state.items()}
