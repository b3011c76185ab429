"""Every env played to its end by ``ors-sdk``'s client against ``agentenvs serve --protocol
ors`` on loopback, with the rewards of in-process runs of the same actions."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("ors", reason="could not import ors: pip install 'agentenvs[ors]'")

from _mcp_helpers import plan_episode, traversable_tmp  # noqa: E402
from _ors_helpers import ors_env, ors_server, play, task  # noqa: E402

ENVS = [
    pytest.param("agentenvs/FrozenLake-v0", id="frozenlake"),
    pytest.param("agentenvs/BFCL-v0", id="bfcl"),
    pytest.param("agentenvs/BFCLMultiTurn-v0", id="bfcl-multi-turn"),
    pytest.param("agentenvs/InterCodeSQL-v0", id="intercode-sqlite"),
    pytest.param("agentenvs/DeepCoderMT-v0", id="deepcoder", marks=pytest.mark.bwrap),
    pytest.param("agentenvs/TerminalBench-v0", id="terminal", marks=pytest.mark.bwrap),
]


@pytest.fixture
def tmp_path():  # noqa: ANN201 - the server's TMPDIR, where sandboxes would leave dirs
    with traversable_tmp() as path:
        yield path


@pytest.mark.parametrize("env_id", ENVS)
def test_an_ors_episode_equals_the_in_process_one(env_id: str, tmp_path) -> None:
    plan = plan_episode(env_id)
    assert plan.success, "the in-process episode solves the task"
    with ors_server(env_id, tmpdir=tmp_path) as server:

        async def main() -> tuple:
            async with (
                ors_env(server.url, env_id) as env,
                env.session(task=task(env_id, plan.reset)) as session,
            ):
                prompt = await session.get_prompt()
                played = await play(session, plan)
                held = server.sessions()
            return prompt, played, held

        prompt, (rewards, last, outputs), held = asyncio.run(main())
        assert held["active"] == 1 and held["envs"] == 1
        assert prompt[0].detail["task_id"] == plan.reset["task_id"]
        assert rewards == plan.rewards
        assert last.finished is True and last.metadata["success"] is True
        assert last.metadata["return"] == pytest.approx(sum(plan.rewards))
        assert [o.finished for o in outputs].count(True) == 1  # only the last one
        # the client deleted its session on exit: its env is closed
        assert server.wait_envs(0) == 0
        assert server.sessions()["active"] == 0
        left = [p.name for p in tmp_path.iterdir() if not p.name.startswith(("agentenvs-pylib-", "agentenvs-etc-"))]
        assert left == []


def test_a_listed_task_by_split_and_index_is_the_episode_of_its_spec() -> None:
    env_id = "agentenvs/FrozenLake-v0"
    with ors_server(env_id) as server:

        async def main() -> tuple:
            async with ors_env(server.url, env_id) as env:
                return await listed(env)

        async def listed(env) -> tuple:  # noqa: ANN001
            splits = await env.list_splits()
            tasks = await env.list_tasks("test")
            tools = await env.list_tools()
            async with env.session(split="test", index=1) as session:
                prompt = await session.get_prompt()
            seeded = []
            for _ in range(2):  # the same spec and seed: the same episode
                spec = {**tasks[1].task_spec, "seed": 7, "max_turns": 6}
                async with env.session(task=task(env_id, spec)) as session:
                    outs = [await session.call_tool("move", {"direction": "Right"})]
                    outs += [await session.call_tool("move", {"direction": "Down"})]
                    seeded.append([(o.blocks[0].text, o.reward) for o in outs])
            return splits, tasks, tools, prompt, seeded

        splits, tasks, tools, prompt, seeded = asyncio.run(main())
        assert splits == ["test"]
        assert [t.task_spec for t in tasks[:2]] == [{"task_id": "4x4"}, {"task_id": "8x8"}]
        assert [t.name for t in tools] == ["move"]
        assert tools[0].input_schema["properties"]["direction"]["enum"] == [
            "Left",
            "Down",
            "Right",
            "Up",
        ]
        assert prompt[0].detail["task_id"] == "8x8" and prompt[0].detail["tools"] == ["move"]
        assert "`move`" in prompt[0].text
        assert seeded[0] == seeded[1]
        assert server.wait_envs(0) == 0
