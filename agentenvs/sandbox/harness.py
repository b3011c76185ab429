"""The warm worker behind ``run_python_cases``: compile a program once, fork per test case.

This file runs *inside* a sandbox under whatever ``python3`` the sandbox has, so it uses
the standard library only and never imports ``agentenvs``; the host imports it for the
pure helpers (frame encoding, result decoding). Protocol, on the worker's stdin/stdout:

- the host starts ``python3 -c <this file>`` and sends one frame (a 4-byte big-endian
  length, then that many bytes of JSON): ``{"source": str, "timeout": float, "limits":
  {Limits fields}}`` and, where the sandbox asks, ``scratch``, ``deadline_s``,
  ``clean_up`` and ``deny_tracing`` (see ``encode_header``); the worker answers the line
  ``{"ready": true}`` once the source is compiled;
- then, one case at a time, the host sends a case frame ``{"kind", "func", "size"}``
  followed by ``size`` raw bytes (the stdin text, or the JSON list of call arguments),
  and the worker answers one JSON line ``{"i", "stdout", "stderr", "value", "error",
  "duration_s"}`` (``error`` as in ``CaseRun``) before the host sends the next case. The
  host closing stdin ends the worker; with ``clean_up`` it then kills every other
  process of its uid and removes what that uid owns, and exits 0 only when nothing is
  left (97 when something is, 124 past ``deadline_s``, 90 when it refuses to clean up
  outside a sandbox container).

What a hostile program cannot do:

- *reach the protocol*: the worker is the sandbox's own process (the exec or pid 1 the
  backend starts, with no shell around it), so it is the only process of its uid that
  holds the host's pipes. It is non-dumpable: a case of the same uid can neither open
  them through ``/proc/<worker>/fd`` nor trace or read the worker (``ptrace``,
  ``process_vm_readv``, ``/proc/<worker>/mem``). Each case's process closes every fd but
  its own three before the program runs and refuses tracing altogether (the local
  sandbox's seccomp filter, or with ``deny_tracing`` one of the case's own: ``ptrace``,
  ``process_vm_readv``/``writev``, ``pidfd_getfd``).

- *see another test*: a case's input reaches the sandbox only when that case runs. The
  worker copies it through one reused buffer (zeroed afterwards) into a memfd, so its
  heap, which every case inherits, holds no test input; expected outputs never enter
  the sandbox at all.
- *forge a result*: while the program runs, its process holds only stdin, stdout and
  stderr. The result channel is a Unix socket the worker listens on (in the sandbox's
  own network namespace); the harness connects to it only after the program returned
  (``stdin`` cases) or the called function returned (``call`` cases), and the worker
  accepts one connection per case, from that case's pid only. (The program shares its
  process with that code, as in the official harness, so it decides what its function
  returns, but no fd it can find while it runs reaches the worker.)
- *outlive its case*: the worker (a child subreaper, non-dumpable, ignoring
  SIGTERM/SIGINT/SIGHUP) kills the case's process group and every orphan it left
  before the next case; a case that kills the worker itself ends the stream and the
  host reports "worker died" for the cases left, and since the worker then never said
  it cleaned up, the host does (or replaces the sandbox). (The local sandbox makes the
  worker pid 1 of its pid namespace, where such signals from inside do not arrive.)
- *break the host's reading*: a result it sends itself that the worker cannot read or
  write back is its case's "crashed: unreadable result"; the host reads any line that
  is not a well-formed answer the same way (``_case_results``).

Globals never leak between cases (each runs in a fresh fork); files written to the work
dir persist between the cases of one call, as they would between runs of a real program,
and the sandbox gives every call a fresh work dir. The worker deletes nothing but, with
``clean_up``, what its own uid left at the end of the call.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Sequence
from typing import Any

#: a non-JSON return value comes back as ``{REPR_KEY: repr(value)}``
REPR_KEY = "__repr__"
#: the module name ``call`` cases run under (so ``if __name__ == "__main__"`` stays off)
CALL_MODULE_NAME = "solution"
_FILENAME = "<solution>"
_CHUNK = 1 << 16
_PR_SET_DUMPABLE = 4
_PR_SET_SECCOMP = 22
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_CHILD_SUBREAPER = 36
#: the worker's exit status: 0 after a complete clean-up (or none asked), else one of these
EXIT_NOT_CLEAN = 97
EXIT_REFUSED = 90
EXIT_DEADLINE = 124
#: a case's error when the worker's answer to it cannot be read
UNREADABLE_RESULT = "crashed: unreadable result"


# ----------------------------------------------------------------------------- pure helpers
def to_jsonable(value: Any) -> Any:
    """``value`` with tuples as lists and numpy scalars as the Python values they hold;
    what JSON cannot hold becomes ``{REPR_KEY: repr(x)}``."""

    def convert(v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, (list, tuple)):
            return [convert(x) for x in v]
        if isinstance(v, dict) and all(isinstance(k, str) for k in v):
            return {k: convert(x) for k, x in v.items()}
        if type(v).__module__ == "numpy" and getattr(v, "shape", None) == ():
            # a numpy scalar (np.int64(3), np.bool_(True)) is the Python value it holds,
            # as ``==`` sees it
            try:
                plain = v.item()
            except Exception:  # noqa: BLE001 - kept as its repr below
                plain = v
            if plain is not v and isinstance(plain, (bool, int, float, str)):
                return plain
        return {REPR_KEY: repr(v)}

    try:
        return convert(value)
    except RecursionError:  # self-referencing containers
        return {REPR_KEY: repr(value)}


def exception_line(exc: BaseException) -> str:
    """The last line of the traceback Python would print: ``Type: message``."""
    name = type(exc).__name__
    msg = str(exc)
    return f"{name}: {msg}" if msg else name


def compile_error(exc: BaseException) -> str:
    """``compile error: ...`` naming the line, as the CaseRun error of every case."""
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return f"compile error: {type(exc).__name__}: {exc.msg}{where}"
    return f"compile error: {exception_line(exc)}"


def describe_signal(signum: int) -> str:
    try:
        return f"crashed: signal {signum} ({signal.Signals(signum).name})"
    except ValueError:
        return f"crashed: signal {signum}"


_LIMIT_FIELDS = (
    "cpu_seconds",
    "memory_mb",
    "max_processes",
    "max_file_mb",
    "max_open_files",
    "max_output_bytes",
)


def frame(obj: Any) -> bytes:
    """``obj`` as JSON behind its 4-byte big-endian length."""
    raw = json.dumps(obj).encode()
    return len(raw).to_bytes(4, "big") + raw


def encode_header(
    source: str,
    timeout: float,
    limits: Any,
    *,
    scratch: str | None = None,
    deadline_s: float | None = None,
    clean_up: Sequence[str] = (),
    deny_tracing: bool = False,
) -> bytes:
    """The first frame for a worker; ``limits`` is Limits-like.

    ``scratch``: the worker works from a fresh private dir made there (its cwd, ``HOME``
    and ``TMPDIR``); ``deadline_s``: it stops this long after it read the header;
    ``clean_up``: at its end it kills every other process of its uid and removes what
    that uid owns in these dirs and in System V IPC (see ``main`` for its exit status);
    ``deny_tracing``: each case refuses tracing with a seccomp filter of its own (for a
    sandbox whose own filter does not, as the local sandbox's does).
    """
    header: dict[str, Any] = {
        "source": source,
        "timeout": float(timeout),
        "limits": {k: getattr(limits, k) for k in _LIMIT_FIELDS},
    }
    if scratch is not None:
        header["scratch"] = scratch
    if deadline_s is not None:
        header["deadline_s"] = float(deadline_s)
    if clean_up:
        header["clean_up"] = list(clean_up)
    if deny_tracing:
        header["deny_tracing"] = True
    return frame(header)


def encode_case(case: Any) -> bytes:
    """One case (PyCase-like) as the worker reads it: a frame, then its input bytes."""
    if case.kind == "stdin":
        payload = case.stdin.encode("utf-8", "surrogatepass")
    else:
        payload = json.dumps(list(case.args)).encode()
    return frame({"kind": case.kind, "func": case.func, "size": len(payload)}) + payload


def worker_argv(python: str = "python3") -> list[str]:
    """The command that starts a worker (this file's text passed with ``-c``)."""
    with open(__file__, encoding="utf-8") as f:
        return [python, "-c", f.read()]


# ----------------------------------------------------------------------------- the worker
_LIBC: Any = None


def _libc() -> Any:
    global _LIBC
    if _LIBC is None:
        import ctypes

        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _prctl(option: int, value: int, arg: Any = 0) -> int:
    try:
        return int(_libc().prctl(option, value, arg, 0, 0))
    except Exception:  # best effort: not every libc/interpreter has it
        return -1


# Tracing and reading other processes (ptrace, process_vm_readv/writev, pidfd_getfd) fail
# with EPERM in a case, whatever the sandbox's own filter allows; other ABIs of the same
# machine (x32, i386) are refused whole. Classic BPF on struct seccomp_data.
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NO_TRACING = {"x86_64": (101, 310, 311, 438), "aarch64": (117, 270, 271, 438)}
_X32_BIT = 0x40000000


def _no_tracing_filter() -> Any:
    """A ``struct sock_fprog`` (with its instructions kept alive) for this machine, or None."""
    import ctypes

    machine = os.uname().machine
    if machine not in _AUDIT_ARCH:
        return None
    eperm = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
    allow = 0x7FFF0000
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    denied = _NO_TRACING[machine]
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, _AUDIT_ARCH[machine]), (ret, 0, 0, eperm), (ld, 0, 0, 0)]
    if machine == "x86_64":
        prog.append((jge, len(denied) + 1, 0, _X32_BIT))  # x32 system calls: to the EPERM
    for i, nr in enumerate(denied):
        prog.append((jeq, len(denied) - i, 0, nr))
    prog += [(ret, 0, 0, allow), (ret, 0, 0, eperm)]

    class Insn(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_ushort),
            ("jt", ctypes.c_ubyte),
            ("jf", ctypes.c_ubyte),
            ("k", ctypes.c_uint32),
        ]

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Insn))]

    insns = (Insn * len(prog))(*[Insn(*i) for i in prog])
    fprog = Prog(len(prog), insns)
    fprog.keep = insns
    return ctypes.byref(fprog), fprog


def _deny_tracing(fprog: Any) -> None:
    """Install the filter on this process (a case's, before the program runs)."""
    if fprog is None:
        return
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _prctl(_PR_SET_SECCOMP, 2, fprog[0])  # SECCOMP_MODE_FILTER


def _list_children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        pass
    kids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                kids.append(int(name))
    return kids


def _kill_leftovers(pgid: int, grace_s: float = 5.0) -> None:
    """Kill the case's group and every orphan reparented to us (we are a subreaper)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
    end = time.monotonic() + grace_s
    while True:
        kids = _list_children()
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reaped = False
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                break
            reaped = True
        if not kids and not reaped:
            return
        if time.monotonic() > end:
            return
        if not reaped:
            time.sleep(0.0005)


def _set_limits(limits: dict[str, Any], timeout: float) -> None:
    mb = 1 << 20
    cpu = max(1, min(int(limits["cpu_seconds"]), int(timeout) + 1))
    wanted = [
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_AS, limits["memory_mb"] * mb, limits["memory_mb"] * mb),
        (resource.RLIMIT_FSIZE, limits["max_file_mb"] * mb, limits["max_file_mb"] * mb),
        (resource.RLIMIT_NOFILE, limits["max_open_files"], limits["max_open_files"]),
        # the sandbox's own processes (init, this worker) count against the same uid
        (resource.RLIMIT_NPROC, limits["max_processes"] + 2, limits["max_processes"] + 2),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    for res, soft, hard in wanted:
        cur_soft, cur_hard = resource.getrlimit(res)
        if cur_hard != resource.RLIM_INFINITY:
            hard = min(hard, cur_hard)
            soft = min(soft, hard)
        try:
            resource.setrlimit(res, (soft, hard))
        except (ValueError, OSError):
            pass


def _child(
    code: Any,
    case: dict[str, Any],
    limits: dict[str, Any],
    timeout: float,
    fds: tuple[int, int, int],
    result_addr: bytes,
    fprog: Any,
) -> None:
    """Runs in the forked child; never returns."""
    in_fd, out_w, err_w = fds
    status: dict[str, Any] = {}
    args: Any = ()
    try:
        os.setpgid(0, 0)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if case["kind"] == "call":
            args = json.loads(_read_fd(in_fd).decode("utf-8"))
            os.close(in_fd)
            in_fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(in_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        # nothing of the worker's (its protocol pipes, the result listener) stays open:
        # while the program runs, its process holds stdin, stdout and stderr only
        os.closerange(3, max(1 << 16, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        # memory that runs out picks the program first, never the worker (pid 1 locally),
        # whose death by the kernel's signal would read as the host's doing (see faults)
        # (the file is the process's own only while it is dumpable, which the worker is not)
        _prctl(_PR_SET_DUMPABLE, 1)
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass
        _prctl(_PR_SET_DUMPABLE, 0)
        _set_limits(limits, timeout)
        _deny_tracing(fprog)
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        sys.stderr = open(
            2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1
        )
        # as in a fresh interpreter, sys.__stdin__ & co. are these same objects: a program
        # that rewraps a stream (sys.stdin = io.TextIOWrapper(sys.stdin.buffer)) must not
        # drop the last reference to the original, whose collection would close the buffer
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
        sys.argv = ["solution.py"]
    except BaseException as exc:  # noqa: BLE001 - report set-up failures as a crash
        _send_result(result_addr, {"error": f"crashed: {exception_line(exc)}"})
        os._exit(1)
    try:
        is_call = case["kind"] == "call"
        name = CALL_MODULE_NAME if is_call else "__main__"
        namespace: dict[str, Any] = {"__name__": name, "__builtins__": __builtins__}
        exec(code, namespace)
        if is_call:
            func = case["func"]
            sol = namespace.get("Solution")
            if isinstance(sol, type) and hasattr(sol, func):
                target = getattr(sol(), func)
            elif func in namespace:
                target = namespace[func]
            else:
                raise NameError(f"function {func!r} is not defined")
            status["value"] = to_jsonable(target(*args))
    except SystemExit as exc:
        if exc.code not in (None, 0):
            status["error"] = f"exception: SystemExit: {exc.code}"
    except MemoryError:
        status["error"] = "memory"
    except BaseException as exc:  # noqa: BLE001 - the program's own errors are results
        status["error"] = f"exception: {exception_line(exc)}"
        try:
            import traceback

            # as Python would print it, minus this harness's own frame
            traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        except BaseException:  # noqa: BLE001
            pass
    for stream in (sys.__stdout__, sys.stdout, sys.__stderr__, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - e.g. a closed stdout
            pass
    try:
        payload = json.dumps(status).encode()
    except BaseException:  # noqa: BLE001 - e.g. a value too large for memory
        payload = b'{"error": "memory"}'
    _send_result(result_addr, payload)
    os._exit(0)


def _send_result(addr: bytes, payload: Any) -> None:
    """Open the result channel (only now: the program has returned) and send ``payload``."""
    if not isinstance(payload, bytes):
        payload = json.dumps(payload).encode()
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(addr)
        conn.sendall(payload)
        conn.close()
    except BaseException:  # noqa: BLE001 - the worker reports a missing result
        pass


def _read_fd(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _read_exact(fd: int, n: int) -> bytes | None:
    """Exactly ``n`` bytes from ``fd``; None at end of input."""
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read_frame(fd: int) -> Any:
    head = _read_exact(fd, 4)
    if head is None:
        return None
    raw = _read_exact(fd, int.from_bytes(head, "big"))
    return None if raw is None else json.loads(raw)


class _InputCopier:
    """Copies a case's input from the host's pipe into a memfd through one reused buffer.

    The bytes pass through this buffer only, which is zeroed after each copy, so the
    worker's memory (which every later case inherits by fork) keeps no test input.
    """

    def __init__(self) -> None:
        self.buf = bytearray(_CHUNK)
        self.view = memoryview(self.buf)

    def copy(self, src: int, size: int) -> int | None:
        try:
            fd = os.memfd_create("case-input", 0)
        except (AttributeError, OSError):
            import tempfile

            fd = os.dup(tempfile.TemporaryFile().fileno())
        left = size
        try:
            while left:
                n = os.readv(src, [self.view[: min(left, _CHUNK)]])
                if not n:
                    os.close(fd)
                    return None
                _write_all(fd, self.view[:n])
                left -= n
        finally:
            self.view[:] = bytes(_CHUNK)
        os.lseek(fd, 0, os.SEEK_SET)
        return fd


def _write_all(fd: int, data: Any) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _peer_pid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[0]


def _run_case(
    code: Any,
    case: dict[str, Any],
    in_fd: int,
    limits: dict[str, Any],
    timeout: float,
    listener: socket.socket,
    result_addr: bytes,
    fprog: Any = None,
) -> dict[str, Any]:
    cap = int(limits["max_output_bytes"])
    pipes = [os.pipe() for _ in range(2)]
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        fds = (in_fd, pipes[0][1], pipes[1][1])
        _child(code, case, limits, timeout, fds, result_addr, fprog)
    try:
        os.setpgid(pid, pid)  # both sides set it, so killpg works whoever runs first
    except OSError:
        pass
    os.close(in_fd)
    for _, w in pipes:
        os.close(w)
    streams = {r: i for i, (r, _) in enumerate(pipes)}
    bufs = [bytearray(), bytearray(), bytearray()]
    error: str | None = None
    result_conn: socket.socket | None = None
    result_done = False
    misuse = False
    poller = select.poll()
    for r in streams:
        poller.register(r, select.POLLIN)
    lfd = listener.fileno()
    poller.register(lfd, select.POLLIN)
    try:
        pidfd = os.pidfd_open(pid)
        poller.register(pidfd, select.POLLIN)
    except (AttributeError, OSError):
        pidfd = -1
    wait_status: int | None = None
    deadline = start + timeout

    def accept_all() -> None:
        """Take the case's one result connection; refuse any other."""
        nonlocal result_conn, misuse
        while True:
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            try:
                peer = _peer_pid(conn)
            except OSError:
                peer = -1
            if peer != pid or result_conn is not None or result_done:
                misuse = misuse or peer == pid
                conn.close()
                continue
            conn.setblocking(False)
            result_conn = conn
            poller.register(conn.fileno(), select.POLLIN)

    def read_result() -> bool:
        """Read one chunk of the result; False at its end."""
        nonlocal error, result_conn, result_done
        assert result_conn is not None
        try:
            chunk = result_conn.recv(_CHUNK)
        except BlockingIOError:
            return True
        except OSError:
            chunk = b""
        if chunk:
            room = cap + 4096 - len(bufs[2])
            if len(chunk) > room:
                error = error or "output limit"
                chunk = chunk[: max(room, 0)]
            bufs[2] += chunk
            return True
        poller.unregister(result_conn.fileno())
        result_conn.close()
        result_conn = None
        result_done = True
        return False

    def read_stream(fd: int) -> bool:
        """Read one chunk of stdout/stderr; False at EOF. Sets ``error`` past the cap."""
        nonlocal error
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return False
        which = streams[fd]
        buf = bufs[which]
        room = cap - len(buf)
        if which == 1:  # stderr is cut silently; only stdout/value over the cap fail
            buf += chunk[: max(room, 0)]
        elif len(chunk) > room:
            buf += chunk[: max(room, 0)]
            error = error or "output limit"
        else:
            buf += chunk
        return True

    while wait_status is None and error is None:
        left = deadline - time.monotonic()
        if left <= 0:
            error = "timeout"
            break
        wait_ms = left * 1000 if pidfd >= 0 else min(left * 1000, 2)
        for fd, _ in poller.poll(wait_ms):
            if fd == pidfd:
                continue
            if fd == lfd:
                accept_all()
            elif result_conn is not None and fd == result_conn.fileno():
                read_result()
            elif fd in streams and not read_stream(fd):
                poller.unregister(fd)
                del streams[fd]
                os.close(fd)
        got, st = os.waitpid(pid, os.WNOHANG)
        if got:
            wait_status = st
    duration = time.monotonic() - start
    _kill_leftovers(pid)  # also reaps the child when we killed it (timeout/output)
    if wait_status is None:
        wait_status = 0
    # every writer is dead now: drain what is left, still under the cap
    for fd in list(streams):
        while error is None and read_stream(fd):
            pass
        os.close(fd)
    accept_all()  # a connection made just before the child exited
    while error is None and result_conn is not None and read_result():
        pass
    if result_conn is not None:
        result_conn.close()
    accept_all()  # anything else is refused and closed
    if pidfd >= 0:
        os.close(pidfd)
    status: dict[str, Any] = {}
    if bufs[2]:
        # the program may send its own result: whatever it is, it is this case's alone
        try:
            status = json.loads(bytes(bufs[2]))
        except (ValueError, RecursionError, MemoryError):
            status = {"error": UNREADABLE_RESULT}
        if not isinstance(status, dict):
            status = {"error": UNREADABLE_RESULT}
    if error is None:
        if misuse:
            error = "crashed: the result channel was opened twice"
        elif os.WIFSIGNALED(wait_status):
            sig = os.WTERMSIG(wait_status)
            error = "timeout" if sig == signal.SIGXCPU else describe_signal(sig)
        elif "error" in status:
            err = status["error"]
            error = err if isinstance(err, str) else UNREADABLE_RESULT
        elif not bufs[2] and os.WEXITSTATUS(wait_status) != 0:
            error = f"crashed: exit code {os.WEXITSTATUS(wait_status)}"
        elif not bufs[2] and case["kind"] == "call":
            error = "crashed: exited without a result"
    return {
        "stdout": bufs[0].decode("utf-8", "replace"),
        "stderr": bufs[1].decode("utf-8", "replace"),
        "value": status.get("value") if error is None else None,
        "error": error,
        "duration_s": duration,
    }


class _DeadlinePassed(Exception):
    """The worker's own time limit (``deadline_s``) passed."""


def _on_deadline(signum: int, frame: Any) -> None:
    raise _DeadlinePassed


def _in_sandbox_container() -> bool:
    """Whether a clean-up may run here: an unprivileged uid in a sandbox container (pid 1
    is Docker's init), never a host, where killing every process of a uid is a disaster."""
    try:
        with open("/proc/1/comm") as f:
            init = f.read().strip()
    except OSError:
        return False
    return os.getuid() != 0 and init == "docker-init"


def _others_of_my_uid() -> list[int]:
    """The live (not zombie) processes of this uid besides this one."""
    me, uid = os.getpid(), str(os.getuid())
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except (OSError, ValueError):
            continue
        zombie = fields.get("State", "").strip().startswith("Z")
        if fields.get("Uid", "").split()[:1] == [uid] and not zombie:
            found.append(int(name))
    return found


def _kill_all_others(wait_s: float = 5.0) -> bool:
    """SIGKILL every other process of this uid until none is left; whether none is."""
    end = time.monotonic() + wait_s
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # never the caller itself
        except OSError:
            pass
        while True:  # orphans reparented to us: reap them
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if not _others_of_my_uid():
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.001)


def _remove_owned(top: str, uid: int) -> bool:
    """Remove everything ``uid`` owns under ``top`` (never following links, never into
    another file system); whether all of it went. A ``top`` we cannot write is skipped."""
    try:
        if not os.access(top, os.W_OK):
            return True
        dev = os.lstat(top).st_dev
    except OSError:
        return True
    import stat

    ok = True
    todo, owned_dirs = [top], []
    owned = set()
    while todo:
        path = todo.pop()
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError:
            ok = ok and path not in owned  # ours was made listable: it must list
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_dev != dev:
                continue
            mine = st.st_uid == uid
            if stat.S_ISDIR(st.st_mode):
                if mine:
                    try:
                        os.chmod(entry.path, 0o700)
                    except OSError:
                        ok = False
                    owned_dirs.append(entry.path)
                    owned.add(entry.path)
                todo.append(entry.path)
            elif mine:
                try:
                    os.unlink(entry.path)
                except OSError:
                    ok = False
    for path in reversed(owned_dirs):  # found after their parents: deepest first
        try:
            os.rmdir(path)
        except OSError:
            ok = False
    return ok


def _remove_ipc(uid: int) -> bool:
    """Remove the System V IPC objects ``uid`` owns or made; whether none is left."""
    libc = _libc()
    remove = {
        "shm": lambda i: libc.shmctl(i, 0, None),  # IPC_RMID
        "msg": lambda i: libc.msgctl(i, 0, None),
        "sem": lambda i: libc.semctl(i, 0, 0),
    }
    left = False
    for attempt in range(2):
        left = False
        for kind, rm in remove.items():
            try:
                with open(f"/proc/sysvipc/{kind}") as f:
                    head, *rows = f.read().splitlines()
            except (OSError, ValueError):
                continue
            cols = head.split()
            owners = [cols.index(c) for c in ("uid", "cuid") if c in cols]
            for row in rows:
                fields = row.split()
                if any(int(fields[c]) == uid for c in owners):
                    left = True
                    if not attempt:
                        rm(int(fields[1]))  # the second column is the object's id
        if not left:
            return True
    return not left


def _clean_up(dirs: Sequence[str]) -> bool:
    """Kill every other process of this uid, then remove what it owns in ``dirs`` and in
    System V IPC; whether nothing of it is left."""
    os.chdir("/")
    uid = os.getuid()
    done = _kill_all_others()
    for top in dirs:
        done = _remove_owned(top, uid) and done
    return _remove_ipc(uid) and done


def main() -> None:
    # Our protocol channel moves off fd 1 so nothing a case inherits can write to it;
    # being non-dumpable keeps /proc/<worker>/{fd,mem} out of a case's reach too (the
    # worker is the sandbox's own process holding the channel: nothing else of its uid
    # does, see the sandbox backends).
    proto = os.dup(1)
    requests = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    _prctl(_PR_SET_DUMPABLE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    # a case that signals its parent with SIGTERM/SIGINT/SIGHUP must not end the run
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)

    header = _read_frame(requests)
    if header is None:
        return
    dirs = header.get("clean_up") or ()
    if dirs and not _in_sandbox_container():
        sys.exit(EXIT_REFUSED)
    status = 0
    try:
        if "deadline_s" in header:
            signal.signal(signal.SIGALRM, _on_deadline)
            signal.setitimer(signal.ITIMER_REAL, max(float(header["deadline_s"]), 0.001))
        if "scratch" in header:
            # a fresh dir of its own as cwd, HOME and TMPDIR (a case inherits them)
            home = os.path.join(header["scratch"], "cases." + os.urandom(6).hex())
            os.mkdir(home, 0o700)
            os.chdir(home)
            os.environ["HOME"] = os.environ["TMPDIR"] = home
        _serve(header, requests, proto)
    except _DeadlinePassed:
        status = EXIT_DEADLINE
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if dirs and not _clean_up(dirs):
            status = EXIT_NOT_CLEAN
    if status:
        sys.exit(status)


def _send(proto: int, result: dict[str, Any]) -> None:
    """One answer line; a value that cannot be written (the program may have sent its own
    result) is this case's error, never the worker's end."""
    try:
        line = json.dumps(result).encode()
    except (ValueError, TypeError, RecursionError, MemoryError):
        result.update(value=None, error=UNREADABLE_RESULT)
        line = json.dumps(result).encode()
    _write_all(proto, line + b"\n")


def _serve(header: dict[str, Any], requests: int, proto: int) -> None:
    """Compile the program, answer ready, then run the cases as they come."""
    limits, timeout = header["limits"], float(header["timeout"])
    source = header["source"]
    try:
        code = compile(source, _FILENAME, "exec", dont_inherit=True)
        bad = None
    except BaseException as exc:  # noqa: BLE001 - SyntaxError, ValueError (NUL), ...
        code, bad = None, compile_error(exc)
    if code is not None:
        import linecache

        # tracebacks on the case's stderr show the program's lines
        linecache.cache[_FILENAME] = (len(source), None, source.splitlines(True), _FILENAME)
    # the result channel: an abstract Unix socket, private to the sandbox's network
    # namespace (each sandbox call has its own), with a random name
    result_addr = b"\0agentenvs-results-" + os.urandom(8).hex().encode()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    listener.bind(result_addr)
    listener.listen(8)
    copier = _InputCopier()
    fprog = _no_tracing_filter() if header.get("deny_tracing") else None
    _send(proto, {"ready": True})
    i = 0
    while True:
        case = _read_frame(requests)
        if case is None:
            return
        in_fd = copier.copy(requests, int(case["size"]))
        if in_fd is None:
            return
        if bad is not None:
            os.close(in_fd)
            result = {"stdout": "", "stderr": "", "value": None, "error": bad, "duration_s": 0.0}
        else:
            result = _run_case(code, case, in_fd, limits, timeout, listener, result_addr, fprog)
        result["i"] = i
        i += 1
        _send(proto, result)


if __name__ == "__main__":
    main()
