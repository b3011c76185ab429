"""Core types: the base env, the free-text space, snapshots, info keys and errors."""

from agentenvs.core.aio import AsyncEnv, AsyncEnvPool
from agentenvs.core.env import TextEnv, Transition
from agentenvs.core.errors import (
    AgentEnvsError,
    MissingExtraError,
    SandboxError,
    ServiceUnavailable,
    SnapshotError,
    TaskError,
    UnknownTaskError,
)
from agentenvs.core.ray_pool import EnvActorLostError, RayEnv, RayEnvPool
from agentenvs.core.snapshot import (
    Snapshot,
    SnapshotParticipant,
    restore_snapshot,
    take_snapshot,
)
from agentenvs.core.spaces import FreeText

__all__ = [
    "AgentEnvsError",
    "AsyncEnv",
    "AsyncEnvPool",
    "EnvActorLostError",
    "FreeText",
    "MissingExtraError",
    "RayEnv",
    "RayEnvPool",
    "SandboxError",
    "ServiceUnavailable",
    "Snapshot",
    "SnapshotError",
    "SnapshotParticipant",
    "TaskError",
    "TextEnv",
    "Transition",
    "UnknownTaskError",
    "restore_snapshot",
    "take_snapshot",
]
