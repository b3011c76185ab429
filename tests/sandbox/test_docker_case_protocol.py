"""The case protocol of ``run_python_cases`` out of the program's reach, on both backends.

A test case runs as the same uid as the worker that forks it. Each test here submits an
attack as the program's source: it looks for the pipes of the worker's protocol through
``/proc/<pid>/fd`` (to write lines the host would read, or to read the next hidden
case's input waiting there), traces the processes around it, kills the outermost process
of its uid after leaving files, IPC objects and a daemon behind, or sends crafted results
and answer lines the host must read. Each attack must fail (no exception out of the call,
nothing read, nothing left for the next call) and an honest case after it must still pass.
Through ``gym.make("agentenvs/DeepCoderMT-v0")`` + ``step`` too.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from _services import require_docker

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.sandbox import Limits, PyCase, Sandbox
from agentenvs.sandbox._case_results import UNREADABLE, case_run, read_answer

# Every attack is one mode of this program: the first input line picks it; "honest" adds
# the two numbers of the second line (the control, which must still pass).
PROGRAM = r"""
import ctypes, os, signal, socket, sys, time

MODE = None
mode = MODE or sys.stdin.readline().strip()
ME = os.getpid()


def others():
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != ME:
            yield int(name)


def fds_of(pid):
    try:
        return os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []


def uid_of(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        return None


def ppid_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


if mode == "honest":
    a, b = map(int, sys.stdin.readline().split())
    print(a + b)

elif mode == "write-pipes":
    # lines the host would read as answers, and bytes the worker would read as frames
    reached = []
    for pid in others():
        for fd in fds_of(pid):
            try:
                w = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                os.write(w, b"not json\n[1, 2]\n\x00\x00\x00\x10not a frame\n")
                reached.append(f"{pid}/{fd}")
            except OSError:
                pass
            os.close(w)
    print("reached", reached)

elif mode == "read-pipes":
    # the next case's input waits in the exec's stdin pipe
    got = b""
    for pid in others():
        for fd in fds_of(pid):
            try:
                r = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                got += os.read(r, 1 << 16)
            except OSError:
                pass
            os.close(r)
    print("read", got)

elif mode == "trace":
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    PTRACE_ATTACH, PTRACE_DETACH, PTRACE_SEIZE = 16, 17, 0x4206
    attached, tried = [], []
    # the worker (the case's parent) and every other process of the uid
    targets = {os.getppid()} | {p for p in others() if uid_of(p) == os.getuid()}
    for pid in sorted(targets):
        for req in (PTRACE_ATTACH, PTRACE_SEIZE):
            tried.append(pid)
            if libc.ptrace(req, pid, None, None) == 0:
                attached.append(pid)
                time.sleep(0.05)
                libc.ptrace(PTRACE_DETACH, pid, None, None)
    # and its own child, which nothing but the case's own filter refuses
    child = os.fork()
    if child == 0:
        time.sleep(5)
        os._exit(0)
    own = libc.ptrace(PTRACE_ATTACH, child, None, None) == 0
    os.kill(child, signal.SIGKILL)
    print("attached", attached, "parent tried", os.getppid() in tried, "own child", own)

elif mode == "kill-outermost":
    tag = sys.stdin.readline().strip()
    # files and IPC objects, and a daemon that leaves the case's process group
    with open(f"/tmp/{tag}", "w") as f:
        f.write("left")
    with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), tag), "w") as f:
        f.write("left")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE | IPC_CREAT | 0600
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "1000." + tag.split("-")[-1]])
        os._exit(0)
    time.sleep(0.2)
    # the outermost ancestor of this uid: the process holding the exec (a wrapper, or
    # the worker itself)
    uid, pid, outermost = os.getuid(), os.getppid(), None
    while pid > 1 and uid_of(pid) == uid:
        outermost, pid = pid, ppid_of(pid)
    if outermost:
        os.kill(outermost, signal.SIGKILL)
    time.sleep(0.5)
    print("killed", outermost)

elif mode == "look-for-leftovers":
    tag = sys.stdin.readline().strip()
    left = []
    for root in ("/tmp", "/dev/shm"):
        for base, dirs, files in os.walk(root):
            left += [os.path.join(base, n) for n in files if n == tag]
    for pid in others():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if ("1000." + tag.split("-")[-1]).encode() in f.read():
                    left.append(f"process {pid}")
        except OSError:
            pass
    with open("/proc/sysvipc/shm") as f:
        rows = f.read().splitlines()[1:]
    uid = os.getuid()
    left += [r for r in rows if int(r.split()[7]) == uid]
    print("left", left)

elif mode.startswith("send-result "):
    # the program's own result through the worker's result channel (it may connect: its
    # process is the case's); whatever it sends must be this case's failure at most
    payload = {
        "deep": b"[" * 100000 + b"]" * 100000,
        "array": b"[1, 2]",
        "not-json": b"not json\n{",
        "wrong-types": b'{"error": [1], "value": 1}',
        "huge-int": b'{"value": 1' + b"0" * 10000 + b"}",
    }[mode.split()[1]]
    with open("/proc/net/unix") as f:
        names = [l.split()[-1] for l in f if "@agentenvs-results-" in l]
    for name in names:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(b"\0" + name[1:].encode())
            s.sendall(payload)
        except OSError:
            pass
        s.close()
    sys.stdout.flush()
    os._exit(0)

elif mode == "wide-output":
    cap = int(sys.stdin.readline())
    # within the cap, but each byte a 6-byte \uXXXX in the answer line
    sys.stdout.write("\x01" * (cap - 64))
    sys.stderr.write("\x01" * (cap - 64))
"""
#: the control: an honest case after each attack
HONEST = PyCase("stdin", stdin="honest\n4242 17\n")


def run(box: Sandbox, *inputs: str, timeout: float = 5.0) -> list[Any]:
    cases = [PyCase("stdin", stdin=i) for i in inputs]
    return list(box.run_python_cases(PROGRAM, [*cases, HONEST], timeout_per_case=timeout))


def assert_control_passes(run_: Any) -> None:
    assert (run_.error, run_.stdout) == (None, "4259\n")


@pytest.fixture
def docker_box() -> Iterator[Sandbox]:
    """A Docker sandbox with a container of its own (not the shared pool's)."""
    require_docker()
    from agentenvs.sandbox.docker import DockerSandbox

    box = DockerSandbox(pool=False)
    try:
        yield box
    finally:
        box.close()


# ----------------------------------------------------------------------------- 1. the pipes
def test_protocol_pipes_cannot_be_written(backend: Sandbox) -> None:
    attack, control = run(backend, "write-pipes\n")
    assert attack.error is None, attack
    assert attack.stdout == "reached []\n"
    assert_control_passes(control)


def test_next_input_cannot_be_read(backend: Sandbox) -> None:
    attack, control = run(backend, "read-pipes\n")
    assert attack.error is None, attack
    assert "4242" not in attack.stdout
    assert attack.stdout == "read b''\n"
    assert_control_passes(control)  # its input was there, unread, when its turn came


# ----------------------------------------------------------------------------- 2. ptrace
def test_worker_cannot_be_traced(backend: Sandbox) -> None:
    attack, control = run(backend, "trace\n")
    assert attack.error is None, attack
    assert attack.stdout == "attached [] parent tried True own child False\n"
    assert_control_passes(control)


# ----------------------------------------------------------------------------- 3. exit status
def test_a_killed_worker_leaves_nothing_behind(backend: Sandbox) -> None:
    tag = f"agentenvs-left-{uuid.uuid4().int % 10**12:012d}"
    # the worker's own death, if it comes to that (it shares the case's uid), is the
    # program's doing: the call returns, every case answered or "worker died"
    attack = run(backend, f"kill-outermost\n{tag}\n")
    assert len(attack) == 2
    # the next call finds nothing of it: no file, IPC object or process
    look, control = run(backend, f"look-for-leftovers\n{tag}\n")
    assert (look.error, look.stdout) == (None, "left []\n")
    assert_control_passes(control)


@pytest.mark.docker
def test_docker_worker_killed_by_its_case_is_not_a_clean_exit(docker_box: Sandbox) -> None:
    """The exec holding the protocol ends by SIGKILL (137): the host cleans up after the
    case uid (or replaces the container) rather than read it as a clean end."""
    tag = f"agentenvs-left-{uuid.uuid4().int % 10**12:012d}"
    first = list(
        docker_box.run_python_cases(PROGRAM, [PyCase("stdin", stdin=f"kill-outermost\n{tag}\n")])
    )
    assert first[0].error == "worker died"  # the worker was the outermost: killed
    look, control = run(docker_box, f"look-for-leftovers\n{tag}\n")
    assert (look.error, look.stdout) == (None, "left []\n")
    assert_control_passes(control)


# ----------------------------------------------------------------------------- 4. answers
@pytest.mark.parametrize("payload", ["deep", "array", "not-json", "wrong-types", "huge-int"])
def test_crafted_results_are_the_case_failure(backend: Sandbox, payload: str) -> None:
    attack, control = run(backend, f"send-result {payload}\n")
    assert attack.error is not None and attack.error.startswith("crashed"), attack
    assert_control_passes(control)


def test_an_answer_line_of_wide_output_is_read(backend: Sandbox) -> None:
    """Output within the cap whose answer line is many times the cap (each byte escaped)
    is the case's output, not an overflow of the protocol."""
    cap = backend.limits.max_output_bytes
    attack, control = run(backend, f"wide-output\n{cap}\n", timeout=20.0)
    assert attack.error is None, attack.error
    assert attack.stdout == "\x01" * (cap - 64)
    assert_control_passes(control)


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b"[1, 2]",
        b'"text"',
        b"[" * 100000 + b"]" * 100000,
        b'{"stdout": 5}',
        b'{"stdout": "", "error": [1]}',
        b'{"stdout": "", "duration_s": "soon"}',
        b'{"stdout": "", "duration_s": NaN}',
        b"",  # a line over the cap reads as empty
    ],
)
def test_a_malformed_answer_line_is_an_error_of_its_case(line: bytes) -> None:
    run_ = case_run(read_answer(line))
    assert (run_.error, run_.stdout, run_.value) == (UNREADABLE, "", None)


def test_a_well_formed_answer_line_is_read_as_it_is() -> None:
    line = json.dumps(
        {"i": 0, "stdout": "3\n", "stderr": "", "value": [1], "error": None, "duration_s": 0.5}
    ).encode()
    run_ = case_run(read_answer(line))
    assert (run_.stdout, run_.value, run_.error, run_.duration_s) == ("3\n", [1], None, 0.5)


# ----------------------------------------------------------------------------- through step
@pytest.mark.docker
def test_attacks_through_step_on_docker(tmp_path: Path) -> None:
    """The pipe attacks as an agent's action: step returns (nothing raised, nothing of the
    hidden tests seen), and the right program still earns the reward."""
    require_docker()
    tests = [
        {"input": f"{a} {b}\n", "output": f"{a + b}\n", "testtype": "stdin"}
        for a, b in [(1, 2), (40, 2), (987654, 123456)]
    ]
    row = {
        "id": "sum-1",
        "problem": "Read two integers and print their sum.",
        "starter_code": "",
        "tests": json.dumps(tests),
        "metadata": "{}",
    }
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(row) + "\n")
    env = gym.make(
        "agentenvs/DeepCoderMT-v0",
        tasks_path=path,
        sandbox="docker",
        limits=Limits(memory_mb=1024),
        public_tests=1,
        max_turns=4,
    )
    try:
        env.reset(options={"task_id": "sum-1"})
        for mode in ("write-pipes", "read-pipes"):
            attack = PROGRAM.replace("MODE = None", f"MODE = {mode!r}")
            obs, reward, terminated, _, _ = env.step(f"```python\n{attack}\n```")
            assert reward < 1.0 and not terminated
            assert "987654" not in obs and "reached ['" not in obs
        honest = "a, b = map(int, input().split())\nprint(a + b)\n"
        _, reward, terminated, _, _ = env.step(f"```python\n{honest}\n```")
        assert (reward, terminated) == (1.0, True)
    finally:
        env.close()
