"""A real env server in a subprocess on loopback, for the server tests.

Every server here is started with a known token (``TEST_TOKEN``), which the suite's
clients find in the environment (``AGENTENVS_SERVER_TOKEN``, and ``ORS_API_KEY`` for the
ORS SDK's client) while the tests run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _token import TEST_TOKEN, authorized

pytest.importorskip("fastapi", reason="could not import fastapi: pip install 'agentenvs[server]'")
pytest.importorskip("uvicorn", reason="could not import uvicorn: pip install 'agentenvs[server]'")
pytest.importorskip("websockets", reason="could not import websockets: pip install 'agentenvs[server]'")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def server_token(monkeypatch: pytest.MonkeyPatch) -> str:
    """The test servers' token where the clients look for it."""
    monkeypatch.setenv("AGENTENVS_SERVER_TOKEN", TEST_TOKEN)
    monkeypatch.setenv("ORS_API_KEY", TEST_TOKEN)
    return TEST_TOKEN


@dataclass
class Server:
    proc: subprocess.Popen[str]
    url: str
    token: str | None = TEST_TOKEN
    #: the line the server announced itself with
    announced: str = ""

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(authorized(self.url + path), timeout=30) as resp:
            return json.loads(resp.read())

    @property
    def ws_url(self) -> str:
        """The session endpoint, with the token in its query."""
        return self.url.replace("http://", "ws://") + f"/ws?token={self.token}"

    def active_sessions(self) -> int:
        return int(self.get("/sessions")["active"])

    def wait_sessions(self, n: int, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            active = self.active_sessions()
            if active == n or time.monotonic() > deadline:
                return active
            time.sleep(0.05)

    def wait_envs(self, n: int, timeout: float = 60.0) -> int:
        """Wait until ``n`` envs are held: a closed session's env counts until it has closed."""
        deadline = time.monotonic() + timeout
        while True:
            envs = int(self.get("/sessions")["envs"])
            if envs == n or time.monotonic() > deadline:
                return envs
            time.sleep(0.05)

    def children(self) -> set[int]:
        """Every live descendant process of the server."""
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
        found: set[int] = set()
        frontier = {self.proc.pid}
        while frontier:
            frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
            found |= frontier
        return found


@pytest.fixture
def start_server() -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(
        env_id: str,
        *extra: str,
        env_kwargs: dict[str, Any] | None = None,
        token: str | None = TEST_TOKEN,
        extra_env: dict[str, str] | None = None,
    ) -> Server:
        cmd = [sys.executable, "-m", "agentenvs.cli", "serve", "--env", env_id, "--port", "0",
               "--env-kwargs", json.dumps(env_kwargs or {}), *extra]
        if token is not None:
            cmd += ["--token", token]
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               **(extra_env or {})}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if match is None:
            proc.kill()
            rest = proc.stdout.read()
            raise AssertionError(f"the server did not start: {line}{rest}")
        server = Server(proc, f"http://127.0.0.1:{match.group(1)}", token, line)
        started.append(server)
        deadline = time.monotonic() + 60
        while True:
            try:
                server.get("/health")
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        return server

    yield start
    for server in started:
        server.proc.terminate()
        try:
            server.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()
