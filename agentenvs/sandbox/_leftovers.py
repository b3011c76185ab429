"""Temp dirs that name their owner, and the sweep that removes those of dead owners.

A process killed with SIGKILL runs no clean-up, so what it made on the host stays. Every
temp dir this project makes on the host is named ``<prefix><pid>-<start>-<random>``:
the owner's pid and its start time (clock ticks since boot, from ``/proc``), which
together tell a live owner from a dead one even after its pid was reused. ``sweep``
removes only dirs of that exact shape, whose owner is gone, that are real directories
(never a symlink), owned by this uid or by the sandbox's uid; it runs when a process
first makes a dir of that prefix, so the next start cleans up after a killed one.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import threading

_NAME = re.compile(r"^(?P<pid>\d+)-(?P<start>\d+)-[A-Za-z0-9_]+$")
_swept: set[tuple[str, str]] = set()
_lock = threading.Lock()
#: the prefixes of every temp dir the project makes on the host
HOST_PREFIXES = ("agentenvs-sbx-", "agentenvs-bwrap-", "agentenvs-pylib-")


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat_line = f.read()
    except OSError:
        return None
    # the command name may hold spaces and parentheses: fields follow the last ')'
    fields = stat_line.rsplit(b")", 1)[-1].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def owner_alive(pid: int, start: int) -> bool:
    return start_time(pid) == start


def sweep_once(prefix: str, parent: str | None = None) -> list[str]:
    """``sweep`` the first time this process asks for ``prefix`` in ``parent``."""
    parent = parent or tempfile.gettempdir()
    with _lock:
        if (parent, prefix) in _swept:
            return []
        _swept.add((parent, prefix))
    return sweep(prefix, parent)


def owned_mkdtemp(prefix: str, dir: str | None = None) -> str:
    """``tempfile.mkdtemp`` named after this process; dead owners' dirs are swept first."""
    parent = dir or tempfile.gettempdir()
    sweep_once(prefix, parent)
    me = os.getpid()
    return tempfile.mkdtemp(prefix=f"{prefix}{me}-{start_time(me) or 0}-", dir=parent)


def _removable_uids() -> set[int]:
    uids = {os.geteuid()}
    if os.geteuid() == 0:
        uids.add(65534)  # the local sandbox's files when the host is root
    return uids


def sweep(prefix: str, parent: str | None = None) -> list[str]:
    """Remove ``parent``'s ``<prefix><pid>-<start>-*`` dirs whose owner is dead; their paths."""
    parent = parent or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    uids = _removable_uids()
    for name in names:
        if not name.startswith(prefix):
            continue
        m = _NAME.match(name[len(prefix) :])
        if m is None or owner_alive(int(m["pid"]), int(m["start"])):
            continue
        path = os.path.join(parent, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in uids:
            continue
        if remove_tree(path):
            removed.append(path)
    return removed


def remove_tree(path: str) -> bool:
    """Remove the directory ``path`` (made by us) and everything in it; whether it is gone."""
    from agentenvs.sandbox import _files

    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        with contextlib.suppress(Exception):
            _files.clear_dir(path)
            os.rmdir(path)
    return not os.path.lexists(path)
