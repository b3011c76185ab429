"""A MariaDB server in a container, for the ``mysql`` backend without a local server.

The image ``agentenvs/mariadb:latest`` is built offline by ``sandboxes/build_images.sh``.
The container has no network: the server listens only on a unix socket in a host
directory bind-mounted at ``/run/mysqld``, and ``root`` logs in via ``unix_socket`` auth
(the server maps the connecting process's uid to a name in the container, so ``root``
works for a host process running as root). Whoever could replace that socket would catch
the env's passwordless root login, so the socket's directory sits in a private one (mode
0700, the env's user's: no other local user can enter it) and is sticky: made ``1777``
when the env runs as root (the image's entrypoint then gives it to the server's uid, and
only that uid or root may remove the socket), ``0777`` otherwise (so that the env's user
can remove what the server left; the private directory above keeps others out). Containers carry the label
``agentenvs.pool=<pid>`` so the docker sandbox's orphan sweep removes those of dead
processes. Start one from a shell with ``python -m agentenvs.envs.intercode_sql.container``
(prints its URL, removes it on Ctrl-C).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

DEFAULT_MARIADB_IMAGE = os.environ.get("AGENTENVS_MARIADB_IMAGE", "agentenvs/mariadb:latest")
SOCKET_DIR = "/run/mysqld"
SOCKET_NAME = "mysqld.sock"


class MariaDBContainer:
    """A running MariaDB container; ``url`` reaches it. A context manager; ``close()``
    removes the container and its socket directory."""

    def __init__(self, client: Any, container_id: str, socket_dir: str) -> None:
        self._client = client
        self.container_id = container_id
        self.socket_dir = socket_dir
        #: the private directory that holds ``socket_dir`` (removed whole at close)
        self.private_dir = os.path.dirname(socket_dir)
        self.socket_path = os.path.join(socket_dir, SOCKET_NAME)
        self.url = f"mysql://root@localhost/?unix_socket={self.socket_path}"
        self._closed = False

    def logs(self, tail: int = 30) -> str:
        return self._client.api.logs(self.container_id, tail=tail).decode(errors="replace")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._client.api.remove_container(self.container_id, force=True)
        except Exception:  # already gone (removed by hand or by a sweep)
            pass
        finally:
            self._client.close()
            shutil.rmtree(self.private_dir, ignore_errors=True)

    def __enter__(self) -> MariaDBContainer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MariaDBContainer({self.container_id[:12]}, url={self.url!r})"


def private_socket_dir(parent: str | None = None) -> str:
    """A directory for the server's socket that no other local user can replace it in:
    ``<private>/run``, where ``<private>`` is this user's alone (0700)."""
    private = tempfile.mkdtemp(prefix="agentenvs-mariadb.", dir=parent)  # 0700, ours
    run = os.path.join(private, "run")
    os.mkdir(run)
    # mysqld runs as the container's mysql uid, which the host does not know: it must be
    # able to write here. As root the dir is sticky, and the image's entrypoint gives it
    # to that uid; otherwise it stays ours, so that we can remove what the server left.
    os.chmod(run, 0o1777 if os.geteuid() == 0 else 0o777)
    return run


def _answers(socket_path: str) -> bool:
    """Whether the server sends its handshake on the socket (it is ready for logins)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2.0)
            s.connect(socket_path)
            return len(s.recv(4)) == 4
    except OSError:
        return False


def start_mariadb_container(
    image: str = DEFAULT_MARIADB_IMAGE,
    *,
    timeout: float = 60.0,
    memory_mb: int = 1024,
    socket_parent: str | None = None,
    server_args: Sequence[str] = (),
) -> MariaDBContainer:
    """Start a MariaDB container and wait until it answers; raises ``ServiceUnavailable``
    when there is no engine or image, or the server does not come up within ``timeout``.
    ``server_args`` go to the server (e.g. ``["--lower-case-table-names=1"]``)."""
    from agentenvs.core.errors import ServiceUnavailable
    from agentenvs.sandbox.docker import HOST_LABEL, POOL_LABEL, _client

    client = _client()
    try:
        client.images.get(image)
    except Exception as exc:
        client.close()
        raise ServiceUnavailable(
            f"image {image!r} is missing ({exc}); build it with `bash sandboxes/build_images.sh`"
        ) from exc
    socket_dir = private_socket_dir(socket_parent)
    labels = {POOL_LABEL: str(os.getpid()), HOST_LABEL: socket.gethostname()}
    try:
        created = client.api.create_container(
            image=image,
            labels=labels,
            command=list(server_args) or None,
            # network_mode none only: NetworkDisabled makes this image exit at once
            host_config=client.api.create_host_config(
                network_mode="none",
                binds={socket_dir: {"bind": SOCKET_DIR, "mode": "rw"}},
                mem_limit=memory_mb * 1024 * 1024,
                # the server's own files live in the container's writable layer
                tmpfs={"/tmp": "rw,nosuid,nodev,size=256m"},
            ),
        )
        box = MariaDBContainer(client, created["Id"], socket_dir)
    except Exception as exc:
        client.close()
        shutil.rmtree(os.path.dirname(socket_dir), ignore_errors=True)
        raise ServiceUnavailable(f"cannot create a {image} container: {exc}") from exc
    try:
        client.api.start(box.container_id)
        deadline = time.monotonic() + timeout
        while not _answers(box.socket_path):
            state = client.api.inspect_container(box.container_id)["State"]
            if not state.get("Running"):
                raise ServiceUnavailable(f"the MariaDB container exited:\n{box.logs()}")
            if time.monotonic() > deadline:
                raise ServiceUnavailable(
                    f"the MariaDB container did not answer within {timeout:.0f}s:\n{box.logs()}"
                )
            time.sleep(0.2)
    except BaseException:
        box.close()
        raise
    return box


def main() -> None:
    """Start a container, print its URL, and keep it until interrupted."""
    import argparse
    import signal
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=DEFAULT_MARIADB_IMAGE)
    args = parser.parse_args()
    # SIGTERM (and SIGINT) end the wait so that the container is removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with start_mariadb_container(args.image) as box:
        print(box.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
