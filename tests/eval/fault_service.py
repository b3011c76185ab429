"""A small service on a Unix socket that tests' envs and policies depend on, and break.

Run as a process (``python fault_service.py SOCKET [--drop 3,9] [--die-at N]``), it
answers one line per connection: ``ping`` -> ``pong``; ``guess TARGET GUESS`` ->
``higher``, ``lower`` or ``correct``. It counts requests from 1: at each request listed
in ``--drop`` it closes the connection without an answer (a connection lost mid-call),
and at request ``--die-at`` it SIGKILLs itself (a server that dies), so every later
call is refused. The faults are real: the client sees a closed socket or a refused
connection, as it would from a crashed database or model server.

``Service`` starts and stops one from a test: ``with Service(path, drop=[3]) as svc``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

#: seconds a client waits for the service before it calls the service lost
CLIENT_TIMEOUT = 30.0


def answer(line: str) -> str:
    parts = line.split()
    if parts == ["ping"]:
        return "pong"
    if len(parts) == 3 and parts[0] == "guess":
        target, guess = int(parts[1]), int(parts[2])
        return "correct" if guess == target else "higher" if guess < target else "lower"
    return "error"


def serve(path: str, drop: set[int], die_at: int | None) -> None:
    if os.path.exists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    print("ready", flush=True)
    count = 0
    while True:
        conn, _ = server.accept()
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
            count += 1
            if count == die_at:
                os.kill(os.getpid(), signal.SIGKILL)
            if count in drop:
                continue  # closed without an answer
            conn.sendall((answer(data.decode()) + "\n").encode())


def request(path: str, line: str) -> str:
    """One call to the service; ``OSError`` when it is gone or closed the connection."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(CLIENT_TIMEOUT)
        conn.connect(path)
        conn.sendall((line + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                raise ConnectionResetError(f"{path} closed the connection without an answer")
            data += chunk
    return data.decode().strip()


class Service:
    """A ``fault_service`` process on ``path``, stopped (SIGKILL) on exit."""

    def __init__(self, path: str | Path, *, drop: list[int] = (), die_at: int | None = None):
        self.path = str(path)
        args = [sys.executable, __file__, self.path]
        if drop:
            args += ["--drop", ",".join(map(str, drop))]
        if die_at is not None:
            args += ["--die-at", str(die_at)]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            self.stop()
            raise RuntimeError("the fault service did not start")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def wait_dead(self, timeout: float = 60.0) -> int:
        """The exit status of a service that is to die by itself (``die_at``)."""
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.process.wait(timeout=1)

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--drop", default="")
    parser.add_argument("--die-at", type=int, default=None)
    args = parser.parse_args()
    drop = {int(v) for v in args.drop.split(",") if v}
    serve(args.path, drop, args.die_at)


if __name__ == "__main__":
    main()
