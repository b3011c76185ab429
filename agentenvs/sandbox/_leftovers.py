"""Temp dirs that name their owner, and the sweep that removes those of dead owners.

A process killed with SIGKILL runs no clean-up, so what it made on the host stays. Every
temp dir this project makes on the host is named ``<prefix><pid>-<start>-<ns>-<random>``:
the owner's pid, its start time (clock ticks since boot, from ``/proc``) and its pid
namespace (the inode of ``/proc/self/ns/pid``), which together tell a live owner from a
dead one even after its pid was reused. A pid means something only in its own pid
namespace: a process in another one (a container, a CI root entered with ``unshare``)
sharing the same temp dir or cgroup tree would find its neighbour's pids absent and take
them for dead. So only names of this process's own pid namespace are ever judged; every
other name (another namespace's, or one without a namespace) is left alone. ``sweep``
removes only dirs of that exact shape, whose owner is gone, that are real directories
(never a symlink), owned by this uid or by the sandbox's uid; it runs when a process
first makes a dir of that prefix, so the next start cleans up after a killed one.

A process ended by a signal (SIGTERM's default action, SIGKILL) runs no ``atexit`` either,
so each dir is also handed to a *reaper*: a small process, detached from its owner (its
own session, not a child of it), that reads the dirs' paths from a pipe whose only writer
is the owner (and the owner's forks) and removes them when the pipe closes, that is when
every one of them has ended, however it ended. The sweep stays the backstop for when the
reaper is killed too.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading

from agentenvs.core.procs import pid_namespace

_NAME = re.compile(r"^(?P<pid>\d+)-(?P<start>\d+)-(?P<ns>\d+)-[A-Za-z0-9_]+$")
_swept: set[tuple[str, str]] = set()
_lock = threading.Lock()
#: the prefixes of every temp dir the project makes on the host
HOST_PREFIXES = ("agentenvs-sbx-", "agentenvs-bwrap-", "agentenvs-pylib-", "agentenvs-etc-")


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


def owner_tag(pid: int | None = None) -> str:
    """``<pid>-<start>-<ns>``: what names an owner in a temp dir's or cgroup's name."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{start_time(pid) or 0}-{pid_namespace()}"


def owner_alive(pid: int, start: int, ns: int | None = None) -> bool:
    """Whether the owner ``pid``/``start`` of pid namespace ``ns`` may be alive: True
    for an owner of another namespace (this process cannot see it, so never judges it
    dead), else whether that process is still there."""
    if ns is not None and ns != pid_namespace():
        return True
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
    """``tempfile.mkdtemp`` named after this process; dead owners' dirs are swept first, and
    this one is removed by the reaper once this process has ended, however it ended."""
    parent = dir or tempfile.gettempdir()
    sweep_once(prefix, parent)
    path = tempfile.mkdtemp(prefix=f"{prefix}{owner_tag()}-", dir=parent)
    reap_at_exit(path)
    return path


# the reaper: forks away from its starter (so it is no child of the owner), says its pid,
# then collects paths until EOF and removes them; read-only dirs are made writable first
_REAPER = r"""
import os, shutil, stat, sys
if os.fork():
    os._exit(0)
os.setsid()
os.write(1, b"%d\n" % os.getpid())
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
paths = [os.fsdecode(line.rstrip(b"\n")) for line in sys.stdin.buffer]
def retry(top):
    # a dir made unreadable is made readable again: only inside top, never its parent
    # (the shared temp dir), and nothing for what is already gone
    def again(func, path, exc):
        if isinstance(exc[1], FileNotFoundError):
            return
        try:
            if path != top:
                os.chmod(os.path.dirname(path), stat.S_IRWXU)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, stat.S_IRWXU)
            func(path)
        except OSError:
            pass
    return again
for path in paths:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, onerror=retry(path))
"""
_reaper_fd: int | None = None
_reaper_tried = False
#: the reaper's pid (None until one is started)
reaper_pid: int | None = None


def _start_reaper() -> int | None:
    global reaper_pid
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _REAPER],
            stdin=read_end,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    os.close(read_end)
    assert proc.stdout is not None
    with proc.stdout:
        line = proc.stdout.readline()
    proc.wait()
    if not line.strip().isdigit():
        os.close(write_end)
        return None
    reaper_pid = int(line)
    return write_end


def reap_at_exit(path: str) -> None:
    """Have ``path`` removed when this process (and every fork of it) has ended."""
    global _reaper_fd, _reaper_tried
    with _lock:
        if not _reaper_tried:  # a fork shares its parent's reaper (it holds the pipe too)
            _reaper_tried = True
            _reaper_fd = _start_reaper()
        if _reaper_fd is None:
            return
        with contextlib.suppress(OSError):
            os.write(_reaper_fd, os.fsencode(path) + b"\n")


def _removable_uids() -> set[int]:
    uids = {os.geteuid()}
    if os.geteuid() == 0:
        uids.add(65534)  # the local sandbox's files when the host is root
    return uids


def sweep(prefix: str, parent: str | None = None) -> list[str]:
    """Remove ``parent``'s ``<prefix><pid>-<start>-<ns>-*`` dirs whose owner, of this
    process's pid namespace, is dead; their paths."""
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
        if m is None or owner_alive(int(m["pid"]), int(m["start"]), int(m["ns"])):
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
