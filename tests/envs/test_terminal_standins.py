"""Stand-ins that differ from the base a task names: a Python or distribution the local
images do not have exactly (``python:3.12-slim``, ``debian:bookworm``, ``ubuntu:22.04``)
is given the nearest local image, what differs is said (``info["base_standin"]``,
``check_tasks()``'s ``stood_in``), and a task whose own files name the Python it asked
for is refused with the file, never run on another version."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenvs.envs.terminal.data import load_task
from agentenvs.envs.terminal.env import TerminalBenchEnv
from agentenvs.envs.terminal.images import (
    DEBIAN_13,
    DEFAULT_IMAGE_MAP,
    PYTHON_313,
    UnprovidableError,
    map_image,
    plan_bases,
    python_named,
    standin_note,
)

REAL = Path(__file__).parent / "terminal_real_fixtures"
#: what the Python stand-in ships beyond python:3.X-slim (by the manifest)
TOOLS = ", pytest, curl present (the real image has none)"


def test_each_official_base_gets_the_nearest_image_or_none() -> None:
    cases = {
        "python:3.12-slim": PYTHON_313,
        "python:3.12.7-slim-bookworm": PYTHON_313,
        "python:3.10": PYTHON_313,
        "python:3.9-slim": PYTHON_313,
        "registry.example/laude-institute/t-bench/python-3-12:20250620": PYTHON_313,
        "ubuntu:22.04": DEBIAN_13,
        "ubuntu:jammy-20240808": DEBIAN_13,
        "debian:bookworm-slim": DEBIAN_13,
        "debian:12.7": DEBIAN_13,
        "python:3.14-slim": None,  # newer than any local Python: none rather than an older one
        "python:3.1": None,
        "buildpack-deps:jammy": None,  # compilers and -dev libraries the images lack
    }
    for name, want in cases.items():
        assert map_image(name, DEFAULT_IMAGE_MAP) == want, name


def test_what_differs_is_said_and_an_exact_stand_in_says_nothing() -> None:
    # the userland matches; the tools the stand-in ships beyond the real image are said
    assert standin_note("python:3.13-slim", PYTHON_313) == (
        "base python:3.13-slim stood in for by agentenvs/tb-python:3.13: "
        "pytest, curl present (the real image has none)"
    )
    assert standin_note("debian:trixie", DEBIAN_13) == (
        "base debian:trixie stood in for by agentenvs/tb-debian:13: "
        "python3, pip, pytest, curl present (the real image has none)"
    )
    assert standin_note("python:3.12-slim", PYTHON_313) == (
        "base python:3.12-slim stood in for by agentenvs/tb-python:3.13: Python 3.13 for 3.12, "
        "pytest, curl present (the real image has none)"
    )
    assert standin_note("ubuntu:24.04", DEBIAN_13) == (
        "base ubuntu:24.04 stood in for by agentenvs/tb-debian:13: "
        "Python 3.13 for 3.12, Debian 13 for Ubuntu 24.04, "
        "python3, pip, pytest, curl present (the real image has none)"
    )
    assert standin_note("debian:bookworm-slim", DEBIAN_13) == (
        "base debian:bookworm-slim stood in for by agentenvs/tb-debian:13: "
        "Python 3.13 for 3.11, Debian 13 for Debian 12, "
        "python3, pip, pytest, curl present (the real image has none)"
    )
    assert standin_note("python:3.12", "my/own-python:3.12") is None  # a user's map: unknown


def _as_312(tmp_path: Path, tests_extra: str = "") -> Path:
    """tb1-venv-sum (TB1's layout, a uv bootstrap at test time) on python:3.12."""
    task = tmp_path / "tb1-venv-sum-312"
    shutil.copytree(REAL / "tb1-venv-sum", task)
    dockerfile = task / "Dockerfile"
    dockerfile.write_text(
        dockerfile.read_text().replace("python:3.13-slim-bookworm", "python:3.12-slim-bookworm")
    )
    if tests_extra:
        tests = task / "tests" / "test_outputs.py"
        tests.write_text(tests.read_text() + tests_extra)
    return task


NAMES_312 = "\n\ndef test_version():\n    import sys\n\n    assert sys.version_info[:2] == (3, 12)  # python3.12\n"


def test_a_task_that_names_its_python_is_refused_with_the_file(tmp_path: Path) -> None:
    have = {PYTHON_313}.__contains__
    plain = load_task(_as_312(tmp_path / "a"))
    assert python_named(plain, "3.12") is None
    (plan,) = plan_bases(plain, online=False, present=have, image_map=DEFAULT_IMAGE_MAP)
    assert (plan.use, plan.how) == (PYTHON_313, "mapped")
    assert plan.note is not None and plan.note.endswith("Python 3.13 for 3.12" + TOOLS)
    named = load_task(_as_312(tmp_path / "b", NAMES_312))
    assert python_named(named, "3.12") == "tests/test_outputs.py: 'python3.12'"
    with pytest.raises(UnprovidableError, match=r"names Python 3\.12 \(tests/test_outputs\.py"):
        plan_bases(named, online=False, present=have, image_map=DEFAULT_IMAGE_MAP)
    # other spellings of a dependence on the version
    for text in (
        "RUN pip download --python-version 3.12 x",
        "wheel-cp312-x.whl",
        "tox -e py312",
        'requires-python = ">=3.12"',
    ):
        assert python_named(_with_dockerfile_line(tmp_path / text[:6], text), "3.12"), text
    # the version in prose or another number is not one
    for text in ("FROM python:3.12-slim", "version 3.12.1 of the tool", "python3.120"):
        assert python_named(_with_dockerfile_line(tmp_path / text[:6], text), "3.12") is None


def _with_dockerfile_line(where: Path, line: str):  # noqa: ANN202 - a TerminalTask
    task = load_task(_as_312(where))
    task.dockerfile.write_text(task.dockerfile.read_text() + f"\n# {line}\n")
    return task


# ------------------------------------------------------------------------ on the engine
@pytest.fixture
def env(tmp_path: Path) -> Iterator[TerminalBenchEnv]:
    root = tmp_path / "tasks"
    root.mkdir()
    _as_312(root / "one").rename(root / "tb1-venv-sum-312")
    _as_312(root / "two", NAMES_312).rename(root / "tb1-names-312")
    env = TerminalBenchEnv(
        tasks_path=root,
        runtime="docker",
        offline=True,
        command_timeout=120,
        max_turns=3,
        wheelhouse=tmp_path / "no-wheels",
    )
    yield env
    env.close()


@pytest.mark.docker("agentenvs/tb-python:3.13")
def test_a_python_312_task_runs_on_the_313_stand_in_and_says_so(env: TerminalBenchEnv) -> None:
    why = env.check_tasks()
    assert set(why) == {"tb1-names-312"}
    assert "names Python 3.12 (tests/test_outputs.py: 'python3.12')" in why["tb1-names-312"]
    assert env.stood_in == {
        "tb1-venv-sum-312": "base python:3.12-slim-bookworm stood in for by "
        "agentenvs/tb-python:3.13: Python 3.13 for 3.12" + TOOLS
    }
    env.reset(options={"task_id": "tb1-venv-sum-312"})
    obs, reward, term, _, info = env.step("submit")
    assert term and reward == 0.0 and not info["success"], obs
    assert info["base_standin"] == env.stood_in["tb1-venv-sum-312"]
    env.reset(options={"task_id": "tb1-venv-sum-312"})
    obs, *_ = env.step("python --version")
    assert "Python 3.13" in obs
    env.step(env.oracle_action())
    obs, reward, term, _, info = env.step("submit")
    assert term and reward == 1.0 and info["success"], obs[-2000:]
    assert info["base_standin"].endswith("Python 3.13 for 3.12" + TOOLS)


# ------------------------------------------------------------------- the manifest
def test_the_manifest_holds_each_replaced_images_facts() -> None:
    from agentenvs.envs.terminal.images import image_facts, manifest, standin_facts

    assert manifest()["image"] and manifest()["standin"]
    tb = image_facts("ghcr.io/laude-institute/t-bench/python-3-13:20250620")
    assert tb is not None and tb["workdir"] == "/app" and tb["user"] == "root"
    assert image_facts("laude-institute/t-bench/ubuntu-24-04:latest")["workdir"] == "/app"
    ubuntu = image_facts("ubuntu:24.04")
    assert ubuntu is not None and ubuntu["workdir"] == "/"
    assert not ubuntu["tools"]["pip"] and not ubuntu["tools"]["pytest"]
    assert image_facts("python:3.13-slim")["tools"]["pip"]
    assert image_facts("buildpack-deps:jammy") is None  # not one the stand-ins replace
    # every image the default map stands in for has facts, every stand-in its own
    for pattern, use in DEFAULT_IMAGE_MAP.items():
        name = pattern.replace("[0-2]", "2").replace("[89]", "9").replace("*", "x")
        assert image_facts(name) is not None, pattern
        assert standin_facts(use) is not None, use


@pytest.mark.parametrize("use", [PYTHON_313, DEBIAN_13])
@pytest.mark.docker("agentenvs/tb-debian:13")
def test_each_stand_in_is_as_the_manifest_says(use: str) -> None:
    """The stand-ins' declared facts are checked against the built images themselves."""
    import docker

    from agentenvs.envs.terminal.images import MANIFEST_TOOLS, standin_facts

    facts = standin_facts(use)
    assert facts is not None
    client = docker.from_env()
    try:
        config = client.api.inspect_image(use)["Config"]
        assert (config.get("WorkingDir") or "/") == facts["workdir"]
        assert (config.get("User") or "root") == facts["user"]
        probe = "; ".join(f"command -v {t} >/dev/null && echo {t}" for t in MANIFEST_TOOLS)
        out = client.containers.run(
            use, ["sh", "-c", probe + "; true"], network_mode="none", remove=True
        ).decode()
    finally:
        client.close()
    have = {t for t, on in facts["tools"].items() if on}
    assert set(out.split()) == have, out


def _on_tbench_base(where: Path) -> Path:
    """A TB1 task on the t-bench Python image whose Dockerfile sets no WORKDIR (as 8 of
    the core tasks: their run-tests.sh then runs in the image's /app)."""
    task = load_task(_as_312(where))
    task.dockerfile.write_text(
        "FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\nRUN echo marker > here.txt\n"
    )
    return task.path


@pytest.mark.docker("agentenvs/tb-python:3.13")
def test_a_stand_in_gets_the_real_images_workdir(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    root.mkdir()
    _on_tbench_base(tmp_path / "one").rename(root / "tb1-no-workdir")
    env = TerminalBenchEnv(
        tasks_path=root,
        runtime="docker",
        offline=True,
        command_timeout=120,
        max_turns=3,
        wheelhouse=tmp_path / "no-wheels",
    )
    try:
        env.reset(options={"task_id": "tb1-no-workdir"})
        obs, *_ = env.step("pwd; cat /app/here.txt")
        assert obs.split()[:2] == ["/app", "marker"], obs  # the RUN ran in /app too
        obs, _, _, _, info = env.step("submit")
        # the work dir is given, the tools the real image lacks are said
        assert info["base_standin"] == (
            "base laude-institute/t-bench/python-3-13:20250620 stood in for by "
            "agentenvs/tb-python:3.13: pytest present (the real image has none)"
        )
    finally:
        env.close()
