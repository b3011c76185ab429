"""A tiny OpenAI-compatible HTTP server over a local ``HFPolicy`` (stdlib ``http.server``).

It serves what ``OpenAICompatPolicy`` uses, so the client can be tested (and a local model
shared between processes) over real HTTP:

- ``POST /v1/chat/completions``: ``messages``, ``tools``, ``n``, ``temperature``, ``top_p``,
  ``max_tokens``, ``stop``, ``seed``; the policy's chat template renders the prompt.
- ``POST /v1/completions``: ``prompt`` as text, token ids, or a list of either. With
  ``echo=True, max_tokens=0, logprobs=N`` it returns the prompt tokens' log-probs
  (``token_logprobs``, first ``None``; ``top_logprobs`` holds only the prompt's own token),
  as vLLM's server does; with ``max_tokens > 0`` it samples a continuation (without
  log-probs). Text prompts are tokenized with special tokens unless
  ``add_special_tokens=False``.
- ``GET /v1/models``.

Errors answer as OpenAI's API does: a bad request 400 (a prompt longer than the model's
context with the code ``context_length_exceeded``, which ``OpenAICompatPolicy`` raises as
``PromptTooLongError``), a ``Fault`` of the model (memory ran out, a CUDA error) 503, any
other failure of the model 500; the client retries the last two.

Requests run one at a time (one lock around the model). Not hardened for untrusted
clients: bind it to localhost.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentenvs.core.errors import Fault
from agentenvs.policy.base import Conversation
from agentenvs.policy.chat import PromptTooLongError


class _BadRequest(Exception):
    pass


class LocalServer:
    """A running server: ``url`` is its ``/v1`` base URL; ``close()`` stops it."""

    def __init__(self, policy: Any, host: str, port: int, model_name: str) -> None:
        self.policy = policy
        self.model_name = model_name
        self.lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"server_state": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self.thread = threading.Thread(
            # a short poll interval: close() returns within it
            target=self.httpd.serve_forever, args=(0.05,), name="policy-server", daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def close(self) -> None:
        if self.thread.is_alive():
            self.httpd.shutdown()
            self.thread.join()
        self.httpd.server_close()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ endpoints
    def chat_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _BadRequest("'messages' must be a non-empty list")
        conversation = Conversation(messages=messages, tools=body.get("tools"))
        n = _int(body, "n", 1)
        with self.lock:
            ids = self.policy.formatter.prompt_ids(conversation)
            generations = self.policy.generate(
                [ids], n, seed=body.get("seed"), **_sampling(body)
            )[0]
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": g.text},
                "finish_reason": g.finish_reason,
            }
            for i, g in enumerate(generations)
        ]
        completion_tokens = sum(len(g.token_ids) for g in generations)
        return self._envelope("chat.completion", choices, len(ids), completion_tokens)

    def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        prompts = self._prompt_ids(body.get("prompt"), bool(body.get("add_special_tokens", True)))
        echo = bool(body.get("echo", False))
        max_tokens = _int(body, "max_tokens", 16, minimum=0)
        logprobs = body.get("logprobs")
        tokenizer = self.policy.tokenizer
        if max_tokens == 0:
            if not echo:
                raise _BadRequest("max_tokens=0 returns nothing without echo=True")
            if any(len(ids) < 1 for ids in prompts):
                raise _BadRequest("empty prompt")
            with self.lock:
                values = self.policy.token_logprobs(
                    prompts, [1 if len(ids) > 1 else len(ids) for ids in prompts]
                )
            choices = []
            for i, (ids, lps) in enumerate(zip(prompts, values, strict=True)):
                tokens = tokenizer.batch_decode(
                    [[t] for t in ids], skip_special_tokens=False, clean_up_tokenization_spaces=False
                )
                token_logprobs: list[float | None] = [None, *lps]
                offsets, at = [], 0
                for token in tokens:
                    offsets.append(at)
                    at += len(token)
                choice: dict[str, Any] = {
                    "index": i,
                    "text": "".join(tokens),
                    "finish_reason": "length",
                    "logprobs": None,
                }
                if logprobs is not None:
                    choice["logprobs"] = {
                        "tokens": tokens,
                        "token_logprobs": token_logprobs,
                        "top_logprobs": [
                            None if lp is None else {tok: lp}
                            for tok, lp in zip(tokens, token_logprobs, strict=True)
                        ],
                        "text_offset": offsets,
                    }
                choices.append(choice)
            return self._envelope("text_completion", choices, sum(map(len, prompts)), 0)
        if logprobs is not None:
            raise _BadRequest("this server returns log-probs only for prompts (echo=True, max_tokens=0)")
        n = _int(body, "n", 1)
        with self.lock:
            generations = self.policy.generate(
                prompts, n, seed=body.get("seed"), **_sampling(body, max_tokens)
            )
        choices = []
        for p, (ids, gens) in enumerate(zip(prompts, generations, strict=True)):
            prefix = tokenizer.decode(ids, skip_special_tokens=False) if echo else ""
            for j, g in enumerate(gens):
                choices.append(
                    {"index": p * n + j, "text": prefix + g.text, "finish_reason": g.finish_reason, "logprobs": None}
                )
        completion_tokens = sum(len(g.token_ids) for gens in generations for g in gens)
        return self._envelope("text_completion", choices, sum(map(len, prompts)), completion_tokens)

    def _prompt_ids(self, prompt: Any, add_special_tokens: bool) -> list[list[int]]:
        def encode(item: Any) -> list[int]:
            if isinstance(item, str):
                return list(self.policy.tokenizer(item, add_special_tokens=add_special_tokens)["input_ids"])
            if isinstance(item, list) and all(isinstance(t, int) for t in item):
                return list(item)
            raise _BadRequest("'prompt' must be text, token ids, or a list of either")

        if isinstance(prompt, str) or (
            isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)
        ):
            return [encode(prompt)]
        if isinstance(prompt, list) and prompt:
            return [encode(item) for item in prompt]
        raise _BadRequest("'prompt' must be text, token ids, or a non-empty list of either")

    def _envelope(
        self, kind: str, choices: list[dict[str, Any]], prompt_tokens: int, completion_tokens: int
    ) -> dict[str, Any]:
        return {
            "id": f"cmpl-{uuid.uuid4().hex[:16]}",
            "object": kind,
            "created": int(time.time()),
            "model": self.model_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _int(body: dict[str, Any], key: str, default: int, minimum: int = 1) -> int:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise _BadRequest(f"'{key}' must be an integer >= {minimum}, got {value!r}")
    return value


def _sampling(body: dict[str, Any], max_tokens: int | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            options[key] = float(body[key])
    if max_tokens is None and body.get("max_tokens") is not None:
        max_tokens = _int(body, "max_tokens", 16)
    if max_tokens is not None:
        options["max_new_tokens"] = max_tokens
    if body.get("stop") is not None:
        options["stop"] = body["stop"]
    return options


class _Handler(BaseHTTPRequestHandler):
    server_state: LocalServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # quiet: a test or benchmark run should not print a line per request

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str, code: str | int | None = None) -> None:
        error = {"message": message, "type": kind, "code": status if code is None else code}
        self._send(status, {"error": error})

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if self.path.rstrip("/") == "/v1/models":
            name = self.server_state.model_name
            self._send(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        routes = {
            "/v1/chat/completions": self.server_state.chat_completions,
            "/v1/completions": self.server_state.completions,
        }
        route = routes.get(self.path.rstrip("/"))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if route is None:
            self._error(404, f"no route {self.path}", "not_found")
            return
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise _BadRequest("the request body must be a JSON object")
            self._send(200, route(body))
        except PromptTooLongError as exc:
            self._error(400, str(exc), "invalid_request_error", "context_length_exceeded")
        except Fault as exc:
            self._error(503, f"the model failed: {exc}", "server_error")
        except (_BadRequest, json.JSONDecodeError, ValueError, TypeError) as exc:
            self._error(400, str(exc), "invalid_request_error")
        except Exception as exc:  # a model failure must answer, not hang the client
            self._error(500, f"{type(exc).__name__}: {exc}", "server_error")


def serve(
    policy: Any, host: str = "127.0.0.1", port: int = 0, *, model_name: str = "local"
) -> LocalServer:
    """Serve ``policy`` (an ``HFPolicy``) on ``host:port`` (0: a free port) in a thread."""
    return LocalServer(policy, host, port, model_name)
