"""Sandboxes that run untrusted code: ``local`` (bubblewrap namespaces) and ``docker``.

    from agentenvs.sandbox import make_sandbox, PyCase
    with make_sandbox("local") as box:
        print(box.run(["python3", "-c", "print(1)"]).stdout)

Backends load lazily: ``import agentenvs`` never imports docker.
"""

from __future__ import annotations

from typing import Any

from agentenvs.sandbox.base import (
    WORKDIR,
    CaseRun,
    FilesSnapshot,
    Limits,
    PyCase,
    RunResult,
    Sandbox,
    SandboxProcess,
)

BACKENDS = ("local", "docker", "auto")


def make_sandbox(backend: str = "local", *, limits: Limits | None = None, **kwargs: Any) -> Sandbox:
    """A sandbox of the named backend; ``auto`` takes local namespaces, else Docker."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
    limits = limits or Limits()
    if backend == "auto":
        from agentenvs.sandbox.local import local_available

        backend = "local" if local_available()[0] else "docker"
    if backend == "local":
        from agentenvs.sandbox.local import LocalSandbox

        return LocalSandbox(limits=limits, **kwargs)
    from agentenvs.sandbox.docker import DockerSandbox

    return DockerSandbox(limits=limits, **kwargs)


def limits_info(backend: str, limits: Limits, *, docker_pids_slack: int = 16) -> dict[str, Any]:
    """What bounds a sandbox of ``backend`` as a whole on this host (``info["sandbox_limits"]``
    of the envs that run code): ``scope`` ``"sandbox"`` (a cgroup locally, the container on
    Docker: memory incl. tmpfs, no swap, processes) or ``"process"`` (rlimits only; ``why``
    says why the host gives no cgroup), ``enforced_by``, ``memory_mb``, ``max_processes``."""
    if backend == "docker":
        from agentenvs.sandbox._cgroup import MEMORY_SLACK_MB

        return {
            "scope": "sandbox",
            "enforced_by": "docker",
            "memory_mb": limits.memory_mb + MEMORY_SLACK_MB,
            "max_processes": limits.max_processes + docker_pids_slack,
        }
    from agentenvs.sandbox import _cgroup

    h = _cgroup.hierarchy()
    if h.version == 0:
        return _cgroup.Scope("rlimits", why=h.why).as_info()
    return _cgroup.Scope(
        f"cgroup{h.version}",
        limits.memory_mb + _cgroup.MEMORY_SLACK_MB,
        _cgroup.pids_max(limits.max_processes),
    ).as_info()


_docker_swept: list[bool] = []


def sweep_leftovers(backend: str = "local") -> list[str]:
    """Remove what killed processes of this project left for ``backend``; what was removed.

    Runs at the start of whatever opens sandboxes (envs call it when they are made, before
    any code runs). ``local``: temp dirs (``agentenvs-sbx-*``, ``agentenvs-bwrap-*``,
    ``agentenvs-pylib-*``, ``agentenvs-etc-*``) whose owning process is dead; ``docker``
    (and ``auto``) also this host's sandbox containers whose owner is dead, when an engine
    answers. Never
    raises: a sweep that cannot run leaves things for the next one.
    """
    from agentenvs.sandbox import _leftovers

    removed = []
    for prefix in _leftovers.HOST_PREFIXES:
        removed += _leftovers.sweep_once(prefix)
    if backend in ("docker", "auto") and not _docker_swept:
        _docker_swept.append(True)
        try:
            from agentenvs.sandbox._docker_engine import sweep_orphans

            n = sweep_orphans()
            removed += [f"{n} container(s)"] if n else []
        except Exception:  # no SDK, no engine: nothing of ours can be running there
            pass
    return removed


__all__ = [
    "BACKENDS",
    "WORKDIR",
    "CaseRun",
    "FilesSnapshot",
    "Limits",
    "PyCase",
    "RunResult",
    "Sandbox",
    "SandboxProcess",
    "limits_info",
    "make_sandbox",
    "sweep_leftovers",
]
