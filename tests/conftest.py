"""Shared test set-up: service markers whose skips become failures when services are required.

Tests that need a service (Docker, MySQL, bubblewrap namespaces) carry its marker, or ask
for its fixture (which marks them), and skip with the reason when it is missing; the probes
live in ``_services.py``. With ``AGENTENVS_REQUIRE_SERVICES=1`` (set by CI) such a skip is
reported as a failure, so CI proves them; so is a skip for an optional dependency that
could not be imported (``pytest.importorskip``), since `make test` installs them all.

Two variables let one run pick up where another left off (CI's service run after its bare
run): ``AGENTENVS_PASSED_LOG=FILE`` appends the id of every test that passed (setup, call
and teardown) to FILE; ``AGENTENVS_ALREADY_PASSED=FILE`` deselects the tests listed there,
so only what did not pass there (skipped for a service or an extra, or left out as long)
runs.
"""

from __future__ import annotations

import os

import pytest
from _services import require_docker, require_marked, require_mysql

SERVICE_MARKERS = ("docker", "mysql", "bwrap")
#: fixtures that stand for a service: a test asking for one carries its marker
SERVICE_FIXTURES = {"mysql_url": "mysql", "docker_engine": "docker", "local_box": "bwrap"}

# Ray instances that the tests start serve this machine only: with this set (read when ray
# is imported, inherited by subprocesses) Ray registers its node on the loopback address
# instead of the machine's network address.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def services_required() -> bool:
    return os.environ.get("AGENTENVS_REQUIRE_SERVICES", "") not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def mysql_url() -> str:
    """The URL of a MySQL/MariaDB server that answers (``_services.find_mysql``)."""
    return require_mysql()


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """A Docker engine that answers, with the image the ``docker`` sandbox starts by default."""
    require_docker()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    already = os.environ.get("AGENTENVS_ALREADY_PASSED", "")
    if already:
        with open(already) as fh:
            passed = {line.strip() for line in fh if line.strip()}
        done = [item for item in items if item.nodeid in passed]
        if done:
            config.hook.pytest_deselected(items=done)
            items[:] = [item for item in items if item.nodeid not in passed]
    for item in items:
        for fixture, marker in SERVICE_FIXTURES.items():
            needed = fixture in getattr(item, "fixturenames", ())
            if needed and item.get_closest_marker(marker) is None:
                item.add_marker(marker)


def pytest_runtest_setup(item: pytest.Item) -> None:
    require_marked(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or not services_required():
        return
    needed = [m for m in SERVICE_MARKERS if item.get_closest_marker(m) is not None]
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
    if needed:
        report.outcome = "failed"
        report.longrepr = (
            f"service(s) {needed} are required (AGENTENVS_REQUIRE_SERVICES is set) "
            f"but the test was skipped: {reason}"
        )
    elif "could not import" in str(reason):
        # an optional dependency that `make test` installs (torch, transformers, ray, ...)
        report.outcome = "failed"
        report.longrepr = (
            f"an installed extra is required (AGENTENVS_REQUIRE_SERVICES is set) "
            f"but the test was skipped: {reason}"
        )


_outcomes: dict[str, bool] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    log = os.environ.get("AGENTENVS_PASSED_LOG", "")
    if not log:
        return
    ok = report.passed and not getattr(report, "wasxfail", None)
    if report.when == "setup":
        _outcomes[report.nodeid] = ok
    elif report.when == "call":
        _outcomes[report.nodeid] = _outcomes.get(report.nodeid, False) and ok
    elif report.when == "teardown":
        if _outcomes.pop(report.nodeid, False) and ok:
            with open(log, "a") as fh:
                fh.write(report.nodeid + "\n")
