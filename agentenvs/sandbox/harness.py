"""The warm worker behind ``run_python_cases``: compile a program once, fork per test case.

This file runs *inside* a sandbox under whatever ``python3`` the sandbox has, so it uses
the standard library only and never imports ``agentenvs``; the host imports it for the
pure helpers at the bottom (request encoding, result decoding). Protocol:

- the host starts ``python3 -c <this file>`` and writes one JSON request on stdin, then
  closes it: ``{"source": str, "cases": [{"kind", "stdin", "func", "args"}...],
  "timeout": float, "limits": {Limits fields}}``;
- the worker answers ``{"ready": true}`` once the request is read and the source compiled,
  then one JSON line per case as each finishes: ``{"i", "stdout", "stderr", "value",
  "error", "duration_s"}`` (``error`` as in ``CaseRun``).

Per case the worker forks a child that sets rlimits, becomes a process-group leader, gets
stdin from a memfd and stdout/stderr/result on pipes (read by the parent up to the output
cap), and runs the program: ``stdin`` cases exec it as ``__main__``; ``call`` cases exec
it as module ``solution`` and call ``func(*args)`` (or ``Solution().func(*args)``). The
parent enforces the wall timeout, then kills the child's group and, being a child
subreaper, every orphan the case left behind, so nothing outlives its case. A case that
kills the worker itself (``kill(getppid(), SIGKILL)``) ends the stream; the host reports
"worker died" for the cases left. (The local sandbox makes the worker pid 1 of its pid
namespace, where such signals from inside do not arrive.)

Globals never leak between cases (each runs in a fresh fork); files written to the work
dir do persist, as they would between runs of a real program.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import sys
import time
from typing import Any

#: a non-JSON return value comes back as ``{REPR_KEY: repr(value)}``
REPR_KEY = "__repr__"
#: the module name ``call`` cases run under (so ``if __name__ == "__main__"`` stays off)
CALL_MODULE_NAME = "solution"
_FILENAME = "<solution>"
_CHUNK = 1 << 16
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


# ----------------------------------------------------------------------------- pure helpers
def to_jsonable(value: Any) -> Any:
    """``value`` with tuples as lists; what JSON cannot hold becomes ``{REPR_KEY: repr(x)}``."""

    def convert(v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, (list, tuple)):
            return [convert(x) for x in v]
        if isinstance(v, dict) and all(isinstance(k, str) for k in v):
            return {k: convert(x) for k, x in v.items()}
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


def encode_request(source: str, cases: Any, timeout: float, limits: Any) -> bytes:
    """The request line for a worker; ``cases`` are PyCase-like, ``limits`` Limits-like."""
    return json.dumps(
        {
            "source": source,
            "cases": [
                {"kind": c.kind, "stdin": c.stdin, "func": c.func, "args": list(c.args)}
                for c in cases
            ],
            "timeout": float(timeout),
            "limits": {
                k: getattr(limits, k)
                for k in (
                    "cpu_seconds",
                    "memory_mb",
                    "max_processes",
                    "max_file_mb",
                    "max_open_files",
                    "max_output_bytes",
                )
            },
        }
    ).encode()


def worker_argv(python: str = "python3") -> list[str]:
    """The command that starts a worker (this file's text passed with ``-c``)."""
    with open(__file__, encoding="utf-8") as f:
        return [python, "-c", f.read()]


# ----------------------------------------------------------------------------- the worker
def _prctl(option: int, value: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except Exception:  # best effort: not every libc/interpreter has it
        pass


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
    code: Any, case: dict[str, Any], limits: dict[str, Any], timeout: float, fds: tuple
) -> None:
    """Runs in the forked child; never returns."""
    in_fd, out_w, err_w, res_w = fds
    status: dict[str, Any] = {}
    try:
        os.setpgid(0, 0)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.dup2(in_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(res_w, 3)
        # the worker's protocol pipe and request must be out of reach of the program
        os.closerange(4, 1 << 16)
        _set_limits(limits, timeout)
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        sys.stderr = open(
            2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1
        )
        sys.argv = ["solution.py"]
    except BaseException as exc:  # noqa: BLE001 - report set-up failures as a crash
        os.write(res_w, json.dumps({"error": f"crashed: {exception_line(exc)}"}).encode())
        os._exit(1)
    res = os.fdopen(3, "w", encoding="utf-8", closefd=False)
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
            status["value"] = to_jsonable(target(*case["args"]))
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
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - e.g. a closed stdout
            pass
    try:
        res.write(json.dumps(status))
        res.flush()
    except BaseException:  # noqa: BLE001 - e.g. a value too large for memory
        os.write(3, b'{"error": "memory"}')
    os._exit(0)


def _stdin_fd(data: str) -> int:
    raw = data.encode("utf-8")
    try:
        fd = os.memfd_create("stdin", 0)
    except (AttributeError, OSError):
        import tempfile

        fd = os.dup(tempfile.TemporaryFile().fileno())
    _write_all(fd, raw)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _run_case(
    code: Any, case: dict[str, Any], limits: dict[str, Any], timeout: float
) -> dict[str, Any]:
    cap = int(limits["max_output_bytes"])
    in_fd = _stdin_fd(case.get("stdin", "") if case["kind"] == "stdin" else "")
    pipes = [os.pipe() for _ in range(3)]
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(code, case, limits, timeout, (in_fd, pipes[0][1], pipes[1][1], pipes[2][1]))
    try:
        os.setpgid(pid, pid)  # both sides set it, so killpg works whoever runs first
    except OSError:
        pass
    os.close(in_fd)
    for _, w in pipes:
        os.close(w)
    readers = {r: i for i, (r, _) in enumerate(pipes)}
    bufs = [bytearray(), bytearray(), bytearray()]
    error: str | None = None
    poller = select.poll()
    for r in readers:
        poller.register(r, select.POLLIN)
    try:
        pidfd = os.pidfd_open(pid)
        poller.register(pidfd, select.POLLIN)
    except (AttributeError, OSError):
        pidfd = -1
    wait_status: int | None = None
    deadline = start + timeout

    def read_from(fd: int) -> bool:
        """Read one chunk; False at EOF. Sets ``error`` when a cap is passed."""
        nonlocal error
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return False
        which = readers[fd]
        buf = bufs[which]
        # the result channel gets room for its JSON envelope on top of the value
        room = (cap if which < 2 else cap + 4096) - len(buf)
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
            if not read_from(fd):
                poller.unregister(fd)
                del readers[fd]
                os.close(fd)
        got, st = os.waitpid(pid, os.WNOHANG)
        if got:
            wait_status = st
    duration = time.monotonic() - start
    _kill_leftovers(pid)  # also reaps the child when we killed it (timeout/output)
    if wait_status is None:
        wait_status = 0
    # every writer is dead now: drain what is left, still under the cap
    for fd in list(readers):
        while error is None and read_from(fd):
            pass
        os.close(fd)
    if pidfd >= 0:
        os.close(pidfd)
    status: dict[str, Any] = {}
    if bufs[2]:
        try:
            status = json.loads(bytes(bufs[2]))
        except ValueError:
            status = {"error": "crashed: unreadable result"}
    if error is None:
        if os.WIFSIGNALED(wait_status):
            sig = os.WTERMSIG(wait_status)
            error = "timeout" if sig == signal.SIGXCPU else describe_signal(sig)
        elif "error" in status:
            error = status["error"]
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


def main() -> None:
    # Our protocol channel moves off fd 1 so nothing a case inherits can write to it;
    # being non-dumpable keeps /proc/<worker>/fd out of a case's reach too.
    proto = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.close(devnull)
    _prctl(_PR_SET_DUMPABLE, 0)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    # a case that signals its parent with SIGTERM/SIGINT/SIGHUP must not end the run
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)

    def send(obj: dict[str, Any]) -> None:
        _write_all(proto, json.dumps(obj).encode() + b"\n")

    request = json.loads(sys.stdin.buffer.read())
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    cases, limits, timeout = request["cases"], request["limits"], float(request["timeout"])
    source = request["source"]
    try:
        code = compile(source, _FILENAME, "exec", dont_inherit=True)
        bad = None
    except BaseException as exc:  # noqa: BLE001 - SyntaxError, ValueError (NUL), ...
        code, bad = None, compile_error(exc)
    if code is not None:
        import linecache

        # tracebacks on the case's stderr show the program's lines
        linecache.cache[_FILENAME] = (len(source), None, source.splitlines(True), _FILENAME)
    send({"ready": True})
    for i, case in enumerate(cases):
        if bad is not None:
            result = {"stdout": "", "stderr": "", "value": None, "error": bad, "duration_s": 0.0}
        else:
            result = _run_case(code, case, limits, timeout)
        result["i"] = i
        send(result)


if __name__ == "__main__":
    main()
