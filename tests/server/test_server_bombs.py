"""One session's bomb does not take the env server down: its sandbox holds it.

A real server on loopback with Terminal-Bench sessions (local runtime). One session's
command forks past its sandbox's memory while another session works; the figures are
read from outside: the server process's memory, the other session's answers, the bombed
session's own next command.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from _services import require_bwrap

from agentenvs.sandbox import _cgroup
from agentenvs.server.client import RemoteEnv

pytestmark = pytest.mark.bwrap

FIXTURES = Path(__file__).resolve().parents[1] / "envs" / "terminal_fixtures"
CHILDREN, CHUNK_MB = 20, 160  # 3.2 GB asked for against a 2.3 GB sandbox
# every child holds its chunk until the parent has heard from each (it said so, or died),
# so all of them ask at once however slow the machine: the count of the dead is what the
# sandbox refused
BOMB = f"""
import os, select, signal, time
r, w = os.pipe()
kids = []
for _ in range({CHILDREN}):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        b = bytearray({CHUNK_MB} << 20)
        b[::4096] = b"1" * len(b[::4096])
        os.write(w, b"%d\\n" % os.getpid())
        time.sleep(300)
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
print("killed", len(dead), flush=True)
for pid in kids:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_a_memory_bomb_in_one_session_leaves_the_server_and_the_others(start_server) -> None:
    require_bwrap()
    if _cgroup.hierarchy().version == 0:
        pytest.skip(f"no cgroup for sandboxes on this host: {_cgroup.hierarchy().why}")
    server = start_server(
        "agentenvs/TerminalBench-v0",
        "--max-sessions",
        "4",
        env_kwargs={"tasks_path": str(FIXTURES), "command_timeout": 120},
    )
    rss_before = _rss_kb(server.proc.pid)

    async def main() -> tuple[str, list[str], str]:
        async with RemoteEnv(server.url) as bomber, RemoteEnv(server.url) as other:
            await bomber.areset(options={"task_id": "tb1-greeting"})
            await other.areset(options={"task_id": "tb1-greeting"})
            action = f"```bash\ncat > /tmp/bomb.py <<'EOF'\n{BOMB}\nEOF\npython3 /tmp/bomb.py\n```"
            bomb = asyncio.create_task(bomber.astep(action))
            answers = []
            for i in range(5):
                obs, *_ = await other.astep(f"```bash\necho still-here-{i}\n```")
                answers.append(obs)
            obs_bomb, *_ = await bomb
            after, *_ = await bomber.astep("```bash\necho after\n```")
            return obs_bomb, answers, after

    obs_bomb, answers, after = asyncio.run(main())
    assert all(f"still-here-{i}" in a for i, a in enumerate(answers))
    # the bomb's own sandbox took the kills (or its session), never the server; under
    # rlimits alone all 20 children hold their 160 MB ("killed 0")
    killed = re.search(r"killed (\d+)", obs_bomb)
    assert (killed and int(killed.group(1)) >= 1) or "lost" in obs_bomb.lower(), obs_bomb
    assert isinstance(after, str)
    assert server.proc.poll() is None
    # the server paid nothing for 3.2 GB asked for in a session
    assert _rss_kb(server.proc.pid) - rss_before < 200 * 1024
    assert server.get("/health") is not None
