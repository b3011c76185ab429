"""The async face: same episodes as the sync loop, one thread per env, bounded envs and steps."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.aio import AsyncEnv, AsyncEnvPool

MOVES = ["Left", "Down", "Right", "Up"]


def frozenlake_actions(seed: int) -> list[str]:
    return [f"<answer>{MOVES[(seed + i) % 4]}</answer>" for i in range(12)]


def sync_frozenlake(seed: int) -> list[Any]:
    env = gym.make("agentenvs/FrozenLake-v0", map_name="8x8", max_turns=12)
    out: list[Any] = [env.reset(seed=seed)]
    for action in frozenlake_actions(seed):
        step = env.step(action)
        out.append(step)
        if step[2] or step[3]:
            break
    env.close()
    return out


async def async_frozenlake(pool: AsyncEnvPool, seed: int) -> list[Any]:
    async with pool.env() as env:
        out: list[Any] = [await env.areset(seed=seed)]
        for action in frozenlake_actions(seed):
            step = await env.astep(action)
            out.append(step)
            if step[2] or step[3]:
                break
        return out


def test_concurrent_episodes_equal_the_sync_loop() -> None:
    seeds = list(range(40))

    async def main() -> list[list[Any]]:
        async with AsyncEnvPool("agentenvs/FrozenLake-v0", max_envs=6, map_name="8x8", max_turns=12) as pool:
            results = await asyncio.gather(*(async_frozenlake(pool, s) for s in seeds))
            assert pool.size <= 6
            return results

    got = asyncio.run(main())
    assert got == [sync_frozenlake(s) for s in seeds]


class CountingEnv(gym.Wrapper):
    """Records how many envs are open and how many steps run at once."""

    lock = threading.Lock()
    open_now = 0
    open_max = 0
    stepping = 0
    stepping_max = 0
    closed = 0
    threads: dict[int, set[int]] = {}

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        with self.lock:
            CountingEnv.open_now += 1
            CountingEnv.open_max = max(CountingEnv.open_max, CountingEnv.open_now)
            CountingEnv.threads[id(self)] = {threading.get_ident()}

    def step(self, action: str) -> Any:
        with self.lock:
            CountingEnv.stepping += 1
            CountingEnv.stepping_max = max(CountingEnv.stepping_max, CountingEnv.stepping)
            CountingEnv.threads[id(self)].add(threading.get_ident())
        try:
            time.sleep(0.01)  # a slow step, long enough for calls to overlap
            return self.env.step(action)
        finally:
            with self.lock:
                CountingEnv.stepping -= 1

    def close(self) -> None:
        with self.lock:
            CountingEnv.open_now -= 1
            CountingEnv.closed += 1
            CountingEnv.threads[id(self)].add(threading.get_ident())
        self.env.close()


def counting_factory(**kwargs: Any) -> gym.Env:
    return CountingEnv(gym.make("agentenvs/FrozenLake-v0", **kwargs))


@pytest.fixture
def counting() -> type[CountingEnv]:
    CountingEnv.open_now = CountingEnv.open_max = CountingEnv.stepping = 0
    CountingEnv.stepping_max = CountingEnv.closed = 0
    CountingEnv.threads = {}
    return CountingEnv


def test_envs_and_steps_are_bounded_and_each_env_keeps_its_thread(counting) -> None:
    async def main() -> None:
        pool = AsyncEnvPool(counting_factory, max_envs=5, max_concurrent_steps=2, max_turns=4)
        async with pool:
            await asyncio.gather(*(async_frozenlake(pool, s) for s in range(30)))
            assert counting.open_now == pool.size <= 5

    asyncio.run(main())
    assert counting.open_max <= 5
    assert 1 <= counting.stepping_max <= 2
    assert counting.open_now == 0 and counting.closed == counting.open_max
    # built, stepped and closed on one thread each
    assert all(len(threads) == 1 for threads in counting.threads.values())


def test_an_env_whose_episode_failed_is_closed_not_reused(counting) -> None:
    async def main() -> int:
        async with AsyncEnvPool(counting_factory, max_envs=2) as pool:
            with pytest.raises(ValueError, match="unknown reset option"):
                async with pool.env() as env:
                    await env.areset(seed=0, options={"no_such_option": 1})
            assert pool.size == 0 and counting.closed == 1
            async with pool.env() as env:
                obs, info = await env.areset(seed=0)
                assert info["turn"] == 0
            return pool.size

    assert asyncio.run(main()) == 1
    assert counting.open_now == 0


def test_snapshot_restore_and_score_through_the_async_face() -> None:
    async def main() -> None:
        env = await AsyncEnv.make("agentenvs/FrozenLake-v0", map_name="8x8")
        try:
            await env.areset(seed=3)
            await env.astep("<answer>Down</answer>")
            snap = await env.asnapshot()
            first = await env.astep("<answer>Right</answer>")
            await env.arestore(snap)
            assert await env.astep("<answer>Right</answer>") == first
            await env.arestore(snap)
            q = await env.ascore_action("Right")
            assert q == pytest.approx(env.unwrapped.q_values()[2])
        finally:
            await env.aclose()
        assert env.closed
        with pytest.raises(RuntimeError, match="closed"):
            await env.astep("Down")

    asyncio.run(main())


@pytest.mark.parametrize("inline", [None, True])
def test_sqlite_envs_work_from_the_event_loop(inline) -> None:
    # an SQLite connection refuses threads other than its own: the env must stay on one
    tasks = [f"seed-{s}" for s in range(12)]

    def sync_run(seed: int) -> list[Any]:
        env = gym.make("agentenvs/InterCodeSQL-v0")
        obs, info = env.reset(seed=seed)
        gold = env.unwrapped.gold_query
        out = [obs, env.step(f"```sql\n{gold}\n```"), env.step("submit")]
        env.close()
        return out

    async def async_run(pool: AsyncEnvPool, seed: int) -> list[Any]:
        async with pool.env() as env:
            obs, info = await env.areset(seed=seed)
            gold = await env.call(lambda e: e.unwrapped.gold_query)
            return [obs, await env.astep(f"```sql\n{gold}\n```"), await env.astep("submit")]

    async def main() -> list[list[Any]]:
        async with AsyncEnvPool("agentenvs/InterCodeSQL-v0", max_envs=4, inline=inline) as pool:
            # a statement may run up to its time limit: a thread of its own unless asked
            assert pool.inline is bool(inline)
            return await asyncio.gather(*(async_run(pool, s) for s in range(len(tasks))))

    got = asyncio.run(main())
    assert got == [sync_run(s) for s in range(len(tasks))]
    assert all(run[2][1] == 1.0 for run in got)


def test_envs_whose_calls_only_compute_run_inline() -> None:
    from agentenvs.core.aio import calls_wait

    assert not calls_wait("agentenvs/FrozenLake-v0")
    assert not calls_wait("agentenvs/BFCL-v0") and not calls_wait("agentenvs/BFCLMultiTurn-v0")
    assert calls_wait("agentenvs/InterCodeSQL-v0")  # statements run up to their time limit
    assert calls_wait("agentenvs/InterCodeSQL-v0", {"backend": "mysql"})
    assert calls_wait("agentenvs/DeepCoderMT-v0") and calls_wait("agentenvs/TerminalBench-v0")
    assert AsyncEnvPool(counting_factory, max_envs=1).inline is False  # a factory: a thread


def test_inline_envs_run_on_the_loop_thread_and_take_turns() -> None:
    order: list[int] = []

    class Logged(gym.Wrapper):
        def step(self, action: str) -> Any:
            order.append(self.seed_)
            return self.env.step(action)

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            self.seed_ = seed
            return self.env.reset(seed=seed, options=options)

    def factory() -> gym.Env:
        return Logged(gym.make("agentenvs/FrozenLake-v0", map_name="8x8", max_turns=12))

    async def main() -> None:
        loop_thread = threading.get_ident()
        async with AsyncEnvPool(factory, max_envs=2, inline=True) as pool:
            async def one(seed: int) -> list[Any]:
                async with pool.env() as env:
                    assert env.inline
                    assert await env.call(lambda e: threading.get_ident()) == loop_thread
                    return await async_frozenlake_on(env, seed)

            got = await asyncio.gather(one(0), one(1))
        assert got == [sync_frozenlake(0), sync_frozenlake(1)]

    asyncio.run(main())
    # the two episodes' steps interleave: each call lets the other coroutine run
    assert order[:4] in ([0, 1, 0, 1], [1, 0, 1, 0]), order


async def async_frozenlake_on(env: AsyncEnv, seed: int) -> list[Any]:
    out: list[Any] = [await env.areset(seed=seed)]
    for action in frozenlake_actions(seed):
        step = await env.astep(action)
        out.append(step)
        if step[2] or step[3]:
            break
    return out


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_envs"):
        AsyncEnvPool("agentenvs/FrozenLake-v0", max_envs=0)
    with pytest.raises(ValueError, match="max_concurrent_steps"):
        AsyncEnvPool("agentenvs/FrozenLake-v0", max_envs=1, max_concurrent_steps=0)
    with pytest.raises(TypeError, match="env id or a factory"):
        AsyncEnvPool(3, max_envs=1)  # type: ignore[arg-type]
