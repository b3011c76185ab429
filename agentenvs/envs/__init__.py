"""The benchmark envs, one package each, and their registration."""

from __future__ import annotations

import gymnasium as gym

from agentenvs.policy.registry import register_policy

NAMESPACE = "agentenvs"

#: id -> entry point; every id gets order enforcement from the base env itself
ENV_IDS: dict[str, str] = {
    "FrozenLake-v0": "agentenvs.envs.frozenlake.env:FrozenLakeEnv",
    "InterCodeSQL-v0": "agentenvs.envs.intercode_sql.env:InterCodeSQLEnv",
    "BFCL-v0": "agentenvs.envs.bfcl.env:BFCLEnv",
    "BFCLMultiTurn-v0": "agentenvs.envs.bfcl.multi_turn.env:BFCLMultiTurnEnv",
    "DeepCoderMT-v0": "agentenvs.envs.deepcoder.env:DeepCoderMTEnv",
    "TerminalBench-v0": "agentenvs.envs.terminal.env:TerminalBenchEnv",
}

#: envs from outside the suite, adapted (``agentenvs.envs.foreign``): registered like the
#: benchmarks, listed apart from them (``registered_ids`` names the benchmarks)
FOREIGN_IDS: dict[str, str] = {
    "GymnasiumText-v0": "agentenvs.envs.foreign.gymnasium_text:GymnasiumTextEnv",
    "TextArena-v0": "agentenvs.envs.foreign.textarena_env:TextArenaEnv",
    "ReasoningGym-v0": "agentenvs.envs.foreign.reasoning_gym_env:ReasoningGymEnv",
    "OpenEnv-v0": "agentenvs.envs.foreign.openenv_env:OpenEnvTextEnv",
    "Verifiers-v0": "agentenvs.envs.foreign.verifiers_env:VerifiersTextEnv",
    "GEM-v0": "agentenvs.envs.foreign.gem_env:GEMTextEnv",
}

POLICIES: dict[str, str] = {
    "frozenlake/oracle": "agentenvs.envs.frozenlake.policies:OraclePolicy",
    "frozenlake/random": "agentenvs.envs.frozenlake.policies:RandomPolicy",
    "frozenlake/noisy": "agentenvs.envs.frozenlake.policies:NoisyOraclePolicy",
    "intercode_sql/gold": "agentenvs.envs.intercode_sql.policies:GoldPolicy",
    "intercode_sql/noisy": "agentenvs.envs.intercode_sql.policies:NoisyGoldPolicy",
    "bfcl/gold": "agentenvs.envs.bfcl.policies:GoldPolicy",
    "bfcl/noisy": "agentenvs.envs.bfcl.policies:NoisyGoldPolicy",
    "bfcl_mt/gold": "agentenvs.envs.bfcl.multi_turn.policies:GoldPolicy",
    "bfcl_mt/noisy": "agentenvs.envs.bfcl.multi_turn.policies:NoisyGoldPolicy",
    "deepcoder/reference": "agentenvs.envs.deepcoder.policies:ReferencePolicy",
    "deepcoder/buggy-then-fix": "agentenvs.envs.deepcoder.policies:BuggyThenFixPolicy",
    "terminal/solution": "agentenvs.envs.terminal.policies:SolutionPolicy",
    "terminal/noisy": "agentenvs.envs.terminal.policies:NoisySolutionPolicy",
    "foreign/random": "agentenvs.envs.foreign.policies:RandomPolicy",
}


#: the env each family of scripted policies reads (by the name before the slash)
POLICY_ENVS: dict[str, str] = {
    "frozenlake": "FrozenLake-v0",
    "intercode_sql": "InterCodeSQL-v0",
    "bfcl": "BFCL-v0",
    "bfcl_mt": "BFCLMultiTurn-v0",
    "deepcoder": "DeepCoderMT-v0",
    "terminal": "TerminalBench-v0",
}
#: the env class a family of policies reads, where it is no single registered id's
POLICY_ENV_CLASSES: dict[str, str] = {
    "foreign": "agentenvs.envs.foreign.replay:ForeignTextEnv",
}


def register_envs() -> None:
    """Register every env id under the ``agentenvs/`` namespace (idempotent)."""
    for name, entry_point in {**ENV_IDS, **FOREIGN_IDS}.items():
        env_id = f"{NAMESPACE}/{name}"
        if env_id not in gym.registry:
            # The base env enforces reset-before-step itself and owns the turn budget;
            # gym.make's OrderEnforcing and PassiveEnvChecker would refuse an env that was
            # restored from a snapshot without a reset (a worker receiving a snapshot).
            gym.register(
                id=env_id,
                entry_point=entry_point,
                order_enforce=False,
                disable_env_checker=True,
            )
    for name, entry_point in POLICIES.items():
        family = name.partition("/")[0]
        env = POLICY_ENV_CLASSES.get(family) or ENV_IDS[POLICY_ENVS[family]]
        register_policy(name, entry_point, env=env)


def registered_ids() -> list[str]:
    return [f"{NAMESPACE}/{name}" for name in ENV_IDS]
