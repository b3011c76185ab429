"""Adapters to the trainers people use; one module per framework, each importing it lazily.

- ``agentenvs.integrations.trl``: TRL's ``GRPOTrainer`` (``environment_factory`` with the
  env's actions as tools, a task dataset, a reward function; a ``rollout_func`` over
  ``GroupEnv`` for free-text actions).
- ``agentenvs.integrations.verifiers``: a verifiers environment module
  (``load_environment``) for any env id.
- ``agentenvs.integrations.skyrl``: a SkyRL-gym ``BaseTextEnv`` registered per env id, and
  a dataset builder.
- ``agentenvs.server``: the OpenEnv-protocol env server, for every framework that speaks it.
- ``agentenvs.integrations.tiny_model``: a tiny Qwen3 built offline (random weights, a
  tokenizer trained on an env's text), what the docs' trainer snippets run with.

``agentenvs.integrations.common`` holds what they share (the prompt split, per-rollout
random streams, the tools of each env); it needs no framework.
"""
