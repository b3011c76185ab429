"""A soak through ``env.step``: every episode's program leaves everything it
can behind (a background process, files in the work dir and ``/tmp``, a SysV shared-memory
segment, a POSIX message queue) and still solves its task; afterwards nothing is left: no
process, no temp dir, no container beyond the pool, no IPC object, no open fd.

Both rule sets take turns (the strict rules' fork-per-case worker, the official rules'
scratch runner). Each backend soaks twice: 50 episodes in `make test` (a leak of one thing
an episode shows after 25), and 1,000 (marker ``long``: `make test-all`, which CI runs;
``AGENTENVS_SOAK_EPISODES`` changes that count), the figures in docs/sandboxes.md.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from _services import require_bwrap, require_docker

from agentenvs.envs.deepcoder.env import DeepCoderMTEnv
from agentenvs.sandbox import Limits

SHORT_EPISODES = 50
LONG_EPISODES = int(os.environ.get("AGENTENVS_SOAK_EPISODES", "1000"))

LITTER = r"""
import ctypes, io, os, sys
data = sys.stdin.read()
tag = "%d-%d" % (os.getpid(), id(data))
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget(0x50A4000 + os.getpid() % 4096, 4096, 0o1666)
rt = ctypes.CDLL("librt.so.1", use_errno=True)
rt.mq_open(("/soak-" + tag).encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
for path in ("junk-" + tag, "/tmp/junk-" + tag, "/dev/shm/junk-" + tag):
    try:
        io.open(path, "w").write("x" * 1000)
    except OSError:
        pass
os.posix_spawnp("sh", ["MARKER", "-c", "sleep 1000"], dict(os.environ))
print(data, end="")
"""
CENSUS = r"""
import io, os, sys
sys.stdin.read()
seen = {}
for name in ("shm", "msg", "sem"):
    seen[name] = io.open("/proc/sysvipc/" + name).read().splitlines()[1:]
for d in ("/dev/mqueue", "/dev/shm", "/tmp", "."):
    try:
        seen[d] = sorted(os.listdir(d))
    except OSError as exc:
        seen[d] = str(exc)
print(seen)
"""


def host_state() -> dict[str, object]:
    me = os.getpid()
    mine = [p for p in os.listdir(tempfile.gettempdir()) if p.startswith(f"agentenvs-sbx-{me}-")]
    ipc = {
        n: Path(f"/proc/sysvipc/{n}").read_text().splitlines()[1:] for n in ("shm", "msg", "sem")
    }
    mq = sorted(os.listdir("/dev/mqueue")) if os.path.isdir("/dev/mqueue") else []
    return {"dirs": mine, "ipc": ipc, "mqueue": mq, "fds": len(os.listdir("/proc/self/fd"))}


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize(
    "episodes",
    [
        pytest.param(SHORT_EPISODES, id="short"),
        pytest.param(LONG_EPISODES, id="long", marks=pytest.mark.long),
    ],
)
@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("local", marks=pytest.mark.bwrap),
        pytest.param("docker", marks=pytest.mark.docker),
    ],
)
def test_soak_leaves_nothing_behind(
    backend: str, episodes: int, tmp_path: Path, nothing_left: Callable[..., None]
) -> None:
    if backend == "local":
        require_bwrap()
    else:
        require_docker()
    marker = f"agentenvs-soak-{uuid.uuid4().hex[:12]}"
    tests = [
        {"input": f"{i} soak\n", "output": f"{i} soak\n", "testtype": "stdin"} for i in range(3)
    ]
    rows = [{"id": "echo", "problem": "Print the input.", "tests": json.dumps(tests)}]
    rows.append({"id": "census", "problem": "Look around.", "tests": json.dumps(tests[:1])})
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    limits = Limits(memory_mb=1024, disk_mb=16, shm_mb=8)
    envs = [
        DeepCoderMTEnv(tasks_path=path, sandbox=backend, rules=rules, limits=limits, parallel=1)
        for rules in ("strict", "official")
    ]
    start = time.monotonic()
    before: dict[str, object] = {}
    try:
        for episode in range(episodes):
            if episode == min(100, episodes // 2):
                # the baseline once both envs are warm (the Docker client's connection
                # pool holds up to a few dozen sockets for the life of the process)
                before = host_state()
            env = envs[episode % 2]
            env.reset(seed=episode, options={"task_id": "echo"})
            # a new text each time: the result cache must not answer for the sandbox
            code = LITTER.replace("MARKER", marker) + f"EPISODE = {episode}\n"
            _, reward, terminated, _, info = env.step(f"```python\n{code}```")
            assert reward == 1.0 and terminated, (episode, info)
        for env in envs:  # what the next episode sees: nothing of the episodes before it
            env.reset(options={"task_id": "census"})
            obs, *_ = env.step("```python\n" + CENSUS + "\n```")
            assert "'shm': [], 'msg': [], 'sem': [], '/dev/mqueue': [], '/dev/shm': []" in obs, obs
            assert "junk-" not in obs, obs
    finally:
        for env in envs:
            env.close()
    elapsed = time.monotonic() - start
    nothing_left(marker)
    after = host_state()
    assert after["dirs"] == [] and after["ipc"] == before["ipc"], (before, after)
    assert after["mqueue"] == before["mqueue"]
    assert after["fds"] <= before["fds"] + 10, (before, after)  # a leak would be one per episode
    if backend == "docker":
        from agentenvs.sandbox.docker import POOL_LABEL, DockerPool, _client

        pool = DockerPool.shared()
        client = _client()
        try:
            ours = client.api.containers(all=True, filters={"label": f"{POOL_LABEL}={os.getpid()}"})
        finally:
            client.close()
        assert len(ours) <= pool.size, ours  # idle, reset containers of the pool only
    print(f"{episodes} episodes on {backend} in {elapsed:.0f} s ({episodes / elapsed:.1f}/s)")
