"""Wrappers for agentenvs envs: varying turn budgets, error injection and recording.

Each wrapper that holds state takes part in snapshots (``wrapper_state`` /
``restore_wrapper_state``), so ``take_snapshot``/``restore_snapshot`` on a wrapped env
restore the wrappers too; ``wrapper.snapshot()``/``wrapper.restore(snap)`` are shortcuts.

``GroupEnv`` (the K rollouts of a GRPO group as a PettingZoo ``ParallelEnv``) loads on
first access, so that importing this package does not import pettingzoo.
"""

from typing import Any

from agentenvs.wrappers.budget import BUDGET_SAMPLED, BudgetMix
from agentenvs.wrappers.inject_error import INJECTED_ACTION, ORIGINAL_ACTION, InjectError
from agentenvs.wrappers.record import RecordEpisode, json_safe, read_records

__all__ = [
    "BUDGET_SAMPLED",
    "INJECTED_ACTION",
    "ORIGINAL_ACTION",
    "BudgetMix",
    "GroupEnv",
    "InjectError",
    "RecordEpisode",
    "json_safe",
    "read_records",
]

_LAZY = {"GroupEnv": "agentenvs.wrappers.group"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
