"""A model server's faults are never the agent's action: ``OpenAICompatPolicy`` against a
real OpenAI-compatible server on loopback (aiohttp, the real wire format) that answers
500 or 429, hangs, trickles, drops its answer mid-body or reports a dropped generation,
in front of the local server over the tiny model (``agentenvs.policy.serve``).

Each transient fault is retried and the samples (and whole episodes, through the
runner's ``run_episode``) equal those of a fault-free run with the same seeds; a fault
that lasts is a ``Fault(kind="model")`` out of ``sample`` (and out of the episode: no
record, no reward); the caller's errors (a context too long, a bad key) are raised at
once, never retried. The local HF policy's own failures: a prompt longer than the
context is the agent's (``PromptTooLongError``), memory that runs out is a fault.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the env ids
from agentenvs.core.errors import Fault
from agentenvs.policy.base import Conversation
from agentenvs.policy.chat import PromptTooLongError
from agentenvs.policy.openai_compat import EndpointError, OpenAICompatPolicy
from agentenvs.policy.registry import make_policy

aiohttp = pytest.importorskip("aiohttp")
from aiohttp import web  # noqa: E402

#: how the server answers a request: forwarded to the model ("ok") or a fault
MODES = ("ok", "500", "429", "hang", "drop", "trickle", "abort", "error-in-200")


class FaultyModelServer:
    """An OpenAI-compatible server on loopback that answers each POST by the next mode of
    its script (``ok`` when the script is used up), forwarding ``ok`` requests to
    ``upstream``; ``requests`` counts the POSTs it was sent."""

    def __init__(self, upstream: str, script: list[str] | None = None) -> None:
        self.upstream = upstream
        self.script = list(script or [])
        self.requests = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)

    async def _start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/{path:.*}", self._answer)
        self.runner = web.AppRunner(app, shutdown_timeout=0.5, handler_cancellation=True)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}/v1"

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        mode = self.script.pop(0) if self.script else "ok"
        body = await request.read()
        if mode == "500":
            return web.json_response({"error": {"message": "engine crashed"}}, status=500)
        if mode == "429":
            return web.json_response(
                {"error": {"message": "rate limited"}}, status=429, headers={"Retry-After": "0"}
            )
        if mode == "hang":
            await asyncio.Event().wait()  # until the client gives up and the server stops
        if mode == "context":
            message = (
                "This model's maximum context length is 4096 tokens. However, you requested "
                "5000 tokens. Please reduce the length of the messages or completion."
            )
            return web.json_response({"error": {"message": message, "code": 400}}, status=400)
        if mode == "401":
            return web.json_response({"error": {"message": "bad key"}}, status=401)
        if mode == "error-in-200":
            return web.json_response({"error": {"message": "upstream failed", "code": 502}})
        async with aiohttp.ClientSession() as session:
            async with session.post(
                f"{self.upstream}/{request.match_info['path']}",
                data=body,
                headers={"Content-Type": "application/json"},
            ) as response:
                status, data = response.status, await response.read()
        if mode == "abort":
            answer = json.loads(data)
            for choice in answer["choices"]:
                choice["message"]["content"] = choice["message"]["content"][:1]
                choice["finish_reason"] = "abort"
            return web.json_response(answer)
        if mode in ("drop", "trickle"):
            stream = web.StreamResponse(status=status, headers={"Content-Type": "application/json"})
            stream.content_length = len(data)
            await stream.prepare(request)
            if mode == "drop":  # half the body, then the connection is gone
                await stream.write(data[: len(data) // 2])
                assert request.transport is not None
                request.transport.close()
                return stream
            for i in range(len(data) - 1):  # a byte a tenth of a second: no read ever times out
                await stream.write(data[i : i + 1])
                await asyncio.sleep(0.1)
            await asyncio.Event().wait()
        return web.Response(status=status, body=data, content_type="application/json")

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


@pytest.fixture(scope="module")
def upstream(hf_policy: Any) -> Iterator[Any]:
    from agentenvs.policy.serve import serve

    # no key: the fault proxy in front of it forwards bodies, not headers (loopback only)
    with serve(hf_policy, model_name="tiny", auth=False) as running:
        yield running


@pytest.fixture()
def faulty(upstream: Any) -> Iterator[Any]:
    made: list[FaultyModelServer] = []

    def make(script: list[str]) -> FaultyModelServer:
        made.append(FaultyModelServer(upstream.url, script))
        return made[-1]

    yield make
    for server in made:
        server.close()


def conversation() -> Conversation:
    return Conversation.start("Map:\nP_\n_G", {"system_prompt": "You are playing FrozenLake."})


def client(url: str, **options: Any) -> OpenAICompatPolicy:
    settings = {"max_new_tokens": 8, "timeout": 1.0, "max_retries": 2, "backoff": 0.01}
    return OpenAICompatPolicy(url, "tiny", **{**settings, **options})


@pytest.mark.parametrize("mode", ["500", "429", "hang", "drop", "abort", "error-in-200"])
def test_a_transient_fault_is_retried_and_the_samples_equal_a_fault_free_run(
    faulty: Any, upstream: Any, mode: str
) -> None:
    expected = client(upstream.url).sample([conversation()], 3, seed=7)
    server = faulty([mode, "ok"])
    policy = client(server.url)
    assert policy.sample([conversation()], 3, seed=7) == expected
    assert server.requests == 2 and policy.transient_failures == 1


@pytest.mark.parametrize("mode", ["500", "hang", "drop", "abort", "error-in-200"])
def test_a_lasting_fault_is_a_model_fault_never_an_action(faulty: Any, mode: str) -> None:
    server = faulty([mode] * 3)
    policy = client(server.url)
    with pytest.raises(Fault, match="the model server failed: 3 tries") as info:
        policy.sample([conversation()], 2, seed=1)
    fault = info.value
    assert (fault.kind, fault.attribution, fault.retryable) == ("model", "infrastructure", True)
    assert fault.record()["evidence"]
    assert server.requests == 3 and policy.transient_failures == 3


def test_a_refused_connection_is_a_model_fault() -> None:
    import socket

    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(Fault, match="ConnectionRefusedError"):
        client(f"http://127.0.0.1:{port}/v1").sample([conversation()])


def test_the_deadline_cuts_off_a_server_that_trickles_its_answer(faulty: Any) -> None:
    # each byte comes within the read timeout, so only the deadline can end the call
    server = faulty(["trickle"] * 10)
    policy = client(server.url, timeout=5.0, deadline=1.5, max_retries=5)
    with pytest.raises(Fault, match="deadline"):
        policy.sample([conversation()])
    assert server.requests == 1


def test_the_callers_errors_are_raised_at_once(faulty: Any) -> None:
    server = faulty(["context", "401"])
    policy = client(server.url, max_retries=3)
    with pytest.raises(PromptTooLongError, match="maximum context length"):
        policy.sample([conversation()])
    with pytest.raises(EndpointError, match="HTTP 401: bad key"):
        policy.sample([conversation()])
    assert server.requests == 2 and policy.transient_failures == 0


# ---------------------------------------------------------------- whole episodes
def episode(policy: Any, seed: int) -> dict[str, Any]:
    from agentenvs.eval.runner import WorkItem, run_episode

    env = gym.make("agentenvs/FrozenLake-v0")
    try:
        item = WorkItem(task_id="4x4", sample=0, budget=4, seed=seed)
        return run_episode(env, policy, item, info_keys=())
    finally:
        env.close()


def test_episodes_through_transient_faults_equal_fault_free_episodes(
    faulty: Any, upstream: Any
) -> None:
    spec = f"openai:base_url={upstream.url},model=tiny,max_new_tokens=8,max_retries=2,backoff=0.01,timeout=1"
    expected = [episode(make_policy(spec), seed) for seed in (0, 1)]
    server = faulty(["500", "ok", "drop", "ok", "429", "hang", "ok", "abort"])
    policy = make_policy(spec.replace(upstream.url, server.url))
    assert [episode(policy, seed) for seed in (0, 1)] == expected
    assert policy.transient_failures == 5  # type: ignore[attr-defined]


def test_an_episode_whose_model_server_fails_raises_the_fault(faulty: Any) -> None:
    server = faulty(["ok", "500", "500", "500"])
    policy = client(server.url)
    with pytest.raises(Fault, match="HTTP 500: engine crashed"):
        episode(policy, 0)


# ---------------------------------------------------------------- the local model's failures
def long_conversation(hf_policy: Any) -> Conversation:
    text = "Map:\n" + "P_G_" * (hf_policy.context_length // 2)
    return Conversation.start(text, {})


def test_a_prompt_longer_than_the_context_is_the_agents(hf_policy: Any, upstream: Any) -> None:
    conv = long_conversation(hf_policy)
    assert len(hf_policy.formatter.prompt_ids(conv)) > hf_policy.context_length
    with pytest.raises(PromptTooLongError, match="maximum context length"):
        hf_policy.sample([conv])
    with pytest.raises(PromptTooLongError, match="maximum context length"):
        hf_policy.score([conv], ["Up"])
    remote = client(upstream.url, max_retries=3)
    with pytest.raises(PromptTooLongError, match="maximum context length"):
        remote.sample([conv])
    assert remote.transient_failures == 0


def test_generation_stops_where_the_context_ends(hf_policy: Any) -> None:
    def prompt(fill: int) -> list[int]:
        return hf_policy.formatter.prompt_ids(Conversation.start("Map:\n" + "_" * fill, {}))

    per_char = len(prompt(100)) - len(prompt(0))
    ids = prompt((hf_policy.context_length - 10 - len(prompt(0))) * 100 // per_char)
    room = hf_policy.context_length - len(ids)
    assert 0 < room < 20
    (generation,) = hf_policy.generate([ids], 1, seed=0, temperature=1.0, max_new_tokens=40)[0]
    assert len(generation.token_ids) <= room


@pytest.mark.skipif(
    not pytest.importorskip("torch").cuda.is_available(), reason="needs a CUDA device"
)
def test_cuda_memory_running_out_is_a_model_fault(tiny_model: Any, tiny_tokenizer: Any) -> None:
    import torch

    from agentenvs.policy.hf import HFPolicy

    policy = HFPolicy(tiny_model, tiny_tokenizer, device="cuda", max_new_tokens=64, batch_size=512)
    fraction = (torch.cuda.memory_allocated() + 2**20) / torch.cuda.get_device_properties(
        0
    ).total_memory
    torch.cuda.set_per_process_memory_fraction(fraction)  # the allocator refuses past this
    try:
        with pytest.raises(Fault, match="out of memory") as info:
            policy.sample([conversation()], 512)
        assert info.value.kind == "model"
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        tiny_model.to("cpu")
