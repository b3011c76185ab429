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
    "make_sandbox",
]
