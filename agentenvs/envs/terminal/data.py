"""Terminal-Bench tasks from a folder, in either layout.

TB1 (``terminal-bench`` 0.2): ``<task>/task.yaml`` (instruction, difficulty,
``max_agent_timeout_sec`` 360, ``max_test_timeout_sec`` 60, ``run_tests_in_same_shell``,
``parser_name`` pytest, tags), ``Dockerfile``, ``run-tests.sh``, ``tests/``,
``solution.sh``. Harbor/TB2: ``<task>/task.toml`` (``[metadata]``, ``[agent]``/``[verifier]``
``timeout_sec``), ``instruction.md``, ``environment/Dockerfile``, ``tests/test.sh`` (writes
``/logs/verifier/reward.txt``), ``solution/solve.sh``.

The Dockerfile is read for what the local runtime can reproduce without Docker: ``FROM``
the terminal base image, ``WORKDIR /app``, ``COPY`` into ``/app``, ``ENV`` and the one
standard ``RUN`` that runs ``files/setup.sh``. Anything else makes the task
docker-only, with the reason kept in ``TerminalTask.local_problem``. Test scripts that
download tools (curl, wget, uv, pip install, apt) are flagged in ``network_problem``:
the runtimes have no network, so such tasks are refused on both.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.core.errors import TaskError
from agentenvs.core.tasks import tasks_root

BASE_IMAGE = "agentenvs/terminal:latest"
DEFAULT_AGENT_TIMEOUT = 360.0
DEFAULT_TEST_TIMEOUT = 60.0
#: ``needs:`` tags -> the binary the task needs on the host (local runtime)
NEEDS_BINARY = {"sqlite3-cli": "sqlite3"}
_DOWNLOADS = re.compile(
    r"\b(curl|wget)\b|\buv\s+(add|pip|sync|run|venv|tool|init)\b|\bpip3?\s+install\b"
    r"|\bapt(-get)?\s+(install|update)\b|\bastral\.sh\b"
)
# the standard step of the bundled Dockerfiles: run files/setup.sh once, then delete it
_SETUP_RUN = re.compile(
    r"^(rm -f /app/\.keep && )?if \[ -f /app/setup\.sh \]; then cd /app && "
    r"(APP_DIR=/app )?bash /app/setup\.sh && rm -f /app/setup\.sh; fi$"
)
_BASE_REFS = {"${BASE_IMAGE}", "$BASE_IMAGE", BASE_IMAGE, "agentenvs/terminal"}


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
    #: why the task needs the network (None: it runs offline)
    network_problem: str | None = None

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


def _dockerfile_steps(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per step, continuations joined, comments dropped."""
    steps: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = (pending + line).strip()
        pending = ""
        word, _, rest = line.partition(" ")
        steps.append((word.upper(), " ".join(rest.split())))
    return steps


def analyse_dockerfile(path: Path) -> dict[str, Any]:
    """What the local runtime needs from a Dockerfile, and why it cannot, if it cannot."""
    copies: list[tuple[str, str]] = []
    env: list[tuple[str, str]] = []
    runs_setup = False
    problem: str | None = None
    network: str | None = None
    for word, args in _dockerfile_steps(path):
        if word == "RUN" and _DOWNLOADS.search(args):
            network = f"{path.name}: RUN {args[:80]!r} downloads packages"
        if problem is not None:
            continue
        if word in ("ARG", "LABEL", "CMD", "ENTRYPOINT", "EXPOSE"):
            continue
        if word == "FROM":
            image = args.split()[0] if args else ""
            if image not in _BASE_REFS and not image.startswith("agentenvs/terminal:"):
                problem = (
                    f"{path.name}: base image {image!r} (the local runtime has only {BASE_IMAGE})"
                )
        elif word == "WORKDIR":
            if args.rstrip("/") != "/app":
                problem = f"{path.name}: WORKDIR {args} (the local runtime works in /app)"
        elif word == "COPY":
            parts = shlex.split(args)
            if any(p.startswith("--") for p in parts) or len(parts) != 2:
                problem = f"{path.name}: COPY {args} (only `COPY <src> /app/...` is understood)"
            elif not (parts[1] == "/app" or parts[1].startswith("/app/")):
                problem = f"{path.name}: COPY to {parts[1]} (outside /app)"
            else:
                copies.append((parts[0], parts[1]))
        elif word == "ENV":
            for item in shlex.split(args):
                key, eq, value = item.partition("=")
                if not eq:
                    problem = f"{path.name}: ENV {args} (only ENV key=value is understood)"
                env.append((key, value))
        elif word == "RUN" and _SETUP_RUN.match(args):
            runs_setup = True
        else:
            problem = f"{path.name}: {word} {args[:80]!r} (needs the docker runtime)"
    return {
        "copies": tuple(copies),
        "env": tuple(env),
        "runs_setup": runs_setup,
        "local_problem": problem,
        "network_problem": network,
    }


def _check_tests(task_dir: Path, script: str) -> tuple[Path, str | None]:
    path = task_dir / script
    if not path.is_file():
        raise TaskError(str(path), "<file>", "missing test runner")
    tests = task_dir / "tests"
    if not tests.is_dir():
        raise TaskError(str(tests), "<dir>", "missing tests folder")
    found = _DOWNLOADS.search(path.read_text(errors="replace"))
    network = f"{script} downloads tools ({found.group(0)!r})" if found else None
    return tests, network


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
    if parser_name != "pytest":
        raise TaskError(
            str(source), "parser_name", f"only 'pytest' is supported, got {parser_name!r}"
        )
    tags = data.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise TaskError(str(source), "tags", "expected a list of strings")
    dockerfile = task_dir / "Dockerfile"
    if not dockerfile.is_file():
        raise TaskError(str(dockerfile), "<file>", "missing Dockerfile")
    tests, network = _check_tests(task_dir, "run-tests.sh")
    image = analyse_dockerfile(dockerfile)
    solution = task_dir / "solution.sh"
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
        local_problem=image["local_problem"],
        network_problem=network or image["network_problem"],
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
    for name, table in (("metadata", meta), ("agent", agent), ("verifier", verifier)):
        if not isinstance(table, dict):
            raise TaskError(str(source), name, "expected a table")
    instruction_path = task_dir / "instruction.md"
    if not instruction_path.is_file():
        raise TaskError(str(instruction_path), "<file>", "missing instruction")
    instruction = instruction_path.read_text().strip()
    if not instruction:
        raise TaskError(str(instruction_path), "<file>", "empty instruction")
    dockerfile = task_dir / "environment" / "Dockerfile"
    if not dockerfile.is_file():
        raise TaskError(str(dockerfile), "<file>", "missing Dockerfile")
    tests, network = _check_tests(task_dir, "tests/test.sh")
    image = analyse_dockerfile(dockerfile)
    tags = meta.get("tags", [])
    if not isinstance(tags, list):
        raise TaskError(str(source), "metadata.tags", "expected a list of strings")
    solution = task_dir / "solution" / "solve.sh"
    return TerminalTask(
        id=task_dir.name,
        path=task_dir,
        layout="harbor",
        instruction=instruction,
        difficulty=str(meta.get("difficulty", "unknown")),
        max_agent_timeout_sec=_number(source, agent, "timeout_sec", DEFAULT_AGENT_TIMEOUT),
        max_test_timeout_sec=_number(source, verifier, "timeout_sec", DEFAULT_TEST_TIMEOUT),
        tags=tuple(str(t) for t in tags),
        context=dockerfile.parent,
        dockerfile=dockerfile,
        copies=image["copies"],
        env=image["env"],
        runs_setup=image["runs_setup"],
        tests_dir=tests,
        test_script="tests/test.sh",
        solution=solution.read_text() if solution.is_file() else None,
        local_problem=image["local_problem"],
        network_problem=network or image["network_problem"],
    )


def load_task(task_dir: Path) -> TerminalTask:
    if (task_dir / "task.yaml").is_file():
        return load_tb1(task_dir)
    if (task_dir / "task.toml").is_file():
        return load_harbor(task_dir)
    raise TaskError(str(task_dir), "<dir>", "neither task.yaml nor task.toml")


def load_tasks(path: str | Path | None = None) -> dict[str, TerminalTask]:
    """Every task under ``path`` (a folder of task folders, or one task folder)."""
    root = Path(path) if path is not None else tasks_root() / "terminal"
    if not root.is_dir():
        raise TaskError(str(root), "<dir>", "no such tasks folder")
    if (root / "task.yaml").is_file() or (root / "task.toml").is_file():
        dirs = [root]
    else:
        dirs = sorted(
            d
            for d in root.iterdir()
            if d.is_dir() and ((d / "task.yaml").is_file() or (d / "task.toml").is_file())
        )
    if not dirs:
        raise TaskError(str(root), "<dir>", "no task folders (with task.yaml or task.toml)")
    return {d.name: load_task(d) for d in dirs}


def missing_binaries(task: TerminalTask) -> list[str]:
    """``needs:`` binaries the host lacks (the local sandbox shows the host's /usr)."""
    path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
    return [b for b in task.needs if shutil.which(b, path=path) is None]
