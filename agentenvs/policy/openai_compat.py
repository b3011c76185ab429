"""``OpenAICompatPolicy``: any OpenAI-compatible HTTP endpoint as a policy (stdlib only).

- ``sample``: one ``POST {base_url}/chat/completions`` per conversation (``n``,
  ``temperature``, ``top_p``, ``max_tokens``, ``stop``, ``seed``), up to ``concurrency`` at
  a time; the server renders its own chat template. With a ``seed``, conversation ``c``
  of a call is sent ``derive_seed(seed, c)``: reproducible where the server honours seeds.
  Tools go along with ``tool_choice="none"``, so the model sees them and answers in text.
- ``sample_tokens``: the same samples as ``Sample``s, with the ids the model was given and
  drew and their log-probs, where the server has vLLM's token extensions (vLLM's, ``agentenvs
  serve-model``; see ``agentenvs.policy.openai_tokens``). ``conversation="tokens"`` (the
  default) with ``tokenizer=`` (the served model's) builds each turn's prompt here, as the
  ``hf`` policy does (``agentenvs.policy.tokens``: the previous prompt, the sampled ids, the
  observation's tokens; the drift against the template checked with ``check_drift``), and
  sends it as token ids to ``/completions`` with ``return_token_ids`` and ``logprobs``
  (tokens named ``token_id:<id>``). Without a tokenizer, with ``conversation="template"``,
  or against a server whose ``/completions`` refuses token prompts, it asks
  ``/chat/completions`` (the server renders its template) for ``return_token_ids`` and
  ``logprobs`` and records what comes back: the server's prompt ids and the drawn ids. A
  server without the extensions answers text only: the samples carry no ids, the records
  no tokens, and ``token_note`` (logged once, and in ``agentenvs eval``'s manifest) says
  why. ``sample`` returns the texts of ``sample_tokens``.
- ``score``: ``POST {base_url}/completions`` with the history+action *token ids* as the
  prompt and ``echo=True, logprobs=1, max_tokens=0``, which returns the prompt tokens'
  log-probs (vLLM's server does this; OpenAI's own API does not). Sending ids rather
  than text means the server scores exactly the tokens the chat template renders, which
  needs the model's tokenizer here (``tokenizer=`` a path or a loaded tokenizer; loading
  one needs the ``hf`` extra). A server that cannot echo prompt log-probs gets a
  ``ScoringUnsupportedError`` saying so.

Faults of the model side are never the agent's action. Each request is tried up to
``max_retries + 1`` times (default 4), waiting ``backoff * 2**attempt`` seconds between
tries (0.5, 1, 2 s; at most ``max_backoff``, 30 s) or what the server's ``Retry-After``
asks (within ``max_backoff``), each try waiting at most ``timeout`` seconds (60) for any
one read, and all of them together within ``deadline`` seconds (300: a server that
trickles its answer is cut off there). What is retried, then raised as
``Fault(kind="model")`` (``agentenvs.core.errors``) when the tries or the deadline run
out:

- HTTP 408, 409, 429 and every 5xx but 501 (the server is overloaded, failing or gone);
- a connection refused, reset or closed early, a read that timed out, a body cut short
  (fewer bytes than its ``Content-Length``, a chunk missing) or that is not JSON;
- an error reported inside a 200 answer (``{"error": ...}``), and a choice whose
  ``finish_reason`` is ``abort`` or ``error`` (the engine dropped the request: its text
  is partial).

What is the caller's, and raised at once without a retry: a context too long (HTTP 400
saying ``context_length_exceeded`` or "maximum context length"), a ``PromptTooLongError``
(``agentenvs.policy.chat``: the trajectory ends there, unsuccessful, as for any history
that cannot be put to the model); every other 4xx and 501 (a bad request, key, model
name or URL, a feature the server lacks) and an answer of the wrong shape or number of
choices, an ``EndpointError`` with the server's message. A sample that ended on
``max_tokens`` (``finish_reason="length"``) is the model's own, and is returned.
``transient_failures`` counts the tries that failed and were retried or given up on.

Sampling settings (``max_new_tokens``, ``temperature``, ``top_p``, ``stop``): an argument
given wins; an unset one takes the served spec's value where the server says it (the
``sampling_defaults`` of its ``/v1/models`` entry, which ``agentenvs serve-model`` gives),
else the built-in default (``DEFAULT_SAMPLING``: 256 tokens, temperature 1, top-p 1, no
stop). The server is asked once, at the first request or ``sampling_settings()``; one that
does not answer then (a connection refused, a 5xx) is asked again next time, and the
built-in defaults serve meanwhile. ``sampling_settings()`` gives the effective values and
where each came from (``agentenvs eval`` keeps them in the run's manifest).

The key (``Authorization: Bearer``): ``api_key_env=NAME`` (an environment variable) or
``api_key_file=PATH`` (a file only its user may read), else ``AGENTENVS_MODEL_API_KEY``,
else ``OPENAI_API_KEY``; none is sent where none is set. ``api_key=`` inline works too,
but a spec is written down (a run's manifest, the process list): it is shown as ``***``
there, and the environment or a file is the way (``agentenvs.policy.credentials``).
Spec: ``openai:base_url=http://127.0.0.1:8000/v1,model=NAME[,api_key_env=NAME,
tokenizer=PATH,conversation=tokens,check_drift=true,...]``.
"""

from __future__ import annotations

import functools
import http.client
import json
import logging
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from agentenvs.core.errors import AgentEnvsError, Fault, require
from agentenvs.policy.base import ActionScore, Conversation, Sample
from agentenvs.policy.chat import ChatFormatter, PromptTooLongError
from agentenvs.policy.credentials import resolve_api_key
from agentenvs.policy.hf import derive_seed
from agentenvs.policy.openai_tokens import (
    CHAT_TOKEN_FIELDS,
    COMPLETION_TOKEN_FIELDS,
    EXTENSION_FIELDS,
    DroppedGeneration,
    answer_choices,
    end_of_turn_ids,
    refuses_extensions,
    served_sample,
)
from agentenvs.policy.tokens import CONVERSATION_MODES, TurnPrompts

logger = logging.getLogger(__name__)

#: statuses of the model side's faults (retried, then a ``Fault``): 408, 409, 429, 5xx but 501
FAULT_STATUS = frozenset({408, 409, 429, *range(500, 600)}) - {501}
#: sampling settings where neither the arguments nor the server say otherwise
DEFAULT_SAMPLING: dict[str, Any] = {"max_tokens": 256, "temperature": 1.0, "top_p": 1.0, "stop": []}

T = TypeVar("T")


class EndpointError(AgentEnvsError):
    """An OpenAI-compatible endpoint refused a request as the caller's (a 4xx) or answered
    something of the wrong shape: not a fault, not retried."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ScoringUnsupportedError(EndpointError):
    """The endpoint does not return prompt log-probs, so it cannot score given actions."""


class _Transient(Exception):
    """One try failed for a reason of the model side's; the request may be tried again."""

    def __init__(
        self, message: str, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


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
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: str | Sequence[str] | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        deadline: float = 300.0,
        concurrency: int = 8,
        score_batch_size: int = 16,
        chat_template: str | None = None,
        conversation: str = "tokens",
        check_drift: bool = True,
        api_key_env: str | None = None,
        api_key_file: str | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if conversation not in CONVERSATION_MODES:
            raise ValueError(
                f"conversation must be one of {CONVERSATION_MODES}, got {conversation!r}"
            )
        _check_sampling(max_new_tokens, temperature, top_p)
        if float(timeout) <= 0 or int(max_retries) < 0 or int(concurrency) < 1:
            raise ValueError("need timeout > 0, max_retries >= 0 and concurrency >= 1")
        if float(deadline) <= 0 or float(backoff) < 0 or float(max_backoff) < 0:
            raise ValueError("need deadline > 0, backoff >= 0 and max_backoff >= 0")
        base = base_url.rstrip("/")
        self.base_url = base if base.endswith("/v1") else f"{base}/v1"
        self.model = str(model)
        self.api_key = resolve_api_key(api_key, api_key_env, api_key_file)
        #: the sampling settings given as arguments (the rest come from the server or defaults)
        self._given: dict[str, Any] = {
            key: value
            for key, value in (
                ("max_tokens", None if max_new_tokens is None else int(max_new_tokens)),
                ("temperature", None if temperature is None else float(temperature)),
                ("top_p", None if top_p is None else float(top_p)),
                ("stop", None if stop is None else _stop_list(stop)),
            )
            if value is not None
        }
        self._served: dict[str, Any] | None = None  # the server's sampling defaults, once known
        self._sampling_lock = threading.Lock()
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.deadline = float(deadline)
        self.concurrency = int(concurrency)
        self.score_batch_size = max(1, int(score_batch_size))
        self.transient_failures = 0
        self._count_lock = threading.Lock()
        self._tokenizer_source = tokenizer
        self._chat_template = chat_template
        self._formatter: ChatFormatter | None = None
        self.conversation = conversation
        self.check_drift = bool(check_drift)
        self._turns: TurnPrompts | None = None
        #: whether the server takes the token-extension fields (False once it refused them)
        self._extensions = True
        #: whether token prompts go to /completions (False once it refused them)
        self._token_prompts = conversation == "tokens" and tokenizer is not None
        self._completions_answered = False
        #: why samples carry no token ids, where they do not (said once, then kept here)
        self.token_note: str | None = None
        if conversation == "tokens" and tokenizer is None:
            self._note(
                "conversation='tokens' needs the served model's tokenizer (tokenizer=PATH) to "
                "build each turn's prompt from ids; without one the server renders its chat "
                "template every turn, and the samples carry the ids it reports"
            )

    def __repr__(self) -> str:  # never the key
        return f"OpenAICompatPolicy(base_url={self.base_url!r}, model={self.model!r})"

    # ------------------------------------------------------------ sampling settings
    def sampling_settings(self) -> dict[str, Any]:
        """The effective ``max_tokens``, ``temperature``, ``top_p`` and ``stop`` of every
        request, and in ``source`` where each came from: ``"argument"``, ``"server"`` (its
        ``/v1/models`` entry) or ``"default"`` (``DEFAULT_SAMPLING``)."""
        served = self._served_defaults()
        settings: dict[str, Any] = {}
        source: dict[str, str] = {}
        for key, default in DEFAULT_SAMPLING.items():
            if key in self._given:
                settings[key], source[key] = self._given[key], "argument"
            elif served is not None and served.get(key) is not None:
                settings[key], source[key] = served[key], "server"
            else:
                settings[key], source[key] = default, "default"
        settings["stop"] = list(settings["stop"])
        return {**settings, "source": source}

    @property
    def max_new_tokens(self) -> int:
        return int(self.sampling_settings()["max_tokens"])

    @property
    def temperature(self) -> float:
        return float(self.sampling_settings()["temperature"])

    @property
    def top_p(self) -> float:
        return float(self.sampling_settings()["top_p"])

    @property
    def stop(self) -> tuple[str, ...]:
        return tuple(self.sampling_settings()["stop"])

    def _served_defaults(self) -> dict[str, Any] | None:
        """The ``sampling_defaults`` of the server's entry for this model (``None``: it
        gives none). Asked once; a server that does not answer is asked again next time."""
        if len(self._given) == len(DEFAULT_SAMPLING):
            return None  # every setting given: nothing to ask
        with self._sampling_lock:
            if self._served is not None:
                return self._served or None
            headers = {"Accept": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            request = urllib.request.Request(f"{self.base_url}/models", headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=min(self.timeout, 30.0)) as response:
                    listing = json.loads(response.read())
            except urllib.error.HTTPError as exc:
                if exc.code in FAULT_STATUS:
                    logger.warning(
                        "model server %s/models: HTTP %d; built-in sampling defaults for now",
                        self.base_url,
                        exc.code,
                    )
                    return None
                listing = {}  # a server without the route: it gives no defaults
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                logger.warning(
                    "model server %s/models: %s; built-in sampling defaults for now",
                    self.base_url,
                    exc,
                )
                return None
            except (json.JSONDecodeError, UnicodeDecodeError):
                listing = {}
            entries = listing.get("data") if isinstance(listing, dict) else None
            entries = [e for e in entries or [] if isinstance(e, dict)]
            entry = next((e for e in entries if e.get("id") == self.model), None)
            if entry is None and len(entries) == 1:
                entry = entries[0]  # a server that answers to any name
            defaults = (entry or {}).get("sampling_defaults")
            self._served = _served_sampling(defaults) if isinstance(defaults, dict) else {}
            return self._served or None

    # ------------------------------------------------------------ transport
    def _post(
        self,
        path: str,
        payload: dict[str, Any],
        parse: Callable[[dict[str, Any]], T] | None = None,
    ) -> T | dict[str, Any]:
        """POST ``payload`` and return ``parse(answer)`` (the answer itself without one),
        trying again after a fault of the model side (see the module docstring)."""
        url = f"{self.base_url}{path}"
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        start = time.monotonic()
        end = start + self.deadline
        failures: list[str] = []
        for attempt in range(self.max_retries + 1):
            try:
                answer = self._try(url, body, headers, end)
                if isinstance(answer.get("error"), dict | str) and "choices" not in answer:
                    raise _Transient(f"the server answered an error: {_short(answer['error'])}")
                return parse(answer) if parse is not None else answer
            except _Transient as exc:
                with self._count_lock:
                    self.transient_failures += 1
                failures.append(str(exc))
                wait = exc.retry_after
                if wait is None:
                    wait = self.backoff * 2**attempt
                wait = min(max(wait, 0.0), self.max_backoff)
            if attempt == self.max_retries or time.monotonic() + wait >= end:
                break
            logger.warning(
                "model server %s: %s; try %d of %d again in %.2f s",
                url,
                failures[-1],
                attempt + 2,
                self.max_retries + 1,
                wait,
            )
            time.sleep(wait)
        elapsed = time.monotonic() - start
        raise Fault(
            f"{url}: the model server failed: {len(failures)} "
            f"{'try' if len(failures) == 1 else 'tries'} in {elapsed:.1f} s (deadline "
            f"{self.deadline:g} s), the last: {failures[-1]}",
            kind="model",
            evidence="; ".join(failures[-3:]),
        )

    def _try(self, url: str, body: bytes, headers: dict[str, str], end: float) -> dict[str, Any]:
        """One request, its socket shut at ``end`` whatever it is waiting for."""
        left = end - time.monotonic()
        if left <= 0:
            raise _Transient("no time left before the deadline")
        watchdog = _Watchdog(left)
        opener = urllib.request.build_opener(_HTTPHandler(watchdog), _HTTPSHandler(watchdog))
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with opener.open(request, timeout=min(self.timeout, left)) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            message, code = _error_message(exc)
            if exc.code in FAULT_STATUS:
                raise _Transient(
                    f"HTTP {exc.code}: {message}", exc.code, _retry_after(exc)
                ) from exc
            if exc.code == 400 and _context_exceeded(message, code):
                raise PromptTooLongError(f"{url}: HTTP 400: {message}") from exc
            raise EndpointError(f"{url}: HTTP {exc.code}: {message}", exc.code) from exc
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            if watchdog.fired:
                raise _Transient(
                    f"no complete answer within the deadline ({self.deadline:g} s)"
                ) from exc
            reason = getattr(exc, "reason", exc)
            raise _Transient(f"{type(reason).__name__}: {reason}") from exc
        finally:
            watchdog.cancel()
        try:
            answer = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise _Transient(f"the answer is not JSON ({len(raw)} bytes): {raw[:200]!r}") from exc
        if not isinstance(answer, dict):
            raise EndpointError(f"{url}: the answer is not a JSON object: {_short(answer)}")
        return answer

    # ------------------------------------------------------------ sampling
    def sample(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[str]]:
        return [[s.text for s in row] for row in self.sample_tokens(conversations, n, seed=seed)]

    def sample_tokens(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[Sample]]:
        """``n`` samples per conversation, with the prompt and drawn ids and log-probs where
        the server gives them (see the module docstring)."""
        if int(n) < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        count = int(n)
        indexed = list(enumerate(conversations))

        def ask(item: tuple[int, Conversation]) -> list[Sample]:
            index, conversation = item
            if self._token_prompts:
                samples = self._sample_from_ids(conversation, count, seed, index)
                if samples is not None:
                    return samples
            return self._sample_chat(conversation, count, seed, index)

        if len(indexed) <= 1 or self.concurrency == 1:
            rows = [ask(item) for item in indexed]
        else:
            with ThreadPoolExecutor(min(self.concurrency, len(indexed))) as pool:
                rows = list(pool.map(ask, indexed))
        if any(not s.completion_ids for row in rows for s in row):
            self._note(
                f"the server at {self.base_url} returned no token ids (it lacks vLLM's "
                "return_token_ids): its samples are text only and no tokens are recorded"
            )
        return rows

    @property
    def turns(self) -> TurnPrompts:
        """How each turn's prompt ids are built here (``conversation="tokens"``)."""
        if self._turns is None:
            formatter = self.formatter
            self._turns = TurnPrompts(
                formatter,
                self.conversation,
                check_drift=self.check_drift,
                end_ids=end_of_turn_ids(formatter),
            )
        return self._turns

    def _sample_from_ids(
        self, conversation: Conversation, n: int, seed: int | None, index: int
    ) -> list[Sample] | None:
        """The samples of a token prompt built here, from ``/completions`` (``None``: the
        server refused token prompts before answering any, so chat takes over)."""
        prompt = self.turns.build(conversation)
        payload = self._sampling_payload(n, seed, index)
        payload["prompt"] = list(prompt.ids)
        turns = self.turns

        def parse(answer: dict[str, Any]) -> list[Sample]:
            return [
                served_sample(
                    choice,
                    text,
                    prompt,
                    None,
                    chat=False,
                    tokenizer=turns.formatter.tokenizer,
                    vocab=turns.formatter.vocab_fingerprint,
                    stop=self.stop,
                    end_ids=sorted(turns.end_ids),
                )
                for choice, text in self._choices(answer, n, chat=False)
            ]

        try:
            samples = self._post_tokens("/completions", payload, COMPLETION_TOKEN_FIELDS, parse)
        except EndpointError as exc:
            if self._completions_answered or exc.status not in (400, 404, 405, 422, 501):
                raise
            self._token_prompts = False
            self._note(
                f"{self.base_url}/completions refused a prompt of token ids ({exc}); the "
                "server renders its chat template every turn instead"
            )
            return None
        self._completions_answered = True
        return samples

    def _sample_chat(
        self, conversation: Conversation, n: int, seed: int | None, index: int
    ) -> list[Sample]:
        payload = self._sampling_payload(n, seed, index)
        payload["messages"] = [dict(m) for m in conversation.messages]
        if conversation.tools:
            payload["tools"] = list(conversation.tools)
            payload["tool_choice"] = "none"
        formatter = self._formatter_if_any()

        def parse(answer: dict[str, Any]) -> list[Sample]:
            prompt_ids = answer.get("prompt_token_ids")
            if not isinstance(prompt_ids, list) or not all(isinstance(i, int) for i in prompt_ids):
                prompt_ids = None
            return [
                served_sample(
                    choice,
                    text,
                    None,
                    prompt_ids,
                    chat=True,
                    tokenizer=None if formatter is None else formatter.tokenizer,
                    vocab="" if formatter is None else formatter.vocab_fingerprint,
                    stop=self.stop,
                    end_ids=(),
                )
                for choice, text in self._choices(answer, n, chat=True)
            ]

        return self._post_tokens("/chat/completions", payload, CHAT_TOKEN_FIELDS, parse)

    def _post_tokens(
        self,
        path: str,
        payload: dict[str, Any],
        fields: dict[str, Any],
        parse: Callable[[dict[str, Any]], T],
    ) -> T:
        """POST with the token-extension ``fields``; a server that refuses them by name
        (as OpenAI's refuses unknown arguments) is asked again without, from then on."""
        if self._extensions:
            try:
                return self._post(path, {**payload, **fields}, parse)  # type: ignore[return-value]
            except EndpointError as exc:
                if exc.status not in (400, 422) or not refuses_extensions(str(exc)):
                    raise
                self._extensions = False
                self._note(
                    f"the server at {self.base_url} refused vLLM's token extensions ({exc}): "
                    "its samples are text only and no tokens are recorded"
                )
        plain = {k: v for k, v in payload.items() if k not in EXTENSION_FIELDS}
        return self._post(path, plain, parse)  # type: ignore[return-value]

    def _sampling_payload(self, n: int, seed: int | None, index: int) -> dict[str, Any]:
        settings = self.sampling_settings()
        payload: dict[str, Any] = {
            "model": self.model,
            "n": n,
            "temperature": settings["temperature"],
            "top_p": settings["top_p"],
            "max_tokens": settings["max_tokens"],
        }
        if settings["stop"]:
            payload["stop"] = list(settings["stop"])
        if seed is not None:
            payload["seed"] = derive_seed(int(seed), index) % (2**31)  # servers take int32 seeds
        return payload

    def _choices(
        self, answer: dict[str, Any], n: int, *, chat: bool
    ) -> list[tuple[dict[str, Any], str]]:
        try:
            return answer_choices(answer, n, chat=chat, stop=self.stop)
        except DroppedGeneration as exc:
            raise _Transient(str(exc)) from exc
        except ValueError as exc:
            raise EndpointError(str(exc)) from exc

    def _note(self, note: str) -> None:
        """Say once why the samples carry no (or fewer) token ids."""
        with self._count_lock:
            if self.token_note is not None:
                return
            self.token_note = note
        logger.warning("openai policy: %s", note)

    def _formatter_if_any(self) -> ChatFormatter | None:
        return None if self._tokenizer_source is None else self.formatter

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
            shapes = [(len(s.ids), s.action_start) for s in chunk]
            try:
                parse = functools.partial(_scores_from_echo, shapes=shapes)
                scores += self._post("/completions", payload, parse)
            except ScoringUnsupportedError:
                raise
            except EndpointError as exc:
                if exc.status in (400, 404, 405, 422, 501):
                    raise ScoringUnsupportedError(
                        "the endpoint refused a prompt-log-prob request (/completions with "
                        f"echo=True, logprobs=1, max_tokens=0), which scoring needs: {exc}",
                        exc.status,
                    ) from exc
                raise
        return scores


def _scores_from_echo(
    answer: dict[str, Any], shapes: Sequence[tuple[int, int]]
) -> list[ActionScore]:
    """The action part of each echoed prompt's log-probs (``shapes``: length, action start)."""
    try:
        choices = sorted(answer["choices"], key=lambda ch: ch.get("index", 0))
    except (KeyError, TypeError, AttributeError) as exc:
        raise EndpointError(f"malformed completion: {_short(answer)}") from exc
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


def _check_sampling(max_tokens: Any, temperature: Any, top_p: Any) -> None:
    if (
        (temperature is not None and float(temperature) < 0)
        or (top_p is not None and not 0 < float(top_p) <= 1)
        or (max_tokens is not None and int(max_tokens) < 1)
    ):
        raise ValueError(
            f"need temperature >= 0, 0 < top_p <= 1, max_new_tokens >= 1; got "
            f"{temperature}, {top_p}, {max_tokens}"
        )


def _stop_list(stop: str | Sequence[str]) -> list[str]:
    return [stop] if isinstance(stop, str) else [str(s) for s in stop]


def _served_sampling(defaults: dict[str, Any]) -> dict[str, Any]:
    """A server's ``sampling_defaults``, the values that make sense kept."""
    served: dict[str, Any] = {}
    try:
        _check_sampling(
            defaults.get("max_tokens"), defaults.get("temperature"), defaults.get("top_p")
        )
    except (TypeError, ValueError):
        return {}
    for key, kind in (("max_tokens", int), ("temperature", float), ("top_p", float)):
        if isinstance(defaults.get(key), int | float) and not isinstance(defaults[key], bool):
            served[key] = kind(defaults[key])
    stop = defaults.get("stop")
    if isinstance(stop, str | list):
        served["stop"] = _stop_list(stop)
    return served


# ---------------------------------------------------------------- deadline and errors
class _Watchdog:
    """Shuts the sockets of one request when its time is up, so that no read (a server
    that trickles its answer a byte at a time) outlives the deadline."""

    def __init__(self, seconds: float) -> None:
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            fired = self.fired
        if fired:
            _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


def _watched(connection_class: type[http.client.HTTPConnection], watchdog: _Watchdog) -> Any:
    def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
        connection = connection_class(host, **kwargs)
        connect = connection.connect

        def watched_connect() -> None:
            connect()
            watchdog.watch(connection.sock)

        connection.connect = watched_connect  # type: ignore[method-assign]
        return connection

    return make


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPConnection, self._watchdog), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(
            _watched(http.client.HTTPSConnection, self._watchdog), req, context=self._context
        )


def _error_message(exc: urllib.error.HTTPError) -> tuple[str, str]:
    """The server's message and error code (``""`` when it gives none)."""
    try:
        raw = exc.read()
    except (OSError, http.client.HTTPException):
        return exc.reason or "", ""
    try:
        data = json.loads(raw)
        error = data.get("error", data) if isinstance(data, dict) else data
        if isinstance(error, dict):
            return str(error.get("message") or error), str(error.get("code") or "")
        return str(error), ""
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return raw[:300].decode(errors="replace"), ""


def _context_exceeded(message: str, code: str) -> bool:
    """Whether a 400 says the prompt (with ``max_tokens``) does not fit the model's context:
    OpenAI's code, and the wording of vLLM's and this project's servers."""
    text = message.lower()
    return code == "context_length_exceeded" or any(
        phrase in text for phrase in ("maximum context length", "maximum model length")
    )


def _retry_after(exc: urllib.error.HTTPError) -> float | None:
    value = exc.headers.get("Retry-After") if exc.headers else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _short(value: Any) -> str:
    return str(value)[:300]
