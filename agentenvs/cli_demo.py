"""The suites ``agentenvs demo`` runs: per env, two scripted policies that differ the way
the paper's base and RL models do, and the budgets and mode to sweep them over."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DemoSuite:
    """One env of the demo: a weaker and a stronger scripted policy, compared by Pass@(K,T)."""

    name: str
    env_id: str
    env_kwargs: dict[str, Any]
    first: str  # the "base-like" policy
    second: str  # the "RL-like" policy
    budgets: tuple[int, ...]
    mode: str
    tasks: str = "all"
    n: int = 16
    note: str = ""


#: FrozenLake: both policies err as often (25% of ordinary moves); right after a mistake
#: the base-like one plays optimally only 30% of the time, the RL-like one 90%, the gain
#: the paper attributes to RL. The scripted policies plan with the exact Q for the turns
#: they have left, so their play depends on the budget: ``rerun`` mode (one run per T).
#: The ice slips 20% of the time (``success_rate=0.8``) rather than Gymnasium's 2/3, so
#: that 16 turns are enough to finish most maps. Pass@1 of each policy peaks near T = 12
#: and then falls a little: with more turns left the exact plan takes a longer, safer
#: route, and each extra move is another 25% chance of a lowest-Q mistake (the report's
#: notes and the figure's footnote say so; docs/analyses.md gives the measurements). The
#: gap between the two policies still grows with T. With 38 maps (< 50 tasks) the paired
#: tables give intervals but no verdict.
DEMO_SUITES: tuple[DemoSuite, ...] = (
    DemoSuite(
        name="frozenlake",
        env_id="agentenvs/FrozenLake-v0",
        env_kwargs={"success_rate": 0.8},
        first="frozenlake/noisy:error_rate=0.25,recover=0.3",
        second="frozenlake/noisy:error_rate=0.25,recover=0.9",
        budgets=(2, 4, 6, 8, 10, 12, 14, 16),
        mode="rerun",
        note="same error rate, different recovery",
    ),
    # InterCode-SQL on embedded SQLite: a policy that sends a wrong statement at 60% of
    # its turns against one that does so at 20%; both recover (gold, then submit), so
    # the gap narrows as the budget leaves room for extra turns. Neither reads the budget
    # and the env checks nothing at the budget's end: derive is valid.
    DemoSuite(
        name="intercode_sql",
        env_id="agentenvs/InterCodeSQL-v0",
        env_kwargs={},
        first="intercode_sql/noisy:error_rate=0.6",
        second="intercode_sql/noisy:error_rate=0.2",
        budgets=(1, 2, 3, 4),
        mode="derive",
        note="a wrong statement at 60% vs 20% of turns",
    ),
    # DeepCoder-MT in the local sandbox: both submit a buggy program first; the second
    # fixes it (submits the reference) with probability 0.8 per later turn, the first 0.3.
    DemoSuite(
        name="deepcoder",
        env_id="agentenvs/DeepCoderMT-v0",
        env_kwargs={},
        first="deepcoder/buggy-then-fix:fix_rate=0.3",
        second="deepcoder/buggy-then-fix:fix_rate=0.8",
        budgets=(1, 2, 3, 4),
        mode="derive",
        tasks="first:12",
        n=8,
        note="buggy first attempt, then a fix 30% vs 80% of the time",
    ),
    # BFCL single-turn: a near-miss call 50% vs 20% of the time (a decodable reply is
    # graded at once, so the budget only matters after undecodable replies; these
    # policies' replies always decode, so every episode ends at turn 1 and the report's
    # figures label the T axis "no effect here").
    DemoSuite(
        name="bfcl",
        env_id="agentenvs/BFCL-v0",
        env_kwargs={},
        first="bfcl/noisy:error_rate=0.5",
        second="bfcl/noisy:error_rate=0.2",
        budgets=(1, 2, 3),
        mode="derive",
        note="near-miss calls 50% vs 20% of the time",
    ),
    # Terminal-Bench in the local sandbox: the task's solution.sh and submit, or at 60% vs
    # 20% of turns a destructive or mistyped command (the env's error_action) instead.
    # Every episode ends in a run of the task's pytest suite (about half a CPU-second
    # with its interpreter start), and rerun mode needs an episode per budget, so this is
    # the demo's costliest part: 10 tasks x 2 samples x 2 budgets per policy, one turn
    # (no room for a mistake) and three (room to recover from two). 10 tasks are far
    # fewer than the 50 a paired verdict needs: the report prints intervals, no verdict.
    DemoSuite(
        name="terminal",
        env_id="agentenvs/TerminalBench-v0",
        env_kwargs={},
        first="terminal/noisy:error_rate=0.6",
        second="terminal/noisy:error_rate=0.2",
        budgets=(1, 3),
        mode="rerun",  # the tests also run when the budget runs out: derive is invalid here
        tasks="first:10",
        n=2,
        note="a wrong command instead of the solution at 60% vs 20% of turns",
    ),
    # BFCL multi-turn on the project's backends: a near-miss call at 30% vs 10% of steps;
    # the budget counts agent steps over all user turns.
    DemoSuite(
        name="bfcl_multi_turn",
        env_id="agentenvs/BFCLMultiTurn-v0",
        env_kwargs={},
        first="bfcl_mt/noisy:error_rate=0.3",
        second="bfcl_mt/noisy:error_rate=0.1",
        budgets=(4, 8, 12, 16, 24),
        mode="derive",
        note="a near-miss call at 30% vs 10% of steps",
    ),
)
