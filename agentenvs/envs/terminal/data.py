"""Terminal-Bench tasks from a folder, in either layout.

TB1 (``terminal-bench`` 0.2): ``<task>/task.yaml`` (instruction, difficulty,
``max_agent_timeout_sec`` 360, ``max_test_timeout_sec`` 60, ``run_tests_in_same_shell``,
``parser_name``: see ``parser.py``, tags), ``Dockerfile``, ``run-tests.sh``, ``tests/``,
``solution.sh``. Harbor/TB2: ``<task>/task.toml`` (``[metadata]``, ``[agent]``/``[verifier]``
``timeout_sec``), ``instruction.md``, ``environment/Dockerfile``, ``tests/test.sh`` (writes
``/logs/verifier/reward.txt``), ``solution/solve.sh``.

The Dockerfile is read as Docker reads it (``FROM --platform=... image AS name``, ``ARG``
defaults, ``ENV`` with ``$VAR`` expanded) for the base image and the environment, and for
what the local runtime can reproduce without Docker: ``FROM`` the terminal base image,
``WORKDIR /app``, ``COPY`` into ``/app``, ``ENV`` and the one standard ``RUN`` that runs
``files/setup.sh``. Anything else makes the task docker-only, with the reason kept in
``TerminalTask.local_problem``. The other services of ``docker-compose.yaml`` (image or
build, command, entrypoint, environment, working_dir; ports, expose, depends_on,
container_name, restart and healthcheck accepted as not changing what runs) are kept in
``TerminalTask.services`` for the docker runtime; a service with any other key, and what
no runtime here provides (MCP servers), is kept in ``TerminalTask.problems``. Harbor's
``[[steps]]`` and separate verifier environments are read by ``steps.py``. Network needs
are not guessed from the scripts' text: the runtimes serve the standard test bootstraps
offline (see ``agentenvs.envs.terminal.offline``).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.core.errors import TaskError
from agentenvs.core.tasks import tasks_root
from agentenvs.envs.terminal.dockerfile import (  # noqa: F401 (read from data by others)
    BASE_IMAGE,
    DEFAULT_PATH,
    _dockerfile_steps,
    _env_items,
    analyse_dockerfile,
    expand,
    parse_from,
)
from agentenvs.envs.terminal.parser import PARSERS
from agentenvs.envs.terminal.steps import TaskStep, read_separate_verifier, read_steps

DEFAULT_AGENT_TIMEOUT = 360.0
DEFAULT_TEST_TIMEOUT = 60.0
#: Harbor's ``[verifier] timeout_sec`` default
HARBOR_TEST_TIMEOUT = 600.0
#: ``needs:`` tags -> the binary the task needs on the host (local runtime)
NEEDS_BINARY = {"sqlite3-cli": "sqlite3"}
#: official bases (``name:tag``, host and ``library/`` dropped) whose userland the host's
#: Debian with Python stands in for on the local runtime (the difference is reported:
#: ``runtime_local.standin_difference``)
LOCAL_STANDIN_BASES = re.compile(
    r"^(?:python:3\.\d+(?:\.\d+)?(?:-(?:slim|bookworm|trixie|slim-bookworm|slim-trixie))?"
    r"|debian:[a-z0-9.-]+|ubuntu:[a-z0-9.-]+|laude-institute/t-bench/python-3-\d+:[\w.-]+)$"
)


def normalize(image: str) -> str:
    """The image's name without its registry host and ``library/`` (a mirror's copy of an
    official image is that image): ``<host>/library/python:3.13`` and
    ``<host>/docker/library/python:3.13`` (the public ECR gallery's layout) ->
    ``python:3.13``; no tag -> ``:latest``; a digest is dropped."""
    name = image.strip().split("@", 1)[0]
    parts = name.split("/")
    # Docker's reference grammar: a first part with a dot or a port, or localhost, is a host
    hosted = len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost")
    if hosted:
        parts = parts[1:]
    if hosted and len(parts) > 2 and parts[:2] == ["docker", "library"]:
        parts = parts[1:]
    if len(parts) > 1 and parts[0] == "library":
        parts = parts[1:]
    name = "/".join(parts)
    if ":" not in parts[-1]:
        name += ":latest"
    return name


def standin_base(image: str) -> str | None:
    """``image`` as ``name:tag`` when the local runtime stands in for it (None: it cannot)."""
    name = normalize(image)
    return name if LOCAL_STANDIN_BASES.match(name) else None


#: the Python minor version and distribution an official base image ships
_BASE_DISTROS = {
    "debian:13": ("3.13", "Debian 13"),
    "debian:trixie": ("3.13", "Debian 13"),
    "debian:12": ("3.11", "Debian 12"),
    "debian:bookworm": ("3.11", "Debian 12"),
    "ubuntu:24.04": ("3.12", "Ubuntu 24.04"),
    "ubuntu:noble": ("3.12", "Ubuntu 24.04"),
    "ubuntu:22.04": ("3.10", "Ubuntu 22.04"),
    "ubuntu:jammy": ("3.10", "Ubuntu 22.04"),
    # the t-bench images are those Ubuntu releases with the harness's tools (any tag)
    "laude-institute/t-bench/ubuntu-24-04": ("3.12", "Ubuntu 24.04"),
    "laude-institute/t-bench/ubuntu-22-04": ("3.10", "Ubuntu 22.04"),
}


def base_userland(image: str) -> tuple[str | None, str]:
    """(Python ``major.minor`` or None when unknown, distribution) an official base ships."""
    name = normalize(image)
    repo, _, tag = name.partition(":")
    if repo == "python" or repo.startswith("laude-institute/t-bench/python-"):
        m = re.match(r"^(3\.\d+)", tag) if repo == "python" else re.search(r"3-(\d+)$", repo)
        minor = (m.group(1) if repo == "python" else f"3.{m.group(1)}") if m else None
        # python:3.X is built on Debian (bookworm for 3.12 and older tags, trixie for 3.13)
        return minor, "Debian"
    for key, found in _BASE_DISTROS.items():
        if name == key or name.startswith((key + ".", key + "-", key + ":")):
            return found
    return None, repo.capitalize()


#: compose keys of an extra service that do not change what runs in it (accepted, unused:
#: ``depends_on`` only orders the starts)
COMPOSE_IGNORED_KEYS = frozenset(
    {"ports", "expose", "depends_on", "container_name", "restart", "healthcheck"}
)
COMPOSE_KEYS = frozenset({"image", "build", "command", "entrypoint", "environment", "working_dir"})


@dataclass(frozen=True)
class ComposeService:
    """A service of the task's ``docker-compose.yaml`` besides the task's own container:
    run by the docker runtime as a sidecar in the task's network namespace."""

    name: str
    #: the image it runs (``image:``), or None when it is built (``build:``)
    image: str | None = None
    #: the build context and Dockerfile of a ``build:`` service
    context: Path | None = None
    dockerfile: Path | None = None
    command: tuple[str, ...] | str | None = None
    entrypoint: tuple[str, ...] | str | None = None
    environment: tuple[tuple[str, str], ...] = ()
    working_dir: str | None = None


@dataclass(frozen=True)
class Healthcheck:
    """Harbor's ``[environment.healthcheck]`` (Docker's HEALTHCHECK options, in seconds):
    ``command`` is run by the shell until it exits 0; ``retries`` consecutive failures
    after ``start_period_sec`` (during which checks come every ``start_interval_sec`` and
    do not count) make the environment unhealthy."""

    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


@dataclass(frozen=True)
class TerminalTask:
    """One task, whatever its layout (``layout`` is ``"tb1"`` or ``"harbor"``)."""

    id: str
    path: Path
    layout: str
    instruction: str
    difficulty: str = "unknown"
    max_agent_timeout_sec: float = DEFAULT_AGENT_TIMEOUT
    max_test_timeout_sec: float = DEFAULT_TEST_TIMEOUT
    run_tests_in_same_shell: bool = False
    parser_name: str = "pytest"
    tags: tuple[str, ...] = ()
    #: the Docker build context (the folder holding the Dockerfile)
    context: Path = field(default_factory=Path)
    dockerfile: Path = field(default_factory=Path)
    #: (source relative to the context, destination) of each COPY
    copies: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    #: the starting state needs ``setup.sh`` run in /app (then removed)
    runs_setup: bool = False
    tests_dir: Path = field(default_factory=Path)
    #: the test runner, relative to the task folder (TB1 run-tests.sh, Harbor tests/test.sh)
    test_script: str = "run-tests.sh"
    solution: str | None = None
    #: why the local runtime cannot reproduce the image (None: it can)
    local_problem: str | None = None
    #: the Dockerfile's (last stage's) base image and ``--platform``, or a prebuilt image
    base_image: str = ""
    platform: str | None = None
    #: Harbor ``[environment] docker_image``: a prebuilt image instead of a Dockerfile
    docker_image: str | None = None
    workdir: str = "/app"
    #: Harbor ``[environment] workdir``: where commands run, over the image's WORKDIR
    workdir_override: str | None = None
    #: the official network defaults: TB1's compose network and Harbor's ``public`` mode
    #: give both phases the internet; Harbor's ``network_mode``/``allow_internet`` can say no
    agent_network: bool = True
    verifier_network: bool = True
    #: the oracle: TB1 ``solution.sh`` (run from /oracle), Harbor ``solution/`` (at /solution)
    solution_path: Path | None = None
    #: TB1 ``solution.yaml``: the commands the oracle types, in order
    solution_commands: tuple[str, ...] = ()
    #: Harbor ``[solution] env``: variables the oracle's ``solve.sh`` runs with
    solution_env: tuple[tuple[str, str], ...] = ()
    #: what no runtime of this project provides (a second container, MCP servers)
    problems: tuple[str, ...] = ()
    #: the compose file's other services (sidecars, in start order: docker runtime only)
    services: tuple[ComposeService, ...] = ()
    #: Harbor ``[environment] memory_mb`` / ``cpus`` (None: not declared, the runtime's
    #: own limits hold), ``gpus`` (a task asking for any is refused: see ``problems``),
    #: ``storage_mb`` (read, not yet applied: the runtime's disk cap holds)
    memory_mb: int | None = None
    cpus: float | None = None
    gpus: int = 0
    storage_mb: int | None = None
    #: Harbor ``[[steps]]`` (``agentenvs.envs.terminal.steps``): one trial of several
    #: instructions; ``instruction`` is then the first step's
    steps: tuple[TaskStep, ...] = ()
    multi_step_reward_strategy: str = "mean"
    #: the current step's ``tests/``, laid over ``tests_dir`` at ``/tests`` (set on the
    #: view of a task at one of its steps, never when a task loads)
    step_tests_dir: Path | None = None
    #: Harbor ``[verifier] environment_mode = "separate"``: the tests' own image (a
    #: build context holding a Dockerfile, or a prebuilt image) and the paths carried
    #: over from the agent's environment (``/logs/artifacts`` and the task's artifacts)
    verifier_context: Path | None = None
    verifier_image: str | None = None
    artifacts: tuple[str, ...] = ()
    #: Harbor ``[environment] env`` (the container's, so every command and the tests see
    #: it) and ``[verifier] env`` (the tests only), ``${VAR}``/``${VAR:-default}``
    #: resolved from the host's environment when the task is read (:func:`resolve_env`)
    environment_env: tuple[tuple[str, str], ...] = ()
    verifier_env: tuple[tuple[str, str], ...] = ()
    #: Harbor ``[agent] user`` / ``[verifier] user`` (None: the image's USER)
    agent_user: str | None = None
    verifier_user: str | None = None
    #: Harbor ``[environment] build_timeout_sec``: the image build (and pulls) stop there
    build_timeout_sec: float = 600.0
    #: Harbor ``[environment.healthcheck]``: run until it passes before the first action
    healthcheck: Healthcheck | None = None

    @property
    def separate_verifier(self) -> bool:
        """The tests run in an environment of their own (Harbor's separate verifier)."""
        return self.verifier_context is not None or self.verifier_image is not None

    @property
    def needs(self) -> tuple[str, ...]:
        """Binaries named by ``needs:`` tags."""
        names = [t.split(":", 1)[1] for t in self.tags if t.startswith("needs:")]
        return tuple(NEEDS_BINARY.get(n, n) for n in names)

    def digest(self) -> str:
        """A hash of everything the image is built from (Dockerfile and context files)."""
        h = hashlib.blake2b(digest_size=12)
        for p in sorted(self.context.rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(self.context)).encode() + b"\0")
                h.update(p.read_bytes())
        return h.hexdigest()


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        import yaml
    except ImportError as exc:  # a core dependency; say so if it went missing
        raise TaskError(str(path), "<file>", "PyYAML is needed to read task.yaml") from exc
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise TaskError(str(path), "<file>", f"not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise TaskError(str(path), "<file>", "expected a mapping at the top level")
    return data


def _number(source: Path, data: Mapping[str, Any], key: str, default: float) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise TaskError(str(source), key, f"expected a positive number, got {value!r}")
    return float(value)


def _check_tests(task_dir: Path, script: str) -> Path:
    path = task_dir / script
    if not path.is_file():
        raise TaskError(str(path), "<file>", "missing test runner")
    tests = task_dir / "tests"
    if not tests.is_dir():
        raise TaskError(str(tests), "<dir>", "missing tests folder")
    return tests


def _solution_commands(path: Path) -> tuple[str, ...]:
    """TB1's ``solution.yaml``: a list of ``{command, min_timeout_sec, block, append_enter}``."""
    if not path.is_file():
        return ()
    data = _read_yaml_any(path)
    if not isinstance(data, list):
        raise TaskError(str(path), "<file>", "expected a list of {command: ...}")
    commands = []
    for i, item in enumerate(data):
        command = item.get("command") if isinstance(item, dict) else None
        if not isinstance(command, str):
            raise TaskError(str(path), f"[{i}].command", "expected a string")
        commands.append(command)
    return tuple(commands)


def _read_yaml_any(path: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise TaskError(str(path), "<file>", f"not valid YAML: {exc}") from exc


def _argv(path: Path, field_name: str, value: Any) -> tuple[str, ...] | str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return tuple(str(v) for v in value)
    raise TaskError(str(path), field_name, "expected a string or a list of strings")


def _service(path: Path, name: str, spec: Any) -> tuple[ComposeService | None, str | None]:
    """(the service, None) or (None, why it is refused); ill-typed fields raise TaskError."""
    where = f"services.{name}"
    if not isinstance(spec, dict):
        raise TaskError(str(path), where, "expected a mapping")
    for key in spec:
        if key not in COMPOSE_KEYS and key not in COMPOSE_IGNORED_KEYS:
            return None, f"{path.name}: service {name!r} uses {key!r}, which is not supported"
    image = spec.get("image")
    if image is not None and not isinstance(image, str):
        raise TaskError(str(path), f"{where}.image", "expected a string")
    context = dockerfile = None
    build = spec.get("build")
    if build is not None:
        if isinstance(build, str):
            build = {"context": build}
        if not isinstance(build, dict):
            raise TaskError(str(path), f"{where}.build", "expected a string or a mapping")
        extra = sorted(set(build) - {"context", "dockerfile"})
        if extra:
            return None, f"{path.name}: service {name!r} uses build.{extra[0]}, not supported"
        ctx, df = build.get("context", "."), build.get("dockerfile", "Dockerfile")
        if not isinstance(ctx, str) or not isinstance(df, str):
            raise TaskError(str(path), f"{where}.build", "expected context/dockerfile strings")
        context = (path.parent / ctx).resolve()
        dockerfile = context / df
        if not dockerfile.is_file():
            raise TaskError(str(dockerfile), "<file>", f"missing Dockerfile of service {name!r}")
        image = None  # what is built is run (the name it would be tagged with is not)
    if image is None and build is None:
        raise TaskError(str(path), where, "expected an image or a build")
    env = spec.get("environment") or {}
    if isinstance(env, list):
        if not all(isinstance(e, str) for e in env):
            raise TaskError(str(path), f"{where}.environment", "expected strings NAME=value")
        items = tuple((k, v) for k, _, v in (e.partition("=") for e in env))
    elif isinstance(env, dict):
        if not all(v is None or isinstance(v, str | int | float) for v in env.values()):
            raise TaskError(str(path), f"{where}.environment", "expected scalar values")
        items = tuple((str(k), "" if v is None else str(v)) for k, v in env.items())
    else:
        raise TaskError(str(path), f"{where}.environment", "expected a list or a mapping")
    workdir = spec.get("working_dir")
    if workdir is not None and not isinstance(workdir, str):
        raise TaskError(str(path), f"{where}.working_dir", "expected a string")
    return (
        ComposeService(
            name=name,
            image=image,
            context=context,
            dockerfile=dockerfile,
            command=_argv(path, f"{where}.command", spec.get("command")),
            entrypoint=_argv(path, f"{where}.entrypoint", spec.get("entrypoint")),
            environment=items,
            working_dir=workdir,
        ),
        None,
    )


def _start_order(path: Path, services: dict[str, Any], names: list[str]) -> list[str]:
    """``names`` in dependency order (``depends_on``), else in file order."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in order:
            return
        if name in visiting:
            raise TaskError(str(path), f"services.{name}.depends_on", "a dependency cycle")
        visiting.add(name)
        deps = services[name].get("depends_on") or []
        if isinstance(deps, dict):
            deps = list(deps)
        if not isinstance(deps, list):
            raise TaskError(str(path), f"services.{name}.depends_on", "expected a list")
        for dep in deps:
            if str(dep) in names:
                visit(str(dep))
        visiting.discard(name)
        order.append(name)

    for name in names:
        visit(name)
    return order


def _compose(path: Path) -> tuple[tuple[ComposeService, ...], str | None]:
    """The compose file's services besides the task's own container (TB1 ``client``,
    Harbor ``main``), and why the task is refused (None: it is not)."""
    if not path.is_file():
        return (), None
    try:
        import yaml

        data = yaml.safe_load(path.read_text())
    except Exception as exc:  # noqa: BLE001 - any unreadable compose file is reported
        raise TaskError(str(path), "<file>", f"not valid YAML: {exc}") from exc
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict):
        raise TaskError(str(path), "services", "expected a mapping of services")
    names = [str(name) for name in services if name not in ("client", "main")]
    services = {str(k): v for k, v in services.items()}
    found: dict[str, ComposeService] = {}
    for name in names:
        service, why = _service(path, name, services[name])
        if why is not None:
            return (), why
        assert service is not None
        found[name] = service
    return tuple(found[n] for n in _start_order(path, services, names)), None


def second_containers(services: tuple[ComposeService, ...]) -> str:
    return f"a second container ({', '.join(s.name for s in services)})"


def load_tb1(task_dir: Path) -> TerminalTask:
    """A task in the Terminal-Bench 1 layout (``task.yaml``)."""
    source = task_dir / "task.yaml"
    data = _read_yaml(source)
    instruction = data.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise TaskError(str(source), "instruction", "missing or empty")
    difficulty = data.get("difficulty", "unknown")
    if difficulty not in ("easy", "medium", "hard", "unknown"):
        raise TaskError(str(source), "difficulty", f"expected easy/medium/hard, got {difficulty!r}")
    parser_name = data.get("parser_name", "pytest")
    if not isinstance(parser_name, str):
        raise TaskError(str(source), "parser_name", f"expected a string, got {parser_name!r}")
    problems: list[str] = []
    if parser_name not in PARSERS:
        # a parser of a later harness: the task loads, and is refused with the reason
        problems.append(
            f"task.yaml: parser_name {parser_name!r} is not one this project reproduces "
            f"({', '.join(PARSERS)})"
        )
    tags = data.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise TaskError(str(source), "tags", "expected a list of strings")
    dockerfile = task_dir / "Dockerfile"
    if not dockerfile.is_file():
        raise TaskError(str(dockerfile), "<file>", "missing Dockerfile")
    tests = _check_tests(task_dir, "run-tests.sh")
    image = analyse_dockerfile(dockerfile)
    solution = task_dir / "solution.sh"
    services, compose = _compose(task_dir / "docker-compose.yaml")
    commands = _solution_commands(task_dir / "solution.yaml")
    return TerminalTask(
        id=task_dir.name,
        path=task_dir,
        layout="tb1",
        instruction=instruction.strip(),
        difficulty=difficulty,
        max_agent_timeout_sec=_number(source, data, "max_agent_timeout_sec", DEFAULT_AGENT_TIMEOUT),
        max_test_timeout_sec=_number(source, data, "max_test_timeout_sec", DEFAULT_TEST_TIMEOUT),
        run_tests_in_same_shell=bool(data.get("run_tests_in_same_shell", False)),
        parser_name=parser_name,
        tags=tuple(tags),
        context=task_dir,
        dockerfile=dockerfile,
        copies=image["copies"],
        env=image["env"],
        runs_setup=image["runs_setup"],
        tests_dir=tests,
        test_script="run-tests.sh",
        solution=solution.read_text() if solution.is_file() else None,
        solution_path=solution if solution.is_file() else None,
        solution_commands=commands,
        local_problem=second_containers(services) if services else image["local_problem"],
        base_image=image["base_image"],
        platform=image["platform"],
        workdir=image["workdir"],
        problems=(*problems, compose) if compose else tuple(problems),
        services=services,
    )


def _network_mode(source: Path, name: str, table: Mapping[str, Any], default: str) -> str:
    """Harbor's ``network_mode`` of a phase (``allow_internet``, deprecated, read too)."""
    mode = table.get("network_mode")
    legacy = table.get("allow_internet")
    if mode is None and legacy is not None:
        if not isinstance(legacy, bool):
            raise TaskError(str(source), f"{name}.allow_internet", "expected true or false")
        mode = "public" if legacy else "no-network"
    if mode is None:
        return default
    if mode not in ("public", "no-network", "allowlist"):
        raise TaskError(
            str(source),
            f"{name}.network_mode",
            f"expected public/no-network/allowlist, got {mode!r}",
        )
    return str(mode)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_SIZE_MB = {"": 1 / (1024 * 1024), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


def _megabytes(source: Path, table: Mapping[str, Any], key: str, legacy: str) -> int | None:
    """Harbor's ``<key>`` in MB, or its older ``<legacy>`` string (``"2G"``, ``"512M"``;
    a bare number is bytes, as Docker reads it); None when neither is declared."""
    value = table.get(key)
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise TaskError(
                str(source), f"environment.{key}", f"expected a positive int, got {value!r}"
            )
        return value
    text = table.get(legacy)
    if text is None:
        return None
    m = _SIZE.match(str(text))
    if m is None or float(m.group(1)) <= 0:
        raise TaskError(
            str(source), f"environment.{legacy}", f"expected a size such as '2G', got {text!r}"
        )
    return max(1, round(float(m.group(1)) * _SIZE_MB[m.group(2).lower()]))


def _resources(source: Path, environment: Mapping[str, Any]) -> dict[str, Any]:
    """``[environment]``'s memory, CPUs, GPUs and storage, checked."""
    cpus = environment.get("cpus")
    if cpus is not None and (
        isinstance(cpus, bool) or not isinstance(cpus, int | float) or cpus <= 0
    ):
        raise TaskError(
            str(source), "environment.cpus", f"expected a positive number, got {cpus!r}"
        )
    gpus = environment.get("gpus", 0)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise TaskError(str(source), "environment.gpus", f"expected an int >= 0, got {gpus!r}")
    return {
        "memory_mb": _megabytes(source, environment, "memory_mb", "memory"),
        "cpus": float(cpus) if cpus is not None else None,
        "gpus": gpus,
        "storage_mb": _megabytes(source, environment, "storage_mb", "storage"),
    }


#: a whole value that is a template: ``${VAR}`` or ``${VAR:-default}``
_TEMPLATE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?\}$", re.DOTALL)


def resolve_env(
    source: Path, name: str, table: Any, host: Mapping[str, str] | None = None
) -> tuple[tuple[str, str], ...]:
    """A task.toml ``env`` table, resolved as Harbor resolves it: a value that is wholly
    ``${VAR}`` takes the host's ``VAR`` (``${VAR:-default}``: ``default`` when ``VAR`` is
    not set; set and empty is set), any other value is taken literally. A template whose
    variable is unset, with no default, is a :class:`TaskError` naming the file and field."""
    import os

    if not isinstance(table, dict):
        raise TaskError(str(source), name, "expected a table of strings")
    found = os.environ if host is None else host
    out = []
    for key, value in table.items():
        if not isinstance(value, str):
            raise TaskError(str(source), f"{name}.{key}", f"expected a string, got {value!r}")
        m = _TEMPLATE.match(value)
        if m is None:
            out.append((str(key), value))
        elif m.group(1) in found:
            out.append((str(key), found[m.group(1)]))
        elif m.group(2) is not None:
            out.append((str(key), m.group(2)))
        else:
            raise TaskError(
                str(source),
                f"{name}.{key}",
                f"${{{m.group(1)}}} is not set in the host's environment (and has no default)",
            )
    return tuple(out)


def _user(source: Path, name: str, table: Mapping[str, Any]) -> str | None:
    """``[agent]``/``[verifier] user``: a name or a uid, as ``docker exec --user`` takes it."""
    value = table.get("user")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise TaskError(str(source), f"{name}.user", f"expected a user name or uid, got {value!r}")
    return str(value)


def _seconds(source: Path, table: Mapping[str, Any], key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise TaskError(str(source), key, f"expected a number >= 0, got {value!r}")
    return float(value)


def _healthcheck(
    source: Path, environment: Mapping[str, Any], name: str = "environment.healthcheck"
) -> Healthcheck | None:
    table = environment.get("healthcheck")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise TaskError(str(source), name, "expected a table")
    command = table.get("command")
    if not isinstance(command, str) or not command.strip():
        raise TaskError(str(source), f"{name}.command", "missing or empty")
    unknown = set(table) - {
        "command",
        "interval_sec",
        "timeout_sec",
        "start_period_sec",
        "start_interval_sec",
        "retries",
    }
    if unknown:
        raise TaskError(str(source), name, f"unknown keys {sorted(unknown)}")
    retries = table.get("retries", 3)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 1:
        raise TaskError(str(source), f"{name}.retries", f"expected an int >= 1, got {retries!r}")
    timeout = _seconds(source, table, "timeout_sec", 30.0)
    if timeout <= 0:
        raise TaskError(str(source), f"{name}.timeout_sec", "expected a positive number")
    return Healthcheck(
        command=command,
        interval_sec=_seconds(source, table, "interval_sec", 5.0),
        timeout_sec=timeout,
        start_period_sec=_seconds(source, table, "start_period_sec", 0.0),
        start_interval_sec=_seconds(source, table, "start_interval_sec", 5.0),
        retries=retries,
    )


def load_harbor(task_dir: Path) -> TerminalTask:
    """A task in the Harbor / Terminal-Bench 2 layout (``task.toml``)."""
    source = task_dir / "task.toml"
    try:
        data = tomllib.loads(source.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(str(source), "<file>", f"not valid TOML: {exc}") from exc
    meta = data.get("metadata", {})
    agent = data.get("agent", {})
    verifier = data.get("verifier", {})
    environment = data.get("environment", {})
    for name, table in (
        ("metadata", meta),
        ("agent", agent),
        ("verifier", verifier),
        ("environment", environment),
    ):
        if not isinstance(table, dict):
            raise TaskError(str(source), name, "expected a table")
    baseline = _network_mode(source, "environment", environment, "public")
    agent_mode = _network_mode(source, "agent", agent, baseline)
    verifier_mode = _network_mode(source, "verifier", verifier, baseline)
    docker_image = environment.get("docker_image")
    if docker_image is not None and not isinstance(docker_image, str):
        raise TaskError(str(source), "environment.docker_image", "expected a string")
    problems = []
    if environment.get("mcp_servers"):
        problems.append("task.toml: MCP servers ([[environment.mcp_servers]]) are not provided")
    steps, strategy = read_steps(source, data)
    problems += [why for step in steps for why in step.problems]
    separate = read_separate_verifier(source, data, docker_image)
    if steps and separate is not None:
        problems.append("task.toml: a separate verifier of a multi-step task is not provided")
    resources = _resources(source, environment)
    if resources["gpus"]:
        # as Harbor's Docker environment: no runtime here gives a container a GPU
        problems.append(
            f"task.toml: it needs {resources['gpus']} GPU(s) ([environment] gpus), and no "
            "runtime of this project gives a container GPUs"
        )
    instruction_path = task_dir / "instruction.md"
    if steps:
        instruction = steps[0].instruction
    elif not instruction_path.is_file():
        raise TaskError(str(instruction_path), "<file>", "missing instruction")
    else:
        instruction = instruction_path.read_text().strip()
    if not instruction:
        raise TaskError(str(instruction_path), "<file>", "empty instruction")
    dockerfile = task_dir / "environment" / "Dockerfile"
    if dockerfile.is_file():
        image = analyse_dockerfile(dockerfile)
    elif docker_image:
        image = {
            "copies": (),
            "env": (),
            "runs_setup": False,
            "local_problem": f"task.toml: prebuilt image {docker_image!r}",
            "base_image": docker_image,
            "platform": None,
            "workdir": "/",
        }
    else:
        raise TaskError(str(dockerfile), "<file>", "missing Dockerfile (and no docker_image)")
    if steps or separate is not None:
        # each step's tests (or the separate verifier's image) carry their own test.sh
        tests = task_dir / "tests"
    else:
        tests = _check_tests(task_dir, "tests/test.sh")
    services, compose = _compose(task_dir / "environment" / "docker-compose.yaml")
    if compose:
        problems.append(compose)
    tags = meta.get("tags", [])
    if not isinstance(tags, list):
        raise TaskError(str(source), "metadata.tags", "expected a list of strings")
    solution = task_dir / "solution" / "solve.sh"
    solution_table = data.get("solution", {})
    solution_env = solution_table.get("env", {}) if isinstance(solution_table, dict) else None
    if not isinstance(solution_env, dict):
        raise TaskError(str(source), "solution.env", "expected a table of strings")
    return TerminalTask(
        id=task_dir.name,
        path=task_dir,
        layout="harbor",
        instruction=instruction,
        difficulty=str(meta.get("difficulty", "unknown")),
        max_agent_timeout_sec=_number(source, agent, "timeout_sec", DEFAULT_AGENT_TIMEOUT),
        max_test_timeout_sec=_number(source, verifier, "timeout_sec", HARBOR_TEST_TIMEOUT),
        tags=tuple(str(t) for t in tags),
        context=dockerfile.parent,
        dockerfile=dockerfile,
        copies=image["copies"],
        env=image["env"],
        runs_setup=image["runs_setup"],
        tests_dir=tests,
        test_script="tests/test.sh",
        solution=solution.read_text() if solution.is_file() else None,
        solution_path=solution if solution.is_file() else None,
        local_problem=(
            "a separate verifier environment ([verifier] environment_mode = 'separate'): "
            "its own container, on the docker runtime only"
            if separate is not None
            else second_containers(services)
            if services
            else image["local_problem"]
        ),
        base_image=image["base_image"],
        platform=image["platform"],
        docker_image=docker_image,
        solution_env=tuple((str(k), str(v)) for k, v in solution_env.items()),
        environment_env=resolve_env(source, "environment.env", environment.get("env", {})),
        verifier_env=resolve_env(source, "verifier.env", verifier.get("env", {})),
        agent_user=_user(source, "agent", agent),
        verifier_user=_user(source, "verifier", verifier),
        build_timeout_sec=_number(source, environment, "build_timeout_sec", 600.0),
        healthcheck=_healthcheck(source, environment),
        workdir=str(environment.get("workdir") or image["workdir"]),
        workdir_override=str(environment["workdir"]) if environment.get("workdir") else None,
        agent_network=agent_mode != "no-network",
        verifier_network=verifier_mode != "no-network",
        problems=tuple(problems),
        services=services,
        steps=steps,
        multi_step_reward_strategy=strategy,
        **(separate or {}),
        **resources,
    )


def load_task(task_dir: Path) -> TerminalTask:
    if (task_dir / "task.yaml").is_file():
        return load_tb1(task_dir)
    if (task_dir / "task.toml").is_file():
        return load_harbor(task_dir)
    raise TaskError(str(task_dir), "<dir>", "neither task.yaml nor task.toml")


def task_dirs(root: Path) -> list[Path]:
    """Task folders under ``root`` (a folder of task folders, or one task folder)."""
    if (root / "task.yaml").is_file() or (root / "task.toml").is_file():
        return [root]
    return sorted(
        d
        for d in root.iterdir()
        if d.is_dir() and ((d / "task.yaml").is_file() or (d / "task.toml").is_file())
    )


def load_tasks_report(
    path: str | Path | None = None,
) -> tuple[dict[str, TerminalTask], dict[str, str]]:
    """(tasks, invalid): every loadable task under ``path``, and why each other one is not.

    One malformed task folder does not take the rest down, nor do all of them (the env
    then says at reset why none can run); a path with no task folder at all raises
    :class:`TaskError`.
    """
    root = Path(path) if path is not None else tasks_root() / "terminal"
    if not root.is_dir():
        raise TaskError(str(root), "<dir>", "no such tasks folder")
    dirs = task_dirs(root)
    if not dirs:
        raise TaskError(str(root), "<dir>", "no task folders (with task.yaml or task.toml)")
    tasks: dict[str, TerminalTask] = {}
    invalid: dict[str, str] = {}
    for d in dirs:
        try:
            tasks[d.name] = load_task(d)
        except TaskError as exc:
            invalid[d.name] = str(exc)
        except (OSError, UnicodeDecodeError) as exc:
            invalid[d.name] = f"{d}: field '<file>': cannot be read ({exc})"
    return tasks, invalid


def load_tasks(path: str | Path | None = None) -> dict[str, TerminalTask]:
    """Every task under ``path``; the first malformed one raises (see load_tasks_report)."""
    root = Path(path) if path is not None else tasks_root() / "terminal"
    if not root.is_dir():
        raise TaskError(str(root), "<dir>", "no such tasks folder")
    dirs = task_dirs(root)
    if not dirs:
        raise TaskError(str(root), "<dir>", "no task folders (with task.yaml or task.toml)")
    return {d.name: load_task(d) for d in dirs}


def missing_binaries(task: TerminalTask) -> list[str]:
    """``needs:`` binaries the host lacks (the local sandbox shows the host's /usr)."""
    path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
    return [b for b in task.needs if shutil.which(b, path=path) is None]
