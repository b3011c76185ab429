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


# ----------------------------------------------------------------------------- faults
#: who caused a failure: the agent (its commands, its program: a fork bomb, ``rm -rf /``,
#: its timeout or memory limit, an invalid action: scored as any outcome), the
#: infrastructure (a sandbox, container, engine, database, registry, env server or model
#: server that failed without the agent's doing), or unknown (the evidence does not tell).
#:
#: The rules every attribution follows: it rests on evidence the agent cannot forge (the
#: engine's events and a container's state as the engine reports them, how the host saw a
#: sandbox's process end, a health probe made after the failure); a failure that the
#: agent's own actions can produce with the same evidence is the agent's, since a policy
#: that could turn its failures into faults would learn to (a fault earns no reward, and
#: is retried or left out); ``unknown`` is for missing evidence, never a guess of "agent".
AGENT, INFRASTRUCTURE, UNKNOWN = "agent", "infrastructure", "unknown"
ATTRIBUTIONS = (AGENT, INFRASTRUCTURE, UNKNOWN)
#: what failed, for the fault counts of a run
FAULT_KINDS = (
    "sandbox",  # a local sandbox that could not start or died (SIGKILLed from the host)
    "container",  # a container that could not start, or was stopped or removed from outside
    "engine",  # the Docker engine (an API error, a daemon restart, an unreachable engine)
    "registry",  # an image that could not be pulled
    "database",  # a lost or refused database connection, a server gone
    "env-server",  # the env server or its connection (a client's view)
    "model",  # a model server's error, timeout or truncated stream
    "worker",  # an evaluation worker process that died
    "other",
)


class Fault(AgentEnvsError):
    """An episode (or a model call) failed for a reason that is not the agent's: no
    reward may come from it, and whoever runs the episode retries it or reports it.

    ``attribution`` is ``"infrastructure"`` or ``"unknown"`` (an agent-caused failure is
    an outcome, never a ``Fault``); ``kind`` is one of :data:`FAULT_KINDS`; ``evidence``
    says what the decision rests on (a container's state, an engine event, a health
    probe); ``retryable``: whether running the episode again may succeed.

    It is not a :class:`SandboxError`: code that scores a broken sandbox as the agent's
    doing (``except SandboxError``) lets a fault through by construction.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "other",
        attribution: str = INFRASTRUCTURE,
        evidence: str = "",
        retryable: bool = True,
    ) -> None:
        if attribution not in (INFRASTRUCTURE, UNKNOWN):
            raise ValueError(f"a Fault is never the agent's; got attribution {attribution!r}")
        if kind not in FAULT_KINDS:
            raise ValueError(f"kind must be one of {FAULT_KINDS}, got {kind!r}")
        self.kind = kind
        self.attribution = attribution
        self.evidence = evidence
        self.retryable = retryable
        super().__init__(message)

    def record(self) -> dict[str, object]:
        """A JSON-safe account of the fault, for trajectory records and run manifests."""
        return {
            "kind": self.kind,
            "attribution": self.attribution,
            "message": str(self)[:500],
            "evidence": self.evidence[:500],
            "retryable": self.retryable,
        }


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


def require_installed(extra: str, *modules: str) -> None:
    """Raise MissingExtraError naming ``extra`` unless each of ``modules`` is installed,
    without importing it: the check a command makes before any work (torch alone takes
    seconds to import)."""
    import importlib.util

    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # its parent is missing; it is None in sys.modules
            found = False
        if not found:
            raise MissingExtraError(module, extra)
