"""agentenvs: text environments for multi-turn RL of LLM agents, and the analyses that
show what training improved (Pass@(K,T), step quality from the same state, error-state
recovery, likelihood).

``import agentenvs`` registers every env id under the ``agentenvs/`` namespace, so
``gym.make("agentenvs/FrozenLake-v0")`` works; heavy dependencies load only where used.
"""

from agentenvs.core import (
    AgentEnvsError,
    FreeText,
    Snapshot,
    SnapshotError,
    TaskError,
    TextEnv,
    restore_snapshot,
    take_snapshot,
)
from agentenvs.envs import register_envs, registered_ids

__version__ = "0.1.0"

register_envs()

__all__ = [
    "AgentEnvsError",
    "FreeText",
    "Snapshot",
    "SnapshotError",
    "TaskError",
    "TextEnv",
    "__version__",
    "register_envs",
    "registered_ids",
    "restore_snapshot",
    "take_snapshot",
]
