"""Wrappers for agentenvs envs: varying turn budgets, error injection and recording.

Each wrapper that holds state takes part in snapshots (``wrapper_state`` /
``restore_wrapper_state``), so ``take_snapshot``/``restore_snapshot`` on a wrapped env
restore the wrappers too; ``wrapper.snapshot()``/``wrapper.restore(snap)`` are shortcuts.
"""

from agentenvs.wrappers.budget import BUDGET_SAMPLED, BudgetMix
from agentenvs.wrappers.inject_error import INJECTED_ACTION, ORIGINAL_ACTION, InjectError
from agentenvs.wrappers.record import RecordEpisode, json_safe, read_records

__all__ = [
    "BUDGET_SAMPLED",
    "INJECTED_ACTION",
    "ORIGINAL_ACTION",
    "BudgetMix",
    "InjectError",
    "RecordEpisode",
    "json_safe",
    "read_records",
]
