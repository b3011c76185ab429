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
builds when it is missing.

Two comparisons, both printed, each like for like:
- cold: every side starts its container on the timed path. The peers' trial as above;
  ours with prestarting off (``docker_options["prestart"] = "off"`` before the first
  reset), so ``reset`` starts the container it plays in.
- warm: every side's container was started before the clock. The peers' trial less its
  start (terminal-bench: the tmux session and the first command; Harbor: the first
  ``exec``); ours with prestarting on (the default), its reset after the next container
  was prestarted during the pause.
Ours is also timed back to back after the rounds (prestarting on, no pause: the reset
waits for the container being prestarted), the cost when episodes are instant; it is not
taken in turns with the peers, so no ratio is drawn from it. Each round runs one
trial of every side, the order turning each round, with a pause after each trial so
that no side's background work (ours prestarting the next container; the peers'
``compose down``) runs during another's timing. Prints p50/p90 wall time and the p50 of
CPU time (the side's process and its children, ``resource.getrusage``; the peers report
theirs from their driver, and the engine's own CPU is on no side) and the ratios of
p50s. A peer whose image cannot be built is skipped with the reason; exits 0 with the
reason when the engine is missing. Removes everything it started: the peers' driver
containers and compose projects (names ``agentenvs-tbpeer-<pid>-*``), our envs'
containers (``close``), and its temp folder.

Usage: python benchmarks/peers/bench_terminal.py   (BENCH_REPEATS, default 10)
"""

from __future__ import annotations

import json
import math
import os
import resource
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


def cpu() -> float:
    """CPU time of this process and its finished children."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


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
            out["warm"] = out["total"] - out["start"]  # its container started before the clock
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
        ("cold: start + first command", "total"),
        ("warm: tmux session + first command", "warm"),
        ("compose down (after)", "stop"),
    ),
    "Harbor": (
        ("DockerEnvironment.start", "start"),
        ("first command (exec)", "first"),
        ("cold: start + first command", "total"),
        ("warm: first command", "warm"),
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
    envs: dict[str, gym.Env] = {}
    peers: list[Peer] = []
    try:
        compose = write_tb1_task(root / "tasks" / TASK)
        for name in ("warm", "cold"):
            envs[name] = gym.make(
                "agentenvs/TerminalBench-v0",
                runtime="docker",
                tasks_path=root / "tasks",
                offline=True,
                command_timeout=60,
            )
        # cold: no container started ahead; reset starts the one it plays in
        envs["cold"].unwrapped.docker_options["prestart"] = "off"
        options = {"task_id": TASK}
        for env in envs.values():
            env.reset(options=options)  # builds the task image once
        base = envs["warm"].unwrapped
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

        def ours(env: gym.Env) -> tuple[float, float]:
            c0, start = cpu(), time.perf_counter()
            env.reset(options=options)
            observation = env.step(COMMAND)[0]
            took, used = time.perf_counter() - start, cpu() - c0
            if MARKER not in observation:
                raise RuntimeError(f"ours: {COMMAND!r} did not show {MARKER}: {observation!r}")
            return took, used

        ours_t: dict[str, list[float]] = {"cold": [], "warm": [], "cold cpu": [], "warm cpu": []}
        for i in range(REPEATS + 1):  # the first round warms every side up
            sides = [*peers, "cold", "warm"]
            k = i % len(sides)
            for side in sides[k:] + sides[:k]:  # the order turns each round
                if isinstance(side, Peer):
                    side.trial(keep=i > 0)
                else:
                    took, used = ours(envs[side])
                    if i:
                        ours_t[side].append(took)
                        ours_t[f"{side} cpu"].append(used)
                time.sleep(SETTLE_S)
        ours_b2b = [ours(envs["warm"])[0] for _ in range(REPEATS)]
    finally:
        for peer in peers:
            peer.close()
        for env in envs.values():
            env.close()
        remove_started(prefix)
        shutil.rmtree(root, ignore_errors=True)  # the folder this run made

    print(
        f"task {TASK} (image {image}), first command {COMMAND!r}, {REPEATS} rounds, the "
        f"order turning each round; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'ms per trial':52} {'p50':>8} {'p90':>8} {'CPU p50':>8}")
    for peer in peers:
        for name, key in ROWS[peer.label]:
            values = peer.times[key]
            cpu_ms = f"{pct(peer.times['cpu'], 0.5):8.1f}" if key == "total" else ""
            print(
                f"{peer.label + ': ' + name:52} {pct(values, 0.5):8.1f} {pct(values, 0.9):8.1f} {cpu_ms}"
            )
    for name, values, used in (
        ("agentenvs: cold: reset (starts it) + first step", ours_t["cold"], ours_t["cold cpu"]),
        ("agentenvs: warm: reset (prestarted) + first step", ours_t["warm"], ours_t["warm cpu"]),
        ("agentenvs: back to back (prestart not done)", ours_b2b, None),
    ):
        cpu_ms = f"{pct(used, 0.5):8.1f}" if used else ""
        print(f"{name:52} {pct(values, 0.5):8.1f} {pct(values, 0.9):8.1f} {cpu_ms}")
    for peer in peers:
        cold, warm = pct(peer.times["total"], 0.5), pct(peer.times["warm"], 0.5)
        print(
            f"ratio ({peer.label} / ours), p50: cold {cold / pct(ours_t['cold'], 0.5):.1f}x, "
            f"warm {warm / pct(ours_t['warm'], 0.5):.1f}x; CPU, cold "
            f"{pct(peer.times['cpu'], 0.5) / pct(ours_t['cold cpu'], 0.5):.1f}x"
        )


if __name__ == "__main__":
    main()
