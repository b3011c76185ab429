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
server answers to any model name.

One thread runs the model, in turns (``agentenvs.policy.serve_schedule``): a request's
generation (all its choices in one batch) or one log-prob pass. A generation gives way
between its decoding steps to the turn waiting longest, so a small request beside a
large one waits one decoding step of it, not all of it.

Errors answer in OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``: a
bad request 400 naming its field in ``param`` (a prompt longer than the model's context
with the code ``context_length_exceeded``, which ``OpenAICompatPolicy`` raises as
``PromptTooLongError``; features it cannot honour, such as penalties, a ``logit_bias`` or
a ``response_format``, are refused, never ignored), an unknown route 404, a ``Fault`` of
the model (memory ran out, a CUDA error) 503, any other failure of the model 500; the
client retries the last two.

Who may ask and how much (``agentenvs.policy.serve_http``): every route but ``GET
/health`` needs the key (``Authorization: Bearer``; a 401 without it); a ``Host`` that is
not a loopback name with the server's port (or one allowed) and a foreign ``Origin`` are
refused (403); ``n``, ``max_tokens``, the prompt's tokens and bytes and the sequences of a
request past ``ServeLimits``' caps are a 400 naming the cap, a body past its cap a 413
(unread), a request past the queue a 429 (``Retry-After``), one past its time a 503.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from agentenvs.core.errors import Fault
from agentenvs.policy.base import Conversation
from agentenvs.policy.chat import PromptTooLongError, apply_stop
from agentenvs.policy.credentials import new_api_key
from agentenvs.policy.serve_http import (
    Access,
    HTTPServer,
    Request,
    Response,
    ServeLimits,
    error_response,
    is_loopback,
)
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
from agentenvs.policy.serve_schedule import FairScheduler, RequestTimedOut

#: sampling fields the server cannot honour: refused unless at their neutral value
_UNSUPPORTED = {
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "logit_bias": {},
    "best_of": 1,
    "suffix": "",
}

T = TypeVar("T")

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
    """A running server: ``url`` is its ``/v1`` base URL, ``api_key`` the key every route
    but ``GET /health`` needs (``None``: none, ``auth=False``); ``close()`` stops it."""

    def __init__(
        self,
        policy: Any,
        host: str,
        port: int,
        model_name: str,
        *,
        api_key: str | None = None,
        auth: bool = True,
        allowed_hosts: Sequence[str] = (),
        limits: ServeLimits | None = None,
    ) -> None:
        if not auth and not is_loopback(host):
            raise ValueError(
                f"a server without a key binds loopback only, not {host!r}: give it a key "
                "(the default) or bind 127.0.0.1"
            )
        if auth and api_key is not None and not api_key.strip():
            raise ValueError("the API key is empty")
        self.policy = policy
        self.model_name = model_name
        self.created = int(time.time())
        self.limits = limits or ServeLimits()
        if int(policy.max_new_tokens) > self.limits.max_tokens:
            raise ValueError(
                f"the served spec's max_new_tokens={policy.max_new_tokens} is past the cap "
                f"of {self.limits.max_tokens} new tokens a request (--max-tokens)"
            )
        #: the most tokens of a prompt: the cap given, within the model's context
        context = policy.context_length
        cap = self.limits.max_prompt_tokens
        self.max_prompt_tokens: int | None = (
            context if cap is None else cap if context is None else min(cap, context)
        )
        self.api_key = (api_key or new_api_key()) if auth else None
        template = policy.formatter.chat_template
        #: whether generations are searched for Hermes-style tool calls
        self.parses_tool_calls = TOOL_CALL_START in template
        self.scheduler = FairScheduler()
        self._request = threading.local()
        access = Access(self.api_key, frozenset(h.strip().lower() for h in allowed_hosts))
        try:
            self.http = HTTPServer(self.handle, host, port, access, self.limits)
        except BaseException:
            self.scheduler.close()
            raise
        self.host, self.port = self.http.host, self.http.port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in str(self.host) else self.host
        return f"http://{host}:{self.port}/v1"

    def close(self) -> None:
        self.http.close()
        self.scheduler.close()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ requests
    def handle(self, request: Request) -> Response:
        """Answer one admitted request (run in the HTTP server's pool)."""
        path = request.path
        if request.method == "GET":
            if path == "/v1/models":
                return Response(200, {"object": "list", "data": [self.model_card()]})
            if path == f"/v1/models/{self.model_name}":
                return Response(200, self.model_card())
            return error_response(404, f"no route {path}", "not_found_error")
        if request.method != "POST":
            return error_response(405, f"{request.method} is not served", "invalid_request_error")
        routes = {
            "/v1/chat/completions": self.chat_completions,
            "/v1/completions": self.completions,
        }
        route = routes.get(path)
        if route is None:
            return error_response(404, f"no route {path}", "not_found_error")
        self._request.deadline = time.monotonic() + self.limits.request_timeout
        try:
            body = json.loads(request.body or b"{}")
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            answer = route(body)
        except PromptTooLongError as exc:
            return error_response(
                400, str(exc), "invalid_request_error", "context_length_exceeded", "messages"
            )
        except RequestTimedOut as exc:
            return error_response(
                503, f"{exc} (--request-timeout {self.limits.request_timeout:g} s)",
                "server_error", "timeout")
        except Fault as exc:
            return error_response(503, f"the model failed: {exc}", "server_error")
        except BadRequest as exc:
            return error_response(400, str(exc), "invalid_request_error", param=exc.param)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return error_response(
                400, f"the request body is not JSON: {exc}", "invalid_request_error")
        except (ValueError, TypeError) as exc:
            return error_response(400, str(exc), "invalid_request_error")
        if isinstance(answer, Streamed):
            return Response(200, events=list(answer.events))
        return Response(200, answer)

    def _turn(self, work: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``work(*args, **kwargs)`` on the model thread, at this request's turn."""
        return self.scheduler.run(lambda: work(*args, **kwargs), self._request.deadline)

    def _generate(self, prompts: list[list[int]], sampling: Sampling) -> list[list[Any]]:
        """``sampling.n`` generations of each prompt, in one turn that gives way to other
        requests between its decoding steps."""
        return self._turn(
            self.policy.generate, prompts, sampling.n,
            between_steps=self.scheduler.between_steps, **sampling.generate_options(),
        )

    # ------------------------------------------------------------ caps
    def _check_sampling(self, sampling: Sampling, prompts: int) -> None:
        limits = self.limits
        if sampling.n > limits.max_n:
            raise BadRequest(
                f"'n' must be at most {limits.max_n} on this server (--max-n), got {sampling.n}",
                "n")
        if sampling.n * prompts > limits.max_sequences:
            raise BadRequest(
                f"n x prompts = {sampling.n * prompts}: this server takes at most "
                f"{limits.max_sequences} sequences a request (--max-sequences)", "prompt")
        if sampling.max_tokens is not None and sampling.max_tokens > limits.max_tokens:
            raise BadRequest(
                f"'max_tokens' must be at most {limits.max_tokens} on this server "
                f"(--max-tokens), got {sampling.max_tokens}", "max_tokens")

    def _check_prompt_text(self, size: int) -> None:
        if size > self.limits.max_prompt_bytes:
            raise BadRequest(
                f"a prompt of {size} bytes: this server takes at most "
                f"{self.limits.max_prompt_bytes} (--max-prompt-bytes)", "messages")

    def _check_prompt_ids(self, prompts: Sequence[Sequence[int]]) -> None:
        cap = self.max_prompt_tokens
        vocabulary = _vocabulary_size(self.policy)
        for ids in prompts:
            if cap is not None and len(ids) > cap:
                raise PromptTooLongError(
                    f"a prompt of {len(ids)} tokens: this server takes at most {cap} "
                    "(the model's maximum context length, or --max-prompt-tokens)")
            if vocabulary is not None and any(t < 0 or t >= vocabulary for t in ids):
                raise BadRequest(
                    f"token ids must be in [0, {vocabulary}) (the model's vocabulary)", "prompt")

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
        self._check_sampling(sampling, 1)
        self._check_prompt_text(
            sum(len(str(m.get("content") or "").encode()) for m in messages)
            + len(json.dumps(tools or []).encode())
        )
        conversation = Conversation(messages=messages, tools=tools)
        # in this request's thread: a tokenizer's encoding is no turn on the model
        ids = self.policy.formatter.prompt_ids(conversation)
        self._check_prompt_ids([ids])
        generations = self._generate([ids], sampling)[0]
        values = (
            [self._turn(self._logprobs, ids, drawn(g), top) for g in generations]
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
        sampling = read_sampling(body, chat=False)
        echo = bool_field(body, "echo")
        top = read_logprobs(body, chat=False)
        _refuse_unsupported(body)
        prompt = body.get("prompt")
        self._check_sampling(sampling, len(prompt) if _is_prompt_list(prompt) else 1)
        self._check_prompt_text(_prompt_text_bytes(prompt))
        prompts = self._prompt_ids(prompt, bool(body.get("add_special_tokens", True)))
        self._check_prompt_ids(prompts)
        if sampling.max_tokens == 0:
            if sampling.stream:
                raise BadRequest("max_tokens=0 (prompt log-probs) is not streamed", "stream")
            return self._prompt_logprobs(prompts, echo, top is not None)
        tokenizer = self.policy.tokenizer
        n = sampling.n
        generations = self._generate(prompts, sampling)
        values: list[list[TokenLogprob | None]] = []
        if top is not None:  # prompt-major, as the choices
            for ids, gens in zip(prompts, generations, strict=True):
                for g in gens:
                    computed = self._turn(
                        self._logprobs, ids, drawn(g), top, 1 if echo else len(ids)
                    )
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
        values = self._turn(
            self.policy.token_logprobs, prompts, [1 if len(ids) > 1 else len(ids) for ids in prompts]
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
                encoded = self.policy.tokenizer(item, add_special_tokens=add_special_tokens)
                return list(encoded["input_ids"])
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


def _is_prompt_list(prompt: Any) -> bool:
    """A list of prompts (texts or id lists), not one prompt of ids."""
    return isinstance(prompt, list) and bool(prompt) and not all(
        isinstance(t, int) for t in prompt
    )


def _prompt_text_bytes(prompt: Any) -> int:
    if isinstance(prompt, str):
        return len(prompt.encode())
    if isinstance(prompt, list):
        return sum(len(p.encode()) for p in prompt if isinstance(p, str))
    return 0


def _vocabulary_size(policy: Any) -> int | None:
    """How many token ids the model embeds (an id past it would crash the forward pass)."""
    try:
        return int(policy.model.get_input_embeddings().num_embeddings)
    except (AttributeError, TypeError):
        size = getattr(getattr(policy.model, "config", None), "vocab_size", None)
        return int(size) if size else None


def _refuse_unsupported(body: dict[str, Any]) -> None:
    for key, neutral in _UNSUPPORTED.items():
        if body.get(key) not in (None, neutral):
            raise BadRequest(f"'{key}' is not supported by this server", key)
    response_format = body.get("response_format")
    if response_format not in (None, {"type": "text"}):
        raise BadRequest(
            "'response_format' other than text is not supported by this server", "response_format"
        )


def serve(
    policy: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    model_name: str = "local",
    api_key: str | None = None,
    auth: bool = True,
    allowed_hosts: Sequence[str] = (),
    limits: ServeLimits | None = None,
) -> LocalServer:
    """Serve ``policy`` (an ``HFPolicy``) on ``host:port`` (0: a free port) in a thread.

    Every route but ``GET /health`` needs ``api_key`` (a new random one where ``None``:
    read it from the server's ``api_key``); ``auth=False`` serves without a key, on a
    loopback address only. ``allowed_hosts``: ``Host`` names accepted besides loopback
    ones; ``limits``: the caps (``ServeLimits``' defaults where ``None``)."""
    return LocalServer(
        policy, host, port, model_name, api_key=api_key, auth=auth,
        allowed_hosts=allowed_hosts, limits=limits,
    )
