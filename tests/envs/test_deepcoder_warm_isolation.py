"""rules="official" on the local sandbox's warm server: nothing of one program reaches the next.

Each program of the official grader is a fork of a server that has numpy and pandas
imported (``agentenvs/sandbox/forkserver.py``). Here hostile programs, graded through
``gym.make("agentenvs/DeepCoderMT-v0", rules="official")`` and ``step``, try to leave
something behind for the next program: files, memory, modules (numpy and builtins
monkeypatched, ``sys.modules`` written), descriptors, the environment, signal handlers,
the cwd, rlimits, the umask, a process left running, System V IPC, sockets, the random
state, bytes written to every descriptor they hold. After each, a program that prints a
digest of the world it finds (as a wrong answer, so its line is in the observation) must
get exactly the observation it gets in a fresh interpreter (the spawn path, which the
Docker backend also takes), and the same server must still be serving (it was put back,
not replaced).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.envs.deepcoder import env as deepcoder_env
from agentenvs.sandbox.base import Limits
from agentenvs.sandbox.local import LocalSandbox
from tests._services import require_bwrap

FIXTURES = Path(__file__).parent / "deepcoder_fixtures"
LIMITS = Limits(memory_mb=4096, cpu_seconds=3600)

#: what a program finds of its world, as one line (never pids, inode numbers or hash seeds)
DESCRIBE = r"""
import io, hashlib, json, os, posix, signal, stat, sys, builtins, collections, numpy
def listing(root):
    out = []
    for base, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            p = os.path.join(base, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            link = os.readlink(p) if stat.S_ISLNK(st.st_mode) else ""
            out.append((p, stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size if stat.S_ISREG(st.st_mode) else 0, link))
    return out
def text(path):
    try:
        with io.open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError as e:
        return type(e).__name__
import re
fds = {}
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        fds[fd] = re.sub(r"[0-9]+", "N", os.readlink("/proc/self/fd/" + fd))
    except OSError:
        pass
status = [l for l in text("/proc/self/status").splitlines() if l.startswith(("Sig", "Shd"))]
handlers = {}
for s in signal.valid_signals():
    try:
        h = signal.getsignal(s)
    except (OSError, ValueError):
        continue
    handlers[int(s)] = getattr(h, "__name__", repr(h))
others = []
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) not in (1, os.getpid()):
        others.append(text("/proc/%s/comm" % pid).strip())
umask = os.umask(0o22); os.umask(umask)
marker = ("ZQX" + "LEAK")
found = []
import select
for fd in range(3, 64):
    try:
        if select.select([fd], [], [], 0)[0] and marker.encode() in os.read(fd, 1 << 16):
            found.append(fd)
    except (OSError, ValueError):
        pass
world = {
    "fds": fds, "limits": text("/proc/self/limits"), "status": status, "handlers": handlers,
    "cwd": posix.getcwd(), "environ": sorted(os.environ.items()),
    "cenviron": sorted(text("/proc/self/environ").split("\0")),
    "files": [listing(r) for r in ("/work", "/tmp", "/dev")],
    "modules": sorted(k for k, v in sys.modules.items() if v is not None),
    "blocked": sorted(k for k, v in sys.modules.items() if v is None),
    "numpy": [str(numpy.sum([1, 2])), str(numpy.pi), len(dir(numpy))],
    "builtins": sorted(dir(builtins)), "len": len("ab"),
    "counter": collections.Counter("aab")["a"], "others": sorted(others), "umask": umask,
    "ipc": [text("/proc/sysvipc/" + t).count("\n") for t in ("shm", "msg", "sem")],
    "net": [text("/proc/net/" + t).count("\n") for t in ("tcp", "tcp6", "udp", "unix")],
    "found": found,
}
print(hashlib.sha256(json.dumps(world, sort_keys=True, default=str).encode()).hexdigest()[:20])
"""

#: an APPS stdin script (no guard at all): it runs in a fork of the runner
TACO_ATTACK = r"""
import ctypes, os, signal, socket, sys, time, resource, random, builtins
import numpy
marker = "ZQX" + "LEAK"
for d in ("/work", "/tmp", "/dev/shm", "/dev"):
    try:
        with open(d + "/planted", "w") as f:
            f.write(marker)
        os.setxattr(d, "user.planted", marker.encode())
    except OSError:
        pass
try:
    os.makedirs("/work/deep/er", exist_ok=True)
    os.chmod("/work/deep", 0)
    os.unlink("/dev/stdin")
    os.symlink("/work/planted", "/dev/stdin")
except OSError:
    pass
os.chmod("/work", 0o500)
os.chmod("/tmp", 0o700)
libc = ctypes.CDLL(None)
libc.shmget(0x1234, 4096, 0o1666)
libc.msgget(0x1235, 0o1666)
r, w = os.pipe()
os.write(w, marker.encode())
for fd in (r, w):
    os.set_inheritable(fd, True)
os.dup2(r, 40)
os.environ["PLANTED"] = marker
os.putenv("PLANTED_C", marker)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
os.umask(0o077)
os.chdir("/tmp")
random.seed(0)
numpy.random.seed(0)
numpy.sum = lambda *a, **k: -1
builtins.planted = marker
sys.modules["collections"] = None
for fd in range(3, 64):
    try:
        os.write(fd, marker.encode())
    except OSError:
        pass
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL, signal.SIGSTOP):
    try:
        os.kill(1, sig)
    except OSError:
        pass
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        sys.argv[0] = "planted-daemon"
        while True:
            try:
                with open("/tmp/alive", "w") as f:
                    f.write(marker)
            except OSError:
                pass
            time.sleep(0.01)
    os._exit(0)
time.sleep(0.05)
print(input()[::-1])
"""

#: the same inside the runner's own process (LiveCodeBench rows load the program there)
LCB_ATTACK = r"""
import builtins, sys, numpy, signal, os, posix, collections
marker = "ZQX" + "LEAK"
numpy.sum = lambda *a, **k: -1
numpy.planted = marker
builtins.len = lambda x: -1
builtins.planted = [marker] * 1000
sys.modules["collections"].Counter = dict
sys.modules["math"] = None
sys.modules["planted"] = sys
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
os.environ["PLANTED"] = marker
posix.chdir("/tmp")
posix.umask(0o077)
with open("/work/planted", "w") as f:
    f.write(marker)
n = int(input())
print(sum(map(int, input().split())))
"""

#: listens on loopback and leaves a connection behind (a TIME_WAIT the next one would see)
SOCKET_ATTACK = r"""
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
c = socket.create_connection(s.getsockname()); a, _ = s.accept()
a.close(); c.close(); s.close()
print(input()[::-1])
"""

RANDOM = "import random, numpy\nprint(random.random(), numpy.random.rand())\n"


class FreshLocal(LocalSandbox):
    """The local sandbox without its warm server: every program a fresh interpreter."""

    spawn_warm = None  # type: ignore[assignment]


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


@pytest.fixture(autouse=True)
def fresh_verdicts() -> Iterator[None]:
    """Verdicts are cached per process: a victim's verdict must be computed, never reused."""
    deepcoder_env._OUTCOMES.data.clear()
    yield
    deepcoder_env._OUTCOMES.data.clear()


def make(box: LocalSandbox, fixture: str) -> gym.Env:
    return gym.make(
        "agentenvs/DeepCoderMT-v0",
        tasks_path=FIXTURES / fixture,
        rules="official",
        sandbox=box,
        max_turns=50,
    )


def step(env: gym.Env, task_id: str, code: str) -> tuple[Any, ...]:
    deepcoder_env._OUTCOMES.data.clear()
    env.reset(seed=0, options={"task_id": task_id})
    obs, reward, terminated, truncated, info = env.step(fenced(code))
    return obs, reward, terminated, info["score"]


def server_pids(box: LocalSandbox) -> list[int]:
    return sorted(s.proc.pid for group in box._warm._idle.values() for s in group)


@pytest.fixture(scope="module")
def fresh_world() -> tuple[Any, ...]:
    require_bwrap()
    with FreshLocal(LIMITS) as box:
        env = make(box, "lcb.jsonl")
        try:
            return step(env, "lcb-stdin", DESCRIBE)
        finally:
            env.close()


@pytest.fixture
def warm() -> Iterator[tuple[LocalSandbox, gym.Env, gym.Env]]:
    require_bwrap()
    with LocalSandbox(LIMITS) as box:
        lcb, taco = make(box, "lcb.jsonl"), make(box, "taco.json")
        try:
            yield box, lcb, taco
        finally:
            lcb.close()
            taco.close()


@pytest.mark.bwrap
def test_the_digest_is_a_wrong_answer_that_shows_in_the_observation(
    fresh_world: tuple[Any, ...], warm: tuple[LocalSandbox, gym.Env, gym.Env]
) -> None:
    obs, reward, _, _ = fresh_world
    assert reward == 0.0 and "Wrong answer" in obs
    box, lcb, _ = warm
    assert step(lcb, "lcb-stdin", DESCRIBE) == fresh_world
    pids = server_pids(box)
    assert len(pids) == 1
    assert step(lcb, "lcb-stdin", DESCRIBE) == fresh_world
    assert server_pids(box) == pids


@pytest.mark.bwrap
@pytest.mark.parametrize(
    ("fixture", "task_id", "attack"),
    [("taco.json", "row-00000", TACO_ATTACK), ("lcb.jsonl", "lcb-stdin", LCB_ATTACK)],
    ids=["apps-script", "in-process"],
)
def test_a_hostile_program_leaves_nothing_for_the_next(
    fresh_world: tuple[Any, ...],
    warm: tuple[LocalSandbox, gym.Env, gym.Env],
    fixture: str,
    task_id: str,
    attack: str,
) -> None:
    box, lcb, taco = warm
    assert step(lcb, "lcb-stdin", DESCRIBE) == fresh_world
    pids = server_pids(box)
    _, reward, *_ = step(taco if fixture == "taco.json" else lcb, task_id, attack)
    # the attack's own verdict is the one it gets in a fresh interpreter
    with FreshLocal(LIMITS) as fresh_box:
        fresh_env = make(fresh_box, fixture)
        try:
            assert reward == step(fresh_env, task_id, attack)[1]
        finally:
            fresh_env.close()
    assert step(lcb, "lcb-stdin", DESCRIBE) == fresh_world
    assert server_pids(box) == pids  # put back, not replaced
    # and a correct program still passes there
    assert (
        step(lcb, "lcb-stdin", "n = int(input())\nprint(sum(map(int, input().split())))")[1] == 1.0
    )


@pytest.mark.bwrap
def test_a_socket_left_behind_retires_the_server(
    fresh_world: tuple[Any, ...], warm: tuple[LocalSandbox, gym.Env, gym.Env]
) -> None:
    box, lcb, taco = warm
    assert step(lcb, "lcb-stdin", DESCRIBE) == fresh_world
    pids = server_pids(box)
    assert step(taco, "row-00000", SOCKET_ATTACK)[1] == 1.0
    assert server_pids(box) != pids  # the TIME_WAIT it left could not be undone
    assert step(lcb, "lcb-stdin", DESCRIBE) == fresh_world


@pytest.mark.bwrap
def test_every_program_draws_its_own_random_numbers(
    warm: tuple[LocalSandbox, gym.Env, gym.Env],
) -> None:
    box, lcb, taco = warm
    step(taco, "row-00000", TACO_ATTACK)  # seeds both generators with 0 in its own process
    seen = {step(lcb, "lcb-stdin", RANDOM)[0] for _ in range(3)}
    assert len(seen) == 3
    with FreshLocal(LIMITS) as fresh_box:
        env = make(fresh_box, "lcb.jsonl")
        try:
            seeded = step(
                env,
                "lcb-stdin",
                "import random, numpy\nrandom.seed(0)\nnumpy.random.seed(0)\n" + RANDOM,
            )[0]
        finally:
            env.close()
    assert seeded not in seen
