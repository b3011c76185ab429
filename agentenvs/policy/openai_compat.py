"""``OpenAICompatPolicy``: any OpenAI-compatible HTTP endpoint as a policy (stdlib only).

- ``sample``: one ``POST {base_url}/chat/completions`` per conversation (``n``,
  ``temperature``, ``top_p``, ``max_tokens``, ``stop``, ``seed``), up to ``concurrency`` at
  a time; the server renders its own chat template. With a ``seed``, conversation ``c``
  of a call is sent ``derive_seed(seed, c)``: reproducible where the server honours seeds.
  Tools go along with ``tool_choice="none"``, so the model sees them and answers in text.
- ``score``: ``POST {base_url}/completions`` with the history+action *token ids* as the
  prompt and ``echo=True, logprobs=1, max_tokens=0``, which returns the prompt tokens'
  log-probs (vLLM's server does this; OpenAI's own API does not). Sending ids rather
  than text means the server scores exactly the tokens the chat template renders, which
  needs the model's tokenizer here (``tokenizer=`` a path or a loaded tokenizer; loading
  one needs the ``hf`` extra). A server that cannot echo prompt log-probs gets a
  ``ScoringUnsupportedError`` saying so.
- Transport: ``urllib`` with a timeout per request; connection errors, timeouts, 408,
  409, 429 and 5xx are retried ``max_retries`` times with exponential backoff (or the
  server's ``Retry-After``); other errors raise ``EndpointError`` with the server's message.

``api_key`` defaults to the ``OPENAI_API_KEY`` environment variable; none is sent if unset.
Spec: ``openai:base_url=http://127.0.0.1:8000/v1,model=NAME[,tokenizer=PATH,...]``.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentenvs.core.errors import AgentEnvsError, require
from agentenvs.policy.base import ActionScore, Conversation
from agentenvs.policy.chat import ChatFormatter, apply_stop
from agentenvs.policy.hf import derive_seed

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class EndpointError(AgentEnvsError):
    """An OpenAI-compatible endpoint failed or answered something unusable."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ScoringUnsupportedError(EndpointError):
    """The endpoint does not return prompt log-probs, so it cannot score given actions."""


class OpenAICompatPolicy:
    """A policy served over the OpenAI chat/completions API (see the module docstring)."""

    name = "openai"
    #: a model sees only the messages: it reads the budget only where the env shows it
    conditions_on_budget = False

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        tokenizer: Any = None,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: str | Sequence[str] | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        concurrency: int = 8,
        score_batch_size: int = 16,
        chat_template: str | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if float(temperature) < 0 or not 0 < float(top_p) <= 1 or int(max_new_tokens) < 1:
            raise ValueError(
                f"need temperature >= 0, 0 < top_p <= 1, max_new_tokens >= 1; got "
                f"{temperature}, {top_p}, {max_new_tokens}"
            )
        if float(timeout) <= 0 or int(max_retries) < 0 or int(concurrency) < 1:
            raise ValueError("need timeout > 0, max_retries >= 0 and concurrency >= 1")
        base = base_url.rstrip("/")
        self.base_url = base if base.endswith("/v1") else f"{base}/v1"
        self.model = str(model)
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.stop: tuple[str, ...] = (stop,) if isinstance(stop, str) else tuple(stop or ())
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.concurrency = int(concurrency)
        self.score_batch_size = max(1, int(score_batch_size))
        self._tokenizer_source = tokenizer
        self._chat_template = chat_template
        self._formatter: ChatFormatter | None = None

    # ------------------------------------------------------------ transport
    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            wait = self.backoff * (2**attempt)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    raw = response.read()
                try:
                    return json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise EndpointError(f"{url}: the answer is not JSON: {raw[:200]!r}") from exc
            except urllib.error.HTTPError as exc:
                message = _error_message(exc)
                if exc.code not in RETRY_STATUS:
                    raise EndpointError(f"{url}: HTTP {exc.code}: {message}", exc.code) from exc
                last = EndpointError(f"{url}: HTTP {exc.code}: {message}", exc.code)
                wait = _retry_after(exc, wait)
            except (
                urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException
            ) as exc:
                reason = getattr(exc, "reason", exc)
                last = EndpointError(f"{url}: {type(reason).__name__}: {reason}")
            if attempt < self.max_retries:
                time.sleep(wait)
        assert last is not None
        raise EndpointError(f"{last} (after {self.max_retries + 1} attempts)", last.status)

    # ------------------------------------------------------------ sampling
    def sample(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[str]]:
        if int(n) < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        payloads = [self._chat_payload(conv, int(n), seed, c) for c, conv in enumerate(conversations)]
        if len(payloads) <= 1 or self.concurrency == 1:
            answers = [self._post("/chat/completions", p) for p in payloads]
        else:
            with ThreadPoolExecutor(min(self.concurrency, len(payloads))) as pool:
                answers = list(pool.map(lambda p: self._post("/chat/completions", p), payloads))
        return [self._texts(answer, int(n)) for answer in answers]

    def _chat_payload(
        self, conversation: Conversation, n: int, seed: int | None, index: int
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in conversation.messages],
            "n": n,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_new_tokens,
        }
        if self.stop:
            payload["stop"] = list(self.stop)
        if seed is not None:
            payload["seed"] = derive_seed(int(seed), index) % (2**31)  # servers take int32 seeds
        if conversation.tools:
            payload["tools"] = list(conversation.tools)
            payload["tool_choice"] = "none"
        return payload

    def _texts(self, answer: dict[str, Any], n: int) -> list[str]:
        try:
            choices = sorted(answer["choices"], key=lambda ch: ch.get("index", 0))
            texts = []
            for choice in choices:
                message = choice["message"]
                text = message.get("content") or ""
                if message.get("tool_calls"):  # a server that still answered with calls
                    text += json.dumps(message["tool_calls"])
                texts.append(apply_stop(text, self.stop)[0])  # in case the server ignored stop
        except (KeyError, TypeError) as exc:
            raise EndpointError(f"malformed chat completion: {str(answer)[:300]}") from exc
        if len(texts) != n:
            raise EndpointError(f"asked for n={n} samples, the server returned {len(texts)}")
        return texts

    # ------------------------------------------------------------ scoring
    @property
    def formatter(self) -> ChatFormatter:
        if self._formatter is None:
            source = self._tokenizer_source
            if source is None:
                raise ScoringUnsupportedError(
                    "scoring through an OpenAI-compatible endpoint needs the model's tokenizer "
                    "here to render the chat template into token ids: pass tokenizer=PATH"
                )
            if isinstance(source, str | os.PathLike):
                transformers = require("transformers", "hf")
                source = transformers.AutoTokenizer.from_pretrained(os.fspath(source))
            self._formatter = ChatFormatter(source, self._chat_template)
        return self._formatter

    def score(
        self, conversations: Sequence[Conversation], actions: Sequence[str]
    ) -> list[ActionScore]:
        if len(conversations) != len(actions):
            raise ValueError(
                f"{len(conversations)} conversations but {len(actions)} actions to score"
            )
        formatter = self.formatter
        sequences = [
            formatter.scored_sequence(conv, action)
            for conv, action in zip(conversations, actions, strict=True)
        ]
        scores: list[ActionScore] = []
        for first in range(0, len(sequences), self.score_batch_size):
            chunk = sequences[first : first + self.score_batch_size]
            payload = {
                "model": self.model,
                "prompt": [seq.ids for seq in chunk],
                "echo": True,
                "logprobs": 1,
                "max_tokens": 0,
                "temperature": 0.0,
            }
            try:
                answer = self._post("/completions", payload)
            except EndpointError as exc:
                if exc.status in (400, 404, 405, 422, 501):
                    raise ScoringUnsupportedError(
                        "the endpoint refused a prompt-log-prob request (/completions with "
                        f"echo=True, logprobs=1, max_tokens=0), which scoring needs: {exc}",
                        exc.status,
                    ) from exc
                raise
            scores += _scores_from_echo(answer, [(len(s.ids), s.action_start) for s in chunk])
        return scores


def _scores_from_echo(
    answer: dict[str, Any], shapes: Sequence[tuple[int, int]]
) -> list[ActionScore]:
    """The action part of each echoed prompt's log-probs (``shapes``: length, action start)."""
    try:
        choices = sorted(answer["choices"], key=lambda ch: ch.get("index", 0))
    except (KeyError, TypeError) as exc:
        raise EndpointError(f"malformed completion: {str(answer)[:300]}") from exc
    if len(choices) != len(shapes):
        raise EndpointError(f"scored {len(shapes)} prompts, the server returned {len(choices)}")
    scores = []
    for choice, (length, start) in zip(choices, shapes, strict=True):
        logprobs = choice.get("logprobs") or {}
        values = logprobs.get("token_logprobs")
        tokens = logprobs.get("tokens") or []
        if not values or len(values) < length:
            raise ScoringUnsupportedError(
                "the endpoint did not echo the prompt's log-probs (got "
                f"{0 if not values else len(values)} for a {length}-token prompt); scoring "
                "needs a server with prompt log-probs, such as vLLM's"
            )
        part = values[start:length]
        if any(v is None for v in part):
            raise EndpointError("the endpoint returned no log-prob for some action tokens")
        token_texts = tuple(str(t) for t in tokens[start:length]) if len(tokens) >= length else ()
        scores.append(ActionScore(float(sum(part)), token_texts, tuple(float(v) for v in part)))
    return scores


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read()
    except OSError:
        return exc.reason or ""
    try:
        data = json.loads(raw)
        error = data.get("error", data) if isinstance(data, dict) else data
        if isinstance(error, dict):
            return str(error.get("message") or error)
        return str(error)
    except (json.JSONDecodeError, AttributeError):
        return raw[:300].decode(errors="replace")


def _retry_after(exc: urllib.error.HTTPError, default: float) -> float:
    value = exc.headers.get("Retry-After") if exc.headers else None
    try:
        return min(max(float(value), 0.0), 30.0) if value is not None else default
    except ValueError:
        return default
