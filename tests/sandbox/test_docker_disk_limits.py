"""What a Docker container of the suite may take from its host: disk, file size, pids,
memory, checked from the host side.

Each bomb goes through ``gym.make("agentenvs/TerminalBench-v0", runtime="docker")`` and
``step``, under small limits (:data:`LIMITS`). Every disk bomb writes at most
``CAP + SLACK`` bytes by construction (files of at most ``Limits.max_file_mb``, RLIMIT_FSIZE,
a known number of them), so its footprint is bounded whatever the machine's speed, and it
passes the cap at the latest when its command ends (where the watch measures at once).
The assertions are on the outcome: the step returns an observation and
``info["sandbox_lost"]`` naming the disk cap and the figure (never an exception), the host
gets its disk back, the next reset works in a clean container. ``allocated`` (the walk
that measures) is also checked alone on host temp dirs: sparse files, hard links,
symlinks out, deep trees.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the envs
from agentenvs.sandbox._docker_disk import MAX_DEPTH, allocated
from agentenvs.sandbox.base import Limits

FIXTURES = Path(__file__).parents[1] / "envs" / "terminal_fixtures"
MB = 1 << 20
#: small caps, so that every bomb stays far below the 1.5 GB a test may cost
LIMITS = Limits(
    cpu_seconds=3600,
    memory_mb=256,
    max_processes=64,
    max_file_mb=64,
    max_open_files=1024,
    max_output_bytes=1 << 20,
    disk_mb=256,
    shm_mb=32,
)
CAP = LIMITS.disk_mb * MB
#: what the disk bombs write past the cap at most (one file of max_file_mb more)
SLACK = LIMITS.max_file_mb * MB
#: the host's free disk may move by this much for other reasons while a test runs
HOST_NOISE = 192 * MB
#: task containers' memory beyond Limits.memory_mb, and pids beyond max_processes
#: (task_container.MEMORY_SLACK_MB, PIDS_SLACK)
MEMORY_LIMIT = (LIMITS.memory_mb + 256) * MB
PIDS_LIMIT = LIMITS.max_processes + 32

#: each writes CAP + SLACK = 320 MiB in all (5 files of 64 MiB, or as many small ones),
#: but "gigabyte": 16 files of 64 MiB, which the watch stops once past the cap
DISK_BOMBS = {
    "gigabyte": "for i in $(seq 16); do yes > /app/g$i; done",
    # one command, several files, each cut by RLIMIT_FSIZE (SIGXFSZ ends `yes`)
    "yes": "for i in 1 2 3 4 5; do yes > /app/y$i; done",
    "dd": "for i in 1 2 3 4 5; do dd if=/dev/zero of=/app/d$i bs=1M count=64 status=none; done",
    # blocks allocated without a byte written
    "fallocate": "for i in 1 2 3 4 5; do fallocate -l 64M /app/f$i; done",
    # 20,480 files of 16 KiB from one process
    "small-files": "mkdir /app/s && head -c 320M /dev/zero | split -b 16k -a 5 - /app/s/x",
    # outside /app, and into a file the engine bind-mounts from the host (/etc/hosts)
    "outside-app": "yes > /etc/hosts; for i in 1 2 3 4; do yes > /var/tmp/o$i; done",
    # sparse files cost nothing, the data written into them does
    "sparse-then-filled": (
        "for i in 1 2 3 4 5; do truncate -s 64M /app/p$i; done; "
        "for i in 1 2 3 4 5; do dd if=/dev/zero of=/app/p$i bs=1M count=64 conv=notrunc "
        "status=none; done"
    ),
}

docker = pytest.mark.docker("agentenvs/terminal:latest")


@pytest.fixture(scope="module")
def envs() -> Iterator[dict[str, Any]]:
    """One env per grading, made when first asked for."""
    made: dict[str, Any] = {}
    yield made
    for one in made.values():
        one.close()


def _env(envs: dict[str, Any], grading: str) -> Any:
    if grading not in envs:
        envs[grading] = gym.make(
            "agentenvs/TerminalBench-v0",
            tasks_path=FIXTURES,
            runtime="docker",
            limits=LIMITS,
            command_timeout=60,
            max_turns=20,
            grading=grading,
        )
    return envs[grading]


@pytest.fixture
def env(envs: dict[str, Any]) -> Any:
    return _env(envs, "official")


@pytest.fixture(scope="module")
def api() -> Iterator[Any]:
    import docker

    client = docker.from_env()
    yield client.api
    client.close()


def _container(env: Any) -> str:
    """The id of the episode's container (its hostname is its short id)."""
    obs, *_ = env.step("cat /etc/hostname")
    return obs.splitlines()[0].strip()


def _free(api: Any) -> int:
    return shutil.disk_usage(api.info()["DockerRootDir"]).free


def _upper(api: Any, container: str) -> str:
    return api.inspect_container(container)["GraphDriver"]["Data"]["UpperDir"]


def _du(path: str) -> int:
    """Bytes allocated below ``path`` as the host's du counts them (0: gone)."""
    done = subprocess.run(["du", "-s", "-B1", "-x", path], capture_output=True, text=True)
    return int(done.stdout.split()[0]) if done.returncode == 0 and done.stdout else 0


def _gone(api: Any, container: str, timeout: float = 60) -> bool:
    import docker

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            api.inspect_container(container)
        except docker.errors.NotFound:
            return True
        time.sleep(0.2)
    return False


class _LowestFree:
    """The host's lowest free disk seen while the block runs (sampled: a record, never
    asserted on, since a sample may miss the peak)."""

    def __init__(self, api: Any) -> None:
        self.root = api.info()["DockerRootDir"]
        self.free = shutil.disk_usage(self.root).free
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.05):
            self.free = min(self.free, shutil.disk_usage(self.root).free)

    def __enter__(self) -> _LowestFree:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def _clean_episode(env: Any) -> None:
    """The next reset gives a working episode in a fresh container."""
    env.reset(options={"task_id": "tb1-greeting"})
    obs, reward, term, _, info = env.step("ls /app /var/tmp; echo ok > /app/probe; cat /app/probe")
    assert "greeting.txt" in obs and "ok" in obs and "[exit status: 0]" in obs, obs
    assert not term and "sandbox_lost" not in info


@docker
@pytest.mark.parametrize("bomb", sorted(DISK_BOMBS))
def test_disk_bomb_ends_the_episode_at_the_cap(env: Any, api: Any, bomb: str) -> None:
    env.reset(options={"task_id": "tb1-greeting"})
    box = _container(env)
    upper = _upper(api, box)
    free_before = _free(api)
    with _LowestFree(api) as lowest:
        obs, reward, term, trunc, info = env.step(DISK_BOMBS[bomb])
    # the agent's outcome: said in the observation and the info, the episode over, no 1
    assert "disk cap" in obs and f"cap of {LIMITS.disk_mb} MiB" in obs, obs
    assert info["sandbox_lost"].startswith("disk cap"), info
    assert term and reward == 0.0 and not info["success"]
    # the container was stopped with what it held, then removed: the host has it back
    held = _du(upper)
    bound = 1 << 30 if bomb == "gigabyte" else CAP + SLACK
    assert held <= bound + 8 * MB, held  # the bomb's own bound (dirs' blocks aside)
    assert _gone(api, box)
    free_after = _free(api)
    print(  # a figure for the record, sampled: it may miss the true peak
        f"\n{bomb}: {info['sandbox_lost']}; host lost {(free_before - lowest.free) / MB:.0f}"
        f" MiB at the lowest sampled during the step, {(free_before - free_after) / MB:+.0f}"
        " MiB after the container's removal"
    )
    assert free_after >= free_before - HOST_NOISE
    _clean_episode(env)


@docker
def test_a_command_under_the_cap_goes_on(env: Any, api: Any) -> None:
    """Sparse files cost what they hold: 640 MiB of them, nearly empty, and 60 MiB of data
    are not a loss."""
    env.reset(options={"task_id": "tb1-greeting"})
    box = _container(env)
    obs, reward, term, _, info = env.step(
        "for i in $(seq 10); do truncate -s 64M /app/sp$i; done; "
        "head -c 60M /dev/zero > /app/real; du -sm /app; ls -l /app/sp1"
    )
    assert not term and "sandbox_lost" not in info and "[exit status: 0]" in obs, obs
    assert "67108864" in obs  # each sparse file has its apparent size
    held = _du(_upper(api, box))
    assert 60 * MB <= held <= 80 * MB, held


@docker
def test_a_file_stops_at_the_file_size_limit(env: Any, api: Any) -> None:
    env.reset(options={"task_id": "tb1-greeting"})
    box = _container(env)
    obs, reward, term, _, info = env.step(
        "ulimit -f; dd if=/dev/zero of=/app/big bs=1M count=100 status=none; "
        "echo status=$?; truncate -s 1G /app/sparse; echo truncate=$?"
    )
    assert f"{LIMITS.max_file_mb * 1024}\n" in obs, obs  # ulimit -f: 1 KiB blocks
    assert "File size limit exceeded" in obs or "File too large" in obs, obs
    assert "truncate=1" in obs  # no apparent size past the limit either
    assert not term and "sandbox_lost" not in info
    big = Path(_upper(api, box)) / "app" / "big"
    assert big.stat().st_size == LIMITS.max_file_mb * MB
    assert (Path(_upper(api, box)) / "app" / "sparse").stat().st_size == 0


@docker
def test_the_log_of_the_container_is_capped(env: Any, api: Any) -> None:
    """What reaches the container's pid 1 output lands in the engine's log on the host:
    kept to 1 MiB. The bomb sends 300 MiB there (lines of 8 KB)."""
    env.reset(options={"task_id": "tb1-greeting"})
    box = _container(env)
    obs, *_ = env.step(
        "yes $(head -c 8000 /dev/zero | tr '\\0' y) | head -c 300M > /proc/1/fd/1; echo sent=$?"
    )
    assert "sent=0" in obs, obs
    log = api.inspect_container(box)["LogPath"]
    assert os.stat(log).st_blocks * 512 <= 2 * MB


@docker
@pytest.mark.parametrize("grading", ["official", "safe"])
def test_a_background_writer_is_caught_by_the_grading(
    envs: dict[str, Any], api: Any, grading: str
) -> None:
    """A job that fills the disk between steps: the watch stops the container meanwhile,
    or the grading measures the end state; either way the agent's loss, said so."""
    env = _env(envs, grading)
    env.reset(options={"task_id": "tb1-greeting"})
    box = _container(env)
    upper = Path(_upper(api, box))
    obs, _, term, _, _ = env.step(
        "(for i in 1 2 3 4 5; do yes > /var/tmp/b$i; done; touch /var/tmp/done) "
        ">/dev/null 2>&1 & echo started"
    )
    assert "started" in obs and not term
    end = time.monotonic() + 60
    while time.monotonic() < end and not (upper / "var" / "tmp" / "done").exists():
        if not api.inspect_container(box)["State"]["Running"]:
            break  # the watch stopped it
        time.sleep(0.2)
    obs, reward, term, _, info = env.step("submit")
    assert term and reward == 0.0 and not info["success"]
    assert "disk cap" in obs and info["sandbox_lost"].startswith("disk cap"), (obs, info)
    assert _gone(api, box)
    _clean_episode(env)


@docker
def test_a_fork_bomb_stops_at_the_pids_limit(env: Any, api: Any) -> None:
    env.reset(options={"task_id": "tb1-greeting"})
    box = _container(env)
    assert api.inspect_container(box)["HostConfig"]["PidsLimit"] == PIDS_LIMIT
    # children that hold their pids for a while, forked until the kernel refuses
    obs, reward, term, _, info = env.step(
        "python3 -c '\nimport os, time\nn = 0\nwhile n < 500:\n    try:\n"
        "        pid = os.fork()\n    except OSError as e:\n        print(\"refused:\", e)\n"
        "        break\n    if pid == 0:\n        time.sleep(15)\n        os._exit(0)\n"
        "    n += 1\nprint(\"forked\", n)\n'"
    )
    assert "refused: [Errno 11] Resource temporarily unavailable" in obs, obs
    stats = api.stats(box, stream=False)  # the children still hold their pids
    assert PIDS_LIMIT - 16 <= stats["pids_stats"]["current"] <= PIDS_LIMIT, stats["pids_stats"]
    forked = int(obs.split("forked ")[1].split()[0])
    assert forked < PIDS_LIMIT, obs
    _clean_episode(env)


#: 12 holders of 64 MiB each (768 MiB and an interpreter each) in a container of 512 MiB:
#: each holds its memory until every one has either said it holds it or died, so they
#: hold at once however slow the machine, and some must die
MEMORY_BOMB = """rm -f /tmp/r* /tmp/e* /tmp/go
for i in $(seq 12); do
  (python3 -c "import os, time
b = b'a' * (64 << 20)
open('/tmp/r$i', 'w').close()
while not os.path.exists('/tmp/go'):
    time.sleep(0.05)"; echo $? > /tmp/e$i) &
done
n=0
while [ $n -lt 12 ]; do
  n=0
  for i in $(seq 12); do
    if [ -e /tmp/r$i ] || [ -e /tmp/e$i ]; then n=$((n + 1)); fi
  done
  sleep 0.1
done
touch /tmp/go
wait
echo "killed $(grep -c -v '^0$' /tmp/e* | grep -c -v ':0$')"
"""


@docker
def test_a_memory_bomb_across_processes_stays_under_the_limit(env: Any, api: Any) -> None:
    """Memory held by several processes at once past the container's 512 MiB (no swap):
    the kernel's OOM killer ends some of them; the cgroup's peak stays within the limit."""
    env.reset(options={"task_id": "tb1-greeting"})
    box = _container(env)
    config = api.inspect_container(box)["HostConfig"]
    assert config["Memory"] == MEMORY_LIMIT and config["MemorySwap"] == MEMORY_LIMIT
    obs, reward, term, _, info = env.step(MEMORY_BOMB)
    stats = api.stats(box, stream=False)["memory_stats"]
    peak = stats.get("max_usage") or stats.get("usage")
    assert 0 < peak <= MEMORY_LIMIT, stats
    killed = [int(line.split()[1]) for line in obs.splitlines() if line.startswith("killed ")]
    assert killed and killed[0] >= 1, (obs, stats)
    print(f"\nmemory: limit {MEMORY_LIMIT / MB:.0f} MiB, cgroup peak {peak / MB:.0f} MiB, "
          f"{killed[0]} of 12 holders killed")
    _clean_episode(env)


@docker
def test_every_tmpfs_of_a_task_container_has_a_size(env: Any, api: Any) -> None:
    env.reset(options={"task_id": "tb1-greeting"})
    box = _container(env)
    config = api.inspect_container(box)["HostConfig"]
    assert config["ShmSize"] == LIMITS.shm_mb * MB
    assert all("size=" in opts for opts in (config.get("Tmpfs") or {}).values())
    assert config["LogConfig"]["Config"]["max-size"] == "1m"
    assert {u["Name"]: u["Hard"] for u in config["Ulimits"]}["fsize"] == LIMITS.max_file_mb * MB


# ---------------------------------------------------------------- the walk alone


def test_the_walk_counts_allocated_blocks_once_and_follows_nothing(tmp_path: Path) -> None:
    root = tmp_path / "upper"
    (root / "d").mkdir(parents=True)
    (root / "d" / "data").write_bytes(b"x" * (4 * MB))
    os.link(root / "d" / "data", root / "d" / "again")  # the same blocks: counted once
    with open(root / "sparse", "wb") as f:  # 1 GiB apparent, nearly nothing allocated
        f.truncate(1 << 30)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"y" * (8 * MB))
    (root / "link").symlink_to(outside)  # never followed
    use = allocated(str(root))
    assert 4 * MB <= use.bytes <= 4 * MB + 64 * 1024, use
    assert use.entries == 5 and not use.too_deep
    assert allocated(str(root), stop_bytes=MB).bytes > MB  # stops once past


def test_the_walk_refuses_a_tree_deeper_than_it_holds(tmp_path: Path) -> None:
    here = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(MAX_DEPTH + 2):  # relative to the last: no path grows long
            os.mkdir("d", dir_fd=here)
            nxt = os.open("d", os.O_RDONLY, dir_fd=here)
            os.close(here)
            here = nxt
    finally:
        os.close(here)
    assert allocated(str(tmp_path)).too_deep
    shutil.rmtree(tmp_path / "d")


# ---------------------------------------------------------------- the generic sandbox


@pytest.mark.docker
def test_a_sandbox_container_writes_nothing_onto_the_host() -> None:
    """DeepCoder's sandbox (``DockerSandbox``): a read-only root, sized tmpfs only, files
    held to max_file_mb; its writable layer on the host stays empty whatever it runs."""
    import docker

    from agentenvs.sandbox.docker import DockerSandbox

    limits = Limits(memory_mb=256, max_file_mb=16, disk_mb=64, shm_mb=16)
    client = docker.from_env()
    box = DockerSandbox(limits, pool=False)
    try:
        info = client.api.inspect_container(box.container_id)
        config = info["HostConfig"]
        assert config["ReadonlyRootfs"] and config["Memory"] == config["MemorySwap"]
        assert set(config["Tmpfs"]) == {"/work", "/tmp"}
        assert all("size=" in opts for opts in config["Tmpfs"].values())
        assert config["ShmSize"] == 16 * MB and config["LogConfig"]["Config"]["max-size"]
        r = box.run(
            "for d in /work /tmp /dev/shm; do for i in 1 2 3 4 5 6; do "
            "head -c 20M /dev/zero > $d/f$i 2>/dev/null; done; done; "
            "ls -l /work/f1 | cut -d' ' -f5; du -sm /work /tmp /dev/shm; "
            "for p in /x /etc/hosts /var/tmp/x; do echo x >> $p || echo refused; done"
        )
        lines = r.stdout.splitlines()
        assert lines[0] == str(16 * MB), r  # RLIMIT_FSIZE
        assert r.stdout.count("refused") == 3, r
        sizes = {ln.split("\t")[1]: int(ln.split("\t")[0]) for ln in lines if "\t" in ln}
        assert sizes["/work"] <= 64 and sizes["/tmp"] <= 64 and sizes["/dev/shm"] <= 16, r
        assert _du(info["GraphDriver"]["Data"]["UpperDir"]) <= 64 * 1024
    finally:
        box.close()
        client.close()
