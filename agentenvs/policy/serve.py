"""An OpenAI-compatible HTTP server over a local ``HFPolicy`` (stdlib ``http.server``):
what ``agentenvs serve-model`` runs, so that any OpenAI client (the ``openai`` policy,
verifiers, SkyRL, TRL's vLLM client) can sample from and score a local model.

- ``POST /v1/chat/completions``: ``messages`` (text content or text parts; ``developer``
  taken as ``system``; assistant ``tool_calls`` and ``tool`` messages as the chat template
  renders them), ``tools`` (passed to the template when it takes them, else listed in the
  system message), ``tool_choice``, ``n``, ``max_tokens`` / ``max_completion_tokens``,
  ``temperature``, ``top_p``, ``seed``, ``stop`` (a string or a list: the text is cut
  before the first one found, ``finish_reason: "stop"``), ``logprobs`` + ``top_logprobs``
  (``choices[i].logprobs.content``: ``token``, ``logprob``, ``bytes``, ``top_logprobs``),
  ``stream`` + ``stream_options.include_usage``. A template that writes Hermes-style tool
  calls (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``, as Qwen's do) gets
  them parsed into ``message.tool_calls`` with ``finish_reason: "tool_calls"`` (content:
  the text before the first call, ``null`` when none), unless ``tool_choice`` is
  ``"none"``; other templates' calls stay text. No decoding is guided: ``"required"`` or
  a named function is not enforced, the model's text decides.
- ``POST /v1/completions``: ``prompt`` as text, token ids, or a list of either (``n``
  choices per prompt, prompt-major); ``echo``, ``logprobs`` (top count, 0..20),
  ``stream``, and the sampling fields above. With ``echo=True, max_tokens=0, logprobs=N``
  it returns the prompt tokens' log-probs (``token_logprobs``, first ``None``;
  ``top_logprobs`` holds only the prompt's own token), as vLLM's server does, for
  ``OpenAICompatPolicy.score``. Text prompts are tokenized with special tokens unless
  ``add_special_tokens=False``.
- vLLM's token extensions: ``return_token_ids: true`` adds ``prompt_token_ids`` (chat: on
  the response, streamed in the first chunk; completions: on each choice) and
  ``token_ids`` per choice (streamed as each chunk's tokens); ``return_tokens_as_token_ids:
  true`` names log-prob tokens ``token_id:<id>``. ``token_ids`` are the tokens the model
  drew for the returned text, the end-of-turn (or EOS) token included where it drew one,
  as vLLM's are; log-probs and ``completion_tokens`` count the same tokens.
- ``GET /v1/models`` (and ``/v1/models/{id}``): the served model, with ``max_model_len``
  and ``sampling_defaults`` (``max_tokens``, ``temperature``, ``top_p``, ``stop``: the
  served spec's), which ``OpenAICompatPolicy`` takes where its own arguments are unset;
  ``GET /health``.

A request's unset sampling fields take the served spec's values (``hf:...,max_new_tokens
=16``), not OpenAI's defaults. Log-probs are the model's own (before temperature and
top-p, as vLLM reports by default), from one forward pass over prompt and completion;
a token's ``bytes`` are those of its decoded text (a token that ends inside a character
decodes to U+FFFD).
Usage counts are exact: the prompt's tokens as the template renders them, and the tokens
of every choice. Streaming sends the chunks once the generation is done (the model
decodes the whole answer first): one chunk per token (its text, log-prob and id), then a
chunk with the ``finish_reason``, the usage chunk when asked, then ``data: [DONE]``;
tool calls stream as ``delta.tool_calls`` (id, name and arguments of each call). The
server answers to any model name; requests run one at a time (one lock around the model).

Errors answer in OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``: a
bad request 400 naming its field in ``param`` (a prompt longer than the model's context
with the code ``context_length_exceeded``, which ``OpenAICompatPolicy`` raises as
``PromptTooLongError``; features it cannot honour, such as penalties, a ``logit_bias`` or
a ``response_format``, are refused, never ignored), an unknown route 404, a ``Fault`` of
the model (memory ran out, a CUDA error) 503, any other failure of the model 500; the
client retries the last two. Not hardened for untrusted clients: bind it to localhost.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentenvs.core.errors import Fault
from agentenvs.policy.base import Conversation
from agentenvs.policy.chat import PromptTooLongError, apply_stop
from agentenvs.policy.serve_protocol import (
    TOOL_CALL_END,
    TOOL_CALL_START,
    BadRequest,
    Sampling,
    bool_field,
    chat_logprob_entry,
    completion_logprobs,
    envelope,
    new_id,
    parse_tool_calls,
    read_logprobs,
    read_messages,
    read_sampling,
    read_tools,
    stream_events,
    text_deltas,
    usage,
)

#: sampling fields the server cannot honour: refused unless at their neutral value
_UNSUPPORTED = {
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "logit_bias": {},
    "best_of": 1,
    "suffix": "",
}

#: per token: its log-prob and the top (token id, log-prob) pairs
TokenLogprob = tuple[float, list[tuple[int, float]]]


@dataclass
class Streamed:
    """An answer sent as Server-Sent Events."""

    events: Iterator[bytes]


def drawn(generation: Any) -> tuple[int, ...]:
    """The tokens a generation drew: its text's, then the end token where it drew one."""
    return tuple(getattr(generation, "sampled_ids", generation.token_ids))


class LocalServer:
    """A running server: ``url`` is its ``/v1`` base URL; ``close()`` stops it."""

    def __init__(self, policy: Any, host: str, port: int, model_name: str) -> None:
        self.policy = policy
        self.model_name = model_name
        self.created = int(time.time())
        self.lock = threading.Lock()
        template = policy.formatter.chat_template
        #: whether generations are searched for Hermes-style tool calls
        self.parses_tool_calls = TOOL_CALL_START in template
        handler = type("Handler", (_Handler,), {"server_state": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self.thread = threading.Thread(
            # a short poll interval: close() returns within it
            target=self.httpd.serve_forever,
            args=(0.05,),
            name="policy-server",
            daemon=True,
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
    def model_card(self) -> dict[str, Any]:
        policy = self.policy
        return {
            "id": self.model_name,
            "object": "model",
            "created": self.created,
            "owned_by": "agentenvs",
            "max_model_len": policy.context_length,
            "sampling_defaults": {
                "max_tokens": policy.max_new_tokens,
                "temperature": policy.temperature,
                "top_p": policy.top_p,
                "stop": list(policy.stop),
            },
        }

    def chat_completions(self, body: dict[str, Any]) -> dict[str, Any] | Streamed:
        messages = read_messages(body)
        tools, wants_calls = read_tools(body)
        sampling = read_sampling(body, chat=True)
        top = read_logprobs(body, chat=True)
        _refuse_unsupported(body)
        conversation = Conversation(messages=messages, tools=tools)
        with self.lock:
            ids = self.policy.formatter.prompt_ids(conversation)
            generations = self.policy.generate([ids], sampling.n, **sampling.generate_options())[0]
            values = (
                [self._logprobs(ids, drawn(g), top) for g in generations]
                if top is not None
                else None
            )
        tokenizer = self.policy.tokenizer
        choices = []
        for i, g in enumerate(generations):
            content, calls = g.text, []
            if wants_calls and self.parses_tool_calls:
                content, calls = parse_tool_calls(self._text_with_tool_markers(g, sampling.stop))
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"] = calls
            choice: dict[str, Any] = {
                "index": i,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else g.finish_reason,
            }
            if values is not None:
                entries = [
                    chat_logprob_entry(tokenizer, t, lp, tops, sampling.tokens_as_ids)
                    for t, (lp, tops) in zip(drawn(g), values[i], strict=True)
                ]
                choice["logprobs"] = {"content": entries, "refusal": None}
            if sampling.return_token_ids:
                choice["token_ids"] = list(drawn(g))
            choices.append(choice)
        counts = usage(len(ids), sum(len(drawn(g)) for g in generations))
        request_id = new_id("chatcmpl")
        if sampling.stream:
            return Streamed(
                self._chat_stream(request_id, ids, generations, choices, sampling, counts)
            )
        answer = {
            **envelope("chat.completion", self.model_name, request_id),
            "choices": choices,
            "usage": counts,
            "system_fingerprint": None,
        }
        if sampling.return_token_ids:
            answer["prompt_token_ids"] = ids
        return answer

    def _chat_stream(
        self,
        request_id: str,
        ids: list[int],
        generations: list[Any],
        choices: list[dict[str, Any]],
        sampling: Sampling,
        counts: dict[str, int],
    ) -> Iterator[bytes]:
        base = envelope("chat.completion.chunk", self.model_name, request_id)
        base["system_fingerprint"] = None

        def chunks() -> Iterator[dict[str, Any]]:
            for g, choice in zip(generations, choices, strict=True):
                i, message = choice["index"], choice["message"]
                first: dict[str, Any] = {
                    "choices": [
                        {
                            "index": i,
                            "delta": {"role": "assistant", "content": ""},
                            "logprobs": None,
                            "finish_reason": None,
                        }
                    ]
                }
                if sampling.return_token_ids and i == 0:
                    first["prompt_token_ids"] = ids
                yield first
                entries = (choice["logprobs"] or {}).get("content")
                if message.get("tool_calls"):
                    deltas: list[dict[str, Any]] = []
                    if message["content"]:
                        deltas.append({"content": message["content"]})
                    deltas += [
                        {"tool_calls": [{"index": k, **call}]}
                        for k, call in enumerate(message["tool_calls"])
                    ]
                    for k, delta in enumerate(deltas):
                        part: dict[str, Any] = {
                            "index": i,
                            "delta": delta,
                            "logprobs": None,
                            "finish_reason": None,
                        }
                        if k == 0:  # the tokens and log-probs of the whole answer, once
                            if entries is not None:
                                part["logprobs"] = {"content": entries, "refusal": None}
                            if sampling.return_token_ids:
                                part["token_ids"] = list(drawn(g))
                        yield {"choices": [part]}
                else:
                    texts = text_deltas(self.policy.tokenizer, drawn(g), message["content"])
                    for k, (token, text) in enumerate(zip(drawn(g), texts, strict=True)):
                        part = {
                            "index": i,
                            "delta": {"content": text},
                            "logprobs": None,
                            "finish_reason": None,
                        }
                        if entries is not None:
                            part["logprobs"] = {"content": [entries[k]], "refusal": None}
                        if sampling.return_token_ids:
                            part["token_ids"] = [token]
                        yield {"choices": [part]}
                yield {
                    "choices": [
                        {
                            "index": i,
                            "delta": {},
                            "logprobs": None,
                            "finish_reason": choice["finish_reason"],
                        }
                    ]
                }

        return stream_events(
            base, chunks(), counts if sampling.include_usage else None, sampling.include_usage
        )

    def completions(self, body: dict[str, Any]) -> dict[str, Any] | Streamed:
        prompts = self._prompt_ids(body.get("prompt"), bool(body.get("add_special_tokens", True)))
        sampling = read_sampling(body, chat=False)
        echo = bool_field(body, "echo")
        top = read_logprobs(body, chat=False)
        _refuse_unsupported(body)
        if sampling.max_tokens == 0:
            if sampling.stream:
                raise BadRequest("max_tokens=0 (prompt log-probs) is not streamed", "stream")
            return self._prompt_logprobs(prompts, echo, top is not None)
        tokenizer = self.policy.tokenizer
        n = sampling.n
        with self.lock:
            generations = self.policy.generate(prompts, n, **sampling.generate_options())
            values: list[list[TokenLogprob | None]] = []
            if top is not None:  # prompt-major, as the choices
                for ids, gens in zip(prompts, generations, strict=True):
                    for g in gens:
                        computed = self._logprobs(ids, drawn(g), top, 1 if echo else len(ids))
                        values.append([None, *computed] if echo else list(computed))
        choices = []
        for p, (ids, gens) in enumerate(zip(prompts, generations, strict=True)):
            prefix = tokenizer.decode(ids, skip_special_tokens=False) if echo else ""
            for j, g in enumerate(gens):
                index = p * n + j
                choice: dict[str, Any] = {
                    "index": index,
                    "text": prefix + g.text,
                    "logprobs": None,
                    "finish_reason": g.finish_reason,
                }
                if top is not None:
                    shown = (list(ids) if echo else []) + list(drawn(g))
                    choice["logprobs"] = completion_logprobs(
                        tokenizer, shown, values[index], sampling.tokens_as_ids
                    )
                if sampling.return_token_ids:
                    choice["prompt_token_ids"] = list(ids)
                    choice["token_ids"] = list(drawn(g))
                choices.append(choice)
        flat = [g for gens in generations for g in gens]
        counts = usage(sum(map(len, prompts)), sum(len(drawn(g)) for g in flat))
        request_id = new_id("cmpl")
        if sampling.stream:
            return Streamed(self._completion_stream(request_id, flat, choices, sampling, counts))
        return {
            **envelope("text_completion", self.model_name, request_id),
            "choices": choices,
            "usage": counts,
        }

    def _completion_stream(
        self,
        request_id: str,
        generations: list[Any],
        choices: list[dict[str, Any]],
        sampling: Sampling,
        counts: dict[str, int],
    ) -> Iterator[bytes]:
        base = envelope("text_completion", self.model_name, request_id)
        tokenizer = self.policy.tokenizer

        def chunks() -> Iterator[dict[str, Any]]:
            for g, choice in zip(generations, choices, strict=True):
                i = choice["index"]
                echoed = choice["text"][: len(choice["text"]) - len(g.text)]
                logprobs = choice["logprobs"]
                skip = len(logprobs["tokens"]) - len(drawn(g)) if logprobs else 0
                if echoed or sampling.return_token_ids:
                    first: dict[str, Any] = {
                        "index": i,
                        "text": echoed,
                        "logprobs": None,
                        "finish_reason": None,
                    }
                    if logprobs and skip:
                        first["logprobs"] = {k: v[:skip] for k, v in logprobs.items()}
                    if sampling.return_token_ids:
                        first["prompt_token_ids"] = choice["prompt_token_ids"]
                        first["token_ids"] = []
                    yield {"choices": [first]}
                texts = text_deltas(tokenizer, drawn(g), g.text)
                for k, (token, text) in enumerate(zip(drawn(g), texts, strict=True)):
                    part: dict[str, Any] = {
                        "index": i,
                        "text": text,
                        "logprobs": None,
                        "finish_reason": None,
                    }
                    if logprobs:
                        part["logprobs"] = {
                            key: v[skip + k : skip + k + 1] for key, v in logprobs.items()
                        }
                    if sampling.return_token_ids:
                        part["token_ids"] = [token]
                    yield {"choices": [part]}
                yield {
                    "choices": [
                        {
                            "index": i,
                            "text": "",
                            "logprobs": None,
                            "finish_reason": choice["finish_reason"],
                        }
                    ]
                }

        return stream_events(
            base, chunks(), counts if sampling.include_usage else None, sampling.include_usage
        )

    def _prompt_logprobs(
        self, prompts: list[list[int]], echo: bool, with_logprobs: bool
    ) -> dict[str, Any]:
        """``echo=True, max_tokens=0``: the prompts' own log-probs (what scoring asks)."""
        if not echo:
            raise BadRequest("max_tokens=0 returns nothing without echo=True", "max_tokens")
        if any(len(ids) < 1 for ids in prompts):
            raise BadRequest("empty prompt", "prompt")
        tokenizer = self.policy.tokenizer
        with self.lock:
            values = self.policy.token_logprobs(
                prompts, [1 if len(ids) > 1 else len(ids) for ids in prompts]
            )
        choices = []
        for i, (ids, lps) in enumerate(zip(prompts, values, strict=True)):
            logprobs = completion_logprobs(
                tokenizer, ids, [None, *((lp, []) for lp in lps)], as_id=False
            )
            choices.append(
                {
                    "index": i,
                    "text": "".join(logprobs["tokens"]),
                    "finish_reason": "length",
                    "logprobs": logprobs if with_logprobs else None,
                }
            )
        return {
            **envelope("text_completion", self.model_name, new_id("cmpl")),
            "choices": choices,
            "usage": usage(sum(map(len, prompts)), 0),
        }

    # ------------------------------------------------------------ helpers
    def _logprobs(
        self, prompt: Sequence[int], tokens: Sequence[int], top: int, start: int | None = None
    ) -> list[TokenLogprob]:
        """``log p(token | what precedes it)`` for the tokens of ``prompt + tokens`` from
        ``start`` (default: the first of ``tokens``), with the ``top`` most likely each."""
        from agentenvs.policy.hf import model_faults

        return model_faults(_forward_logprobs)(
            self.policy, list(prompt) + list(tokens), len(prompt) if start is None else start, top
        )

    def _text_with_tool_markers(self, generation: Any, stop: tuple[str, ...] | None) -> str:
        """A generation's text with the tool-call markers kept where the tokenizer counts
        them as special tokens (decoding drops those)."""
        tokenizer = self.policy.tokenizer
        special = set(getattr(tokenizer, "all_special_tokens", None) or [])
        if TOOL_CALL_START not in special:
            return generation.text
        text = tokenizer.decode(list(generation.token_ids), skip_special_tokens=False)
        for token in special - {TOOL_CALL_START, TOOL_CALL_END}:
            if token:
                text = text.replace(token, "")
        return apply_stop(text, self.policy.stop if stop is None else stop)[0]

    def _prompt_ids(self, prompt: Any, add_special_tokens: bool) -> list[list[int]]:
        def encode(item: Any) -> list[int]:
            if isinstance(item, str):
                return list(
                    self.policy.tokenizer(item, add_special_tokens=add_special_tokens)["input_ids"]
                )
            if isinstance(item, list) and all(
                isinstance(t, int) and not isinstance(t, bool) for t in item
            ):
                return list(item)
            raise BadRequest("'prompt' must be text, token ids, or a list of either", "prompt")

        if isinstance(prompt, str) or (
            isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)
        ):
            return [encode(prompt)]
        if isinstance(prompt, list) and prompt:
            return [encode(item) for item in prompt]
        raise BadRequest(
            "'prompt' must be text, token ids, or a non-empty list of either", "prompt"
        )


def _forward_logprobs(policy: Any, sequence: list[int], start: int, top: int) -> list[TokenLogprob]:
    if start >= len(sequence):
        return []
    torch = policy._torch
    limit = policy.context_length
    if limit is not None and len(sequence) > limit:
        raise PromptTooLongError(
            f"a sequence of {len(sequence)} tokens: the model's maximum context length is {limit} tokens"
        )
    keep = len(sequence) - start + 1
    ids = torch.tensor([sequence], dtype=torch.long, device=policy.device)
    with torch.inference_mode():
        try:
            logits = policy.model(input_ids=ids, use_cache=False, logits_to_keep=keep).logits
        except TypeError:  # a model without logits_to_keep
            logits = policy.model(input_ids=ids, use_cache=False).logits
        logprobs = logits[0, -keep:-1].float().log_softmax(-1)
        chosen = logprobs.gather(-1, ids[0, start:].unsqueeze(-1)).squeeze(-1).tolist()
        if top:
            values, index = logprobs.topk(min(top, logprobs.shape[-1]), dim=-1)
            tops = [
                list(zip(i, v, strict=True))
                for i, v in zip(index.tolist(), values.tolist(), strict=True)
            ]
        else:
            tops = [[] for _ in chosen]
    return [(float(lp), t) for lp, t in zip(chosen, tops, strict=True)]


def _refuse_unsupported(body: dict[str, Any]) -> None:
    for key, neutral in _UNSUPPORTED.items():
        if body.get(key) not in (None, neutral):
            raise BadRequest(f"'{key}' is not supported by this server", key)
    response_format = body.get("response_format")
    if response_format not in (None, {"type": "text"}):
        raise BadRequest(
            "'response_format' other than text is not supported by this server", "response_format"
        )


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

    def _stream(self, events: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client left mid-stream

    def _error(
        self,
        status: int,
        message: str,
        kind: str,
        code: str | int | None = None,
        param: str | None = None,
    ) -> None:
        error = {
            "message": message,
            "type": kind,
            "param": param,
            "code": status if code is None else code,
        }
        self._send(status, {"error": error})

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?", 1)[0].rstrip("/")
        state = self.server_state
        if path == "/v1/models":
            self._send(200, {"object": "list", "data": [state.model_card()]})
        elif path == f"/v1/models/{state.model_name}":
            self._send(200, state.model_card())
        elif path == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._error(404, f"no route {self.path}", "not_found_error")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        routes = {
            "/v1/chat/completions": self.server_state.chat_completions,
            "/v1/completions": self.server_state.completions,
        }
        route = routes.get(self.path.split("?", 1)[0].rstrip("/"))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if route is None:
            self._error(404, f"no route {self.path}", "not_found_error")
            return
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            answer = route(body)
        except PromptTooLongError as exc:
            self._error(
                400, str(exc), "invalid_request_error", "context_length_exceeded", "messages"
            )
        except Fault as exc:
            self._error(503, f"the model failed: {exc}", "server_error")
        except BadRequest as exc:
            self._error(400, str(exc), "invalid_request_error", param=exc.param)
        except json.JSONDecodeError as exc:
            self._error(400, f"the request body is not JSON: {exc}", "invalid_request_error")
        except (ValueError, TypeError) as exc:
            self._error(400, str(exc), "invalid_request_error")
        except Exception as exc:  # a model failure must answer, not hang the client
            self._error(500, f"{type(exc).__name__}: {exc}", "server_error")
        else:
            if isinstance(answer, Streamed):
                self._stream(answer.events)
            else:
                self._send(200, answer)


def serve(
    policy: Any, host: str = "127.0.0.1", port: int = 0, *, model_name: str = "local"
) -> LocalServer:
    """Serve ``policy`` (an ``HFPolicy``) on ``host:port`` (0: a free port) in a thread."""
    return LocalServer(policy, host, port, model_name)
