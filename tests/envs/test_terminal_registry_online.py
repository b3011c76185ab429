"""The online path for real: task folders that name an image on a registry run with the
image pulled by name (a Distribution registry on loopback, ``.ci/services/registry.sh``,
holding the offline stand-ins under official names: a stand-in, not the real image), and
pull errors are never a score: a registry that does not answer is a ``registry`` Fault, an
image it says it does not have is the task's, refused with the engine's words."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _services import find_registry

from agentenvs.core.errors import Fault, TaskError
from agentenvs.envs.terminal.env import TerminalBenchEnv

REGISTRY = find_registry()[0] or ""
pytestmark = [
    pytest.mark.docker("agentenvs/tb-python:3.13"),
    pytest.mark.skipif(not REGISTRY, reason=find_registry()[1]),
]


@pytest.fixture(autouse=True)
def _registry_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry found (perhaps by its default address) is the one the project is told of."""
    if REGISTRY:
        monkeypatch.setenv("AGENTENVS_REGISTRY", REGISTRY)


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


def test_a_task_naming_a_registry_image_runs_with_it_pulled(tmp_path: Path) -> None:
    image = f"{REGISTRY}/library/python:3.13-slim"
    # not on this machine under that name: the build must pull it
    subprocess.run(["docker", "rmi", image], capture_output=True, check=False)
    harbor_task(tmp_path, "pulled", image)
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=False, max_turns=3)
    try:
        assert env.check_tasks() == {}
        env.reset(options={"task_id": "pulled"})
        _, reward, term, _, info = env.step("submit")
        assert term and reward == 0.0 and not info["success"]
        env.reset(options={"task_id": "pulled"})
        env.step(env.unwrapped.oracle_action())
        obs, reward, term, _, info = env.step("submit")
        assert term and reward == 1.0 and info["success"], obs
    finally:
        env.close()


def test_an_image_the_registry_does_not_have_is_refused_by_name(tmp_path: Path) -> None:
    harbor_task(tmp_path, "missing", f"{REGISTRY}/library/no-such-image:1")
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=False, max_turns=3)
    try:
        # the registry answered about the image: the task's, refused with the engine's words
        with pytest.raises(TaskError, match="no-such-image:1 not found"):
            env.reset(options={"task_id": "missing"})
        assert "manifest unknown" in env.unsupported_tasks["missing"]
    finally:
        env.close()


def test_a_registry_that_is_down_is_a_registry_fault(tmp_path: Path) -> None:
    harbor_task(tmp_path, "down", "127.0.0.1:9/library/python:3.13-slim")  # nothing listens
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=False, max_turns=3)
    try:
        with pytest.raises(Fault) as caught:
            env.reset(options={"task_id": "down"})
        assert caught.value.kind == "registry"
    finally:
        env.close()


def tb1_uv_task(root: Path, name: str, image: str) -> Path:
    """A TB1 task on ``image`` whose run-tests.sh is the official uv bootstrap: it fetches
    the uv installer and pytest from the network at test time."""
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "task.yaml").write_text(
        "instruction: Write done to /app/status.txt.\ndifficulty: easy\nmax_test_timeout_sec: 120\n"
    )
    (task / "Dockerfile").write_text(f"FROM {image}\nWORKDIR /app\n")
    (task / "solution.sh").write_text("#!/bin/bash\necho done > /app/status.txt\n")
    (task / "run-tests.sh").write_text(
        "#!/bin/bash\napt-get update\napt-get install -y curl\n"
        "curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\n"
        "source $HOME/.local/bin/env\nuv init\nuv add pytest==8.4.1\n"
        "uv run pytest $TEST_DIR/test_outputs.py -rA\n"
    )
    (task / "tests" / "test_outputs.py").write_text(
        "from pathlib import Path\n\n\ndef test_done():\n"
        "    assert Path('/app/status.txt').read_text().strip() == 'done'\n"
    )
    return task


def test_pulls_without_container_network_serve_the_tests_offline(tmp_path: Path) -> None:
    # the engine pulls from the loopback registry but has no network for containers
    # (dockerd --bridge=none): the test bootstrap's downloads cannot happen, so the
    # stand-ins serve them; the solution is not scored 0 for the missing network
    tb1_uv_task(tmp_path, "uv-bootstrap", f"{REGISTRY}/library/python:3.13-slim")
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=False, max_turns=3)
    try:
        runtime = env.unwrapped.runtime()
        if runtime._has_network():
            pytest.skip("this engine gives containers a network (a bridge)")
        assert not runtime.offline and runtime.networkless
        assert env.check_tasks() == {}
        env.reset(options={"task_id": "uv-bootstrap"})
        _, reward, term, _, info = env.step("submit")
        assert term and reward == 0.0 and not info["success"]
        env.reset(options={"task_id": "uv-bootstrap"})
        env.step(env.unwrapped.oracle_action())
        obs, reward, term, _, info = env.step("submit")
        assert term and reward == 1.0 and info["success"], obs
        assert info["tests_passed"] == info["tests_total"] == 1
    finally:
        env.close()


def test_check_tasks_reads_the_pulled_base_an_offline_build_will_use(tmp_path: Path) -> None:
    """The engine here pulls but gives containers no network, so builds are offline and
    serve ``apt-get install`` from the pulled base: the prediction pulls it (once) and reads
    it, rather than counting every package as unmet."""
    image = f"{REGISTRY}/library/debian:trixie"  # the Debian 13 stand-in: jq and git, no R
    subprocess.run(["docker", "rmi", image], capture_output=True, check=False)
    served = harbor_task(tmp_path, "served", image)
    unserved = harbor_task(tmp_path, "unserved", image)
    for task, packages in ((served, "jq git"), (unserved, "jq r-base")):
        dockerfile = task / "environment" / "Dockerfile"
        dockerfile.write_text(
            dockerfile.read_text() + f"RUN apt-get update && apt-get install -y {packages}\n"
        )
    env = TerminalBenchEnv(tasks_path=tmp_path, runtime="docker", offline=False, max_turns=3)
    try:
        if not env.runtime().networkless:
            pytest.skip("this engine gives containers a network: its builds fetch packages")
        why = env.check_tasks()
        assert set(why) == {"unserved"}
        assert "the Debian package 'r-base'" in why["unserved"] and "'jq'" not in why["unserved"]
        built = env.check_tasks(build=True)
        assert set(built) == {"unserved"} and "r-base" in built["unserved"]
    finally:
        env.close()
