"""Where bundled task data lives, in a wheel and in a source checkout."""

from __future__ import annotations

import os
from pathlib import Path

from agentenvs.core.errors import TaskError

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def tasks_root() -> Path:
    """The folder holding one sub-folder of task data per benchmark.

    ``AGENTENVS_TASKS`` overrides it; a wheel carries it as ``agentenvs/_tasks``; a
    source checkout has it at the repository's top level.
    """
    override = os.environ.get("AGENTENVS_TASKS")
    if override:
        return Path(override)
    for candidate in (_PACKAGE_DIR / "_tasks", _PACKAGE_DIR.parent / "tasks"):
        if candidate.is_dir():
            return candidate
    raise TaskError(str(_PACKAGE_DIR / "_tasks"), "tasks", "bundled task folder not found")


def task_path(*parts: str) -> Path:
    """Path of a bundled task file, e.g. ``task_path("frozenlake", "maps.json")``."""
    path = tasks_root().joinpath(*parts)
    if not path.exists():
        raise TaskError(str(path), "path", "bundled task file not found")
    return path
