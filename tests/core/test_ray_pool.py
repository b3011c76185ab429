"""RayEnvPool on a real local multi-node Ray cluster (``ray.cluster_utils.Cluster``).

One 3-node cluster (1 CPU each, a small object store) serves the whole module. Actors
reserve a quarter CPU each, so placement is the pool's choice, not forced by capacity.
The node-removal test comes last: it leaves the cluster one node short.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agentenvs.core.aio import AsyncEnvPool
from agentenvs.core.errors import Fault
from agentenvs.core.ray_pool import EnvActorLostError, RayEnvPool

ray = pytest.importorskip(
    "ray", reason="the ray extra is not installed: pip install 'agentenvs[ray]'"
)
from ray.cluster_utils import Cluster  # noqa: E402 - after the skip

pytestmark = pytest.mark.slow

FROZENLAKE = "agentenvs/FrozenLake-v0"
ENV_KWARGS = {"map_name": "8x8", "max_turns": 12}
MOVES = ["down", "right", "right", "down"]
NODE_ARGS = {"num_cpus": 1, "object_store_memory": 80 * 1024**2}


def actions(seed: int) -> list[str]:
    return [f"<answer>{MOVES[(seed + i) % 4]}</answer>" for i in range(12)]


async def play(pool: Any, seed: int) -> list[Any]:
    async with pool.env() as env:
        return await play_on(env, seed)


async def play_on(env: Any, seed: int) -> list[Any]:
    out: list[Any] = [await env.areset(seed=seed)]
    for action in actions(seed):
        step = await env.astep(action)
        out.append(step)
        if step[2] or step[3]:
            break
    return out


def local_episodes(seeds: list[int]) -> list[list[Any]]:
    async def main() -> list[list[Any]]:
        async with AsyncEnvPool(FROZENLAKE, max_envs=2, **ENV_KWARGS) as pool:
            return [await play(pool, s) for s in seeds]

    return asyncio.run(main())


def ray_pool(**kwargs: Any) -> RayEnvPool:
    return RayEnvPool(FROZENLAKE, num_cpus=0.25, **{"max_envs": 3, **kwargs}, **ENV_KWARGS)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    head = {**NODE_ARGS, "include_dashboard": False, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        for _ in range(2):
            cluster.add_node(**NODE_ARGS, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def alive_nodes() -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n["Alive"]}


def test_spread_puts_each_actor_on_its_own_node(cluster: Cluster) -> None:
    async def main() -> list[str]:
        async with ray_pool(placement="spread") as pool:
            async with pool.env() as a, pool.env() as b, pool.env() as c:
                assert pool.size == 3
                return [a.node_id, b.node_id, c.node_id]

    nodes = asyncio.run(main())
    assert len(set(nodes)) == 3
    assert set(nodes) == alive_nodes()


def test_episodes_and_snapshots_equal_the_local_pool(cluster: Cluster) -> None:
    seeds = [0, 1, 2, 3, 4, 5]

    async def main() -> tuple[list[list[Any]], list[Any], list[Any]]:
        async with ray_pool(max_envs=2) as pool:
            episodes = await asyncio.gather(*(play(pool, s) for s in seeds))
            assert pool.size == 2  # reused, not one actor an episode
            async with pool.env() as env:
                await env.areset(seed=7)
                await env.astep(actions(7)[0])
                snapshot = await env.asnapshot()
                remote = [await env.astep(a) for a in actions(7)[1:3]]
                await env.arestore(snapshot)  # a snapshot travels back, too
                again = [await env.astep(a) for a in actions(7)[1:3]]
                assert again == remote
        # the snapshot taken on a node restores into a local env
        async with AsyncEnvPool(FROZENLAKE, max_envs=1, **ENV_KWARGS) as local:
            async with local.env() as env:
                await env.areset(seed=7)
                await env.arestore(snapshot)
                here = [await env.astep(a) for a in actions(7)[1:3]]
        return episodes, remote, here

    episodes, remote, here = asyncio.run(main())
    assert episodes == local_episodes(seeds)
    assert here == remote


def test_env_errors_arrive_as_raised(cluster: Cluster) -> None:
    async def main() -> None:
        async with ray_pool() as pool:
            async with pool.env() as env:
                with pytest.raises(Exception) as caught:
                    await env.arestore("not a snapshot")  # type: ignore[arg-type]
                assert not isinstance(caught.value, Fault)
                assert not isinstance(caught.value, ray.exceptions.RayError)

    asyncio.run(main())
    with pytest.raises(ValueError, match="placement"):
        ray_pool(placement="scatter")


def test_a_killed_actor_is_a_fault_and_the_pool_replaces_it(cluster: Cluster) -> None:
    async def main() -> tuple[list[Any], int]:
        async with ray_pool(max_envs=1) as pool:
            with pytest.raises(EnvActorLostError) as caught:
                async with pool.env() as env:
                    await env.areset(seed=3)
                    await env.astep(actions(3)[0])
                    ray.kill(env._actor, no_restart=True)
                    # the kill travels through the cluster: a call may still be answered
                    # before it lands, and then it is a fault, never a reward
                    deadline = time.monotonic() + 120
                    while time.monotonic() < deadline:
                        await env.astep(actions(3)[1])
                        await env.areset(seed=3)
                        await asyncio.sleep(0.05)
            fault = caught.value
            assert isinstance(fault, Fault) and fault.kind == "worker" and fault.retryable
            assert env.closed and env.lost is fault
            with pytest.raises(EnvActorLostError):
                await env.astep(actions(3)[1])  # dead for good: never a reward
            assert pool.size == 0
            again = await play(pool, 3)  # a fresh actor for the next episode
            return again, pool.size

    again, size = asyncio.run(main())
    assert again == local_episodes([3])[0]
    assert size == 1


def test_a_lost_node_is_a_fault_and_the_pool_recovers(cluster: Cluster) -> None:
    head_id = cluster.head_node.node_id
    by_id = {node.node_id: node for node in cluster.worker_nodes}

    async def main() -> tuple[list[Any], str]:
        async with ray_pool(placement="spread") as pool:
            async with pool.env() as a, pool.env() as b, pool.env() as c:
                envs = [a, b, c]
                for env in envs:
                    await env.areset(seed=2)
                    await env.astep(actions(2)[0])
                doomed = next(e for e in envs if e.node_id != head_id)
                cluster.remove_node(by_id[doomed.node_id], allow_graceful=False)
                # the node's worker processes outlive its raylet for a moment: a call may
                # still be answered until they go, and then it is a fault, never a reward
                deadline = time.monotonic() + 120
                with pytest.raises(EnvActorLostError):
                    while time.monotonic() < deadline:
                        await doomed.areset(seed=2)
                        await asyncio.sleep(0.2)
                for env in envs:
                    if env is not doomed:  # the others play on
                        step = await env.astep(actions(2)[1])
                        assert isinstance(step[1], float)
            assert pool.size == 2  # the lost one was dropped
            async with pool.env() as a, pool.env() as b, pool.env() as c:
                fresh = next(e for e in (a, b, c) if e not in envs)  # a new actor
                return await play_on(fresh, 2), pool.size

    again, size = asyncio.run(main())
    assert again == local_episodes([2])[0]
    assert size == 3
