"""Finding the services that marked tests need: MySQL/MariaDB, a Docker engine, bubblewrap.

Each probe answers ``(found, reason)``. Tests reach them in three ways that end in the same
probe and the same skip message:

- a marker: ``mysql``, ``docker`` (an engine with the image the ``docker`` sandbox starts;
  ``docker("agentenvs/terminal:latest")`` for another image) or ``bwrap``; ``conftest.py``
  skips a marked test with the probe's reason before its fixtures run;
- a fixture: ``mysql_url`` (the server's URL), ``docker_engine``, ``local_box`` (in
  ``tests/sandbox``); a test that asks for one is marked as if it carried the marker;
- a call, where the need is known only while the test runs (a factory chosen by a
  parameter): ``require_mysql()``, ``require_docker(image)``, ``require_bwrap()``.

With ``AGENTENVS_REQUIRE_SERVICES=1`` (CI) a marked test that skips fails instead (see
``conftest.py``).

MySQL/MariaDB is found at ``$AGENTENVS_MYSQL_URL`` when it is set (and only there: a URL
that answers nothing is a skip, not a reason to look elsewhere), else as root over the
first default unix socket that answers: those of Debian, of some distributions, of a
tarball install. An image registry (for the tests of pulls by name) likewise: at
``$AGENTENVS_REGISTRY`` when it is set, else at the address ``.ci/services/registry.sh``
starts it on, when a Distribution registry answers there.
"""

from __future__ import annotations

import functools
import os

import pytest

MYSQL_URL_ENV = "AGENTENVS_MYSQL_URL"
MYSQL_SOCKETS = ("/run/mysqld/mysqld.sock", "/var/run/mysqld/mysqld.sock", "/tmp/mysql.sock")
REGISTRY_ENV = "AGENTENVS_REGISTRY"
#: where .ci/services/registry.sh listens by default
REGISTRY_DEFAULT = "127.0.0.1:5000"


def socket_url(path: str) -> str:
    return f"mysql://root@localhost/?unix_socket={path}"


def _ping_mysql(url: str) -> None:
    import pymysql

    from agentenvs.envs.intercode_sql.backends.mysql import parse_mysql_url

    conn = pymysql.connect(**parse_mysql_url(url), connect_timeout=3)
    try:
        conn.ping(reconnect=False)
    finally:
        conn.close()


@functools.cache
def find_mysql() -> tuple[str | None, str]:
    """(the URL of a MySQL/MariaDB server that answers a ping, or None; why)."""
    try:
        import pymysql  # noqa: F401
    except ImportError:
        return None, "PyMySQL is not installed (pip install 'agentenvs[mysql]')"
    url = os.environ.get(MYSQL_URL_ENV)
    if url:
        try:
            _ping_mysql(url)
        except Exception as exc:  # noqa: BLE001 - any failure is the reason to skip
            return None, f"no MySQL/MariaDB server at ${MYSQL_URL_ENV}={url}: {exc}"
        return url, f"MySQL/MariaDB at ${MYSQL_URL_ENV}={url}"
    tried, seen = [], set()
    for path in MYSQL_SOCKETS:
        real = os.path.realpath(path)
        if real in seen:  # /var/run is often a link to /run
            continue
        seen.add(real)
        if not os.path.exists(path):
            tried.append(f"no {path}")
            continue
        try:
            _ping_mysql(socket_url(path))
        except Exception as exc:  # noqa: BLE001
            tried.append(f"{path}: {exc}")
            continue
        return socket_url(path), f"MySQL/MariaDB as root over {path}"
    return None, (
        f"no MySQL/MariaDB server: ${MYSQL_URL_ENV} is unset and no default socket answers "
        f"({'; '.join(tried)})"
    )


def require_mysql() -> str:
    """The server's URL, or a skip with the reason."""
    url, why = find_mysql()
    if url is None:
        pytest.skip(why)
    return url


@functools.cache
def find_registry() -> tuple[str | None, str]:
    """The address of a Distribution registry for the pull tests (``host:port``), and why
    there is none: ``$AGENTENVS_REGISTRY`` when set (and only there), else the default
    address when a registry answers its ``/v2/`` endpoint there."""
    import urllib.error
    import urllib.request

    configured = os.environ.get(REGISTRY_ENV, "")
    address = configured or REGISTRY_DEFAULT
    try:
        with urllib.request.urlopen(f"http://{address}/v2/", timeout=5) as reply:
            version = reply.headers.get("Docker-Distribution-API-Version", "")
    except urllib.error.HTTPError as exc:  # 401: a registry that asks for credentials
        version = exc.headers.get("Docker-Distribution-API-Version", "")
    except OSError as exc:
        where = f"${REGISTRY_ENV}={configured}" if configured else f"{address} (default)"
        return None, f"no image registry answers at {where}: {exc} (.ci/services/registry.sh)"
    if not version.startswith("registry/2"):
        return None, f"{address} answers, but not as a Distribution registry"
    return address, f"a Distribution registry at {address}"


def require_registry() -> str:
    """The registry's address, or a skip with the reason."""
    address, why = find_registry()
    if address is None:
        pytest.skip(why)
    return address


@functools.cache
def find_docker(image: str | None = None) -> tuple[bool, str]:
    """Whether a Docker engine answers and holds ``image`` (by default the one the ``docker``
    sandbox starts), and why not."""
    try:
        from agentenvs.sandbox.docker import docker_available
    except ImportError as exc:
        return False, f"the docker backend cannot be imported: {exc}"
    return docker_available(image) if image else docker_available()


def require_docker(image: str | None = None) -> None:
    ok, why = find_docker(image)
    if not ok:
        pytest.skip(f"Docker unavailable: {why}")


def find_bwrap() -> tuple[bool, str]:
    """Whether the local sandbox (bubblewrap namespaces) works here, and why not."""
    from agentenvs.sandbox.local import local_available

    return local_available()  # probed once per bwrap binary


def require_bwrap() -> None:
    ok, why = find_bwrap()
    if not ok:
        pytest.skip(f"local sandbox unavailable: {why}")


def require_marked(item: pytest.Item) -> None:
    """Skip ``item`` with the reason when a service its markers name is missing."""
    for marker in item.iter_markers("docker"):
        require_docker(*marker.args[:1])
    if item.get_closest_marker("mysql") is not None:
        require_mysql()
    if item.get_closest_marker("bwrap") is not None:
        require_bwrap()


#: registered envs whose defaults start the local sandbox (bubblewrap)
LOCAL_SANDBOX_ENVS = ("agentenvs/DeepCoderMT-v0", "agentenvs/TerminalBench-v0")


def env_id_params(ids: list[str] | None = None, *, long: tuple[str, ...] = ()) -> list:
    """Env ids as parameters (by default every registered one), each marked with the
    service that the env's default construction needs, and those in ``long`` ``long``."""
    import agentenvs

    params = []
    for env_id in agentenvs.registered_ids() if ids is None else ids:
        marks = [pytest.mark.bwrap] if env_id in LOCAL_SANDBOX_ENVS else []
        if env_id in long:
            marks.append(pytest.mark.long)
        params.append(pytest.param(env_id, id=env_id, marks=marks))
    return params
