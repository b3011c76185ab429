"""Offline stand-ins for the downloads of Terminal-Bench's standard test bootstraps.

``shim.py`` (standard library only, run by the sandbox's own python3) and the wrappers
in ``bin/`` are placed at :data:`MOUNT` in a sandbox; with ``MOUNT/bin`` first on PATH, the
``curl ... uv/install.sh | sh``, ``uv venv``/``uv add pytest``/``uv run pytest``,
``pip install pytest`` and ``apt-get install curl`` of real task scripts are served from
what the image has (or a wheelhouse), and what cannot be provided is logged to
:data:`LOG` for the env's report.
"""

from __future__ import annotations

from pathlib import Path

#: the folder holding shim.py and bin/ on this machine
ROOT = Path(__file__).resolve().parent
#: where the sandboxes see it
MOUNT = "/opt/agentenvs/offline"
#: where the stand-ins note what they could not provide
LOG = "/logs/agentenvs-offline.log"
#: where a wheelhouse is seen in the sandbox
WHEELHOUSE = "/opt/agentenvs/wheelhouse"


def environment() -> dict[str, str]:
    """Variables that make a sandbox's tools offline (prepend ``MOUNT/bin`` to PATH too)."""
    return {
        "AGENTENVS_OFFLINE_LOG": LOG,
        "AGENTENVS_WHEELHOUSE": WHEELHOUSE,
        # `python -m pip` is not a command the stand-ins see: pip itself reads this
        "PIP_CONFIG_FILE": f"{MOUNT}/pip.conf",
        "UV_OFFLINE": "1",
    }
