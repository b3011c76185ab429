"""The project's own stateful backends for multi-turn BFCL, one module per class.

Each backend is a plain class whose public attributes are its whole state (the state
checker compares them), with ``_load_scenario(config, long_context=False)`` to load an
entry's ``initial_config`` and public methods that are the tools an agent may call.
Everything is deterministic: the long-context filler comes from fixed seeds.
"""

from __future__ import annotations

import importlib

#: class name -> "module:attribute"; imported only when an entry names the class
BACKENDS: dict[str, str] = {
    "FileSystemAPI": "agentenvs.envs.bfcl.multi_turn.backends.file_system:FileSystemAPI",
    "MessagingAPI": "agentenvs.envs.bfcl.multi_turn.backends.messaging:MessagingAPI",
    "TicketingAPI": "agentenvs.envs.bfcl.multi_turn.backends.ticketing:TicketingAPI",
}


def backend_class(name: str) -> type:
    """The backend class registered under ``name`` (KeyError when there is none)."""
    module_name, _, attr = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module_name), attr)
