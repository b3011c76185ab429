"""Multi-container Terminal-Bench tasks on the docker runtime: the compose file's other
services run as sidecars in the task container's network (reachable by name, with no
bridge and offline), are removed with it, and a sidecar killed from outside is a Fault;
what cannot run (an image that cannot be had, an unsupported key, the local runtime)
is refused with the reason."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenvs.core.errors import Fault, TaskError
from agentenvs.envs.terminal.data import load_task
from agentenvs.envs.terminal.env import TerminalBenchEnv
from agentenvs.envs.terminal.runtime_docker import RUNTIME_LABEL

REAL = Path(__file__).parent / "terminal_real_fixtures"

KV_SERVER = """\
import os
import socketserver

DATA = {}


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            words = raw.decode().split()
            if words[:1] == ["SET"] and len(words) == 3:
                DATA[words[1]] = words[2]
                self.wfile.write(b"OK\\n")
            elif words[:1] == ["GET"] and len(words) == 2:
                self.wfile.write(DATA.get(words[1], "").encode() + b"\\n")
            elif words[:1] == ["SHUTDOWN"]:
                self.wfile.write(b"BYE\\n")
                self.wfile.flush()
                os._exit(0)
            self.wfile.flush()


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


Server(("0.0.0.0", 6390), Handler).serve_forever()
"""

TEST_OUTPUTS = """\
import socket
import time


def ask(line):
    for _ in range(40):
        try:
            with socket.create_connection(("kv", 6390), timeout=10) as s:
                s.sendall(line.encode() + b"\\n")
                return s.makefile().readline().strip()
        except OSError:
            time.sleep(0.5)
    raise AssertionError("kv:6390 does not answer")


def test_greeting_is_stored():
    assert ask("GET greeting") == "hello"
"""

# retries until the sidecar listens: no assumption on how fast it starts
SOLUTION = """\
#!/bin/bash
for i in $(seq 240); do
  if exec 3<>/dev/tcp/kv/6390; then
    printf 'SET greeting hello\\n' >&3
    read -r reply <&3
    echo "kv: $reply"
    exit 0
  fi 2>/dev/null
  sleep 0.5
done
exit 1
"""

COMPOSE = """\
services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
  kv:
    build:
      context: ./kv
    ports: ["6390"]
    restart: always
    environment:
      KV_PORT: "6390"
"""


def write_task(root: Path, name: str = "tb1-kv", compose: str = COMPOSE) -> Path:
    """A TB1 task whose compose file has ``client`` and a built ``kv`` service."""
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "kv").mkdir()
    (task / "task.yaml").write_text(
        "instruction: Store the key greeting with the value hello in the key-value server "
        "at kv:6390 (send the line `SET greeting hello`).\n"
        "difficulty: easy\ntags: [fixture]\nmax_test_timeout_sec: 120\n"
    )
    (task / "Dockerfile").write_text("FROM python:3.13-slim\nWORKDIR /app\n")
    (task / "docker-compose.yaml").write_text(compose)
    (task / "kv" / "Dockerfile").write_text(
        'FROM python:3.13-slim\nCOPY kv.py /kv.py\nCMD ["python3", "/kv.py"]\n'
    )
    (task / "kv" / "kv.py").write_text(KV_SERVER)
    (task / "run-tests.sh").write_text(
        '#!/bin/bash\npython3 -m pytest -p no:cacheprovider "$TEST_DIR/test_outputs.py" -rA\n'
    )
    (task / "tests" / "test_outputs.py").write_text(TEST_OUTPUTS)
    (task / "solution.sh").write_text(SOLUTION)
    return task


# ------------------------------------------------------------------ loading (no engine)
def test_services_are_parsed_in_dependency_order(tmp_path: Path) -> None:
    compose = COMPOSE.replace("    ports:", "    depends_on: [cache]\n    ports:") + (
        "  cache:\n"
        "    image: redis:7\n"
        "    command: redis-server --port 6391\n"
        '    entrypoint: ["docker-entrypoint.sh"]\n'
        "    environment: [A=1, B=two]\n"
        "    working_dir: /data\n"
        '    expose: ["6391"]\n'
        '    healthcheck: {test: ["CMD", "true"]}\n'
        "  web:\n"
        "    image: python:3.13-slim\n"
        "    depends_on: [kv, cache]\n"
    )
    task = load_task(write_task(tmp_path, compose=compose))
    assert [s.name for s in task.services] == ["cache", "kv", "web"]
    cache, kv, _ = task.services
    assert cache.image == "redis:7" and cache.command == "redis-server --port 6391"
    assert cache.entrypoint == ("docker-entrypoint.sh",)
    assert cache.environment == (("A", "1"), ("B", "two")) and cache.working_dir == "/data"
    assert kv.image is None and kv.dockerfile == (tmp_path / "tb1-kv" / "kv" / "Dockerfile")
    assert kv.environment == (("KV_PORT", "6390"),)
    assert task.problems == ()
    assert task.local_problem == "a second container (cache, kv, web)"


@pytest.mark.parametrize("key", ["volumes", "networks", "privileged", "cap_add"])
def test_a_key_that_changes_what_runs_is_refused_naming_it(tmp_path: Path, key: str) -> None:
    compose = COMPOSE + f"    {key}: [x]\n"
    task = load_task(write_task(tmp_path, compose=compose))
    assert task.services == ()
    assert len(task.problems) == 1 and f"'kv' uses {key!r}" in task.problems[0]


def test_ill_typed_services_raise_naming_file_and_field(tmp_path: Path) -> None:
    task_dir = write_task(tmp_path, compose=COMPOSE.replace('KV_PORT: "6390"', "KV_PORT: [1]"))
    with pytest.raises(TaskError, match=r"services\.kv\.environment"):
        load_task(task_dir)
    (task_dir / "docker-compose.yaml").write_text("services:\n  kv:\n    image: [1]\n")
    with pytest.raises(TaskError, match=r"docker-compose\.yaml.*services\.kv\.image"):
        load_task(task_dir)
    (task_dir / "docker-compose.yaml").write_text("services: [\n")
    with pytest.raises(TaskError, match="not valid YAML"):
        load_task(task_dir)


def test_the_local_runtime_refuses_with_the_reason(tmp_path: Path) -> None:
    write_task(tmp_path)
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="local")
    try:
        assert env.unsupported_tasks["tb1-kv"] == (
            "needs the docker runtime: a second container (kv)"
        )
    finally:
        env.close()


# ------------------------------------------------------------------ on the engine
def _containers(label: str) -> list[str]:
    import docker

    client = docker.from_env()
    try:
        return [c["Id"] for c in client.api.containers(all=True, filters={"label": label})]
    finally:
        client.close()


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("terminal-services")
    write_task(root)
    write_task(root, "tb1-volumes", COMPOSE + "    volumes: [./data:/data]\n")
    shutil.copytree(REAL / "tb1-two-containers", root / "tb1-two-containers")
    return root


@pytest.fixture
def env(tasks: Path) -> Iterator[TerminalBenchEnv]:
    env = TerminalBenchEnv(
        tasks_path=tasks, runtime="docker", offline=True, command_timeout=120, max_turns=4
    )
    yield env
    env.close()


@pytest.mark.docker("agentenvs/tb-python:3.13")
def test_check_tasks_accepts_it_and_refuses_what_cannot_run(env: TerminalBenchEnv) -> None:
    why = env.check_tasks()
    assert "tb1-kv" not in why and "tb1-kv" in env.task_ids
    assert "second container (redis)" in why["tb1-two-containers"]
    assert "'redis:7' is not on this machine" in why["tb1-two-containers"]
    assert "'kv' uses 'volumes'" in why["tb1-volumes"]
    with pytest.raises(TaskError, match="redis:7"):
        env.reset(options={"task_id": "tb1-two-containers"})


@pytest.mark.docker("agentenvs/tb-python:3.13")
def test_the_image_need_of_a_service_is_found_by_a_build_and_at_reset(tasks: Path) -> None:
    env = TerminalBenchEnv(tasks_path=tasks, runtime="docker", offline=True)
    try:
        with pytest.raises(TaskError, match=r"second container \(redis\).*'redis:7'"):
            env.reset(options={"task_id": "tb1-two-containers"})
        assert "redis:7" in env.check_tasks(build=True)["tb1-two-containers"]
    finally:
        env.close()


@pytest.mark.docker("agentenvs/tb-python:3.13")
def test_the_solution_passes_an_empty_episode_fails_and_nothing_is_left(
    env: TerminalBenchEnv,
) -> None:
    env.reset(options={"task_id": "tb1-kv"})
    label = f"{RUNTIME_LABEL}={env.runtime().token}"
    obs, reward, term, _, info = env.step("submit")
    assert term and reward == 0.0 and not info["success"], obs
    assert info["services"] == {"kv": "running"}
    env.reset(options={"task_id": "tb1-kv"})
    obs, _, _, _, _ = env.step(env.oracle_action())
    assert "kv: OK" in obs
    obs, reward, term, _, info = env.step("submit")
    assert term and reward == 1.0 and info["success"], env._test_output[-3000:]
    assert info["services"] == {"kv": "running"}
    assert _containers(label)
    env.close()
    assert _containers(label) == []


@pytest.mark.docker("agentenvs/tb-python:3.13")
def test_a_service_the_agent_shut_down_is_reported_and_scored(env: TerminalBenchEnv) -> None:
    env.reset(options={"task_id": "tb1-kv"})
    env.step(
        "for i in $(seq 240); do (exec 3<>/dev/tcp/kv/6390) 2>/dev/null && break; sleep 0.5; done"
    )
    env.step("exec 3<>/dev/tcp/kv/6390; printf 'SHUTDOWN\\n' >&3; read -r r <&3; echo $r")
    obs, reward, term, _, info = env.step("submit")
    assert term and reward == 0.0 and not info["success"], obs
    assert info["services"] == {"kv": "exited (code 0)"}


@pytest.mark.docker("agentenvs/tb-python:3.13")
def test_a_sidecar_killed_from_outside_is_a_fault(env: TerminalBenchEnv) -> None:
    import docker

    env.reset(options={"task_id": "tb1-kv"})
    env.step(env.oracle_action())
    box = env.runtime()._current
    assert box is not None and [s.service.name for s in box.sidecars] == ["kv"]
    sidecar = box.sidecars[0].id
    client = docker.from_env()
    try:
        client.api.kill(sidecar)
    finally:
        client.close()
    with pytest.raises(Fault) as caught:
        env.step("submit")
    assert caught.value.kind == "container" and caught.value.attribution == "infrastructure"
    assert "'kv'" in str(caught.value) and "kill" in caught.value.evidence
    # the next episode starts afresh and passes
    env.reset(options={"task_id": "tb1-kv"})
    env.step(env.oracle_action())
    _, reward, _, _, _ = env.step("submit")
    assert reward == 1.0


@pytest.mark.docker("agentenvs/tb-python:3.13")
def test_a_restore_starts_the_sidecars_afresh(env: TerminalBenchEnv) -> None:
    env.reset(options={"task_id": "tb1-kv"})
    env.step(env.oracle_action())
    snap = env.snapshot()
    env.restore(snap)  # the work dir comes back; the sidecar's state is not snapshotted
    _, reward, term, _, info = env.step("submit")
    assert term and reward == 0.0 and info["services"] == {"kv": "running"}
