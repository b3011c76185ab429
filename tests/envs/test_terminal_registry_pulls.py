"""Base images pulled through a real registry (a Distribution registry on loopback,
``.ci/services/registry.sh``, holding the offline stand-ins under official names: a
stand-in, not the real image), by the names tasks write: Docker Hub names through the
engine's mirror (``.ci/services/docker.sh`` starts the engine with it), other registries'
names through the configured registry by prefix; and a pull the registry fails (credentials
refused, 429, no answer) is a ``registry`` Fault naming the image and the registry, never a
score, while an image the registry does not have stays the task's."""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from _services import find_registry

from agentenvs.core.errors import Fault, TaskError

REGISTRY = find_registry()[0] or ""
STAND_IN = "agentenvs/tb-python:3.13"
pytestmark = [
    pytest.mark.docker(STAND_IN),
    pytest.mark.skipif(not REGISTRY, reason=find_registry()[1]),
]


@pytest.fixture(autouse=True)
def _registry_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry found (perhaps by its default address) is the one the project is told of."""
    if REGISTRY:
        monkeypatch.setenv("AGENTENVS_REGISTRY", REGISTRY)


#: a bcrypt line of the htpasswd format (user ``agent``): the registry asks for credentials
#: that the engine was never given, so no password is ever checked against it
HTPASSWD = "agent:$2y$05$3/nMfRY3.rPghhmQS00DseVN6qP3ToxRxPT8DbLnL2U8I20ZbMSli\n"


def harbor_task(root: Path, name: str, image: str) -> Path:
    """A Harbor task on ``image`` whose tests need Python 3.13 and the agent's file."""
    task = root / name
    for sub in ("environment", "tests", "solution"):
        (task / sub).mkdir(parents=True)
    (task / "task.toml").write_text(
        'version = "1.0"\n\n[environment]\nnetwork_mode = "no-network"\n\n'
        "[verifier]\ntimeout_sec = 120.0\n"
    )
    (task / "instruction.md").write_text("Write done to /app/status.txt.\n")
    (task / "environment" / "Dockerfile").write_text(f"FROM {image}\nWORKDIR /app\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho done > /app/status.txt\n")
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        "if python3 -c 'import sys; assert sys.version_info[:2] == (3, 13)' "
        '&& [ "$(cat /app/status.txt 2>/dev/null)" = done ]; '
        "then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    return task


def docker(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check)


def make_env(root: Path, **kwargs: object) -> gym.Env:
    return gym.make(
        "agentenvs/TerminalBench-v0",
        tasks_path=root,
        runtime="docker",
        offline=False,
        max_turns=3,
        **kwargs,
    )


def solved_and_empty(env: gym.Env, task_id: str) -> tuple[float, float]:
    """(reward of the reference solution, reward of submitting at once)."""
    env.reset(options={"task_id": task_id})
    env.step(env.unwrapped.oracle_action())
    _, solved, term, _, _ = env.step("submit")
    assert term
    env.reset(options={"task_id": task_id})
    _, empty, term, _, _ = env.step("submit")
    assert term
    return float(solved), float(empty)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ----------------------------------------------------------------------------- names
def test_a_docker_hub_name_builds_through_the_engines_mirror(tmp_path: Path) -> None:
    mirrors = json.loads(docker("info", "--format", "{{json .RegistryConfig.Mirrors}}").stdout)
    if f"http://{REGISTRY}/" not in (mirrors or []):
        pytest.skip(f"the engine has no mirror http://{REGISTRY}/ (.ci/services/docker.sh)")
    # the plain Docker Hub name, not on this machine: only the mirror can give it
    docker("rmi", "python:3.13-slim")
    harbor_task(tmp_path, "hub-name", "python:3.13-slim")
    env = make_env(tmp_path)
    try:
        assert solved_and_empty(env, "hub-name") == (1.0, 0.0)
        assert docker("image", "inspect", "python:3.13-slim").returncode == 0
    finally:
        env.close()


@pytest.fixture
def ghcr_image() -> Iterator[str]:
    """A stand-in pushed to the registry under a ghcr.io path (and not on this machine
    under either name)."""
    name = "ghcr.io/agentenvs-registry-test/python:3.13-slim"
    pushed = f"{REGISTRY}/{name}"
    docker("tag", STAND_IN, pushed, check=True)
    docker("push", "-q", pushed, check=True)
    docker("rmi", pushed, name)
    yield name
    docker("rmi", pushed, name)


@pytest.mark.parametrize("configured", ["AGENTENVS_REGISTRY", "registry="])
def test_a_ghcr_name_is_pulled_through_the_configured_registry(
    tmp_path: Path, ghcr_image: str, configured: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    harbor_task(tmp_path, "ghcr-name", ghcr_image)
    if configured == "registry=":
        monkeypatch.delenv("AGENTENVS_REGISTRY")
        env = make_env(tmp_path, registry=REGISTRY)
    else:
        env = make_env(tmp_path)
    try:
        assert env.unwrapped.runtime().registry == REGISTRY
        assert solved_and_empty(env, "ghcr-name") == (1.0, 0.0)
        # tagged with the name the Dockerfile writes: the build pulled nothing itself
        assert docker("image", "inspect", ghcr_image).returncode == 0
    finally:
        env.close()


# ----------------------------------------------------------------------------- pull errors
@pytest.fixture
def auth_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second Distribution registry on loopback that wants credentials (htpasswd)."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.skip("Debian's docker-registry is not installed (.ci/services/registry.sh)")
    root = tmp_path_factory.mktemp("auth-registry")
    (root / "htpasswd").write_text(HTPASSWD)
    addr = f"127.0.0.1:{free_port()}"
    (root / "config.yml").write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: {addr}\n"
        f"auth:\n  htpasswd:\n    realm: agentenvs\n    path: {root / 'htpasswd'}\n"
    )
    with open(root / "registry.log", "wb") as log:
        proc = subprocess.Popen(
            [binary, "serve", str(root / "config.yml")], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://{addr}/v2/", timeout=5)
            except urllib.error.HTTPError as exc:
                if exc.code == 401:
                    break
            except OSError:
                pass
            if proc.poll() is not None:
                raise RuntimeError((root / "registry.log").read_text())
            threading.Event().wait(0.1)
        yield addr
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class _RateLimited(http.server.BaseHTTPRequestHandler):
    """In front of the real registry: its ping passes, every other request gets 429."""

    def _answer(self) -> None:
        if self.path == "/v2/":
            with urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=30) as upstream:
                body, status = upstream.read(), upstream.status
            self.send_response(status)
            self.send_header("Docker-Distribution-Api-Version", "registry/2.0")
        else:
            error = {"code": "TOOMANYREQUESTS", "message": "pull rate limit reached"}
            body, status = json.dumps({"errors": [error]}).encode(), 429
            self.send_response(status)
            self.send_header("Retry-After", "60")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def rate_limited() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RateLimited)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def silent() -> Iterator[str]:
    """A registry address that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.2)  # the accepting thread sees `done` soon after the test
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        listener.close()
        for conn in held:
            conn.close()
        thread.join(timeout=30)


@pytest.mark.parametrize(
    ("registry", "why"),
    [
        ("auth_registry", "refused the credentials"),
        ("rate_limited", "429 too many requests"),
        ("silent", "did not answer in time"),
    ],
)
def test_a_pull_the_registry_fails_is_a_registry_fault_naming_image_and_registry(
    tmp_path: Path, request: pytest.FixtureRequest, registry: str, why: str
) -> None:
    addr = request.getfixturevalue(registry)
    image = f"{addr}/library/python:3.13-slim"
    harbor_task(tmp_path, "failed-pull", image)
    env = make_env(tmp_path)
    if registry == "silent":
        # the project's own deadline, not the engine's (25 s, twice): the pull is cancelled
        env.unwrapped.runtime().pull_timeout_s = 3.0
    try:
        with pytest.raises(Fault) as caught:
            env.reset(options={"task_id": "failed-pull"})
        fault = caught.value
        assert fault.kind == "registry" and fault.attribution == "infrastructure"
        assert fault.retryable
        message = str(fault)
        assert "\n" not in message
        assert f"cannot pull {image!r} from {addr}: " in message and why in message, message
        if registry == "silent":
            assert "within 3 s (pull_timeout_s)" in message, message
        # not the task's: it is not refused, and the next reset asks the registry again
        assert "failed-pull" not in env.unwrapped.unsupported_tasks
        with pytest.raises(Fault):
            env.reset(options={"task_id": "failed-pull"})
    finally:
        env.close()


def test_an_image_the_registry_does_not_have_stays_the_tasks(tmp_path: Path) -> None:
    image = f"{REGISTRY}/library/no-such-image:1"
    harbor_task(tmp_path, "not-found", image)
    env = make_env(tmp_path)
    try:
        with pytest.raises(TaskError, match="no-such-image:1 not found") as caught:
            env.reset(options={"task_id": "not-found"})
        assert f"cannot pull {image!r} from {REGISTRY}: " in str(caught.value)
        assert "manifest unknown" in env.unwrapped.unsupported_tasks["not-found"]
    finally:
        env.close()
