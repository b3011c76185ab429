"""Terminal tasks side by side: Terminal-Bench's own harness vs ``agentenvs/TerminalBench-v0``.

The same task (a folder this script writes in Terminal-Bench 1's layout: ``task.yaml``,
a ``Dockerfile`` on the offline Python 3.13 base, ``docker-compose.yaml`` as TB1 ships it
plus ``network_mode: none``, since containers here never get a network) and the same
image (ours builds it; the peer's compose file names that tag, so ``compose up`` starts
exactly that image), the same first command (``ls /app``) on both sides:
- peer: what the official harness does to open a trial, through its own classes
  (``terminal-bench`` 0.2.18: ``Terminal.start`` = ``docker compose up -d`` via
  ``DockerComposeManager``, with ``--no-rebuild``, its fastest start; ``create_session``
  = the agent's tmux session; the first command with ``send_keys(..., block=True)`` and
  ``capture_pane``), run under Python 3.13 in ``agentenvs/peer-terminal-bench``, a
  container on the same engine (its socket mounted, ``--network none``), which
  ``build_terminal_bench_image.sh`` builds when it is missing;
- ours: ``gym.make("agentenvs/TerminalBench-v0", runtime="docker")``, ``reset`` + the
  first ``step``.
Trials alternate between the sides, with a pause after each so that neither side's
background work (ours prestarts the next container while an agent works; the peer's
``compose down``) runs during the other's timing. Ours is also timed back to back (no
pause: the reset waits for its container), the cost when episodes are instant.
Prints p50/p90 of each side and the ratio. Exits 0 with the reason when the engine or
the peer image is not available. Removes everything it started: the peer's driver
container and its compose projects (names ``agentenvs-tbpeer-<pid>-*``), our env's
containers (``close``), and its temp folder.

Usage: python benchmarks/peers/bench_terminal.py   (BENCH_REPEATS, default 10)
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym

import agentenvs  # noqa: F401  (registers agentenvs/TerminalBench-v0)

REPEATS = int(os.environ.get("BENCH_REPEATS", 10))
SETTLE_S = 1.5
HERE = Path(__file__).resolve().parent
PEER_VERSION = "0.2.18"
PEER_IMAGE = os.environ.get(
    "AGENTENVS_PEER_TB_IMAGE", f"agentenvs/peer-terminal-bench:{PEER_VERSION}"
)
BASE = "agentenvs/tb-python:3.13"
TASK = "peer-list-app"
COMMAND = "ls /app"
MARKER = "prices.txt"

# the TB1 compose file, with the service kept off any network
COMPOSE = """\
services:
  client:
    build:
      dockerfile: Dockerfile
      network: none
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    network_mode: none
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
      - ${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}
"""
TASK_YAML = """\
instruction: |-
  /app/prices.txt holds one price per line. Write their sum to /app/total.txt.
author_name: agentenvs
author_email: agentenvs@example.com
difficulty: easy
category: data-processing
tags:
  - benchmark
parser_name: pytest
max_agent_timeout_sec: 180.0
max_test_timeout_sec: 60.0
run_tests_in_same_shell: false
"""
DOCKERFILE = f"""\
FROM {BASE}
WORKDIR /app
COPY prices.txt /app/prices.txt
"""
TEST = """\
from pathlib import Path


def test_total():
    prices = [float(x) for x in Path("/app/prices.txt").read_text().split()]
    assert float(Path("/app/total.txt").read_text()) == sum(prices)
"""
RUN_TESTS = """\
#!/bin/bash
python3 -m pytest $TEST_DIR/test_outputs.py -rA
"""
SOLUTION = """\
#!/bin/bash
python3 -c 'print(sum(float(x) for x in open("/app/prices.txt")))' > /app/total.txt
"""


def write_task(folder: Path) -> Path:
    """The task folder in TB1's layout; returns its compose file."""
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(TASK_YAML)
    (folder / "Dockerfile").write_text(DOCKERFILE)
    (folder / "docker-compose.yaml").write_text(COMPOSE)
    (folder / "prices.txt").write_text("1.5\n2.25\n3\n")
    (folder / "run-tests.sh").write_text(RUN_TESTS)
    (folder / "solution.sh").write_text(SOLUTION)
    (folder / "tests").mkdir()
    (folder / "tests" / "test_outputs.py").write_text(TEST)
    return folder / "docker-compose.yaml"


def engine_socket() -> str | None:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    return host[len("unix://") :] if host.startswith("unix://") else None


def peer_image() -> tuple[bool, str]:
    """Build the peer image when missing (idempotent); (ok, why not)."""
    proc = subprocess.run(
        ["bash", str(HERE / "build_terminal_bench_image.sh")],
        env={
            **os.environ,
            "PYTHON": sys.executable,
            "AGENTENVS_PEER_TB_IMAGE": PEER_IMAGE,
            "TERMINAL_BENCH_VERSION": PEER_VERSION,
        },
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        last = [line for line in proc.stderr.splitlines() if "is ignored" not in line][-5:]
        return False, "building it failed: " + " | ".join(last)
    return True, ""


def pct(values: list[float], q: float) -> float:
    """The q-th quantile by nearest rank, in ms."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] * 1e3


class Peer:
    """The driver container: one trial per request, over its stdin/stdout."""

    def __init__(self, root: Path, compose: Path, image: str, socket: str, prefix: str) -> None:
        logs = root / "peer-logs"
        logs.mkdir()
        self.prefix = prefix
        self.count = 0
        driver = HERE / "terminal_bench_peer.py"
        # the same paths inside as outside: the engine resolves the compose file's
        # bind mounts on this machine
        self.proc = subprocess.Popen(
            [
                "docker", "run", "-i", "--rm", "--network", "none",
                "--name", f"{prefix}driver", "--label", "agentenvs.bench=terminal-peer",
                # litellm (imported by terminal_bench) would try to fetch its price list
                "-e", "LITELLM_LOCAL_MODEL_COST_MAP=True",
                "-v", f"{socket}:/var/run/docker.sock",
                "-v", f"{root}:{root}", "-v", f"{driver}:/peer/driver.py:ro",
                PEER_IMAGE, "python3", "-u", "/peer/driver.py",
                str(compose), image, str(logs), COMMAND,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the peer's driver exited (rc {self.proc.wait()})")
        out = json.loads(line)
        if "error" in out:
            raise RuntimeError(f"peer trial failed: {out['error']}")
        return out

    def trial(self) -> dict:
        self.count += 1
        self.proc.stdin.write(f"trial {self.prefix}{self.count}\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()


def remove_started(prefix: str) -> None:
    """Remove the containers and networks named with this run's prefix (none when all
    went well: the peer's ``compose down`` and ``--rm`` remove theirs)."""
    ids = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"name=^/{prefix}"],
        capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True)
    nets = subprocess.run(
        ["docker", "network", "ls", "-q", "--filter", f"name=^{prefix}"],
        capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    if nets:
        subprocess.run(["docker", "network", "rm", *nets], capture_output=True)


def main() -> None:
    try:
        from agentenvs.sandbox.docker import docker_available
    except ImportError as exc:
        print(f"terminal-bench: skipped ({exc}; pip install 'agentenvs[docker]')")
        return
    ok, why = docker_available(BASE)
    if not ok:
        print(f"terminal-bench: skipped (no Docker engine with {BASE}: {why})")
        return
    socket = engine_socket()
    if socket is None:
        print(
            "terminal-bench: skipped (the peer needs the engine's unix socket; DOCKER_HOST is not one)"
        )
        return
    ok, why = peer_image()
    if not ok:
        print(f"terminal-bench: skipped (its image {PEER_IMAGE}: {why})")
        return

    prefix = f"agentenvs-tbpeer-{os.getpid()}-"
    root = Path(tempfile.mkdtemp(prefix="agentenvs-bench-tbpeer-"))
    env = peer = None
    try:
        compose = write_task(root / "tasks" / TASK)
        env = gym.make(
            "agentenvs/TerminalBench-v0",
            runtime="docker",
            tasks_path=root / "tasks",
            offline=True,
            command_timeout=60,
        )
        options = {"task_id": TASK}
        env.reset(options=options)  # builds the task image once
        base = env.unwrapped
        image = base.runtime().image(base.tasks[TASK])

        def ours() -> float:
            start = time.perf_counter()
            env.reset(options=options)
            observation = env.step(COMMAND)[0]
            took = time.perf_counter() - start
            if MARKER not in observation:
                raise RuntimeError(f"ours: {COMMAND!r} did not show {MARKER}: {observation!r}")
            return took

        peer = Peer(root, compose, image, socket, prefix)
        peer_t: dict[str, list[float]] = {
            "start": [],
            "session": [],
            "first": [],
            "total": [],
            "stop": [],
        }
        ours_t: list[float] = []
        for i in range(REPEATS + 1):  # the first round warms both sides up
            out = peer.trial()
            if MARKER not in out["screen"]:
                raise RuntimeError(f"peer: {COMMAND!r} did not show {MARKER}: {out['screen']!r}")
            time.sleep(SETTLE_S)
            took = ours()
            time.sleep(SETTLE_S)
            if i:
                for key, values in peer_t.items():
                    values.append(out[key])
                ours_t.append(took)
        ours_cold = [ours() for _ in range(REPEATS)]
    finally:
        if peer is not None:
            peer.close()
        if env is not None:
            env.close()
        remove_started(prefix)
        shutil.rmtree(root, ignore_errors=True)  # the folder this run made

    print(
        f"task {TASK} (image {image}), first command {COMMAND!r}, {REPEATS} trials each, alternating"
    )
    print(f"{'ms per trial':44} {'p50':>8} {'p90':>8}")
    rows = [
        ("terminal-bench: compose up", peer_t["start"]),
        ("terminal-bench: tmux session", peer_t["session"]),
        ("terminal-bench: first command", peer_t["first"]),
        ("terminal-bench: start + first command", peer_t["total"]),
        ("terminal-bench: compose down (after)", peer_t["stop"]),
        ("agentenvs: reset + first step", ours_t),
        ("agentenvs: same, back to back", ours_cold),
    ]
    for name, values in rows:
        print(f"{name:44} {pct(values, 0.5):8.1f} {pct(values, 0.9):8.1f}")
    peer_p50 = pct(peer_t["total"], 0.5)
    print(
        f"ratio (terminal-bench / ours), p50: {peer_p50 / pct(ours_t, 0.5):.1f}x, "
        f"back to back {peer_p50 / pct(ours_cold, 0.5):.1f}x"
    )


if __name__ == "__main__":
    main()
