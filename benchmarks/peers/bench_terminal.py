"""Terminal tasks side by side: Terminal-Bench's harnesses vs ``agentenvs/TerminalBench-v0``.

The same task, the same image, the same first command (``ls /app``) on every side. The
task is written by this script in Terminal-Bench 1's layout (``task.yaml``, a
``Dockerfile`` on the offline Python 3.13 base, ``docker-compose.yaml`` as TB1 ships it
plus ``network_mode: none``, since containers here never get a network) and in Harbor's
(``task.toml`` naming the image as its ``docker_image``, ``environment/`` with the same
Dockerfile and a compose override ``network_mode: none``). Ours builds the image; both
peers start exactly that tag. The sides:
- terminal-bench (0.2.18, Terminal-Bench 1's harness), what it does to open a trial,
  through its own classes: ``Terminal.start`` = ``docker compose up -d`` via
  ``DockerComposeManager``, with ``--no-rebuild``, its fastest start;
  ``create_session`` = the agent's tmux session; the first command with
  ``send_keys(..., block=True)`` and ``capture_pane`` (``terminal_bench_peer.py``);
- Harbor (0.26.0, Terminal-Bench 2's harness): ``DockerEnvironment.start`` as its
  ``Trial`` calls it (prebuilt image, ``docker compose up --wait``), the first command
  with ``exec`` (``harbor_peer.py``);
- ours: ``gym.make("agentenvs/TerminalBench-v0", runtime="docker")``, ``reset`` + the
  first ``step``.
Each peer runs under Python 3.13 in ``agentenvs/peer-<package>``, a container on the
same engine (its socket mounted, ``--network none``), which ``build_peer_image.sh``
builds when it is missing. Trials alternate between the sides, with a pause after each
so that no side's background work (ours prestarts the next container while an agent
works; the peers' ``compose down``) runs during another's timing. Ours is also timed
back to back (no pause: the reset waits for its container), the cost when episodes are
instant. Prints p50/p90 of each side and the ratios. A peer whose image cannot be built
is skipped with the reason; exits 0 with the reason when the engine is missing.
Removes everything it started: the peers' driver containers and compose projects (names
``agentenvs-tbpeer-<pid>-*``), our env's containers (``close``), and its temp folder.

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
#: (label, package, version, driver)
PEERS = (
    ("terminal-bench", "terminal-bench", "0.2.18", "terminal_bench_peer.py"),
    ("Harbor", "harbor", "0.26.0", "harbor_peer.py"),
)
BASE = "agentenvs/tb-python:3.13"
TASK = "peer-list-app"
COMMAND = "ls /app"
MARKER = "prices.txt"
INSTRUCTION = "/app/prices.txt holds one price per line. Write their sum to /app/total.txt."
PRICES = "1.5\n2.25\n3\n"

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
  {instruction}
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
HARBOR_TOML = """\
version = "1.0"

[metadata]
difficulty = "easy"
category = "data-processing"
tags = ["benchmark"]

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 180.0

[environment]
docker_image = "{image}"
"""
# Harbor's own compose files give ``main``; the task's override keeps it off any network
HARBOR_COMPOSE = """\
services:
  main:
    network_mode: none
"""
SOLUTION = """\
#!/bin/bash
python3 -c 'print(sum(float(x) for x in open("/app/prices.txt")))' > /app/total.txt
"""


def write_tb1_task(folder: Path) -> Path:
    """The task folder in TB1's layout; returns its compose file."""
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(TASK_YAML.format(instruction=INSTRUCTION))
    (folder / "Dockerfile").write_text(DOCKERFILE)
    (folder / "docker-compose.yaml").write_text(COMPOSE)
    (folder / "prices.txt").write_text(PRICES)
    (folder / "run-tests.sh").write_text(RUN_TESTS)
    (folder / "solution.sh").write_text(SOLUTION)
    (folder / "tests").mkdir()
    (folder / "tests" / "test_outputs.py").write_text(TEST)
    return folder / "docker-compose.yaml"


def write_harbor_task(folder: Path, image: str) -> Path:
    """The same task in Harbor's layout, its ``docker_image`` the tag ours built."""
    for sub in ("environment", "tests", "solution"):
        (folder / sub).mkdir(parents=True)
    (folder / "task.toml").write_text(HARBOR_TOML.format(image=image))
    (folder / "instruction.md").write_text(INSTRUCTION + "\n")
    (folder / "environment" / "Dockerfile").write_text(DOCKERFILE)
    (folder / "environment" / "prices.txt").write_text(PRICES)
    (folder / "environment" / "docker-compose.yaml").write_text(HARBOR_COMPOSE)
    (folder / "tests" / "test.sh").write_text(RUN_TESTS.replace("$TEST_DIR", "/tests"))
    (folder / "tests" / "test_outputs.py").write_text(TEST)
    (folder / "solution" / "solve.sh").write_text(SOLUTION)
    return folder


def engine_socket() -> str | None:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    return host[len("unix://") :] if host.startswith("unix://") else None


def peer_image(package: str, version: str) -> tuple[str | None, str]:
    """Build the peer's image when missing (idempotent); (image or None, why not)."""
    image = f"agentenvs/peer-{package}:{version}"
    proc = subprocess.run(
        ["bash", str(HERE / "build_peer_image.sh"), package, version],
        env={**os.environ, "PYTHON": sys.executable, "AGENTENVS_PEER_IMAGE": image},
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        last = [line for line in proc.stderr.splitlines() if "is ignored" not in line][-5:]
        return None, f"building {image} failed: " + " | ".join(last)
    return image, ""


def pct(values: list[float], q: float) -> float:
    """The q-th quantile by nearest rank, in ms."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] * 1e3


class Peer:
    """A driver container: one trial per request, over its stdin/stdout."""

    def __init__(
        self, label: str, image: str, driver: str, args: list[str], root: Path, socket: str,
        prefix: str,
    ) -> None:  # fmt: skip
        self.label, self.prefix, self.count = label, prefix, 0
        self.times: dict[str, list[float]] = {}
        # the same paths inside as outside: the engine resolves bind mounts on this machine
        self.proc = subprocess.Popen(
            [
                "docker", "run", "-i", "--rm", "--network", "none",
                "--name", f"{prefix}{label.lower()}-driver",
                "--label", "agentenvs.bench=terminal-peer",
                # litellm (both harnesses import it) would try to fetch its price list
                "-e", "LITELLM_LOCAL_MODEL_COST_MAP=True",
                "-v", f"{socket}:/var/run/docker.sock",
                "-v", f"{root}:{root}", "-v", f"{HERE / driver}:/peer/driver.py:ro",
                image, "python3", "-u", "/peer/driver.py", *args,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.label}'s driver exited (rc {self.proc.wait()})")
        out = json.loads(line)
        if "error" in out:
            raise RuntimeError(f"{self.label} trial failed: {out['error']}")
        return out

    def trial(self, keep: bool) -> None:
        self.count += 1
        self.proc.stdin.write(f"trial {self.prefix}{self.label.lower()}-{self.count}\n")
        self.proc.stdin.flush()
        out = self._read()
        if MARKER not in out["screen"]:
            raise RuntimeError(
                f"{self.label}: {COMMAND!r} did not show {MARKER}: {out['screen']!r}"
            )
        if keep:
            for key, value in out.items():
                if isinstance(value, float):
                    self.times.setdefault(key, []).append(value)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()


def remove_started(prefix: str) -> None:
    """Remove the containers and networks named with this run's prefix (none when all
    went well: the peers' ``compose down`` and ``--rm`` remove theirs)."""
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


#: (row label, timing key) per peer, in the order printed
ROWS = {
    "terminal-bench": (
        ("compose up", "start"),
        ("tmux session", "session"),
        ("first command (send_keys, capture_pane)", "first"),
        ("start + first command", "total"),
        ("compose down (after)", "stop"),
    ),
    "Harbor": (
        ("DockerEnvironment.start", "start"),
        ("first command (exec)", "first"),
        ("start + first command", "total"),
        ("stop: compose down (after)", "stop"),
    ),
}


def main() -> None:
    try:
        from agentenvs.sandbox.docker import docker_available
    except ImportError as exc:
        print(f"terminal peers: skipped ({exc}; pip install 'agentenvs[docker]')")
        return
    ok, why = docker_available(BASE)
    if not ok:
        print(f"terminal peers: skipped (no Docker engine with {BASE}: {why})")
        return
    socket = engine_socket()
    if socket is None:
        print(
            "terminal peers: skipped (they need the engine's unix socket; DOCKER_HOST is not one)"
        )
        return
    images = {}
    for label, package, version, _ in PEERS:
        image, why = peer_image(package, version)
        if image is None:
            print(f"{label}: skipped ({why})")
        else:
            images[label] = image
    if not images:
        return

    prefix = f"agentenvs-tbpeer-{os.getpid()}-"
    root = Path(tempfile.mkdtemp(prefix="agentenvs-bench-tbpeer-"))
    env = None
    peers: list[Peer] = []
    try:
        compose = write_tb1_task(root / "tasks" / TASK)
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
        harbor_task = write_harbor_task(root / "harbor-tasks" / TASK, image)
        logs = root / "peer-logs"
        logs.mkdir()
        args = {
            "terminal-bench": [str(compose), image, str(logs), COMMAND],
            "Harbor": [str(harbor_task), str(logs), COMMAND],
        }
        for label, _, _, driver in PEERS:
            if label in images:
                peers.append(Peer(label, images[label], driver, args[label], root, socket, prefix))

        def ours() -> float:
            start = time.perf_counter()
            env.reset(options=options)
            observation = env.step(COMMAND)[0]
            took = time.perf_counter() - start
            if MARKER not in observation:
                raise RuntimeError(f"ours: {COMMAND!r} did not show {MARKER}: {observation!r}")
            return took

        ours_t: list[float] = []
        for i in range(REPEATS + 1):  # the first round warms every side up
            for peer in peers:
                peer.trial(keep=i > 0)
                time.sleep(SETTLE_S)
            took = ours()
            time.sleep(SETTLE_S)
            if i:
                ours_t.append(took)
        ours_cold = [ours() for _ in range(REPEATS)]
    finally:
        for peer in peers:
            peer.close()
        if env is not None:
            env.close()
        remove_started(prefix)
        shutil.rmtree(root, ignore_errors=True)  # the folder this run made

    print(
        f"task {TASK} (image {image}), first command {COMMAND!r}, {REPEATS} trials each, alternating"
    )
    print(f"{'ms per trial':58} {'p50':>8} {'p90':>8}")
    for peer in peers:
        for name, key in ROWS[peer.label]:
            values = peer.times[key]
            print(f"{peer.label + ': ' + name:58} {pct(values, 0.5):8.1f} {pct(values, 0.9):8.1f}")
    for name, values in (
        ("agentenvs: reset + first step", ours_t),
        ("agentenvs: same, back to back", ours_cold),
    ):
        print(f"{name:58} {pct(values, 0.5):8.1f} {pct(values, 0.9):8.1f}")
    for peer in peers:
        total = pct(peer.times["total"], 0.5)
        print(
            f"ratio ({peer.label} / ours), start + first command, p50: "
            f"{total / pct(ours_t, 0.5):.1f}x, back to back {total / pct(ours_cold, 0.5):.1f}x"
        )


if __name__ == "__main__":
    main()
