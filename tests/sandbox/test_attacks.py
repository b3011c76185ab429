"""The security battery through ``env.step``: programs that try to game DeepCoder-MT's reward.

Every attack is a program submitted as an action, on both backends (local bubblewrap,
Docker) and under both rule sets (the strict default runs ``run_python_cases``; the
official rules run rLLM's in-process checker in a scratch ``spawn``). Each must gain
nothing: no passed test it did not earn, no hidden input, nothing from an earlier episode,
no host resource beyond the limits. The battery's table is in docs/sandboxes.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _services import require_bwrap, require_docker

from agentenvs.envs.deepcoder import official
from agentenvs.envs.deepcoder.env import DeepCoderMTEnv
from agentenvs.sandbox import Limits

BACKENDS = [
    pytest.param("local", marks=pytest.mark.bwrap),
    pytest.param("docker", marks=pytest.mark.docker),
]
RULES = ["strict", "official"]
# small caps keep the disk and memory attacks cheap on a shared machine
LIMITS = Limits(memory_mb=1024, disk_mb=32, shm_mb=16, max_file_mb=64)


def need(backend: str) -> None:
    if backend == "local":
        require_bwrap()
    else:
        require_docker()


def lcb_row(task_id: str, tests: list[dict[str, str]], func: str | None = None) -> dict[str, Any]:
    """A LiveCodeBench row as DeepCoder-Preview ships it (tests and metadata as JSON text)."""
    meta = {"func_name": func} if func else {}
    return {
        "id": task_id,
        "problem": f"Problem {task_id}: read the input and answer.",
        "starter_code": f"class Solution:\n    def {func}(self, x):\n        " if func else "",
        "tests": json.dumps(tests),
        "metadata": json.dumps(meta),
    }


def stdin_tests(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"input": i, "output": o, "testtype": "stdin"} for i, o in pairs]


@pytest.fixture
def make_env(tmp_path: Path) -> Iterator[Any]:
    """``make_env(backend, rules, rows)``: a DeepCoder-MT env on rows written in the
    official layout; every env made is closed afterwards."""
    made: list[DeepCoderMTEnv] = []

    def make(backend: str, rules: str, rows: list[dict[str, Any]], **kw: Any) -> DeepCoderMTEnv:
        need(backend)
        path = tmp_path / f"tasks-{uuid.uuid4().hex[:8]}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        env = DeepCoderMTEnv(
            tasks_path=path,
            sandbox=backend,
            rules=rules,
            limits=replace(LIMITS, **kw.pop("limits", {})),
            public_tests=1,
            timeout_per_test=kw.pop("timeout_per_test", 10.0),
            max_turns=kw.pop("max_turns", 4),
            **kw,
        )
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


def submit(env: DeepCoderMTEnv, task_id: str, program: str) -> tuple[float, str, dict[str, Any]]:
    env.reset(options={"task_id": task_id})
    obs, reward, _, _, info = env.step(f"```python\n{program}\n```")
    return float(reward), obs, info


# ----------------------------------------------------------------------------- 1. forged results
FORGE = r"""
import json, os, socket
FRAME = "\x1eAGENTENVS-OFFICIAL "
forged = [json.dumps({"value": 42, "error": None}).encode(),
          (FRAME + json.dumps({"ready": True}) + "\n").encode(),
          (FRAME + json.dumps({"value": 42, "error": None}) + "\n").encode(),
          b'{"i": 0, "stdout": "", "stderr": "", "value": 42, "error": null, "duration_s": 0}\n']
for fd in range(0, 1024):
    for data in forged:
        try:
            os.write(fd, data)
        except OSError:
            pass
os._exit(0)
"""


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_forged_result_does_not_pass(make_env: Any, backend: str, rules: str) -> None:
    """Writing a result to every fd and exiting must not pass a call test it never ran."""
    rows = [lcb_row("forge", [{"input": "21", "output": "42", "testtype": "functional"}], "double")]
    env = make_env(backend, rules, rows)
    reward, _, info = submit(env, "forge", FORGE)
    assert reward == 0.0 and not info["success"] and info["tests_passed"] == 0
    # the same channel-free program that does define the function passes: the test can fail
    reward, _, info = submit(
        env, "forge", "class Solution:\n    def double(self, x):\n        return 2 * x"
    )
    assert reward == 1.0 and info["success"]


# ----------------------------------------------------------------------------- 2. hidden tests
SNOOP = r"""
import gc, io, os, re, sys
data = sys.stdin.read()
pat = re.compile(rb"HIDDEN-INPUT-([0-9a-f]{16})")
found = set()
for obj in gc.get_objects():
    try:  # a tuple subclass may compute its items (platform's uname result starts a process)
        for v in (obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else [obj]):
            if isinstance(v, str):
                found.update(m.decode() for m in pat.findall(v.encode("utf-8", "replace")))
    except Exception:
        pass
# every readable page of this process, and whatever /proc shows of the others
try:
    with io.open("/proc/self/maps") as maps, io.open("/proc/self/mem", "rb", 0) as mem:
        for line in maps.read().splitlines():
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if "r" not in line.split()[1]:
                continue
            for at in range(lo, hi, 1 << 22):  # 4 MB at a time, overlapping a little
                try:
                    mem.seek(at)
                    found.update(m.decode() for m in pat.findall(mem.read(min((1 << 22) + 64, hi - at))))
                except (OSError, ValueError, OverflowError):
                    break
except OSError:
    pass
for pid in os.listdir("/proc"):
    for name in ("cmdline", "environ", "mem"):
        try:
            with io.open(f"/proc/{pid}/{name}", "rb") as f:
                found.update(m.decode() for m in pat.findall(f.read(1 << 20)))
        except OSError:
            pass
for root in ("/work", "/tmp", "/dev/shm", "."):
    for d, _, files in os.walk(root):
        for n in files:
            try:
                found.update(m.decode() for m in pat.findall(io.open(os.path.join(d, n), "rb").read(1 << 20)))
            except OSError:
                pass
own = set(m.decode() for m in pat.findall(data.encode()))
print("SEEN", sorted(found - own))
"""


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_hidden_inputs_are_not_visible(make_env: Any, backend: str, rules: str) -> None:
    tokens = [uuid.uuid4().hex[:16] for _ in range(3)]
    tests = stdin_tests(("public\n", "x\n"), *[(f"HIDDEN-INPUT-{t}\n", "y\n") for t in tokens])
    env = make_env(backend, rules, [lcb_row("snoop", tests)])
    reward, obs, info = submit(env, "snoop", SNOOP)
    assert reward == 0.0
    assert "SEEN" in obs  # the program ran and reported on the public test
    for token in tokens:
        assert token not in obs


# ----------------------------------------------------------------------------- 3. files persist
PLANT = r"""
import io, os, sys
token = sys.stdin.read().strip()
home = os.environ.get("HOME", ".")
for p in ["leak.txt", "/work/leak.txt", "/tmp/leak.txt", "/dev/shm/leak.txt",
          os.path.join(home, "leak.txt"), "/tmp/sub/leak.txt"]:
    try:
        if os.path.dirname(p):  # (the official rules' guard removes os.getcwd)
            os.makedirs(os.path.dirname(p), exist_ok=True)
        with io.open(p, "w") as f:
            f.write(token)
    except OSError:
        pass
print("planted")
"""
HARVEST = r"""
import io, os, sys
sys.stdin.read()
found = []
for root in {"/work", "/tmp", "/dev/shm", ".", os.environ.get("HOME", ".")}:
    for d, _, files in os.walk(root):
        for n in files:
            try:
                found.append(io.open(os.path.join(d, n), errors="replace").read(200))
            except OSError:
                pass
print("FOUND", found)
"""


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_files_do_not_persist_across_episodes(make_env: Any, backend: str, rules: str) -> None:
    token = f"PLANTED-{uuid.uuid4().hex}"
    rows = [
        lcb_row("plant", stdin_tests((token + "\n", "z\n"))),
        lcb_row("harvest", stdin_tests(("go\n", "z\n"))),
    ]
    env = make_env(backend, rules, rows)
    _, obs, _ = submit(env, "plant", PLANT)
    assert "planted" in obs
    _, obs, _ = submit(env, "harvest", HARVEST)
    assert "FOUND" in obs and token not in obs


# ----------------------------------------------------------------------------- 4. IPC
IPC_PLANT = r"""
import ctypes, os, sys
token = sys.stdin.read().strip().encode()
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shmid = libc.shmget(0x5EC2E7, 4096, 0o1666)
if shmid >= 0:
    addr = libc.shmat(shmid, None, 0)
    ctypes.memmove(addr, token, len(token))
    libc.shmdt(ctypes.c_void_p(addr))
rt = ctypes.CDLL("librt.so.1", use_errno=True)
class Attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long), ("cur", ctypes.c_long), ("pad", ctypes.c_long * 4)]
attr = Attr(0, 4, 256, 0)
q = rt.mq_open(b"/agentenvs-leak", os.O_CREAT | os.O_RDWR, 0o666, ctypes.byref(attr))
if q >= 0:
    rt.mq_send(q, token, len(token), 0)
print("planted", shmid, q)
"""
IPC_HARVEST = r"""
import ctypes, os, sys
sys.stdin.read()
found = []
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shmid = libc.shmget(0x5EC2E7, 0, 0)
if shmid >= 0:
    addr = libc.shmat(shmid, None, 0)
    found.append(ctypes.string_at(addr, 64).split(b"\0")[0].decode(errors="replace"))
rt = ctypes.CDLL("librt.so.1", use_errno=True)
q = rt.mq_open(b"/agentenvs-leak", os.O_RDWR | os.O_NONBLOCK)
if q >= 0:
    buf = ctypes.create_string_buffer(256)
    n = rt.mq_receive(q, buf, 256, None)
    found.append(buf.raw[: max(n, 0)].decode(errors="replace"))
found += io.open("/proc/sysvipc/shm").read().splitlines()[1:]
print("FOUND", found)
"""


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_ipc_does_not_leak(make_env: Any, backend: str, rules: str) -> None:
    """Shared memory and message queues of one episode reach neither the next episode of
    the same env nor the next env (with Docker: the next user of the pooled container)."""
    token = f"IPC-{uuid.uuid4().hex}"
    rows = [
        lcb_row("plant", stdin_tests((token + "\n", "z\n"))),
        lcb_row("harvest", stdin_tests(("go\n", "z\n"))),
    ]
    env = make_env(backend, rules, rows)
    _, obs, _ = submit(env, "plant", IPC_PLANT)
    assert "planted" in obs and "planted -1" not in obs  # the segment was made
    _, obs, _ = submit(env, "harvest", IPC_HARVEST)
    assert "FOUND []" in obs, obs
    env.close()
    time.sleep(0.5)  # the released container's reset runs in the background
    other = make_env(backend, rules, rows)
    _, obs, _ = submit(other, "harvest", IPC_HARVEST)
    assert "FOUND []" in obs, obs


# ----------------------------------------------------------------------------- 5, 6. disk and RAM
FILL = r"""
import io, os, sys
where = sys.stdin.read().strip()
os.makedirs(where, exist_ok=True) if where != "." else None
chunk = b"x" * (1 << 20)
total = 0
for i in range(400):
    try:
        with io.open(os.path.join(where, f"fill-{i}"), "wb") as f:
            for _ in range(8):
                f.write(chunk)
                total += 1
    except OSError:
        break
print("WROTE", total)
"""


@pytest.mark.parametrize("place", ["work", "shm"])
@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_disk_and_shared_memory_are_capped(
    make_env: Any, backend: str, rules: str, place: str
) -> None:
    """3 GB asked of the work dir or /dev/shm: the sandbox's caps (32 and 16 MB here) hold."""
    target = "." if place == "work" else "/dev/shm/x"
    cap = LIMITS.disk_mb if place == "work" else LIMITS.shm_mb
    env = make_env(backend, rules, [lcb_row("fill", stdin_tests((target + "\n", "z\n")))])
    _, obs, _ = submit(env, "fill", FILL)
    wrote = int(obs.split("WROTE", 1)[1].split()[0].strip("'\"\\n"))
    assert 0 < wrote <= cap + 1, obs
    if backend == "local":  # nothing reached the host's disk
        box = env.sandbox()
        assert os.listdir(box.workdir) == []  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- 7. crash leftovers
CRASH = """
import json, os, signal, sys
from agentenvs.envs.deepcoder import official
from agentenvs.envs.deepcoder.env import DeepCoderMTEnv
env = DeepCoderMTEnv(tasks_path=sys.argv[1], sandbox=sys.argv[2], rules=sys.argv[3])
env.reset(options={"task_id": "fill"})
env.step("```python\\nprint(input())\\n```")
box = env.sandbox()
print(json.dumps({"workdir": getattr(box, "workdir", None),
                  "container": getattr(box, "container_id", None)}), flush=True)
# the reaper (which removes the work dir once this process is gone) killed too, as a whole
# cgroup's kill would: the next start's sweep is what this test checks
from agentenvs.sandbox import _leftovers
if _leftovers.reaper_pid:
    os.kill(_leftovers.reaper_pid, signal.SIGKILL)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_leftovers_of_a_killed_process_are_swept_on_start(
    tmp_path: Path, backend: str, rules: str
) -> None:
    need(backend)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(lcb_row("fill", stdin_tests(("a\n", "a\n")))) + "\n")
    out = subprocess.run(
        [sys.executable, "-c", CRASH, str(tasks), backend, rules],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert out.returncode == -9, out.stderr
    left = json.loads(out.stdout.strip().splitlines()[-1])
    if backend == "local":
        assert os.path.isdir(left["workdir"])  # the killed process could not clean up
    else:
        assert left["container"] in _container_ids()
    # the next start (a new process making an env) sweeps what the dead one left
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom agentenvs.envs.deepcoder.env import "
            "DeepCoderMTEnv\nDeepCoderMTEnv(tasks_path=sys.argv[1], sandbox=sys.argv[2]).close()",
            str(tasks),
            backend,
        ],
        check=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    if backend == "local":
        assert not os.path.exists(left["workdir"])
    else:
        assert left["container"] not in _container_ids()


def _container_ids() -> set[str]:
    from agentenvs.sandbox.docker import _client

    client = _client()
    try:
        return {c["Id"] for c in client.api.containers(all=True)}
    finally:
        client.close()


def call_tests(*pairs: tuple[Any, Any]) -> list[dict[str, str]]:
    """LiveCodeBench functional tests: one JSON argument per line in, the JSON value out."""
    return [
        {"input": json.dumps(i), "output": json.dumps(o), "testtype": "functional"}
        for i, o in pairs
    ]


# ----------------------------------------------------------------------------- 8. special numbers
#: tokens a program may print where a number is expected; ``sNaN`` made ``Decimal``'s
#: ``==`` raise out of ``env.step``
SPECIAL_NUMBERS = [
    "sNaN", "-sNaN", "NaN", "-nan", "nan123", "Infinity", "-inf", "inf", "-0", "1e999",
    "1e-99999999", "9" * 5000, "0x1p3", "0x7", "1_0", "+7", "7e0",
]  # fmt: skip


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_special_numbers_are_observations(make_env: Any, backend: str, rules: str) -> None:
    """Whatever a program prints is an observation: no token makes ``env.step`` or
    ``score_action`` raise, and none passes for 7 but 7 spelled as a number."""
    rows = [lcb_row("num", stdin_tests(("go\n", "7\n"), ("again\n", "7 7\n")))]
    env = make_env(backend, rules, rows, timeout_per_test=5.0, max_turns=len(SPECIAL_NUMBERS))
    env.reset(options={"task_id": "num"})
    for token in SPECIAL_NUMBERS:
        program = f"import sys\nn = 2 if sys.stdin.read().startswith('again') else 1\nprint(*[{token!r}] * n)"
        action = f"```python\n{program}\n```"
        passed = token in ("+7", "7e0")  # the same number, as Decimal reads it
        assert env.unwrapped.score_action(action) == float(passed), token  # type: ignore[attr-defined]
        _, reward, _, _, info = env.step(action)
        assert (reward == 1.0) == passed and info["success"] == passed, token
        if passed:
            env.reset(options={"task_id": "num"})


# ----------------------------------------------------------------------------- 9. lying values
LIARS = {
    "always-equal object": (
        "class Liar:\n"
        "    __eq__ = lambda self, other: True\n"
        "    __ne__ = lambda self, other: False\n"
        "    __hash__ = lambda self: 42\n"
        "    __float__ = __int__ = __index__ = lambda self: 42\n"
        "    __str__ = __repr__ = lambda self: '42'\n"
        "value = Liar()"
    ),
    "int subclass": (
        "class I(int):\n    __eq__ = lambda self, other: True\n    __hash__ = int.__hash__\n"
        "    __str__ = __repr__ = lambda self: '42'\nvalue = I(0)"
    ),
    "str subclass": "class S(str):\n    __eq__ = lambda self, other: True\nvalue = S('x')",
    "list subclass": (
        "class L(list):\n    __eq__ = lambda self, other: True\n"
        "    __iter__ = lambda self: iter([x])\nvalue = L()"
    ),
    "dict subclass": "class D(dict):\n    __eq__ = lambda self, other: True\nvalue = D()",
    "NaN": "value = float('nan')",
    "generator": "value = (v for v in [2 * x])",
    "bool": "value = True",
    "float off by 1e-9": "value = 2 * x + 1e-9",
    "string of the answer": "value = str(2 * x)",
    "list of the answer": "value = [2 * x]",
    "huge list": "value = list(range(10 ** 7))",
}


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_lying_return_values_do_not_pass(make_env: Any, backend: str, rules: str) -> None:
    """Objects whose ``__eq__``/``__hash__``/``__float__``/``__repr__`` lie, subclasses of
    int/str/list/dict, NaN, generators, bools, near misses and huge results: a call's value
    crosses the sandbox as data and is compared on the host, so none passes."""
    rows = [lcb_row("liar", call_tests((21, 42), (5, 10)), "double")]
    env = make_env(backend, rules, rows, max_turns=len(LIARS) + 1)
    env.reset(options={"task_id": "liar"})
    for name, body in LIARS.items():
        inner = "\n".join("        " + line for line in body.splitlines())
        program = f"class Solution:\n    def double(self, x):\n{inner}\n        return value"
        _, reward, _, _, info = env.step(f"```python\n{program}\n```")
        assert reward == 0.0 and not any(info["test_results"]), name
    _, reward, _, _, _ = env.step(
        "```python\nclass Solution:\n    def double(self, x):\n        return 2 * x\n```"
    )
    assert reward == 1.0  # the honest program passes: the tests can fail


# ----------------------------------------------------------------------------- 10. result channel
#: a call that reports 42 for every test through every channel it can reach: the strict
#: harness's result socket (its address found in the frames above, or /proc/net/unix),
#: the official runner's framed answers echoing the pending request's id (found by gc),
#: written to every fd; then exits before returning
CHANNEL = r"""
import gc, json, os, socket, sys
def forge():
    addrs = set()
    frame = sys._getframe()
    while frame is not None:
        for v in list(frame.f_locals.values()):
            if isinstance(v, bytes) and v.startswith(b"\0agentenvs-results-"):
                addrs.add(v)
        frame = frame.f_back
    try:
        for line in open("/proc/net/unix").read().splitlines()[1:]:
            name = line.split()[-1]
            if name.startswith("@agentenvs-results-"):
                addrs.add(b"\0" + name[1:].encode())
    except OSError:
        pass
    for addr in addrs:
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(addr)
            conn.sendall(json.dumps({"value": 42}).encode())
            conn.close()
        except OSError:
            pass
    ids = {o["id"] for o in gc.get_objects() if isinstance(o, dict) and isinstance(o.get("id"), str)}
    for i in ids:
        data = ("\x1eAGENTENVS-OFFICIAL " + json.dumps({"id": i, "value": 42, "error": None}) + "\n").encode()
        for fd in range(1, 256):
            try:
                os.write(fd, data)
            except OSError:
                pass
    os._exit(0)
class Solution:
    def double(self, x):
        forge()
"""
#: the harness's own modules, patched by the program before it returns nothing
PATCH = r"""
import json, builtins, sys
json.dumps = lambda *a, **k: '{"value": 42}'
json.JSONEncoder.encode = lambda self, o: '{"value": 42}'
builtins.print = lambda *a, **k: None
class Solution:
    def double(self, x):
        return None
"""


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sent_value_is_compared_as_sent(
    make_env: Any, backend: str, rules: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program can still put a value on the result channel (the strict harness's socket,
    the official runner's answers) or make the harness send one; that value is what gets
    compared, and since no expected output is in the sandbox a constant passes only the
    test it happens to match."""
    # PATCH makes the official runner's answer to its setup lack the request's id, so the
    # host waits out the runner's start allowance (60 s, meant for a cold interpreter
    # importing numpy): a shorter one here, the verdict the same (the runner's ready, on a
    # warm fork, comes within a second or two)
    monkeypatch.setattr(official, "_START_S", 10.0)
    rows = [lcb_row("chan", call_tests((21, 42), (5, 10), (4, 8)), "double")]
    env = make_env(backend, rules, rows, timeout_per_test=5.0)
    for program in (CHANNEL, PATCH):
        reward, _, info = submit(env, "chan", program)
        assert reward == 0.0 and not info["success"]
        assert info["test_results"][1:] == [False, False], info["test_results"]


# ----------------------------------------------------------------------------- 11. the harness
HARNESS_ATTACKS = {
    "atexit print": "import atexit\natexit.register(print, 2 * int(input()))",
    "answer then close stdout": "import os, sys\nprint(2 * int(input()))\nos.close(1)\nos._exit(0)",
    "answer lost by os._exit": "import os\nprint(2 * int(input()))\nos._exit(0)",
    "several candidates": "x = int(input())\nfor d in (-1, 0, 1):\n    print(2 * x + d)",
    "SIGKILL the worker": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
    "SIGSTOP the worker": "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)",
    "SIGTERM every process": "import os, signal\nos.kill(-1, signal.SIGTERM)\nos.kill(-1, signal.SIGKILL)",
}


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_harness_attacks_earn_nothing(make_env: Any, backend: str, rules: str) -> None:
    """Printing through hooks that run after the program, losing or hedging the answer,
    signalling the worker: every test fails, ``env.step`` returns, and the next program
    (the honest one) still passes."""
    rows = [lcb_row("twice", stdin_tests(("21\n", "42\n"), ("5\n", "10\n")))]
    env = make_env(backend, rules, rows, timeout_per_test=3.0)
    for name, program in HARNESS_ATTACKS.items():
        reward, _, info = submit(env, "twice", program)
        assert reward == 0.0 and not info["success"], name
        if name != "answer then close stdout":  # its answer was printed, and may count
            assert not any(info["test_results"]), name
    reward, _, _ = submit(env, "twice", "print(2 * int(input()))")
    assert reward == 1.0
