"""The project's error hierarchy: every error raised on purpose derives from AgentEnvsError."""

from __future__ import annotations


class AgentEnvsError(Exception):
    """Base of every error the project raises on purpose."""


class TaskError(AgentEnvsError, ValueError):
    """A task file or record is malformed; the message names the file and the field."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        super().__init__(f"{source}: field {field!r}: {problem}")


class UnknownTaskError(AgentEnvsError, KeyError):
    """A task id that the env does not know."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "unknown task"


class SnapshotError(AgentEnvsError):
    """A snapshot cannot be taken or restored: the one error for every bad snapshot.

    ``restore()`` raises it for a snapshot of another env or version, a malformed or
    inconsistent payload, bytes that fail their checksum, or a state the env could not
    load; when it is raised the env (and its wrappers) are exactly as they were.
    """


class SandboxError(AgentEnvsError):
    """A sandbox could not be started, used or cleaned up."""


class ServiceUnavailable(AgentEnvsError):
    """A service the caller asked for (Docker, MySQL, Ray) is not reachable."""


class MissingExtraError(AgentEnvsError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"{module!r} is needed here but is not installed; install it with "
            f"`pip install 'agentenvs[{extra}]'`"
        )


def require(module: str, extra: str):  # noqa: ANN201 - returns a module
    """Import an optional dependency or raise MissingExtraError naming its extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(module, extra) from exc
