"""How Terminal-Bench tasks are read (Dockerfile steps as Docker reads them, Harbor's
task.toml) and how their images are had online and offline, without an engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenvs.core.errors import TaskError
from agentenvs.envs.terminal.data import analyse_dockerfile, expand, load_task
from agentenvs.envs.terminal.images import (
    DEFAULT_IMAGE_MAP,
    UnprovidableError,
    map_image,
    normalize,
    offline_dockerfile,
    plan_bases,
)
from agentenvs.envs.terminal.runtime_docker import network_plan
from agentenvs.envs.terminal.verdict import read_rewards

REAL = Path(__file__).parent / "terminal_real_fixtures"
FIXTURES = Path(__file__).parent / "terminal_fixtures"


def test_env_values_expand_as_docker_does(tmp_path: Path) -> None:
    assert expand("/opt/venv/bin:$PATH", {"PATH": "/usr/bin"}) == "/opt/venv/bin:/usr/bin"
    assert expand("${A:-x}-${B:+y}-\\$C-${D}", {"B": "1"}) == "x-y-$C-"
    df = tmp_path / "Dockerfile"
    df.write_text(
        "ARG PY=3.13\n"
        "FROM --platform=linux/amd64 python:${PY}-slim AS build\n"
        "# a comment\n"
        'ENV PATH="/opt/venv/bin:$PATH" \\\n'
        "    # comments inside continuations are dropped too\n"
        "    HOME_DIR=/srv APP=${HOME_DIR}/app\n"
        "ENV LEGACY value with spaces\n"
        "WORKDIR /srv\n"
    )
    got = analyse_dockerfile(df)
    env = dict(got["env"])
    assert got["base_image"] == "python:3.13-slim" and got["platform"] == "linux/amd64"
    assert (
        env["PATH"] == "/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    )
    assert env["APP"] == "/app"  # one ENV line sees the values of earlier lines only
    assert env["LEGACY"] == "value with spaces" and got["workdir"] == "/srv"


def test_harbor_task_toml_network_timeouts_and_problems(tmp_path: Path) -> None:
    task = load_task(REAL / "harbor-multi-reward")
    assert task.max_test_timeout_sec == 120 and task.agent_network and task.verifier_network
    assert task.solution_path == REAL / "harbor-multi-reward" / "solution" / "solve.sh"
    d = tmp_path / "t"
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "tests" / "test.sh").write_text("true\n")
    (d / "instruction.md").write_text("x\n")
    (d / "environment" / "Dockerfile").write_text("FROM python:3.13-slim\n")
    (d / "task.toml").write_text(
        '[environment]\nallow_internet = false\n[verifier]\nnetwork_mode = "public"\n'
        '[[environment.mcp_servers]]\nname = "x"\n'
    )
    task = load_task(d)
    assert task.max_test_timeout_sec == 600  # Harbor's default
    assert not task.agent_network and task.verifier_network
    assert any("MCP" in p for p in task.problems)
    (d / "task.toml").write_text('[agent]\nnetwork_mode = "sometimes"\n')
    with pytest.raises(TaskError, match="agent.network_mode"):
        load_task(d)


@pytest.mark.parametrize(
    "written",
    [
        "public.ecr.aws/docker/library/python:3.11-slim",
        "mirror.gcr.io/library/python:3.11-slim",
        "docker.io/library/python:3.11-slim",
        "docker.io/python:3.11-slim",
        "registry-1.docker.io/library/python:3.11-slim",
        "index.docker.io/library/python:3.11-slim",
        "python:3.11-slim@sha256:" + "0" * 64,
    ],
)
def test_official_mirrors_name_the_official_image(written: str) -> None:
    assert normalize(written) == "python:3.11-slim"
    assert map_image(written, DEFAULT_IMAGE_MAP) == map_image("python:3.11-slim", DEFAULT_IMAGE_MAP)
    assert map_image(written, DEFAULT_IMAGE_MAP) is not None


def test_only_official_layouts_lose_their_namespace() -> None:
    assert normalize("public.ecr.aws/docker/library/gcc:14") == "gcc:14"
    # a Docker Hub user named docker, and another gallery namespace, keep their names
    assert normalize("docker/library/tool:1") == "docker/library/tool:1"
    assert normalize("public.ecr.aws/someone/python:3.11") == "someone/python:3.11"
    assert map_image("public.ecr.aws/someone/python:3.11", DEFAULT_IMAGE_MAP) is None


def test_official_names_map_to_local_images() -> None:
    assert normalize("mirror.example:5000/library/python:3.13") == "python:3.13"
    assert normalize("localhost/me/tool@sha256:" + "0" * 64) == "me/tool:latest"
    assert normalize("ubuntu") == "ubuntu:latest"
    cases = {
        "python:3.13-slim-bookworm": "agentenvs/tb-python:3.13",
        "mirror.example/library/python:3.13": "agentenvs/tb-python:3.13",
        "registry.example/laude-institute/t-bench/python-3-13:20250620": "agentenvs/tb-python:3.13",
        "registry.example/laude-institute/t-bench/ubuntu-24-04:20250624": "agentenvs/tb-debian:13",
        "ubuntu:24.04": "agentenvs/tb-debian:13",
        "python:3.12-slim": "agentenvs/tb-python:3.13",  # the nearest: test_terminal_standins.py
        "golang:1.22": None,
    }
    for name, want in cases.items():
        assert map_image(name, DEFAULT_IMAGE_MAP) == want, name


def test_online_builds_as_written_offline_resolves_or_refuses() -> None:
    venv_sum = load_task(REAL / "tb1-venv-sum")
    have = {"agentenvs/tb-python:3.13"}
    plans = plan_bases(
        venv_sum, online=True, present=have.__contains__, image_map=DEFAULT_IMAGE_MAP
    )
    assert [(p.use, p.how) for p in plans] == [("python:3.13-slim-bookworm", "pull")]
    plans = plan_bases(
        venv_sum, online=False, present=have.__contains__, image_map=DEFAULT_IMAGE_MAP
    )
    assert [(p.use, p.how) for p in plans] == [("agentenvs/tb-python:3.13", "mapped")]
    # an image the machine has is used as it is, online or not
    here = {"python:3.13-slim-bookworm"}
    plans = plan_bases(venv_sum, online=False, present=here.__contains__, image_map={})
    assert [(p.use, p.how) for p in plans] == [("python:3.13-slim-bookworm", "local")]
    with pytest.raises(UnprovidableError, match="not built here"):
        plan_bases(venv_sum, online=False, present=set().__contains__, image_map=DEFAULT_IMAGE_MAP)
    with pytest.raises(UnprovidableError, match="golang:1.22-bookworm"):
        plan_bases(
            load_task(REAL / "tb1-needs-go"),
            online=False,
            present=have.__contains__,
            image_map=DEFAULT_IMAGE_MAP,
        )
    bundled = load_task(FIXTURES / "tb1-uv-env")
    plans = plan_bases(
        bundled,
        online=False,
        present={"agentenvs/terminal:latest"}.__contains__,
        image_map={},
        build_args={"BASE_IMAGE": "agentenvs/terminal:latest"},
    )
    assert [(p.use, p.how) for p in plans] == [("agentenvs/terminal:latest", "local")]


def test_offline_dockerfile_changes_only_from_and_the_shell() -> None:
    task = load_task(REAL / "tb1-venv-sum")
    plans = plan_bases(
        task,
        online=False,
        present={"agentenvs/tb-python:3.13"}.__contains__,
        image_map=DEFAULT_IMAGE_MAP,
    )
    text = offline_dockerfile(task, plans)
    lines = text.splitlines()
    assert lines[0] == "FROM agentenvs/tb-python:3.13"
    assert lines[1] == "COPY .agentenvs-offline /opt/agentenvs/offline"
    assert lines[2] == 'SHELL ["/opt/agentenvs/offline/bin/offline-sh", "/bin/sh", "-c"]'
    original = (REAL / "tb1-venv-sum" / "Dockerfile").read_text().splitlines()[1:]
    assert "\n".join(lines[3:]) == "\n".join(original)


def test_network_follows_the_official_defaults() -> None:
    tb1 = load_task(REAL / "tb1-venv-sum")
    assert network_plan(tb1, offline=False, network="task") == ("bridge", True, True)
    assert network_plan(tb1, offline=False, network="tests-only") == ("bridge", False, True)
    assert network_plan(tb1, offline=False, network="none") == ("none", False, False)
    assert network_plan(tb1, offline=True, network="task") == ("none", False, False)
    with pytest.raises(ValueError, match="network must be one of"):
        network_plan(tb1, offline=False, network="sometimes")


@pytest.mark.parametrize(
    ("json_text", "txt", "reward", "rewards"),
    [
        ('{"sorted": 1, "count": 1}', "", 1.0, {"sorted": 1.0, "count": 1.0}),
        ('{"sorted": 0, "count": 1}', "1", 0.5, {"sorted": 0.0, "count": 1.0}),
        ("0.25", "", 0.25, {"reward": 0.25}),
        ("", "1\n", 1.0, {}),
        ("", "", -1.0, {}),
        ('{"a": "yes"}', "1", -1.0, {}),
        ("{" * 10_000, "1", -1.0, {}),
        ("", "NaN", -1.0, {}),
    ],
)
def test_harbor_rewards_json_first_then_txt(
    json_text: str, txt: str, reward: float, rewards: dict[str, float]
) -> None:
    got, named, problem = read_rewards(json_text, txt)
    assert (got, named) == (reward, rewards)
    assert bool(problem) == (reward < 0)
