"""The Docker engine as the docker sandbox backend uses it: the SDK client, the engine's
address (for the hijacked exec connections of ``_docker_exec``), and the sweep of
containers whose owning process died.

Containers of this project carry ``agentenvs.pool=<owner pid>`` and
``agentenvs.host=<hostname>``; :func:`sweep_orphans` removes this host's containers whose
owner is gone (the docker pool runs it when it first reaches the engine, and
``python -m agentenvs.sandbox.docker sweep`` runs it by hand).
"""

from __future__ import annotations

import os
import socket
from typing import Any

from agentenvs.core.errors import ServiceUnavailable, require
from agentenvs.core.procs import host_identity, pid_alive

DEFAULT_IMAGE = os.environ.get("AGENTENVS_DOCKER_IMAGE", "agentenvs/python:latest")
#: containers of this project carry this label, valued with the owning process id
POOL_LABEL = "agentenvs.pool"
HOST_LABEL = "agentenvs.host"

# --------------------------------------------------------------------------- engine


def _docker_module() -> Any:
    return require("docker", "docker")


def _client(timeout: float = 60.0) -> Any:
    docker = _docker_module()
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # the SDK raises several kinds; all mean "no engine"
        raise ServiceUnavailable(
            f"cannot reach a Docker engine ({exc}); install and start Docker, then build the "
            "sandbox images with `bash sandboxes/build_images.sh` (docs/sandboxes.md)"
        ) from exc
    return client


def docker_available(image: str = DEFAULT_IMAGE) -> tuple[bool, str]:
    """Whether the docker backend can run here: the SDK imports, the engine answers, and
    ``image`` is present. The reason says which is missing (or what was found)."""
    try:
        docker = _docker_module()
    except ImportError as exc:
        return False, str(exc)
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:
        return False, f"no Docker engine answers ({type(exc).__name__}: {exc})"
    try:
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            return False, (
                f"Docker engine is up but image {image!r} is missing; "
                "build it with `bash sandboxes/build_images.sh`"
            )
        version = client.version().get("Version", "?")
    except Exception as exc:
        return False, f"Docker engine error ({type(exc).__name__}: {exc})"
    finally:
        client.close()
    return True, f"Docker engine {version} with image {image}"


def _engine_address(client: Any) -> tuple[int, Any]:
    """(socket family, address) of the engine, for hijacked exec connections."""
    adapter = getattr(client.api, "_custom_adapter", None)
    path = getattr(adapter, "socket_path", None)
    if path:
        return socket.AF_UNIX, path
    base = str(client.api.base_url)
    if base.startswith("http://"):
        host, _, port = base.removeprefix("http://").rstrip("/").partition(":")
        return socket.AF_INET, (host, int(port or 2375))
    raise ServiceUnavailable(
        f"the docker backend needs a local socket or plain TCP engine address, not {base!r}"
    )


def sweep_orphans(client: Any | None = None) -> int:
    """Remove this host's sandbox containers whose owning process is dead; how many."""
    own = client is None
    client = client or _client()
    removed = 0
    try:
        found = client.api.containers(all=True, filters={"label": POOL_LABEL})
        for info in found:
            labels = info.get("Labels") or {}
            try:
                owner = int(labels.get(POOL_LABEL, ""))
            except ValueError:
                continue
            # another host's or another pid namespace's: its pid means nothing here
            if labels.get(HOST_LABEL) != host_identity() or pid_alive(owner):
                continue
            try:
                client.api.remove_container(info["Id"], force=True)
                removed += 1
            except Exception:  # already gone, or being removed by another sweep
                pass
    finally:
        if own:
            client.close()
    return removed
