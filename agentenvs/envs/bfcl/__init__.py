"""BFCL: the Berkeley Function-Calling Leaderboard's call decoding, AST checker and envs."""
