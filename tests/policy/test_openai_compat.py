"""OpenAICompatPolicy against real HTTP: the local server over the tiny model, and small
stdlib servers that fail on purpose (retries, timeouts, missing prompt log-probs)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentenvs.core.errors import Fault
from agentenvs.policy.base import Conversation, ScoringPolicy
from agentenvs.policy.openai_compat import (
    EndpointError,
    OpenAICompatPolicy,
    ScoringUnsupportedError,
)
from agentenvs.policy.registry import make_policy

ACTIONS = ["<answer>Left</answer>", "Up", "some garbage, not a move"]


def conversations() -> list[Conversation]:
    first = Conversation.start("Map:\nP_\n_G", {"system_prompt": "You are playing FrozenLake."})
    second = Conversation.start("Map:\n_P\n_G", {})
    second.add_turn("<answer>Stay</answer>", "Invalid action. Map:\n_P\n_G")
    return [first, second]


@pytest.fixture(scope="module")
def server(hf_policy: Any) -> Iterator[Any]:
    from agentenvs.policy.serve import serve

    # the key by the environment, as a user gives it; every client below takes it there
    with serve(hf_policy, model_name="tiny") as running, pytest.MonkeyPatch.context() as env:
        env.setenv("AGENTENVS_MODEL_API_KEY", running.api_key)
        yield running


@pytest.fixture()
def client(server: Any, tiny_tokenizer: Any) -> OpenAICompatPolicy:
    return OpenAICompatPolicy(server.url, "tiny", tokenizer=tiny_tokenizer, max_new_tokens=12)


def test_scores_equal_the_local_policys(client: OpenAICompatPolicy, hf_policy: Any) -> None:
    assert isinstance(client, ScoringPolicy)
    convs = [c for c in conversations() for _ in ACTIONS]
    actions = ACTIONS * 2
    client.score_batch_size = 4  # several requests, several prompts each
    remote, local = client.score(convs, actions), hf_policy.score(convs, actions)
    for r, lo in zip(remote, local, strict=True):
        assert r.tokens == lo.tokens
        assert r.token_logprobs == pytest.approx(lo.token_logprobs, abs=1e-5)
        assert r.total == pytest.approx(lo.total, abs=1e-5)


def test_samples_are_valid_seeded_and_n_per_conversation(client: OpenAICompatPolicy) -> None:
    convs = conversations()
    first = client.sample(convs, 3, seed=11)
    assert [len(s) for s in first] == [3, 3]
    assert all(isinstance(t, str) for s in first for t in s)
    assert client.sample(convs, 3, seed=11) == first
    assert client.sample(convs, 3, seed=12) != first
    assert len({t for s in first for t in s}) > 3


def test_sampling_options_reach_the_server(server: Any, tiny_tokenizer: Any, hf_policy: Any) -> None:
    conv = conversations()[0]
    greedy = OpenAICompatPolicy(server.url, "tiny", temperature=0.0, max_new_tokens=6)
    (texts,) = greedy.sample([conv], 2)
    ids = hf_policy.formatter.prompt_ids(conv)
    local = hf_policy.generate([ids], 1, temperature=0.0, max_new_tokens=6)[0][0].text
    assert texts == [local, local]
    stop = next(ch for ch in local[1:] if ch.isascii() and ch.isalpha())
    stopped = OpenAICompatPolicy(server.url, "tiny", temperature=0.0, max_new_tokens=6, stop=stop)
    assert stopped.sample([conv], 1)[0] == [local[: local.find(stop)]]


def test_spec_builds_the_client(server: Any, tiny_model_dir: Path, hf_policy: Any) -> None:
    spec = f"openai:base_url={server.url},model=tiny,tokenizer={tiny_model_dir},max_new_tokens=4"
    policy = make_policy(spec)
    assert isinstance(policy, OpenAICompatPolicy) and policy.name == spec
    assert policy.base_url == server.url and policy.max_new_tokens == 4
    (score,) = policy.score(conversations()[:1], ["Up"])
    assert score.total == pytest.approx(hf_policy.score(conversations()[:1], ["Up"])[0].total, abs=1e-5)


def test_scoring_without_a_tokenizer_says_what_is_missing(server: Any) -> None:
    policy = OpenAICompatPolicy(server.url, "tiny")
    with pytest.raises(ScoringUnsupportedError, match="tokenizer"):
        policy.score(conversations()[:1], ["Up"])


def test_server_rejects_bad_requests(server: Any) -> None:
    policy = OpenAICompatPolicy(server.url, "tiny", max_retries=0)
    with pytest.raises(EndpointError, match="HTTP 400: 'messages'") as info:
        policy._post("/chat/completions", {"model": "tiny", "messages": []})
    assert info.value.status == 400
    with pytest.raises(EndpointError, match="HTTP 404"):
        policy._post("/nowhere", {})


def test_base_url_forms_and_argument_checks() -> None:
    assert OpenAICompatPolicy("http://h:1", "m").base_url == "http://h:1/v1"
    assert OpenAICompatPolicy("http://h:1/v1/", "m").base_url == "http://h:1/v1"
    with pytest.raises(ValueError, match="http"):
        OpenAICompatPolicy("h:1", "m")
    with pytest.raises(ValueError, match="temperature"):
        OpenAICompatPolicy("http://h:1", "m", temperature=-0.5)


# ---------------------------------------------------------------- failing servers
class Scripted:
    """A stdlib HTTP server answering each POST with the next (status, body, delay)."""

    def __init__(self, answers: list[tuple[int, Any, float]]) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, dict(self.headers), body))
                status, payload, delay = outer.answers.pop(0) if outer.answers else (500, {}, 0)
                time.sleep(delay)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def scripted() -> Iterator[Callable[[list[tuple[int, Any, float]]], Scripted]]:
    made: list[Scripted] = []

    def make(answers: list[tuple[int, Any, float]]) -> Scripted:
        made.append(Scripted(answers))
        return made[-1]

    yield make
    for server in made:
        server.close()


def chat_answer(*texts: str) -> dict[str, Any]:
    return {"choices": [{"index": i, "message": {"role": "assistant", "content": t}} for i, t in enumerate(texts)]}


def test_retries_transient_errors_then_succeeds(scripted: Any) -> None:
    server = scripted([(503, {"error": {"message": "busy"}}, 0), (429, {}, 0), (200, chat_answer("b", "a"), 0)])
    policy = OpenAICompatPolicy(server.url, "m", api_key="k", max_retries=2, backoff=0.01)
    conv = conversations()[0]
    conv.tools = [{"type": "function", "function": {"name": "f"}}]
    assert policy.sample([conv], 2, seed=1) == [["b", "a"]]
    assert len(server.requests) == 3
    path, headers, body = server.requests[-1]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer k"
    assert (body["n"], body["model"], body["tool_choice"]) == (2, "m", "none")
    assert body["messages"] == conv.messages and body["tools"] == conv.tools
    assert isinstance(body["seed"], int)


def test_gives_up_after_the_retries_with_a_fault(scripted: Any) -> None:
    server = scripted([(503, {"error": {"message": "busy"}}, 0)] * 3)
    policy = OpenAICompatPolicy(server.url, "m", max_retries=1, backoff=0.01)
    with pytest.raises(Fault, match=r"failed: 2 tries .*HTTP 503: busy") as info:
        policy.sample(conversations()[:1])
    assert (info.value.kind, info.value.attribution) == ("model", "infrastructure")
    assert len(server.requests) == 2 and policy.transient_failures == 2


def test_timeouts_are_retried_and_reported(scripted: Any) -> None:
    server = scripted([(200, chat_answer("late"), 1.0), (200, chat_answer("late"), 1.0)])
    policy = OpenAICompatPolicy(server.url, "m", timeout=0.2, max_retries=1, backoff=0.01)
    with pytest.raises(Fault, match="timed out"):
        policy.sample(conversations()[:1])


def test_client_errors_are_not_retried(scripted: Any) -> None:
    server = scripted([(401, {"error": {"message": "bad key"}}, 0)])
    policy = OpenAICompatPolicy(server.url, "m", max_retries=3, backoff=0.01)
    with pytest.raises(EndpointError, match="HTTP 401: bad key"):
        policy.sample(conversations()[:1])
    assert len(server.requests) == 1


def test_wrong_number_of_samples_is_an_error(scripted: Any) -> None:
    server = scripted([(200, chat_answer("only one"), 0)])
    with pytest.raises(EndpointError, match="n=2"):
        OpenAICompatPolicy(server.url, "m").sample(conversations()[:1], 2)


def test_a_server_without_prompt_logprobs_cannot_score(scripted: Any, tiny_tokenizer: Any) -> None:
    refusing = scripted([(400, {"error": {"message": "echo is not supported"}}, 0)])
    policy = OpenAICompatPolicy(refusing.url, "m", tokenizer=tiny_tokenizer, max_retries=0)
    with pytest.raises(ScoringUnsupportedError, match="echo is not supported"):
        policy.score(conversations()[:1], ["Up"])
    # a server that answers but echoes nothing
    silent = scripted([(200, {"choices": [{"index": 0, "text": "", "logprobs": None}]}, 0)])
    policy = OpenAICompatPolicy(silent.url, "m", tokenizer=tiny_tokenizer)
    with pytest.raises(ScoringUnsupportedError, match="did not echo"):
        policy.score(conversations()[:1], ["Up"])
    _, _, body = silent.requests[0]
    assert (body["echo"], body["logprobs"], body["max_tokens"]) == (True, 1, 0)
    assert isinstance(body["prompt"][0][0], int)  # token ids, not text


@pytest.mark.timeout(600)  # the model loads, serves and stops in a subprocess
def test_serve_model_command_serves_a_model_until_interrupted(tiny_model_dir: Path) -> None:
    import os
    import signal
    import stat
    import subprocess
    import sys
    import urllib.request

    env = {k: v for k, v in os.environ.items() if k != "AGENTENVS_MODEL_API_KEY"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentenvs.cli", "serve-model", "--model",
         f"hf:model={tiny_model_dir},device=cpu,threads=1", "--port", "0", "--name", "tiny"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        line = proc.stdout.readline()  # blocks until the server is up (or the command failed)
        assert line.startswith("serving "), (line, proc.stderr.read() if proc.poll() is not None else "")
        url = line.split(" at ", 1)[1].strip()
        # a key made at start, kept in a file of this user's alone; not printed to a pipe
        spec = proc.stdout.readline().split("use it as: ", 1)[1].strip()
        key_file = Path(spec.split("api_key_file=", 1)[1])
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = key_file.read_text().strip()
        assert "not shown" in proc.stdout.readline()
        request = urllib.request.Request(f"{url}/models", headers={"Authorization": f"Bearer {key}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.loads(response.read())["data"][0]["id"] == "tiny"
        client = make_policy(f"{spec},max_new_tokens=4")
        (samples,) = client.sample([Conversation(messages=[{"role": "user", "content": "hi"}])], 2,
                                   seed=1)
        assert len(samples) == 2
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=240)  # a loaded machine can take a minute to stop it
    assert not key_file.exists()  # removed when the server stops
    assert key not in out
    assert proc.returncode == 0 and "stopped" in out
