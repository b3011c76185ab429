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


#: what an episode's clock counts: the whole wall clock (the harnesses' way, the
#: policy's thinking included), the time its commands ran (a trainer's slow model costs
#: the agent nothing), or nothing (no time budget)
COUNTINGS = ("wall", "commands", "off")


class AgentClock:
    """Time used of a task's agent budget, in seconds: of wall clock (``"wall"``) or of
    commands running (``"commands"``: only between ``begin`` and ``mark``)."""

    def __init__(self, budget_s: float, used_s: float = 0.0, *, counting: str = "wall") -> None:
        if counting not in ("wall", "commands"):
            raise ValueError(f"counting must be 'wall' or 'commands', got {counting!r}")
        self.budget_s = float(budget_s)
        self.counting = counting
        self._start = time.monotonic() - float(used_s)
        self._began: float | None = None
        #: the time used when the last action ended (or when the clock was made)
        self.marked_s = float(used_s)

    def begin(self) -> None:
        """A command starts (what ``"commands"`` counts, up to the next ``mark``)."""
        if self.counting == "commands":
            self._began = time.monotonic()

    def mark(self) -> None:
        """Note the time used now (at the end of an action)."""
        self.marked_s = self.used_s
        self._began = None

    @property
    def used_s(self) -> float:
        if self.counting == "wall":
            return time.monotonic() - self._start
        running = time.monotonic() - self._began if self._began is not None else 0.0
        return self.marked_s + running

    @property
    def left_s(self) -> float:
        return self.budget_s - self.used_s

    @property
    def spent(self) -> bool:
        return self.left_s <= 0

    def command_timeout(self, own_s: float) -> float:
        """A command's timeout: ``own_s`` cut to what is left of the budget."""
        return max(min(own_s, self.left_s), MIN_COMMAND_S)
