"""A local sandbox is bounded as a whole: memory (tmpfs included) and processes held by
one cgroup per sandbox, whatever number of processes the program starts.

Every bomb runs through the sandbox's own entry points (``run``, ``spawn``,
``run_python_cases``) or an env's ``step``, and every figure is read from outside: the
kernel's record of the sandbox's cgroup (its peak memory, its OOM kills, its refused
forks) and this process's own memory. Going over is the program's outcome, never a
``Fault``. Under rlimits alone (``AGENTENVS_CGROUP=off``) the same bombs hold many times
the limit: the memory bomb's own test shows it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from _services import require_bwrap

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.sandbox import _cgroup, limits_info
from agentenvs.sandbox.base import Limits, PyCase
from agentenvs.sandbox.local import LocalSandbox

pytestmark = pytest.mark.bwrap

MB = 1 << 20
#: each process of the bomb holds this much, all at once, until told to stop
CHUNK_MB = 160
CHILDREN = 8
# a parent that forks CHILDREN processes, each touching CHUNK_MB, saying so and holding
# it; once every child has either said so or died, the parent counts those that hold
# their memory at that moment (the others were killed), kills them and prints the count
BOMB = f"""
import os, select, time
r, w = os.pipe()
kids = []
for _ in range({CHILDREN}):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        b = bytearray({CHUNK_MB} << 20)
        for i in range(0, len(b), 4096):
            b[i] = 1
        os.write(w, b"%d\\n" % os.getpid())
        time.sleep(120)
        os._exit(0)
    kids.append(pid)
os.close(w)
said, dead, buf = set(), set(), b""
while len(said | dead) < len(kids):
    if select.select([r], [], [], 0.1)[0]:
        buf += os.read(r, 4096)
        *lines, buf = buf.split(b"\\n")
        said.update(int(x) for x in lines if x)
    for pid in kids:
        if pid not in dead and os.waitpid(pid, os.WNOHANG)[0]:
            dead.add(pid)
print("held", len(said - dead), flush=True)
for pid in kids:
    try:
        os.kill(pid, 9)
    except OSError:
        pass
"""


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _need_cgroup() -> None:
    require_bwrap()
    h = _cgroup.hierarchy()
    if h.version == 0:
        pytest.skip(f"no cgroup for sandboxes on this host: {h.why}")


@pytest.fixture
def small_box() -> Iterator[LocalSandbox]:
    _need_cgroup()
    box = LocalSandbox(Limits(memory_mb=256, max_processes=32, max_file_mb=64))
    try:
        yield box
    finally:
        box.close()


def _held(stdout: str) -> int:
    words = stdout.split()
    assert "held" in words, stdout
    return int(words[words.index("held") + 1])


def test_memory_across_processes_is_bounded_per_sandbox(small_box: LocalSandbox) -> None:
    cg = small_box._cgroup
    assert cg is not None and small_box.scope.kind.startswith("cgroup")
    limit = cg.memory_mb * MB
    rss_before = _rss_kb()
    result = small_box.run(["python3", "-c", BOMB], timeout=120)
    # CHILDREN x CHUNK_MB = 1280 MB asked for; the sandbox holds 512 MB in all
    held = _held(result.stdout)
    assert held * CHUNK_MB * MB <= limit
    assert held < CHILDREN
    assert cg.oom_kills() >= 1
    peak = cg.memory_peak()
    assert peak is not None and peak <= limit
    # the host's side of it (this process) did not pay for any of it
    assert _rss_kb() - rss_before < 64 * 1024
    # the sandbox goes on
    assert small_box.run("echo ok").stdout == "ok\n"


def test_the_same_bomb_under_rlimits_alone_holds_all_of_it() -> None:
    """The control: without the cgroup (``AGENTENVS_CGROUP=off``) every child holds its
    chunk, each under its own per-process limit."""
    require_bwrap()
    code = (
        "from agentenvs.sandbox.local import LocalSandbox\n"
        "from agentenvs.sandbox.base import Limits\n"
        "import sys\n"
        "b = LocalSandbox(Limits(memory_mb=256, max_processes=32))\n"
        "assert b.scope.kind == 'rlimits' and b.scope.why, b.scope\n"
        f"r = b.run(['python3', '-c', {BOMB!r}], timeout=120)\n"
        "b.close()\n"
        "print(r.stdout)\n"
    )
    env = {**os.environ, "AGENTENVS_CGROUP": "off"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert _held(out.stdout) == CHILDREN


def test_tmpfs_contents_count_against_the_sandbox(small_box: LocalSandbox) -> None:
    """Files in the sandbox's RAM-backed dirs are its memory: a scratch ``/work`` of 512 MB
    filled with files under the file-size limit stops at the sandbox's memory."""
    cg = small_box._cgroup
    assert cg is not None
    fill = (
        "i=0; while [ $i -lt 12 ]; do "
        "head -c 60000000 /dev/zero > /work/f$i 2>/dev/null || break; i=$((i+1)); done; "
        "du -sm /work | cut -f1"
    )
    proc = small_box.spawn(["/bin/sh", "-c", fill], scratch=True)
    out = b""
    while not proc.eof:
        out += proc.read(5.0)
    assert proc.fault() is None
    proc.kill()
    peak = cg.memory_peak()
    assert peak is not None and peak <= cg.memory_mb * MB
    # 12 x 60 MB asked for: the sandbox held at most its memory
    sizes = [int(w) for w in out.split() if w.isdigit()]
    assert all(size * MB <= cg.memory_mb * MB for size in sizes), out
    assert small_box.run("echo ok").stdout == "ok\n"


def test_fork_bombs_in_several_processes_stop_at_the_sandbox_process_limit(
    small_box: LocalSandbox,
) -> None:
    """Four processes of one sandbox fork as much as they can and hold it: each is held to
    ``max_processes`` by its own rlimit (4 x 32 under rlimits alone), all four together to
    the sandbox's ``pids.max``."""
    cg = small_box._cgroup
    assert cg is not None
    bomb = (
        "import os, time\n"
        "n = 0\n"
        "for _ in range(400):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60); os._exit(0)\n"
        "        n += 1\n"
        "    except OSError:\n"
        "        break\n"
        "print('forked', n, flush=True)\n"
        "time.sleep(60)\n"
    )
    procs = []
    counts = []
    try:
        for _ in range(4):
            proc = small_box.spawn(["python3", "-c", bomb])
            procs.append(proc)
            out = b""
            while b"\n" not in out and not proc.eof:
                out += proc.read(5.0)
            words = out.decode().split()
            counts.append(int(words[words.index("forked") + 1]) if "forked" in words else 0)
            assert proc.fault() is None
        # every process of the sandbox counts: the four pythons, their shells and bwraps
        assert sum(counts) < cg.pids_max, counts
        assert sum(counts) < 4 * (small_box.limits.max_processes - 2)
    finally:
        for proc in procs:
            proc.kill()
    assert small_box.run("echo ok").stdout == "ok\n"


def test_one_sandbox_over_its_memory_leaves_another_running() -> None:
    _need_cgroup()
    bomber = LocalSandbox(Limits(memory_mb=256, max_processes=32))
    honest = LocalSandbox(Limits(memory_mb=256, max_processes=32))
    try:
        assert bomber._cgroup is not None and honest._cgroup is not None
        assert bomber._cgroup.dirs != honest._cgroup.dirs
        outcome: dict[str, str] = {}

        def bomb() -> None:
            outcome["bomb"] = bomber.run(["python3", "-c", BOMB], timeout=120).stdout

        thread = threading.Thread(target=bomb)
        thread.start()
        # an honest program of 200 MB, which its own sandbox can hold, runs meanwhile
        ok = honest.run(
            [
                "python3",
                "-c",
                "b = bytearray(200 << 20); b[::4096] = b'1' * len(b[::4096]); print('fine')",
            ],
            timeout=120,
        )
        thread.join(timeout=150)
        assert ok.stdout == "fine\n" and ok.returncode == 0
        assert honest._cgroup.oom_kills() == 0
        assert _held(outcome["bomb"]) < CHILDREN
    finally:
        bomber.close()
        honest.close()


def test_test_cases_that_fork_past_memory_are_the_programs_outcome(
    small_box: LocalSandbox,
) -> None:
    runs = list(
        small_box.run_python_cases(
            BOMB + "\nprint(input())\n",
            [PyCase(kind="stdin", stdin="a\n"), PyCase(kind="stdin", stdin="b\n")],
            timeout_per_case=60,
        )
    )
    assert len(runs) == 2
    for run in runs:
        # each case held less than it asked for and still answered
        assert run.error is None or "memory" in run.error or "crashed" in run.error, run
        if run.error is None:
            assert _held(run.stdout) < CHILDREN
    honest = list(small_box.run_python_cases("print(input())", [PyCase(kind="stdin", stdin="z\n")]))
    assert honest[0].stdout == "z\n" and honest[0].error is None


def test_a_sandbox_whose_every_process_the_oom_killer_took_is_no_fault(
    small_box: LocalSandbox,
) -> None:
    """Memory filled by tmpfs files, which no kill frees: the kernel takes every process
    of the sandbox, its pid 1 too. The kernel's count of OOM kills in the sandbox's own
    cgroup makes that the program's outcome, not a sandbox killed from outside."""
    cg = small_box._cgroup
    assert cg is not None
    fill = (
        "i=0; while [ $i -lt 12 ]; do head -c 60000000 /dev/zero > /dev/shm/f$i 2>/dev/null; "
        "head -c 60000000 /dev/zero > /tmp/f$i 2>/dev/null; i=$((i+1)); done; "
        "python3 -c 'b = bytearray(250 << 20); b[::4096] = bytes(len(b[::4096]))'; echo end"
    )
    result = small_box.run(fill, timeout=120)  # no Fault raised
    assert result.timed_out is False
    assert (cg.memory_peak() or 0) <= cg.memory_mb * MB
    assert small_box.run("echo ok").stdout == "ok\n"


def test_closing_removes_the_sandbox_cgroup() -> None:
    _need_cgroup()
    box = LocalSandbox(Limits(memory_mb=128))
    cg = box._cgroup
    assert cg is not None
    dirs = list(cg.dirs.values())
    proc = box.spawn(["sleep", "60"])
    assert cg.pids()
    box.close()
    assert proc.eof or proc.read(5.0) == b""
    assert not any(os.path.exists(d) for d in dirs)


def test_the_cgroups_of_a_killed_owner_are_swept() -> None:
    """A process killed with SIGKILL leaves its sandbox's cgroup; the next process that
    makes a sandbox removes it (its processes died with their owner)."""
    _need_cgroup()
    code = (
        "import os, sys\n"
        "from agentenvs.sandbox.local import LocalSandbox\n"
        "b = LocalSandbox()\n"
        "p = b.spawn(['sleep', '60'])\n"
        "print(*b._cgroup.dirs.values(), flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    dirs = out.stdout.split()
    assert dirs and all(os.path.isdir(d) or not os.path.exists(d) for d in dirs)
    _cgroup._swept.clear()
    box = LocalSandbox()
    try:
        # bwrap's --die-with-parent ended the sandbox; the sweep removed what was left
        assert not any(os.path.exists(d) for d in dirs)
    finally:
        box.close()


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a second pid namespace needs root and unshare(1)",
)
def test_a_sandbox_of_another_pid_namespace_is_never_swept_as_a_dead_owners() -> None:
    """Processes in different pid namespaces share the cgroup tree (a container, a CI root
    entered with unshare). A sandbox made in a child namespace is named after a pid that
    means nothing here (its owner is pid 1 there); the sweep of a sandbox made here must
    not take it for a dead owner's and kill it (this process sees its processes)."""
    _need_cgroup()
    code = (
        "import sys\n"
        "from agentenvs.sandbox.local import LocalSandbox\n"
        "b = LocalSandbox()\n"
        "p = b.spawn(['cat'])\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        "p.write(b'still here\\n')\n"
        "got = b''\n"
        "while b'\\n' not in got and not p.eof:\n"
        "    got += p.read(5.0)\n"
        "print(got.decode().strip() or 'gone', p.fault(), flush=True)\n"
        "b.close()\n"
    )
    child = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready", child.stderr.read()[-2000:]
        _cgroup._swept.clear()
        box = LocalSandbox()  # its first sandbox here: the sweep of dead owners runs
        box.close()
        child.stdin.write("go\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert out.strip() == "still here None", err[-2000:]


def test_the_scope_is_reported_and_the_fallback_says_why() -> None:
    require_bwrap()
    info = limits_info("local", Limits(memory_mb=300, max_processes=10))
    h = _cgroup.hierarchy()
    if h.version:
        assert info == {
            "scope": "sandbox",
            "enforced_by": f"cgroup{h.version}",
            "memory_mb": 300 + _cgroup.MEMORY_SLACK_MB,
            "max_processes": _cgroup.pids_max(10),
        }
    code = (
        "from agentenvs.sandbox import limits_info\n"
        "from agentenvs.sandbox.base import Limits\n"
        "print(limits_info('local', Limits()))\n"
    )
    env = {**os.environ, "AGENTENVS_CGROUP": "off"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert "'scope': 'process'" in out.stdout and "AGENTENVS_CGROUP=off" in out.stdout


# ----------------------------------------------------------------------------- through envs
DEEPCODER_FIXTURES = Path(__file__).parent.parent / "envs" / "deepcoder_fixtures"


def test_deepcoder_program_forking_past_memory_through_step() -> None:
    _need_cgroup()
    env = gym.make(
        "agentenvs/DeepCoderMT-v0",
        tasks_path=DEEPCODER_FIXTURES / "lcb.jsonl",
        timeout_per_test=60.0,
        limits=Limits(memory_mb=256, max_processes=32),
    )
    try:
        _, info = env.reset(seed=0, options={"task_id": "lcb-stdin"})
        assert info["sandbox_limits"]["scope"] == "sandbox"
        program = (
            "```python\n" + BOMB + "\nn = int(input())\nprint(sum(map(int, input().split())))\n```"
        )
        obs, reward, _, _, info = env.step(program)  # no Fault, no exception
        assert isinstance(obs, str)
        box = env.unwrapped._sandbox
        cg = box._cgroup
        assert cg is not None and cg.oom_kills() >= 1
        assert (cg.memory_peak() or 0) <= cg.memory_mb * MB
        right = "```python\nn = int(input())\nprint(sum(map(int, input().split())))\n```"
        _, reward, *_ = env.step(right)
        assert reward == 1.0
    finally:
        env.close()


TERMINAL_FIXTURES = Path(__file__).parent.parent / "envs" / "terminal_fixtures"


def test_terminal_command_forking_past_memory_through_step() -> None:
    """A Terminal-Bench session (local runtime) whose command forks past the memory: the
    session's sandbox holds its memory, ``step`` answers, and the next episode solves."""
    _need_cgroup()
    from agentenvs.envs.terminal.env import TerminalBenchEnv

    limits = Limits(
        cpu_seconds=3600,
        memory_mb=384,
        max_processes=256,
        max_file_mb=256,
        max_open_files=1024,
        max_output_bytes=1 << 20,
    )
    env = TerminalBenchEnv(tasks_path=TERMINAL_FIXTURES, command_timeout=120, limits=limits)
    try:
        _, info = env.reset(options={"task_id": "tb1-greeting"})
        assert info["sandbox_limits"]["enforced_by"].startswith("cgroup")
        action = f"```bash\ncat > /tmp/bomb.py <<'EOF'\n{BOMB}\nEOF\npython3 /tmp/bomb.py\n```"
        obs, _, _, _, info = env.step(action)  # no Fault, no exception
        assert isinstance(obs, str)
        cg = env._runtime.box._cgroup
        assert cg is not None and cg.oom_kills() >= 1
        assert (cg.memory_peak() or 0) <= cg.memory_mb * MB
        if "held" in obs:
            assert _held(obs) < CHILDREN
        env.reset(options={"task_id": "tb1-greeting"})
        solution = (TERMINAL_FIXTURES / "tb1-greeting" / "solution.sh").read_text()
        env.step(f"```bash\n{solution}\n```")
        _, reward, terminated, _, _ = env.step("submit")
        assert terminated and reward == 1.0
    finally:
        env.close()
