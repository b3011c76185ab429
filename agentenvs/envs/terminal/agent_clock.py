"""The task's wall-clock budget for the agent (TB1 ``max_agent_timeout_sec``, Harbor
``[agent] timeout_sec``), as the official harnesses hold an agent to it.

An episode's clock starts when its starting state is ready and runs while the policy
thinks and while commands run: each command is interrupted at ``command_timeout`` or at
the budget's end, whichever comes first, and once the budget is spent the episode ends
and the tests run (as TB1 and Harbor run them after an agent timeout). The task's own
solution (``oracle_action``) runs under the budget alone, not ``command_timeout``, as the
official oracle does. A snapshot keeps the time used up to the end of the last action
(``marked_s``: the same however long after it the snapshot is taken, so two snapshots of
one state are equal); a restore goes on from there.
"""

from __future__ import annotations

import time

#: the least time a command is given (a budget spent to the last millisecond still runs
#: the command that was asked, and is interrupted at once)
MIN_COMMAND_S = 0.05


class AgentClock:
    """Time used of a task's agent budget, in seconds of wall clock."""

    def __init__(self, budget_s: float, used_s: float = 0.0) -> None:
        self.budget_s = float(budget_s)
        self._start = time.monotonic() - float(used_s)
        #: the time used when the last action ended (or when the clock was made)
        self.marked_s = float(used_s)

    def mark(self) -> None:
        """Note the time used now (at the end of an action)."""
        self.marked_s = self.used_s

    @property
    def used_s(self) -> float:
        return time.monotonic() - self._start

    @property
    def left_s(self) -> float:
        return self.budget_s - self.used_s

    @property
    def spent(self) -> bool:
        return self.left_s <= 0

    def command_timeout(self, own_s: float) -> float:
        """A command's timeout: ``own_s`` cut to what is left of the budget."""
        return max(min(own_s, self.left_s), MIN_COMMAND_S)
