"""Processes: whether the owner of a leftover (a container, a database) still lives, and
the variable through which a worker pool tells its workers their share of the CPUs."""

from __future__ import annotations

import os

#: the environment variable through which a pool tells its workers their share of the
#: CPUs; model policies set their intra-op threads from it (``HFPolicy``)
THREADS_ENV = "AGENTENVS_WORKER_THREADS"


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` exists on this host (one of another user included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
