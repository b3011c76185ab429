"""BFCL verdicts against bfcl-eval's own, on the installed package's full data.

Single-turn: every entry of the 13 single-turn categories, five to seven reply texts each
(gold, near misses, re-typed values, bare Java/JS source, empty and plain-text replies),
graded through ``BFCL-v0``'s step and through bfcl-eval's decoder and AST checker.
Multi-turn: every entry of the four multi-turn categories, four trajectories each (gold
in one reply a turn, gold one call a step, two perturbed), played through
``BFCLMultiTurn-v0`` and given to bfcl-eval's ``multi_turn_checker``. Prints the counts
of equal verdicts (the figures in docs/bfcl.md), per category, and any case that differs; exits
1 if one does. Also times both graders on the same single-turn replies.

Usage: python benchmarks/bench_bfcl_agreement.py [--per-category N] [--seed S]
(the same as ``python -m agentenvs.envs.bfcl.agreement``).
"""

from __future__ import annotations

from agentenvs.envs.bfcl.agreement import main

if __name__ == "__main__":
    raise SystemExit(main())
