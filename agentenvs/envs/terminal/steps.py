"""Harbor's multi-step trials and separate verifiers, as ``task.toml`` declares them.

A task with ``[[steps]]`` is one trial of several instructions in the same environment.
Each step is ``steps/<name>/``: ``instruction.md`` (required), ``tests/`` (laid over the
task's shared ``tests/`` at ``/tests``; its ``test.sh`` first, else the shared one),
``solution/solve.sh`` (the oracle of that step, else the task's ``solution/``) and
``workdir/`` (copied into the work dir before the step; a ``setup.sh`` there is run with
bash from the work dir). A step's ``[steps.agent] timeout_sec`` and ``[steps.verifier]
timeout_sec`` override the task's. After each step its tests run and give the step's
rewards; the next step starts in the same state (files and all) with its own
instruction. The trial stops early when a step gave no verifier result (its reward file
was missing or unusable, its tests timed out, its setup failed) or when a step's
``min_reward`` (a number: the ``reward`` key; a table: each key) is not met, a missing key
counting as minus infinity.

A step's ``[steps.verifier] env`` (resolved from the host as the task's ``[verifier]
env`` is) is given to that step's tests over the task's, and its ``[steps.healthcheck]``
is run until healthy before the step's agent, after its ``workdir/`` and ``setup.sh``
(unhealthy: a :class:`~agentenvs.core.errors.Fault`, as the task's own). A step's
``[steps.agent] user``, ``[steps.verifier] user`` or ``artifacts`` refuse the task up
front (``TaskStep.problems``, then the task's ``problems``): the agent's shell and the
tests' session are opened once per trial, not per step, and a step's artifacts are
carried only to a separate verifier, which a multi-step task does not have here.

``multi_step_reward_strategy``: ``"mean"`` (the default) is each reward key's mean over
the steps that gave a verifier result (a key a step lacks counts 0 there); ``"final"``
is the last step run's result as it is (none when that step gave none).

``[verifier] environment_mode = "separate"`` (or a ``[verifier.environment]`` table) runs
the tests in a fresh environment of their own: built from the tests folder's
``Dockerfile`` (``tests/`` is the build context; the tests are baked into that image, not
copied), or ``[verifier.environment] docker_image``, or the task's own
``docker_image``. Of the agent's environment only ``/logs/artifacts`` and the paths the
task's top-level ``artifacts`` list names are copied over, to the same paths.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenvs.core.errors import TaskError

STRATEGIES = ("mean", "final")
#: the agent environment's directory Harbor always carries to a separate verifier
ARTIFACTS_DIR = "/logs/artifacts"


@dataclass(frozen=True)
class TaskStep:
    """One ``[[steps]]`` entry of a Harbor task, with its files."""

    name: str
    instruction: str
    #: ``steps/<name>/tests`` (None: the step uses the task's shared tests alone)
    tests_dir: Path | None = None
    #: ``steps/<name>/solution/solve.sh`` (None: the task's own solution)
    solution_path: Path | None = None
    #: ``steps/<name>/workdir`` (None: nothing is copied before the step)
    workdir: Path | None = None
    #: None: the task's ``[agent]`` / ``[verifier]`` ``timeout_sec``
    agent_timeout_sec: float | None = None
    test_timeout_sec: float | None = None
    #: Harbor's gate: ``{reward key: threshold}`` (a bare number gates ``reward``)
    min_reward: tuple[tuple[str, float], ...] | None = None
    #: ``[steps.verifier] env``, resolved: given to the step's tests over the task's
    verifier_env: tuple[tuple[str, str], ...] = ()
    #: ``[steps.healthcheck]``: run until healthy before the step's agent
    healthcheck: Any = None
    #: why the step cannot be played as declared (its users, its artifacts)
    problems: tuple[str, ...] = ()


def _timeout(source: Path, table: Any, field: str) -> float | None:
    if not isinstance(table, dict):
        raise TaskError(str(source), field, "expected a table")
    value = table.get("timeout_sec")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise TaskError(
            str(source), f"{field}.timeout_sec", f"expected a positive number, got {value!r}"
        )
    return float(value)


def _min_reward(source: Path, field: str, value: Any) -> tuple[tuple[str, float], ...] | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (("reward", float(value)),)
    if isinstance(value, dict) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value.values()
    ):
        return tuple((str(k), float(v)) for k, v in value.items())
    raise TaskError(str(source), field, f"expected a number or a table of numbers, got {value!r}")


def read_steps(source: Path, data: Mapping[str, Any]) -> tuple[tuple[TaskStep, ...], str]:
    """The steps of a ``task.toml`` (empty: a single-step task) and its reward strategy."""
    from agentenvs.envs.terminal.data import _healthcheck, resolve_env

    task_dir = source.parent
    raw = data.get("steps")
    strategy = data.get("multi_step_reward_strategy")
    if strategy is not None and strategy not in STRATEGIES:
        raise TaskError(
            str(source), "multi_step_reward_strategy", f"expected mean/final, got {strategy!r}"
        )
    if not raw:
        return (), "mean"
    if not isinstance(raw, list) or not all(isinstance(s, dict) for s in raw):
        raise TaskError(str(source), "steps", "expected an array of tables ([[steps]])")
    steps = []
    seen: set[str] = set()
    for i, table in enumerate(raw):
        name = table.get("name")
        field = f"steps[{i}]"
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            raise TaskError(str(source), f"{field}.name", f"expected a folder name, got {name!r}")
        if name in seen:
            raise TaskError(str(source), f"{field}.name", f"step {name!r} is named twice")
        seen.add(name)
        folder = task_dir / "steps" / name
        path = folder / "instruction.md"
        if not path.is_file():
            raise TaskError(str(path), "<file>", f"missing instruction of step {name!r}")
        instruction = path.read_text().strip()
        if not instruction:
            raise TaskError(str(path), "<file>", f"empty instruction of step {name!r}")
        verifier = table.get("verifier", {})
        if isinstance(verifier, dict) and (
            verifier.get("environment_mode") == "separate" or "environment" in verifier
        ):
            raise TaskError(
                str(source), f"{field}.verifier", "a separate verifier per step is not provided"
            )
        solve = folder / "solution" / "solve.sh"
        agent = table.get("agent", {})
        problems = [
            f"task.toml: {field}.{part}.user = {who.get('user')!r}: the agent's shell and the "
            "tests' session are opened once per trial here, not per step"
            for part, who in (("agent", agent), ("verifier", verifier))
            if isinstance(who, dict) and who.get("user") is not None
        ]
        if table.get("artifacts"):
            problems.append(
                f"task.toml: {field}.artifacts: a step's artifacts go to a separate "
                "verifier, which a multi-step task does not have here"
            )
        steps.append(
            TaskStep(
                name=name,
                instruction=instruction,
                tests_dir=folder / "tests" if (folder / "tests").is_dir() else None,
                solution_path=solve if solve.is_file() else None,
                workdir=folder / "workdir" if (folder / "workdir").is_dir() else None,
                agent_timeout_sec=_timeout(source, table.get("agent", {}), f"{field}.agent"),
                test_timeout_sec=_timeout(source, verifier, f"{field}.verifier"),
                min_reward=_min_reward(source, f"{field}.min_reward", table.get("min_reward")),
                verifier_env=resolve_env(source, f"{field}.verifier.env", verifier.get("env", {}))
                if isinstance(verifier, dict)
                else (),
                healthcheck=_healthcheck(source, table, f"{field}.healthcheck"),
                problems=tuple(problems),
            )
        )
        has_test = (folder / "tests" / "test.sh").is_file() or (
            task_dir / "tests" / "test.sh"
        ).is_file()
        if not has_test:
            raise TaskError(
                str(folder / "tests" / "test.sh"),
                "<file>",
                f"step {name!r} has no test.sh (nor has the task's tests/)",
            )
    return tuple(steps), strategy or "mean"


def step_rewards(
    rewards: Mapping[str, float], reward: float | None, usable: bool
) -> dict[str, float] | None:
    """A step's verifier result as Harbor keeps it: the named rewards of ``reward.json``,
    else ``{"reward": value}`` of ``reward.txt``; None when the step gave none."""
    if not usable or reward is None or reward < 0:
        return None
    return dict(rewards) if rewards else {"reward": float(reward)}


def stops_after(step: TaskStep, rewards: Mapping[str, float] | None) -> str | None:
    """Why the trial stops after ``step`` (None: the next step runs)."""
    if rewards is None:
        return f"step {step.name!r} gave no verifier result"
    for key, threshold in step.min_reward or ():
        actual = rewards.get(key, -math.inf)
        if actual < threshold:
            return f"step {step.name!r}: {key}={actual:g} is below its min_reward {threshold:g}"
    return None


def trial_rewards(
    strategy: str, results: Sequence[Mapping[str, float] | None]
) -> dict[str, float] | None:
    """The trial's rewards from its steps' results, in order (None: no result)."""
    if not results:
        return None
    if strategy == "final":
        last = results[-1]
        return dict(last) if last is not None else None
    given = [r for r in results if r is not None]
    keys = sorted({k for r in given for k in r})
    if not keys:
        return None
    return {k: sum(r.get(k, 0.0) for r in given) / len(given) for k in keys}


def read_separate_verifier(
    source: Path, data: Mapping[str, Any], docker_image: str | None
) -> dict[str, Any] | None:
    """``TerminalTask`` fields of a separate verifier (None: the tests run in the agent's
    environment): its prebuilt image, or the build context of its Dockerfile, and the
    paths carried over from the agent's environment."""
    verifier = data.get("verifier", {})
    if not isinstance(verifier, dict):
        raise TaskError(str(source), "verifier", "expected a table")
    mode = verifier.get("environment_mode")
    if mode not in (None, "shared", "separate"):
        raise TaskError(
            str(source), "verifier.environment_mode", f"expected shared/separate, got {mode!r}"
        )
    own = verifier.get("environment")
    if own is not None and not isinstance(own, dict):
        raise TaskError(str(source), "verifier.environment", "expected a table")
    if mode == "shared" and own is not None:
        raise TaskError(
            str(source), "verifier.environment", "environment_mode 'shared' has no environment"
        )
    if mode != "separate" and own is None:
        return None
    # the verifier's environment is its own table, else a copy of the task's; an image
    # named there is used as it is, else the tests folder is the build context
    image = (own or {}).get("docker_image") if own is not None else docker_image
    if image is not None and not isinstance(image, str):
        raise TaskError(str(source), "verifier.environment.docker_image", "expected a string")
    context = source.parent / "tests"
    if image is None and not (context / "Dockerfile").is_file():
        raise TaskError(
            str(context / "Dockerfile"),
            "<file>",
            "a separate verifier is built from tests/Dockerfile, which is missing",
        )
    raw = data.get("artifacts", [])
    if not isinstance(raw, list):
        raise TaskError(str(source), "artifacts", "expected a list")
    paths = [ARTIFACTS_DIR]
    for i, item in enumerate(raw):
        path = item.get("source") if isinstance(item, dict) else item
        if not isinstance(path, str) or not path.startswith("/"):
            raise TaskError(
                str(source), f"artifacts[{i}]", f"expected an absolute path, got {item!r}"
            )
        paths.append(path)
    return {
        "verifier_image": image,
        "verifier_context": None if image is not None else context,
        "artifacts": tuple(dict.fromkeys(paths)),
    }


def verifier_view(task: Any) -> Any:
    """The ``TerminalTask`` of a task's separate verifier environment: its own image (the
    tests folder's Dockerfile, or the prebuilt image named), the task's other settings
    (a copy of its ``[environment]``, as Harbor makes it), no sidecars, no steps. Its tests
    folder is the build context: the files the image bakes in at ``/tests``."""
    import dataclasses

    from agentenvs.envs.terminal.data import analyse_dockerfile

    context = task.verifier_context
    if context is not None:
        image = analyse_dockerfile(context / "Dockerfile")
        dockerfile = context / "Dockerfile"
    else:
        image = {
            "copies": (),
            "env": (),
            "runs_setup": False,
            "base_image": task.verifier_image,
            "platform": None,
            "workdir": "/",
        }
        dockerfile = task.path / "tests" / "Dockerfile.absent"
    return dataclasses.replace(
        task,
        id=f"{task.id}.verifier",
        context=context or task.path / "tests",
        dockerfile=dockerfile,
        docker_image=task.verifier_image,
        copies=image["copies"],
        env=image["env"],
        runs_setup=image["runs_setup"],
        base_image=image["base_image"],
        platform=image["platform"],
        workdir=task.workdir_override or image["workdir"],
        tests_dir=context or task.path / "tests",
        services=(),
        steps=(),
        step_tests_dir=None,
        verifier_context=None,
        verifier_image=None,
        artifacts=(),
    )
