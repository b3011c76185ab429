"""Processes: whether the owner of a leftover (a container, a database) still lives, and
the variable through which a worker pool tells its workers their share of the CPUs."""

from __future__ import annotations

import os
import socket

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


def pid_namespace() -> int:
    """This process's pid namespace (the inode of ``/proc/self/ns/pid``; 0 if unknown).
    A pid means something only inside its namespace: leftovers are judged by pid only
    among owners of the judge's own namespace."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def host_identity() -> str:
    """Where a pid can be checked: this host's name and this process's pid namespace. Two
    processes on one host in different pid namespaces (a container, a CI root entered
    with ``unshare``) share a hostname but not their pids, so each judges only the
    leftovers (containers, databases) of its own namespace by pid."""
    return f"{socket.gethostname()}/pidns:{pid_namespace()}"
