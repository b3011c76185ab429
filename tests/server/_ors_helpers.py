"""``agentenvs serve --protocol ors`` in a subprocess on loopback, and ``ors-sdk``'s own
client playing the episodes that ``_mcp_helpers.plan_episode`` plans in process."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _mcp_helpers import ENV_KWARGS, Plan, child_env, hidden_keys
from _token import TEST_TOKEN, authorized


def ors_name(env_id: str) -> str:
    return env_id.rsplit("/", 1)[-1]


def ors_serve_args(env_id: str, *extra: str) -> list[str]:
    kwargs = json.dumps(ENV_KWARGS.get(env_id, {}))
    return [
        "-m",
        "agentenvs.cli",
        "serve",
        "--protocol",
        "ors",
        "--env",
        env_id,
        "--env-kwargs",
        kwargs,
        *extra,
    ]


@dataclass
class OrsServer:
    proc: subprocess.Popen[str]
    url: str

    def sessions(self) -> dict[str, Any]:
        with urllib.request.urlopen(authorized(self.url + "/sessions"), timeout=30) as resp:
            return json.loads(resp.read())

    def wait_envs(self, n: int, timeout: float = 120.0) -> int:
        """Wait until ``n`` envs are open (a deleted session's env counts until closed)."""
        deadline = time.monotonic() + timeout
        while True:
            envs = int(self.sessions()["envs"])
            if envs == n or time.monotonic() > deadline:
                return envs
            time.sleep(0.05)


@contextlib.contextmanager
def ors_server(env_id: str, *extra: str, tmpdir: Path | None = None) -> Iterator[OrsServer]:
    cmd = [sys.executable, *ors_serve_args(env_id, "--port", "0", "--token", TEST_TOKEN, *extra)]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(tmpdir)
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+) ", line)
        if match is None:
            rest = proc.stdout.read()
            raise AssertionError(f"the ORS server did not start: {line}{rest}")
        server = OrsServer(proc, f"http://127.0.0.1:{match.group(1)}")
        deadline = time.monotonic() + 60
        while True:
            try:
                server.sessions()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.asynccontextmanager
async def ors_env(url: str, env_id: str, api_key: str | None = TEST_TOKEN) -> AsyncIterator[Any]:
    """The SDK client's ``AsyncEnvironment`` for ``env_id`` (its client kept alive: the
    SDK closes the HTTP session when the ``AsyncORS`` object goes), sending the server's
    token as its ``api_key``."""
    from ors.client import AsyncORS

    client = AsyncORS(url, api_key=api_key)
    env = client.environment(ors_name(env_id))
    try:
        yield env
    finally:
        await env.client.close()
        del client


def task(env_id: str, spec: dict[str, Any]) -> Any:
    from ors.client._types import Task

    return Task(environment_name=ors_name(env_id), task_spec=spec)


async def play(session: Any, plan: Plan) -> tuple[list[float], Any, list[Any]]:
    """Play ``plan``'s calls through an ORS session: the rewards of its steps, the last
    output, and every output."""
    hidden = hidden_keys(plan.env_id) if plan.env_id else frozenset()
    rewards: list[float] = []
    outputs = []
    for name, args in plan.calls:
        listed = {t.name for t in await session.list_tools()}
        assert name in listed, (name, listed)
        out = await session.call_tool(name, args)
        # the env's hidden info keys never reach the agent
        assert not hidden & set(out.metadata or {}), (name, out.metadata)
        outputs.append(out)
        if out.reward is not None:
            rewards.append(float(out.reward))
    return rewards, outputs[-1], outputs
