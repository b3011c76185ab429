"""A task's ``[environment.healthcheck]``, run until the environment is healthy.

Harbor runs the command after the environment starts and before the agent's first
action, as Docker's HEALTHCHECK does: every ``interval_sec`` (``start_interval_sec``
within ``start_period_sec``, where failures do not count), each try stopped at
``timeout_sec``; ``retries`` consecutive failures make it unhealthy. An unhealthy
environment is the task's or the machine's, never the agent's: a :class:`Fault`.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable

from agentenvs.core.errors import Fault
from agentenvs.envs.terminal.data import Healthcheck
from agentenvs.envs.terminal.shell import ShellSession

#: what a try may take past its own timeout before the shell itself is thought stuck
_SLACK_S = 10.0


def wait_healthy(
    check: Healthcheck,
    shell: ShellSession,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Run ``check`` in ``shell`` until it passes; returns how many tries it took.

    Raises :class:`Fault` (kind ``container``) after ``retries`` consecutive failures
    past the start period, with the last try's status and output as evidence."""
    started = clock()
    # `timeout` stops a try that hangs; its exit status 124 counts as a failure
    command = f"timeout -s KILL {check.timeout_sec:g} sh -c {shlex.quote(check.command)}"
    failures = tries = 0
    while True:
        tries += 1
        rc, out = shell.control(command, timeout=check.timeout_sec + _SLACK_S)
        if rc == 0:
            return tries
        starting = clock() - started < check.start_period_sec
        if not starting:
            failures += 1
        if failures >= check.retries:
            said = "timed out" if rc in (None, 124, 137) else f"exit status {rc}"
            tail = out.decode(errors="replace").strip()[-300:]
            raise Fault(
                f"the environment is unhealthy: its healthcheck failed {failures} times in a "
                f"row ([environment.healthcheck] retries = {check.retries}); last try: {said}",
                kind="container",
                evidence=f"healthcheck {check.command!r}: {said}; output: {tail!r}",
                retryable=True,
            )
        sleep(check.start_interval_sec if starting else check.interval_sec)
