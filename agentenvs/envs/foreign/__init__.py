"""Envs from outside the suite as text envs of it: the suite's contract, turn budget,
``info`` keys and branching (by exact replay where the source has no snapshot), so Pass@(K,T),
step quality and error states run on them as on the suite's own envs.

- ``replay``: the base, :class:`~agentenvs.envs.foreign.replay.ReplayTextEnv`: restore,
  fork and branch by replaying the episode's seed and actions, checked step by step;
- ``gymnasium_text``: any Gymnasium env with discrete actions
  (``gym.make("agentenvs/GymnasiumText-v0", env_id="Taxi-v3")``).
"""
