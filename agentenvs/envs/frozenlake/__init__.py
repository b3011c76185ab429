"""FrozenLake in text: Gymnasium FrozenLake-v1's dynamics, an exact DP oracle, scripted
reference policies and bundled maps (``agentenvs/FrozenLake-v0``)."""

from agentenvs.envs.frozenlake.env import ACTION_NAMES, FrozenLakeEnv, format_action, parse_moves
from agentenvs.envs.frozenlake.maps import FIXED_MAPS, generate_solvable_map, is_solvable
from agentenvs.envs.frozenlake.oracle import FrozenLakeOracle, lake_model, oracle_for

__all__ = [
    "ACTION_NAMES",
    "FIXED_MAPS",
    "FrozenLakeEnv",
    "FrozenLakeOracle",
    "format_action",
    "generate_solvable_map",
    "is_solvable",
    "lake_model",
    "oracle_for",
    "parse_moves",
]
