"""Typed messages of the env server, and the JSON-safe form of info dicts.

The wire format is OpenEnv's: an action is a JSON object validated by ``TextAction``; an
observation travels as ``{"observation": {...}, "reward": r, "done": d}`` where the inner
object is ``TextObservation`` without its ``reward``, ``done`` and ``metadata`` fields.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentenvs.integrations.common import json_safe


class TextAction(BaseModel):
    """One agent turn: the free text the env parses (a move, a SQL block, calls, code)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="The action text, exactly as the agent wrote it")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Ignored by the env")


class TextObservation(BaseModel):
    """What the env answers to a reset or a step."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="The observation text")
    terminated: bool = Field(default=False, description="The episode ended on its own")
    truncated: bool = Field(default=False, description="The turn budget ran out")
    info: dict[str, Any] = Field(
        default_factory=dict,
        description="The env's info dict (task_id, turn, score, state_key, ...), JSON-safe",
    )
    done: bool = Field(default=False, description="terminated or truncated")
    reward: float | None = Field(default=None, description="Reward of the step (None on reset)")
    metadata: dict[str, Any] = Field(default_factory=dict)


class EnvState(BaseModel):
    """The session's episode bookkeeping (OpenEnv's ``State`` fields plus the env's)."""

    model_config = ConfigDict(extra="allow")

    episode_id: str | None = None
    step_count: int = 0
    env_id: str = ""
    task_id: str | None = None
    turn: int = 0
    max_turns: int = 0
    turns_left: int = 0
    done: bool = False
    success: bool = False
    score: float = 0.0
    state_key: str | None = None


class ResetParams(BaseModel):
    """The data of a reset: OpenEnv's ``seed``/``episode_id`` plus the env's reset options.

    ``snapshot`` starts from a snapshot this server issued (``snapshot`` message) instead
    of a reset; it cannot be combined with the other options.
    """

    model_config = ConfigDict(extra="forbid")

    seed: int | None = Field(default=None, ge=0, lt=2**64)
    episode_id: str | None = Field(default=None, max_length=255)
    task_id: str | None = Field(default=None, max_length=1024)
    max_turns: int | None = Field(default=None, ge=1, lt=2**63)
    options: dict[str, Any] = Field(
        default_factory=dict, description="Further env-specific reset options"
    )
    snapshot: str | None = Field(
        default=None, max_length=256, description="A token from a snapshot message"
    )


def observation_payload(obs: TextObservation) -> dict[str, Any]:
    """OpenEnv's serialized observation: the model without reward/done/metadata, beside them."""
    return {
        "observation": obs.model_dump(exclude={"reward", "done", "metadata"}),
        "reward": obs.reward,
        "done": obs.done,
    }


__all__ = [
    "EnvState",
    "ResetParams",
    "TextAction",
    "TextObservation",
    "json_safe",
    "observation_payload",
]
