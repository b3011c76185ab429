"""Envs from outside the suite as text envs of it: the suite's contract, turn budget,
``info`` keys and branching (by exact replay where the source has no snapshot), so Pass@(K,T),
step quality and error states run on them as on the suite's own envs.

- ``replay``: the base, :class:`~agentenvs.envs.foreign.replay.ReplayTextEnv`: restore,
  fork and branch by replaying the episode's seed and actions, checked step by step;
- ``gymnasium_text``: any Gymnasium env with discrete actions
  (``gym.make("agentenvs/GymnasiumText-v0", env_id="Taxi-v4")``);
- ``textarena_env``: TextArena's games, two-player ones against a fixed opponent
  (``agentenvs/TextArena-v0``);
- ``reasoning_gym_env``: reasoning-gym's generators, answered until right
  (``agentenvs/ReasoningGym-v0``);
- ``openenv_env``: an OpenEnv ``Environment``, in process or through its server
  (``agentenvs/OpenEnv-v0``);
- ``verifiers_env``: a verifiers environment's rollout, the suite's agent in its seat
  (``agentenvs/Verifiers-v0``);
- ``gem_env``: GEM's envs through ``gem.make`` (``agentenvs/GEM-v0``);
- ``ids``: ``SOURCE:NAME`` on the command line (``gymnasium:Taxi-v4``);
- ``policies``: ``foreign/random``, a random legal move of any adapted env.

Their packages are the ``ecosystem`` extra (GEM's ``gem-llm`` is installed without its
dependencies by ``make install``: it pins an older reasoning-gym).
"""
