"""Offline stand-ins for the downloads of Terminal-Bench's standard test bootstraps.

``shim.py`` (standard library only, run by the sandbox's own python3) and the wrappers
in ``bin/`` are placed at :data:`MOUNT` in a sandbox; with ``MOUNT/bin`` first on PATH, the
``curl ... uv/install.sh | sh``, ``uv venv``/``uv add pytest``/``uv run pytest``,
``pip install pytest`` and ``apt-get install curl`` of real task scripts are served from
what the image has (or a wheelhouse), and what cannot be provided is logged to
:data:`LOG` for the env's report.

The project's own wheelhouse holds the packages the official test bootstraps fetch at
test time (:data:`TEST_TIME_PACKAGES`: Harbor's ``uvx -w pytest==8.4.1 -w
pytest-json-ctrf==0.3.5``, TB1's ``uv add pytest==8.4.1``), downloaded once with pip
(``sandboxes/build_wheelhouse.sh``, or :func:`build_wheelhouse`) into
:func:`default_wheelhouse`; the docker runtime serves it to every container offline
unless ``wheelhouse=`` names another folder.

Image builds need more: the published Harbor sets install pandas, scipy and the like in
their Dockerfiles (``pip3 install pytest==8.4.1 pandas==2.3.2 scipy==1.16.1`` opens
thousands of them). :data:`BUILD_TIME_PACKAGES` are binary wheels for the stand-in bases'
Python (3.13, this machine's architecture), downloaded by :func:`build_build_wheelhouse`
into :func:`default_build_wheelhouse`. An offline build whose Dockerfile runs pip gets
them, with the test-time wheels, in its context at :data:`BUILD_WHEELHOUSE`, where its
RUN steps' pip finds them (the layer is the same for every task on the same base, so the
engine stores it once). Containers are not given them at run time: a reset copies only the
small test-time wheelhouse.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

#: the folder holding shim.py and bin/ on this machine
ROOT = Path(__file__).resolve().parent
#: where the sandboxes see it
MOUNT = "/opt/agentenvs/offline"
#: where the stand-ins note what they could not provide
LOG = "/logs/agentenvs-offline.log"
#: where a wheelhouse is seen in the sandbox
WHEELHOUSE = "/opt/agentenvs/wheelhouse"
#: where an offline build sees the build-time wheels (inside the stand-ins' folder)
BUILD_WHEELHOUSE = f"{MOUNT}/wheelhouse"


def environment() -> dict[str, str]:
    """Variables that make a sandbox's tools offline (prepend ``MOUNT/bin`` to PATH too)."""
    return {
        "AGENTENVS_OFFLINE_LOG": LOG,
        "AGENTENVS_WHEELHOUSE": WHEELHOUSE,
        # `python -m pip` is not a command the stand-ins see: pip itself reads this
        "PIP_CONFIG_FILE": f"{MOUNT}/pip.conf",
        "UV_OFFLINE": "1",
    }


#: what the official bootstraps install at test time: pure-Python wheels, any platform
TEST_TIME_PACKAGES = (
    "pytest==8.4.1",
    "pytest-json-ctrf==0.3.5",
    "iniconfig",
    "packaging",
    "pluggy",
    "pygments",
)


def default_wheelhouse() -> Path:
    """``$AGENTENVS_WHEELHOUSE_DIR``, else ``$XDG_CACHE_HOME/agentenvs/wheelhouse``."""
    explicit = os.environ.get("AGENTENVS_WHEELHOUSE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentenvs" / "wheelhouse"


def build_wheelhouse(
    dest: Path | None = None, packages: tuple[str, ...] = TEST_TIME_PACKAGES
) -> Path:
    """``pip download`` of ``packages`` (wheels only, for any Python 3 platform) into
    ``dest`` (default :func:`default_wheelhouse`); raises ``RuntimeError`` with pip's
    message when a package cannot be had."""
    return _pip_download(
        dest or default_wheelhouse(),
        ["--python-version", "3.13", "--implementation", "py", "--abi", "none",
         "--platform", "any"],
        packages,
    )  # fmt: skip


def _pip_download(dest: Path, target: list[str], packages: tuple[str, ...]) -> Path:
    """``pip download`` of binary wheels of ``packages`` for ``target`` into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
         "--only-binary=:all:", *target, "-d", str(dest), *packages],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"pip download into {dest} failed: {done.stderr.strip()[-2000:]}")
    return dest


#: what the published sets' Dockerfiles install with pip most (counted over a public
#: Harbor-layout registry of 3,566 tasks: pytest, pandas and scipy pinned in every one,
#: then numpy, scikit-learn, pyyaml, flask, requests), as binary wheels
BUILD_TIME_PACKAGES = (
    "pytest==8.4.1",
    "pandas==2.3.2",
    "scipy==1.16.1",
    "numpy",
    "scikit-learn",
    "pyyaml",
    "flask",
    "requests",
)
#: the Python of the stand-in bases (agentenvs/tb-python:3.13, agentenvs/tb-debian:13)
STANDIN_PYTHON = "3.13"


def default_build_wheelhouse() -> Path:
    """``$AGENTENVS_BUILD_WHEELHOUSE_DIR``, else ``$XDG_CACHE_HOME/agentenvs/wheelhouse-build``."""
    explicit = os.environ.get("AGENTENVS_BUILD_WHEELHOUSE_DIR")
    if explicit:
        return Path(explicit)
    return default_wheelhouse().with_name("wheelhouse-build")


def build_build_wheelhouse(
    dest: Path | None = None, packages: tuple[str, ...] = BUILD_TIME_PACKAGES
) -> Path:
    """``pip download`` of ``packages`` and their dependencies as binary wheels for the
    stand-ins' CPython on this machine's architecture (manylinux) into ``dest`` (default
    :func:`default_build_wheelhouse`); raises ``RuntimeError`` with pip's message."""
    arch = platform.machine() or "x86_64"
    abi = "cp" + STANDIN_PYTHON.replace(".", "")
    tags = [f"manylinux_2_{n}_{arch}" for n in (28, 27, 17)] + [f"manylinux2014_{arch}", "any"]
    target = ["--python-version", STANDIN_PYTHON, "--implementation", "cp"]
    target += [a for t in (abi, "abi3", "none") for a in ("--abi", t)]
    target += [a for t in tags for a in ("--platform", t)]
    return _pip_download(dest or default_build_wheelhouse(), target, packages)
