"""The env server: any agentenvs env behind OpenEnv's HTTP/WebSocket protocol.

``agentenvs serve --env agentenvs/InterCodeSQL-v0 --port 8000`` serves one env per
WebSocket session (see ``agentenvs.server.app`` for the protocol); ``RemoteEnv`` is a
small client with the env's own methods, which raises ``RemoteFault`` (a ``Fault``) for
an env's infrastructure fault and for a server or connection that failed. Needs the ``server`` extra
(``pip install 'agentenvs[server]'``: FastAPI, uvicorn, websockets); ``import agentenvs``
never loads it.
"""

from __future__ import annotations

from typing import Any

from agentenvs.core.errors import require

_EXPORTS = {
    "ServerConfig": "agentenvs.server.app",
    "create_app": "agentenvs.server.app",
    "serve": "agentenvs.server.app",
    "RemoteEnv": "agentenvs.server.client",
    "RemoteError": "agentenvs.server.client",
    "RemoteFault": "agentenvs.server.client",
    "openenv_client": "agentenvs.server.client",
    "TextAction": "agentenvs.server.models",
    "TextObservation": "agentenvs.server.models",
    "EnvState": "agentenvs.server.models",
    "json_safe": "agentenvs.server.models",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentenvs.server' has no attribute {name!r}")
    for dep in ("fastapi", "uvicorn", "websockets", "pydantic"):
        require(dep, "server")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = sorted(_EXPORTS)
