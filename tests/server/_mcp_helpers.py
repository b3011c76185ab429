"""MCP clients (the official SDK's) of ``agentenvs serve --protocol mcp``, and the same
episodes played in process, for the MCP server tests."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from _token import AUTH, TEST_TOKEN, authorized

from agentenvs.integrations.common import calls_action

ROOT = Path(__file__).resolve().parents[2]
ENV_KWARGS: dict[str, dict[str, Any]] = {"agentenvs/TerminalBench-v0": {"runtime": "local"}}


def serve_args(env_id: str, *extra: str, transport: str = "http") -> list[str]:
    kwargs = json.dumps(ENV_KWARGS.get(env_id, {}))
    return [
        "-m",
        "agentenvs.cli",
        "serve",
        "--protocol",
        "mcp",
        "--transport",
        transport,
        "--env",
        env_id,
        "--env-kwargs",
        kwargs,
        *extra,
    ]


def child_env(tmpdir: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if tmpdir is not None:  # the sandboxes' temp dirs go there, to be counted afterwards
        env["TMPDIR"] = str(tmpdir)
    return env


@contextlib.contextmanager
def traversable_tmp() -> Iterator[Path]:
    """A fresh temp dir every user can enter (bwrap runs the sandbox as another user), for
    a server's ``TMPDIR``: what the envs leave there is counted afterwards."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="agentenvs-mcp-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class HttpServer:
    proc: subprocess.Popen[str]
    base: str

    @property
    def url(self) -> str:
        return self.base + "/mcp"

    def sessions(self) -> dict[str, Any]:
        with urllib.request.urlopen(authorized(self.base + "/sessions"), timeout=30) as resp:
            return json.loads(resp.read())

    def wait_envs(self, n: int, timeout: float = 120.0) -> int:
        """Wait until ``n`` envs are held (a closing session's env counts until closed)."""
        deadline = time.monotonic() + timeout
        while True:
            envs = int(self.sessions()["envs"])
            if envs == n or time.monotonic() > deadline:
                return envs
            time.sleep(0.05)


@contextlib.contextmanager
def http_server(env_id: str, *extra: str, tmpdir: Path | None = None) -> Iterator[HttpServer]:
    cmd = [sys.executable, *serve_args(env_id, "--port", "0", "--token", TEST_TOKEN, *extra)]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(tmpdir)
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", line)
        if match is None:
            rest = proc.stdout.read()
            raise AssertionError(f"the MCP server did not start: {line}{rest}")
        server = HttpServer(proc, f"http://127.0.0.1:{match.group(1)}")
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


def http_client(headers: dict[str, str] | None = None) -> Any:
    """The HTTP client an MCP client session uses: the test servers' token in its headers."""
    import httpx2

    return httpx2.AsyncClient(
        headers=AUTH if headers is None else headers, timeout=httpx2.Timeout(30, read=300)
    )


@contextlib.asynccontextmanager
async def http_session(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        http_client(headers) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def stdio_session(env_id: str, tmpdir: Path | None = None) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=serve_args(env_id, transport="stdio"),
        env=child_env(tmpdir),
        cwd=str(ROOT),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


# ------------------------------------------------------------------ episodes
@dataclass
class Plan:
    """An episode: its reset, its tool calls, and what the env gave in process for them."""

    reset: dict[str, Any]
    calls: list[tuple[str, dict[str, Any]]]
    rewards: list[float]
    success: bool
    env_id: str = ""


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


def plan_episode(env_id: str) -> Plan:
    """Play a solving episode in process (oracle, gold or reference actions) and return
    the tool calls that make the same turns over MCP: the first seed whose episode is
    solved (the ice is slippery: the oracle does not win every one)."""
    for seed in range(64):
        plan = _plan(env_id, seed)
        if plan.success:
            return plan
    return plan


def _plan(env_id: str, seed: int) -> Plan:
    env = gym.make(env_id, **ENV_KWARGS.get(env_id, {}))
    try:
        inner: Any = env.unwrapped
        family = env_id.rsplit("/", 1)[-1].rsplit("-v", 1)[0]
        task_id = {"FrozenLake": "4x4"}.get(family, inner.task_ids[0])
        reset = {"task_id": task_id, "seed": seed}
        if family == "FrozenLake":
            reset["max_turns"] = 12
        env.reset(seed=seed, options={k: v for k, v in reset.items() if k != "seed"})
        calls: list[tuple[str, dict[str, Any]]] = []
        rewards: list[float] = []
        done, info = False, {}

        def step(action: str) -> None:
            nonlocal done, info
            _, reward, terminated, truncated, info = env.step(action)
            rewards.append(float(reward))
            done = bool(terminated or truncated)

        if family == "FrozenLake":
            from agentenvs.envs.frozenlake.env import ACTION_NAMES
            from agentenvs.envs.frozenlake.policies import best_action

            rng = np.random.default_rng(seed)
            while not done:
                direction = ACTION_NAMES[best_action(inner, rng)]
                calls.append(("move", {"direction": direction}))
                step(f"<answer>{direction}</answer>")
        elif family == "InterCodeSQL":
            gold = inner.gold_query
            calls += [("execute_sql", {"query": gold}), ("submit", {})]
            step(f"```sql\n{gold}\n```")
            step("submit")
        elif family == "BFCL":
            made = [(c.name, _jsonable(c.args)) for c in inner.gold_calls()]
            calls += [*made, ("submit", {})]
            step(calls_action(made))
        elif family == "BFCLMultiTurn":
            from agentenvs.envs.bfcl.multi_turn.env import END_TURN_REPLY

            while not done:
                for call in inner.gold_calls():
                    made = (call.name, _jsonable(call.args))
                    calls.append(made)
                    step(calls_action([made]))
                    if done:
                        break
                if not done:
                    calls.append(("reply", {"message": END_TURN_REPLY}))
                    step(END_TURN_REPLY)
        elif family == "DeepCoderMT":
            code = inner.reference.rstrip()
            calls.append(("run_tests", {"code": code}))
            step(f"```python\n{code}\n```")
        elif family == "TerminalBench":
            oracle = inner.oracle_action()
            command = oracle.removeprefix("```bash\n").removesuffix("```").rstrip("\n")
            calls += [("run_command", {"command": command}), ("submit", {})]
            step(oracle)
            step("submit")
        else:
            raise AssertionError(f"no plan for {env_id}")
        return Plan(reset, calls, rewards, bool(info.get("success")), env_id)
    finally:
        env.close()


def hidden_keys(env_id: str) -> frozenset[str]:
    """The info keys ``env_id`` keeps from the agent (its ``hidden_info_keys``)."""
    from agentenvs.server.app import ServerConfig

    return ServerConfig(env_id).hidden_info_keys


async def play(session: Any, plan: Plan) -> tuple[list[float], dict[str, Any]]:
    """Play ``plan`` through an MCP session: the rewards of its steps and the final state.
    No result and no state holds a key the env hides from the agent."""
    hidden = hidden_keys(plan.env_id) if plan.env_id else frozenset()
    result = await session.call_tool("reset", plan.reset)
    assert not result.is_error, result.content[0].text
    rewards = []
    for name, args in plan.calls:
        listed = {t.name for t in (await session.list_tools()).tools}
        assert name in listed, (name, listed)
        result = await session.call_tool(name, args)
        assert not result.is_error, (name, result.content[0].text)
        data = result.structured_content or {}
        assert not hidden & set(data), (name, sorted(hidden & set(data)))
        if "reward" in data:
            rewards.append(float(data["reward"]))
    state = await session.call_tool("state", {})
    assert not hidden & set(state.structured_content or {}), state.structured_content
    return rewards, dict(state.structured_content or {})
