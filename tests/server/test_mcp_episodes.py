"""Every env played to its end by the official MCP SDK's client, over stdio and over
streamable HTTP, with the rewards of in-process runs of the same actions."""

from __future__ import annotations

import anyio
import pytest

pytest.importorskip("mcp", reason="could not import mcp: pip install 'agentenvs[server]'")

from _mcp_helpers import (  # noqa: E402
    http_server,
    http_session,
    plan_episode,
    play,
    stdio_session,
    traversable_tmp,
)


@pytest.fixture
def tmp_path():  # noqa: ANN201 - the servers' TMPDIR, where sandboxes would leave dirs
    with traversable_tmp() as path:
        yield path


ENVS = [
    pytest.param("agentenvs/FrozenLake-v0", id="frozenlake"),
    pytest.param("agentenvs/BFCL-v0", id="bfcl"),
    pytest.param("agentenvs/BFCLMultiTurn-v0", id="bfcl-multi-turn"),
    pytest.param("agentenvs/InterCodeSQL-v0", id="intercode-sqlite"),
    pytest.param("agentenvs/DeepCoderMT-v0", id="deepcoder", marks=pytest.mark.bwrap),
    pytest.param("agentenvs/TerminalBench-v0", id="terminal", marks=pytest.mark.bwrap),
]


@pytest.mark.parametrize("env_id", ENVS)
def test_an_episode_over_stdio_equals_the_in_process_one(env_id: str, tmp_path) -> None:
    plan = plan_episode(env_id)
    assert plan.success, "the in-process episode solves the task"

    async def main() -> tuple[list[float], dict]:
        async with stdio_session(env_id, tmp_path) as session:
            return await play(session, plan)

    rewards, state = anyio.run(main)
    assert rewards == plan.rewards
    assert state["success"] is True and state["done"] is True
    assert state["return"] == pytest.approx(sum(plan.rewards))
    assert list(tmp_path.iterdir()) == []  # the env's sandbox, if any, is gone


@pytest.mark.parametrize("env_id", ENVS)
def test_an_episode_over_http_equals_the_in_process_one(env_id: str, tmp_path) -> None:
    plan = plan_episode(env_id)
    with http_server(env_id, tmpdir=tmp_path) as server:

        async def main() -> tuple[list[float], dict]:
            async with http_session(server.url) as session:
                return await play(session, plan)

        rewards, state = anyio.run(main)
        assert rewards == plan.rewards
        assert state["success"] is True and state["done"] is True
        # the client ended its session on exit (DELETE): its env is closed
        assert server.wait_envs(0) == 0
        assert server.sessions()["active"] == 0
        # no sandbox dir is left (the process's one copy of pytest's packages stays until exit)
        left = [p.name for p in tmp_path.iterdir() if not p.name.startswith(("agentenvs-pylib-", "agentenvs-etc-"))]
        assert left == []
