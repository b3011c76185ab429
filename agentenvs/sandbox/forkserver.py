"""The warm fork server behind ``LocalSandbox.spawn_warm``: import once, fork per program.

This file runs *inside* a sandbox as its pid 1 (``python3 -c <this file> CTL_FD``) and
uses the standard library only. It imports what every program of its kind preloads (the
official grader: numpy and pandas, and the grader's own runner) once, then starts each
program as a fork of itself, so a program pays neither an interpreter start nor those
imports. Protocol, over the ``SOCK_SEQPACKET`` socket ``CTL_FD`` (one JSON message a
packet; the host's end never enters the sandbox otherwise):

- the host sends ``{"preload": str, "entry": str, "imports": [str], "limits": {...}}``
  and optionally ``"as_if_imported": [str]``: the server runs ``preload`` as a module of
  its own, imports ``imports`` (a missing one is left for the program's own code to
  report), records the state of every writable file system it can see, and answers
  ``{"ready": true}``. With ``as_if_imported`` (a lean server, which imports fewer
  modules than a full one) it first measures, in a throwaway fork that imports those
  modules, how much address space they take, and every program it forks reserves as
  much (an inaccessible mapping) before its rlimits apply: the memory limit leaves a
  program of a lean server the room it would have had in a full one;
- ``{"op": "run", "id"}`` with two descriptors attached (the read end of a fresh request
  pipe, the write end of a fresh answer pipe): the server forks; the fork calls
  ``entry(request_fd, answer_fd)`` of the preloaded module and exits when it returns.
  Answer: ``{"id", "started": true}``;
- ``{"op": "ping", "id"}``: ``{"id", "alive": true}`` (the host's check that pid 1 lives);
- ``{"op": "end", "id"}``: the program is over; the server kills every process of the
  sandbox but itself, puts the sandbox back as it was when it said ready, and answers
  ``{"id", "clean": bool}``. ``clean`` false: something could not be put back, and the
  host retires this server (a fresh one serves the next program).

What one program leaves never reaches the next: a fork starts from the server's memory,
which never held a program, a test's input or its output (those travel on the pipes
between the host and the fork only); its modules, globals, monkeypatches, descriptors,
environment, cwd, signal handlers, rlimits and timers are its own process's; the server
restores in the fork the signal dispositions of a fresh interpreter, applies the
sandbox's rlimits as the shell prelude of ``spawn`` does, and reseeds ``random`` and
numpy's global generator. After the program: every process but pid 1 is SIGKILLed
(``kill(-1)`` from pid 1 spares only the caller) and reaped; every entry that was not
there before is removed from the writable file systems (``/work``, ``/tmp``, ``/dev``,
``/dev/shm``, ``/dev/mqueue``, extra tmpfs dirs), the modes, times and extended attributes
of those that were are restored, System V IPC objects are removed; then the server
compares that state, the sockets of the sandbox's network namespace and its IPC objects
with what it recorded, and says ``clean`` only when they are equal.

Being pid 1 of the sandbox's pid namespace, the server receives no signal from inside that
it does not handle, and it handles none (Python's SIGINT handler is taken off); it is not
dumpable, so ``/proc/1/{mem,fd,environ}`` stay out of a program's reach.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import types
from typing import TYPE_CHECKING, Any

# Only modules the preloaded runner imports too are imported before it runs; the
# server's own others come after, and a fork drops them from ``sys.modules``, so that a
# program finds the modules a fresh interpreter running the preload would have.

if TYPE_CHECKING:
    import mmap
    import resource
    import socket
    import stat

_PR_SET_DUMPABLE = 4
_MAX_MESSAGE = 1 << 24
#: what of the network namespace and IPC must look as it did before any program
_KERNEL_TABLES = (
    "/proc/net/tcp",
    "/proc/net/tcp6",
    "/proc/net/udp",
    "/proc/net/udp6",
    "/proc/net/raw",
    "/proc/net/raw6",
    "/proc/net/unix",
    "/proc/sysvipc/shm",
    "/proc/sysvipc/msg",
    "/proc/sysvipc/sem",
)


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort
        pass


# ----------------------------------------------------------------------------- the file systems
def _unescape(path: str) -> str:
    """A mount point as ``/proc/self/mountinfo`` writes it (octal escapes) decoded."""
    out, i = [], 0
    while i < len(path):
        if path[i] == "\\" and i + 3 < len(path) + 1 and path[i + 1 : i + 4].isdigit():
            out.append(chr(int(path[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(path[i])
            i += 1
    return "".join(out)


def writable_roots() -> list[str]:
    """The mount points of this sandbox a program can write to (``/proc`` aside)."""
    roots = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            point, options = _unescape(parts[4]), parts[5].split(",")
            if point == "/proc" or point.startswith("/proc/") or "rw" not in options:
                continue
            if os.path.isdir(point) and not os.path.islink(point) and os.access(point, os.W_OK):
                roots.append(point)
    return sorted(set(roots))


def _xattrs(path: str) -> tuple[str, ...]:
    try:
        return tuple(sorted(os.listxattr(path, follow_symlinks=False)))
    except OSError:
        return ()


def _entry(path: str, st: os.stat_result) -> tuple[Any, ...]:
    kind = stat.S_IFMT(st.st_mode)
    target = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    size = st.st_size if stat.S_ISREG(st.st_mode) else 0
    mtime = st.st_mtime_ns if not stat.S_ISLNK(st.st_mode) else 0
    return (
        kind,
        stat.S_IMODE(st.st_mode),
        st.st_uid,
        st.st_gid,
        size,
        mtime,
        target,
        _xattrs(path),
        st.st_dev,
        st.st_ino if stat.S_ISREG(st.st_mode) else 0,
    )


def _walk(root: str, into: dict[str, tuple[Any, ...]]) -> None:
    """Every entry under ``root`` (not crossing into other mounts), path -> its state."""
    try:
        st = os.lstat(root)
    except OSError:
        return
    into[root] = _entry(root, st)
    if not stat.S_ISDIR(st.st_mode):
        return
    try:
        names = sorted(os.listdir(root))
    except OSError:
        into[root] += ("unlistable",)
        return
    for name in names:
        path = os.path.join(root, name)
        try:
            child = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(child.st_mode) and child.st_dev != st.st_dev:
            continue  # another mount: walked as a root of its own
        _walk(path, into)


def file_state(roots: list[str]) -> dict[str, tuple[Any, ...]]:
    state: dict[str, tuple[Any, ...]] = {}
    for root in roots:
        _walk(root, state)
    return state


def _remove_new(path: str, keep: dict[str, tuple[Any, ...]], dev: int) -> None:
    """Remove under ``path`` (a dir) everything ``keep`` does not hold, bottom up."""
    try:
        st = os.lstat(path)
        if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
            os.chmod(path, stat.S_IMODE(st.st_mode) | 0o700)
        names = os.listdir(path)
    except OSError:
        return
    for name in names:
        child = os.path.join(path, name)
        try:
            cst = os.lstat(child)
        except OSError:
            continue
        is_dir = stat.S_ISDIR(cst.st_mode)
        if is_dir and cst.st_dev != dev:
            continue
        if is_dir:
            _remove_new(child, keep, dev)
        if child in keep and keep[child][0] == stat.S_IFMT(cst.st_mode):
            try:
                same = not stat.S_ISLNK(cst.st_mode) or os.readlink(child) == keep[child][6]
            except OSError:
                same = False
            if same:
                continue
        try:
            if is_dir:
                os.rmdir(child)
            else:
                os.unlink(child)
        except OSError:
            pass


def restore_files(roots: list[str], before: dict[str, tuple[Any, ...]]) -> None:
    """Put the writable file systems back to ``before`` as far as that can be done."""
    for root in roots:
        try:
            _remove_new(root, before, os.lstat(root).st_dev)
        except OSError:
            pass
    for path in sorted(before):  # parents before children
        kind, mode, *_rest = before[path]
        target, names = before[path][6], before[path][7]
        try:
            if not os.path.lexists(path):
                if kind == stat.S_IFLNK:
                    os.symlink(target, path)
                elif kind == stat.S_IFDIR:
                    os.mkdir(path, mode)
                continue
            if kind != stat.S_IFLNK:
                os.chmod(path, mode)
            for name in set(_xattrs(path)) - set(names):
                os.removexattr(path, name, follow_symlinks=False)
        except OSError:
            pass
    for path in sorted(before, reverse=True):  # children first: an entry's change moves its dir
        kind, mtime = before[path][0], before[path][5]
        if kind != stat.S_IFLNK and os.path.lexists(path):
            try:
                os.utime(path, ns=(mtime, mtime), follow_symlinks=False)
            except OSError:
                pass


# ----------------------------------------------------------------------------- IPC and sockets
def remove_ipc() -> None:
    """Remove every System V shared memory segment, message queue and semaphore set."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
    except (OSError, AttributeError):
        return
    for table, call in (("shm", "shmctl"), ("msg", "msgctl"), ("sem", "semctl")):
        try:
            with open(f"/proc/sysvipc/{table}", encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 2:
                continue
            ident = int(fields[1])
            if call == "semctl":
                libc.semctl(ident, 0, 0)  # IPC_RMID
            else:
                getattr(libc, call)(ident, 0, None)  # IPC_RMID


def kernel_state() -> dict[str, str]:
    state = {}
    for path in _KERNEL_TABLES:
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                state[path] = f.read()
        except OSError:
            state[path] = ""
    return state


# ----------------------------------------------------------------------------- processes
def kill_all() -> None:
    """SIGKILL every process of the pid namespace but this one (pid 1), and reap them."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _set_limits(limits: dict[str, int]) -> None:
    """The rlimits of ``spawn``'s shell prelude (soft and hard alike)."""
    mb = 1 << 20
    for res, value in (
        (resource.RLIMIT_CPU, limits["cpu_seconds"]),
        (resource.RLIMIT_AS, limits["memory_mb"] * mb),
        (resource.RLIMIT_FSIZE, limits["max_file_mb"] * mb),
        (resource.RLIMIT_NOFILE, limits["max_open_files"]),
        (resource.RLIMIT_NPROC, limits["max_processes"]),
        (resource.RLIMIT_CORE, 0),
    ):
        _, hard = resource.getrlimit(res)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(res, (value, value))


def _vm_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _vm_of_imports(names: list[str]) -> int:
    """The address space that importing ``names`` adds, measured in a throwaway fork."""
    if not names:
        return 0
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            before = _vm_bytes()
            for name in names:
                try:
                    __import__(name)
                except ImportError:
                    pass
            os.write(w, str(max(_vm_bytes() - before, 0)).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return int(data or b"0")


def _reserve(size: int) -> Any:
    """An inaccessible private mapping of ``size`` bytes (it counts against RLIMIT_AS only)."""
    if size <= 0:
        return None
    # prot 0 (PROT_NONE, which the module does not name): never touched, never backed
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0)


def _child(
    module: types.ModuleType,
    entry: str,
    fds: list[int],
    ctl: socket.socket,
    dispositions: dict[int, Any],
    limits: dict[str, int],
    own: list[str],
    reserve: int = 0,
) -> None:
    """Runs in the fork; never returns."""
    try:
        held = _reserve(reserve)  # noqa: F841 - kept mapped for the fork's whole life
        ctl.close()
        for name in own:
            sys.modules.pop(name, None)
        sys.modules["__main__"] = module
        for signum, handler in dispositions.items():
            try:
                if signal.getsignal(signum) is not handler:
                    signal.signal(signum, handler)
            except (OSError, ValueError, TypeError):
                pass
        # memory that runs out picks the program first, never pid 1 (whose death by the
        # kernel's signal would read as the host's doing)
        _prctl(_PR_SET_DUMPABLE, 1)
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass
        _prctl(_PR_SET_DUMPABLE, 0)
        _set_limits(limits)
        import random

        random.seed()
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            numpy.random.seed()
        getattr(module, entry)(fds[0], fds[1])
    except BaseException:  # noqa: BLE001 - what the program does ends here, whatever it is
        pass
    finally:
        os._exit(0)


def _recv(ctl: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    try:
        data, fds, _, _ = socket.recv_fds(ctl, _MAX_MESSAGE, 4)
    except (OSError, InterruptedError):
        return None, []
    if not data:
        return None, fds
    return json.loads(data), fds


def _send(ctl: socket.socket, obj: dict[str, Any]) -> None:
    ctl.sendall(json.dumps(obj).encode())


def main() -> None:
    ctl_fd = int(sys.argv[1])
    sys.argv = ["-c"]
    dispositions = {}
    for signum in signal.valid_signals():
        try:
            dispositions[signum] = signal.getsignal(signum)
        except (OSError, ValueError):
            pass
    # pid 1 gets no signal from inside that it does not handle: handle none
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _prctl(_PR_SET_DUMPABLE, 0)
    raw = os.read(ctl_fd, _MAX_MESSAGE)
    if not raw:
        return
    hello = json.loads(raw)
    module = types.ModuleType("agentenvs_preload")
    sys.modules[module.__name__] = module
    exec(compile(hello["preload"], "<preload>", "exec", dont_inherit=True), module.__dict__)
    for name in hello.get("imports", ()):
        try:
            __import__(name)
        except ImportError:
            pass  # the program's code says what is missing
    reserve = _vm_of_imports(list(hello.get("as_if_imported", ())))
    preloaded = set(sys.modules)
    global mmap, resource, socket, stat
    import mmap
    import resource
    import socket
    import stat

    ctl = socket.socket(fileno=ctl_fd)
    limits = hello["limits"]
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    roots = writable_roots()
    files, kernel = file_state(roots), kernel_state()
    import random  # noqa: F401 - reseeded in every fork; imported before `own` is taken

    own = sorted(set(sys.modules) - preloaded) + [module.__name__]
    _send(ctl, {"ready": True, "reserve": reserve})
    while True:
        request, fds = _recv(ctl)
        if request is None:
            return
        if request.get("op") == "run" and len(fds) == 2:
            pid = os.fork()
            if pid == 0:
                _child(module, hello["entry"], fds, ctl, dispositions, limits, own, reserve)
            for fd in fds:
                os.close(fd)
            _send(ctl, {"id": request.get("id"), "started": True})
        elif request.get("op") == "ping":
            _send(ctl, {"id": request.get("id"), "alive": True})
        else:
            for fd in fds:
                os.close(fd)
            kill_all()
            remove_ipc()
            restore_files(roots, files)
            now_files, now_kernel = file_state(roots), kernel_state()
            left = sorted(
                p for p in set(files) | set(now_files) if files.get(p) != now_files.get(p)
            )
            left += sorted(p for p in kernel if kernel[p] != now_kernel[p])
            _send(ctl, {"id": request.get("id"), "clean": not left, "left": left[:20]})


def server_argv(python: str, ctl_fd: int) -> list[str]:
    """The command that starts a server (this file's text passed with ``-c``)."""
    with open(__file__, encoding="utf-8") as f:
        return [python, "-c", f.read(), str(ctl_fd)]


if __name__ == "__main__":
    main()
