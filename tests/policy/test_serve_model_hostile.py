"""``agentenvs serve-model`` against a hostile client on loopback: the real command (a
tiny model built from a config), spoken to with raw sockets and ``http.client``.

No key, a wrong key, a page of another site (its ``Origin``) and a name rebound to
loopback (its ``Host``) are refused; ``n`` and ``max_tokens`` past the caps are refused
naming the cap; a body announced as 2 GB is not read (the server's memory, read from
``/proc``, does not grow by the 300 MB sent); 300 half-open connections cost the server
no thread each (``/proc/<pid>/task``); a one-sample request sent while a sixteen-sample
one runs is answered first. After each, a well-behaved client is still served.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from served_model import ServedModel

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MESSAGES = [{"role": "user", "content": "Map:\nP_\n_G\nWhere do you go?"}]


@pytest.fixture(scope="module")
def served(tiny_model_dir: Path) -> Iterator[ServedModel]:
    with ServedModel(tiny_model_dir, options="max_new_tokens=8",
                     args=("--max-connections", "128")) as server:
        yield server


def _address(served: ServedModel) -> tuple[str, int]:
    host, port = served.root.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _ask(
    served: ServedModel,
    method: str = "POST",
    path: str = "/v1/chat/completions",
    body: dict[str, Any] | None = None,
    *,
    key: str | None = "served",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """One request on a new connection; (status, JSON answer)."""
    host, port = _address(served)
    connection = http.client.HTTPConnection(host, port, timeout=120)
    sent = {"Content-Type": "application/json"}
    if key is not None:
        sent["Authorization"] = f"Bearer {served.api_key if key == 'served' else key}"
    sent.update(headers or {})
    payload = None if body is None and method == "GET" else json.dumps(
        body if body is not None else {"model": "tiny", "messages": MESSAGES}).encode()
    try:
        connection.request(method, path, body=payload, headers=sent)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        connection.close()


def _well_behaved_client_is_served(served: ServedModel) -> None:
    status, answer = _ask(served, body={"model": "tiny", "messages": MESSAGES, "max_tokens": 4})
    assert status == 200, answer
    assert answer["choices"][0]["message"]["role"] == "assistant"


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


# ---------------------------------------------------------------- who may ask
def test_no_key_and_a_wrong_key_are_refused(served: ServedModel) -> None:
    status, answer = _ask(served, key=None)
    assert status == 401 and answer["error"]["code"] == "invalid_api_key"
    status, answer = _ask(served, key=served.api_key[:-1] + "x")
    assert status == 401
    status, _ = _ask(served, "GET", "/v1/models", key=None)
    assert status == 401  # every route but the health probe
    status, answer = _ask(served, "GET", "/health", key=None)
    assert (status, answer) == (200, {"status": "ok"})
    _well_behaved_client_is_served(served)


def test_a_page_of_another_site_is_refused_even_with_the_key(served: ServedModel) -> None:
    # a cross-site form POST (text/plain: no preflight) carries the page's Origin
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{_address(served)[1] + 1}"):
        status, answer = _ask(served, key=None, headers={"Origin": origin,
                                                         "Content-Type": "text/plain"})
        assert status == 403 and answer["error"]["code"] == "origin_not_allowed", origin
    status, _ = _ask(served, headers={"Origin": "http://evil.example"})
    assert status == 403
    status, _ = _ask(served, headers={"Origin": served.root})  # its own page
    assert status == 200
    _well_behaved_client_is_served(served)


def test_a_name_rebound_to_loopback_is_refused(served: ServedModel) -> None:
    _, port = _address(served)
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}"):
        status, answer = _ask(served, headers={"Host": host})
        assert status == 403 and answer["error"]["code"] == "host_not_allowed", host
    assert _ask(served, headers={"Host": f"localhost:{port}"})[0] == 200
    _well_behaved_client_is_served(served)


# ---------------------------------------------------------------- caps
@pytest.mark.parametrize(
    ("field", "value", "cap"),
    [("n", 200000, "--max-n"), ("max_tokens", 10**12, "--max-tokens"),
     ("max_completion_tokens", 10**6, "--max-tokens")],
)
def test_n_and_max_tokens_past_the_caps_are_refused(
    served: ServedModel, field: str, value: int, cap: str
) -> None:
    status, answer = _ask(served, body={"model": "tiny", "messages": MESSAGES, field: value})
    assert status == 400, answer
    message = answer["error"]["message"]
    assert cap in message and "at most" in message and answer["error"]["param"] in (
        field, "max_tokens")
    _well_behaved_client_is_served(served)


def test_a_prompt_past_its_caps_is_refused(served: ServedModel) -> None:
    text = "<answer>Left</answer> " * 60000  # 1.3 MB: past the bytes of a prompt
    status, answer = _ask(served, path="/v1/completions",
                          body={"model": "tiny", "prompt": text, "max_tokens": 1})
    assert status == 400 and "--max-prompt-bytes" in answer["error"]["message"]
    ids = [5] * 5000  # past the model's 4096 tokens of context
    status, answer = _ask(served, path="/v1/completions",
                          body={"model": "tiny", "prompt": ids, "max_tokens": 1})
    assert status == 400 and answer["error"]["code"] == "context_length_exceeded"
    status, answer = _ask(served, path="/v1/completions",
                          body={"model": "tiny", "prompt": [10**9], "max_tokens": 1})
    assert status == 400 and "vocabulary" in answer["error"]["message"]
    _well_behaved_client_is_served(served)


def test_a_lying_content_length_is_not_read(served: ServedModel) -> None:
    pid = served.proc.pid
    _well_behaved_client_is_served(served)
    before = _rss_bytes(pid)
    host, port = _address(served)
    chunk = b"x" * (1 << 20)
    sent = 0
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {served.api_key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {2 * 10**9}\r\n\r\n".encode()
        )
        try:
            while sent < 300 * len(chunk):  # 300 MB of the 2 GB announced
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:  # the server answered and closed: what is left is not sent
            pass
        grown = _rss_bytes(pid) - before
        try:
            answer = sock.recv(4096)
        except OSError:
            answer = b""
    assert grown < 64 << 20, f"the server grew by {grown >> 20} MiB while {sent >> 20} MiB came"
    assert not answer or answer.startswith(b"HTTP/1.1 413")
    _well_behaved_client_is_served(served)


def test_half_open_connections_hold_no_thread(served: ServedModel) -> None:
    pid = served.proc.pid
    _well_behaved_client_is_served(served)
    before = _threads(pid)
    host, port = _address(served)
    sockets = []
    try:
        for _ in range(300):  # a request begun and never finished, on each
            sock = socket.create_connection((host, port), timeout=30)
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
            sockets.append(sock)
        # answered after the server took every connection before it (one accept loop)
        _well_behaved_client_is_served(served)
        during = _threads(pid)
    finally:
        for sock in sockets:
            sock.close()
    assert during <= before + 1, f"{during} threads with 300 half-open connections ({before} before)"
    # past --max-connections (128), the longest idle ones were closed to make room
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    assert fds < 300
    _well_behaved_client_is_served(served)


def test_a_request_past_the_queue_is_a_429_at_once(tiny_model_dir: Path) -> None:
    with ServedModel(tiny_model_dir, options="max_new_tokens=8",
                     args=("--max-queue", "1")) as server:
        results: list[int] = []
        big = {"model": "tiny", "messages": MESSAGES, "n": 16, "max_tokens": 512}
        worker = threading.Thread(target=lambda: results.append(_ask(server, body=big)[0]))
        worker.start()
        try:
            # the queue holds one: while one runs, another is refused, not held
            seen: set[int] = set()
            while worker.is_alive() and 429 not in seen:
                status, answer = _ask(server, body={"model": "tiny", "messages": MESSAGES,
                                                    "max_tokens": 1})
                seen.add(status)
                if status == 429:
                    assert "--max-queue" in answer["error"]["message"]
        finally:
            worker.join()
        # one of the two was turned away (the large one, where a small one got in first)
        assert 429 in seen | set(results) and (seen | set(results)) <= {200, 429}
        _well_behaved_client_is_served(server)


# ---------------------------------------------------------------- fairness
def test_a_small_request_beside_a_large_one_is_answered_first(
    tiny_model: Any, tiny_tokenizer: Any
) -> None:
    """The large one (16 samples of 512 tokens) runs when the small one (one sample of 4)
    comes; the small one runs between two of its decoding steps, not after it."""
    from agentenvs.policy.hf import HFPolicy
    from agentenvs.policy.serve import serve

    started = threading.Event()
    running: list[int] = []  # the n of each generation under way
    seen_beside: list[list[int]] = []

    class Watched(HFPolicy):
        def generate(self, prompts: Any, n: int = 1, **options: Any) -> Any:
            seen_beside.append(list(running))
            running.append(n)
            started.set()
            try:
                return super().generate(prompts, n, **options)
            finally:
                running.remove(n)

    policy = Watched(tiny_model, tiny_tokenizer, max_new_tokens=8, batch_size=16)
    finished: list[str] = []
    with serve(policy, model_name="tiny") as server:
        host, port = server.host, server.port

        def ask(name: str, body: dict[str, Any]) -> None:
            connection = http.client.HTTPConnection(host, port, timeout=300)
            connection.request("POST", "/v1/chat/completions", json.dumps(body).encode(),
                               {"Authorization": f"Bearer {server.api_key}",
                                "Content-Type": "application/json"})
            response = connection.getresponse()
            assert response.status == 200, response.read()
            response.read()
            finished.append(name)

        large = threading.Thread(target=ask, args=("large", {
            "messages": MESSAGES, "n": 16, "max_tokens": 512, "seed": 1}))
        large.start()
        assert started.wait(120)  # the large request holds the model
        ask("small", {"messages": MESSAGES, "n": 1, "max_tokens": 4, "seed": 1})
        large.join()
    assert finished == ["small", "large"]
    assert seen_beside == [[], [16]]  # the small one ran while the large one was under way


def test_no_key_is_refused_beyond_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch", reason="could not import torch: pip install 'agentenvs[hf]'")
    pytest.importorskip("transformers", reason="could not import transformers: pip install 'agentenvs[hf]'")
    from agentenvs.cli import main

    code = main(["serve-model", "--model", "hf:model=unused", "--no-auth", "--host", "0.0.0.0"])
    assert code == 2
    assert "--no-auth serves loopback only" in capsys.readouterr().err
