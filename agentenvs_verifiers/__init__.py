"""The agentenvs taskset for verifiers, under the top-level name verifiers imports by id
(``--env.taskset.id agentenvs_verifiers``); the code is ``agentenvs.integrations.verifiers``."""

from agentenvs.integrations.verifiers import (
    AgentEnvsConfig,
    AgentEnvsData,
    AgentEnvsEnv,
    AgentEnvsEnvConfig,
    AgentEnvsTask,
    AgentEnvsTaskset,
)

__all__ = [
    "AgentEnvsConfig",
    "AgentEnvsData",
    "AgentEnvsEnv",
    "AgentEnvsEnvConfig",
    "AgentEnvsTask",
    "AgentEnvsTaskset",
]
