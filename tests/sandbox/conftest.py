"""Sandbox fixtures: ``backend`` runs a test once per backend, each skipping with its reason.

``local`` needs user namespaces through bubblewrap (marker ``bwrap``); ``docker`` needs a
reachable engine (marker ``docker``). With AGENTENVS_REQUIRE_SERVICES set, those skips fail.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import pytest
from _services import require_bwrap, require_docker

from agentenvs.sandbox import Sandbox, make_sandbox


@pytest.fixture(
    params=[
        pytest.param("local", marks=pytest.mark.bwrap),
        pytest.param("docker", marks=pytest.mark.docker),
    ]
)
def backend(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """A fresh sandbox of each backend, closed after the test."""
    if request.param == "local":
        require_bwrap()
    else:
        require_docker()
    box = make_sandbox(request.param)
    try:
        yield box
    finally:
        box.close()


@pytest.fixture
def local_box() -> Iterator[Sandbox]:
    """A local sandbox (bubblewrap), for tests of that backend alone (marked ``bwrap``)."""
    require_bwrap()
    box = make_sandbox("local")
    try:
        yield box
    finally:
        box.close()


@pytest.fixture
def nothing_left() -> Callable[[str], None]:
    """Asserts that no host process carries a marker in its argv (waiting a moment)."""

    def check(marker: str, wait_s: float = 60.0) -> None:
        # a killed pid namespace is torn down asynchronously: allow it time (a loaded
        # machine is slow; the wait ends as soon as nothing is left)
        end = time.monotonic() + wait_s
        while (left := host_processes_with(marker)) and time.monotonic() < end:
            time.sleep(0.05)
        assert not left, f"processes left behind: {left}"

    return check


def host_processes_with(marker: str) -> list[str]:
    """Command lines of host processes whose argv contains ``marker``."""
    found = []
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            found.append(f"{pid}: {cmd[:200]}")
    return found
