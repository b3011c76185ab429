"""The agentenvs taskset for verifiers, under the top-level name verifiers imports by id
(``--env.taskset.id agentenvs_verifiers``); the code is ``agentenvs.integrations.verifiers``.

``vf-eval agentenvs_verifiers --env.taskset.env ENV_ID ...`` plays the first 5 tasks
(``AgentEnvsConfig.eval_limit``) once each unless ``-n N`` says how many, and prints the
count, and how to ask for more, before it starts."""

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
