"""``HFPolicy``: a Hugging Face transformers causal LM as a sampling and scoring policy.

- ``sample``: prompts rendered with the model's chat template (``ChatFormatter``), left
  padded, ``batch_size`` sequences per ``generate`` call, ``n`` samples per conversation.
  Each sample draws from its own ``torch.Generator`` seeded from ``(seed, conversation
  index, sample index)``, so a seeded call is reproducible and a conversation's samples do
  not depend on the batch size or on the other conversations in the call (up to the
  float rounding that padding can change). The global torch RNG is never touched.
  Decoding is this module's own loop over the model's forward pass (with its KV cache),
  not ``generate``: each token is drawn from ``softmax(logits / temperature)`` in
  float32, cut to the top-p nucleus, the very distribution that ``score`` computes
  (at temperature 1 and top-p 1). No library default (``top_k=50``) and nothing in the
  model's ``generation_config`` (repetition penalty, ``no_repeat_ngram_size``, bad
  words, forced tokens) can change it.
- ``sample_tokens``: the same, returning ``Sample``s: prompt ids, the sampled ids (the
  end-of-turn token included when drawn) and their log-probs under the distribution
  they were drawn from (after temperature and top-p; at temperature 0, greedy, the
  model's own log-softmax, a point mass saying nothing). ``conversation="tokens"`` (the
  default) builds each turn's prompt from the previous turn's ids, its sampled ids and
  the new observation's tokens, and checks it against the template's rendering
  (``check_drift``); ``"template"`` renders the whole history every turn. See
  ``agentenvs.policy.tokens``.
- Stop strings end a sequence early and are cut from the text (not kept), as in the
  OpenAI API; the end-of-turn token of the chat template ends it too, and so does the
  end of the model's context (``max_position_embeddings``): finish reason ``"length"``.
- ``score``: one forward pass per batch over history+action, ``log_softmax`` in float32,
  the action tokens' log-probs gathered (which tokens: see ``agentenvs.policy.chat``).
  Only the logits of the action positions are kept (``logits_to_keep``), so long
  histories cost no vocabulary-sized memory per history token. Actions that share a
  history (several samples from one state) share one pass over it: its KV cache is
  copied per batch of actions (``share_prefix=True``; off, or a model whose cache cannot
  be copied and repeated, scores each history+action in full).

Failures: a prompt (or scored sequence) longer than the model's context is the agent's
history, a ``PromptTooLongError`` (the trajectory ends, unsuccessful). Memory that runs
out while sampling or scoring a history that fits (``torch.OutOfMemoryError`` on a GPU,
the CPU allocator's refusal, ``MemoryError``) and a CUDA error are the deployment's (its
batch size, its memory, its device): ``Fault(kind="model")``, after the GPU's cached
memory is released, so the runner retries the episode.

torch and transformers are imported when a policy is built, never by ``import agentenvs``.
Spec: ``hf:model=PATH[,dtype=bfloat16,device=cuda,max_new_tokens=256,temperature=1.0,
conversation=tokens,check_drift=true,...]``.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agentenvs.core.errors import Fault, require
from agentenvs.policy.base import ActionScore, Conversation, Sample
from agentenvs.policy.chat import (
    ChatFormatter,
    ChatTemplateError,
    PromptTooLongError,
    ScoredSequence,
    apply_stop,
)
from agentenvs.policy.tokens import TurnPrompts, tokens_covering

DTYPES = ("auto", "float32", "float16", "bfloat16")

F = TypeVar("F", bound=Callable[..., Any])


def model_faults(method: F) -> F:
    """Raise the deployment's failures inside ``method`` as ``Fault(kind="model")``: memory
    that runs out (``torch.OutOfMemoryError``, the CPU allocator's refusal,
    ``MemoryError``) and CUDA errors; the GPU's cached memory is released first."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except (MemoryError, RuntimeError) as exc:
            evidence = f"{type(exc).__name__}: {str(exc)[:300]}"
            if not is_deployment_failure(exc):
                raise
            torch = require("torch", "hf")
            if torch.cuda.is_available():
                try:
                    torch.cuda.empty_cache()
                except RuntimeError:
                    pass  # a broken CUDA context: the fault says so already
            raise Fault(
                f"the model ran out of memory or its device failed in {method.__name__}: "
                f"{evidence}",
                kind="model",
                evidence=evidence,
            ) from exc

    return wrapper  # type: ignore[return-value]


def is_deployment_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is memory that ran out or a CUDA device that failed (not the agent's)."""
    if isinstance(exc, MemoryError):
        return True
    torch = require("torch", "hf")
    accelerator_error = getattr(torch, "AcceleratorError", None)
    if isinstance(exc, torch.OutOfMemoryError) or (
        accelerator_error is not None and isinstance(exc, accelerator_error)
    ):
        return True
    text = str(exc)
    return "can't allocate memory" in text or text.startswith("CUDA error")


@dataclass(frozen=True)
class Generation:
    """One sampled continuation: its text (stop string cut), tokens and why it ended.

    ``token_ids`` are the tokens of the text (no end token); ``logprobs`` theirs, under
    the distribution sampled from; ``end_id``/``end_logprob``: the end-of-turn or EOS
    token the model drew to end it (``None`` when a stop string or the budget did).
    """

    text: str
    token_ids: tuple[int, ...]
    finish_reason: str  # "stop" (end of turn, EOS or a stop string) or "length"
    # not compared: the batch a row ran in can move them by float rounding
    logprobs: tuple[float, ...] = field(default=(), compare=False)
    end_id: int | None = None
    end_logprob: float | None = field(default=None, compare=False)

    @property
    def sampled_ids(self) -> tuple[int, ...]:
        """Every token the model drew that the text keeps, the end token included."""
        return self.token_ids if self.end_id is None else (*self.token_ids, self.end_id)

    @property
    def sampled_logprobs(self) -> tuple[float, ...]:
        if self.end_id is None or self.end_logprob is None:
            return self.logprobs
        return (*self.logprobs, self.end_logprob)


def derive_seed(seed: int, *parts: object) -> int:
    """A stable 63-bit seed from a base seed and labels (same on every machine)."""
    digest = hashlib.blake2b(repr((seed, *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def resolve_device(device: str) -> str:
    torch = require("torch", "hf")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def resolve_dtype(dtype: str, device: str) -> Any:
    torch = require("torch", "hf")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if dtype == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32  # half precision on CPU is slow and inaccurate
    return getattr(torch, dtype)


class HFPolicy:
    """A transformers causal LM behind the policy protocol (see the module docstring).

    ``model`` is a path or hub name (loaded with ``AutoModelForCausalLM``) or a loaded
    model; ``tokenizer`` likewise (default: the model's path). ``device="auto"`` picks
    cuda when available, else cpu, for a loaded path; a model object passed in stays
    where it is unless ``device`` is given. ``batch_size`` counts sequences per forward
    pass (samples when sampling, (history, action) pairs or actions after one shared
    history when scoring). ``threads`` sets torch's CPU threads (default: the share of
    the CPUs a worker pool gives each worker, see ``set_cpu_threads``).
    ``conversation`` (``"tokens"`` or ``"template"``) and ``check_drift``: how each turn's
    prompt is built (``agentenvs.policy.tokens``); tokens by default, because those are
    the ids the model saw and sampled, and the check tells when the template disagrees.
    """

    name = "hf"
    #: a model sees only the messages: it reads the budget only where the env shows it
    conditions_on_budget = False

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: str = "auto",
        dtype: str = "auto",
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: str | Sequence[str] | None = None,
        batch_size: int = 16,
        chat_template: str | None = None,
        trust_remote_code: bool = False,
        share_prefix: bool = True,
        threads: int | None = None,
        conversation: str = "tokens",
        check_drift: bool = True,
    ) -> None:
        torch = require("torch", "hf")
        transformers = require("transformers", "hf")
        set_cpu_threads(threads)
        _check_sampling(temperature, top_p, max_new_tokens)
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if isinstance(model, str | os.PathLike):
            path = os.fspath(model)
            self.device = resolve_device(device)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                path,
                dtype=resolve_dtype(dtype, self.device),
                trust_remote_code=trust_remote_code,
            ).to(self.device)
            if tokenizer is None:
                tokenizer = path
        else:
            if tokenizer is None:
                raise ValueError("pass the tokenizer along with a loaded model")
            if device != "auto":
                model = model.to(device)
            if dtype != "auto":
                model = model.to(resolve_dtype(dtype, str(model.device)))
            self.device = str(model.device)
        if isinstance(tokenizer, str | os.PathLike):
            tokenizer = transformers.AutoTokenizer.from_pretrained(
                os.fspath(tokenizer), trust_remote_code=trust_remote_code
            )
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.formatter = ChatFormatter(tokenizer, chat_template)
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.stop: tuple[str, ...] = _stop_tuple(stop)
        self.batch_size = int(batch_size)
        self.share_prefix = bool(share_prefix)
        self.eos_ids = self._end_ids()
        self.turns = TurnPrompts(
            self.formatter, conversation, check_drift=check_drift, end_ids=self.eos_ids
        )
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.eos_ids[0] if self.eos_ids else 0)
        self._torch = torch
        self._transformers = transformers
        self._keeps_logits = True  # until the model refuses logits_to_keep
        context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        #: the model's context window in tokens (None: the model does not say)
        self.context_length: int | None = int(context) if context else None

    def _end_ids(self) -> list[int]:
        """Token ids that end an assistant turn: EOS, the model's generation EOS ids and
        the special token the chat template closes a turn with."""
        ids: list[int] = []
        candidates: list[Any] = [self.tokenizer.eos_token_id]
        generation_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        candidates += generation_eos if isinstance(generation_eos, list) else [generation_eos]
        try:
            end_of_turn = self.formatter.end_of_turn_token()
        except ChatTemplateError:  # a template that cannot render a probe: EOS ids only
            end_of_turn = ""
        if end_of_turn:
            candidates.append(self.tokenizer.convert_tokens_to_ids(end_of_turn))
        for cid in candidates:
            if cid is not None and int(cid) not in ids and int(cid) >= 0:
                ids.append(int(cid))
        return ids

    # ------------------------------------------------------------ sampling
    def sample(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[str]]:
        return [[s.text for s in row] for row in self.sample_tokens(conversations, n, seed=seed)]

    def sample_tokens(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[Sample]]:
        """``n`` samples per conversation with their prompt and sampled ids and log-probs."""
        prompts = [self.turns.build(c) for c in conversations]
        generations = self.generate([p.ids for p in prompts], n, seed=seed)
        return [
            [
                self.turns.sample(p, g.text, g.sampled_ids, g.sampled_logprobs, g.finish_reason)
                for g in gens
            ]
            for p, gens in zip(prompts, generations, strict=True)
        ]

    @model_faults
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        n: int = 1,
        *,
        seed: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_new_tokens: int | None = None,
        stop: str | Sequence[str] | None = None,
        between_steps: Callable[[], None] | None = None,
    ) -> list[list[Generation]]:
        """``n`` continuations of each token-id prompt; unset options use the policy's.

        ``between_steps``: called after each decoding step (``agentenvs serve-model``
        runs other requests' work there, and ends a request past its time by raising)."""
        torch = self._torch
        temperature = self.temperature if temperature is None else float(temperature)
        top_p = self.top_p if top_p is None else float(top_p)
        max_new = self.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
        stops = self.stop if stop is None else _stop_tuple(stop)
        _check_sampling(temperature, top_p, max_new)
        if int(n) < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        limit = self.context_length
        for c, prompt in enumerate(prompts):
            if limit is not None and len(prompt) >= limit:
                raise PromptTooLongError(
                    f"prompt {c} has {len(prompt)} tokens: the model's maximum context length "
                    f"is {limit} tokens, leaving no room for an answer"
                )
        base = secrets.randbits(63) if seed is None else int(seed)
        rows = [(c, j) for c in range(len(prompts)) for j in range(int(n))]
        # longest first: batches of similar length waste less on padding
        rows.sort(key=lambda cj: -len(prompts[cj[0]]))
        results: dict[tuple[int, int], Generation] = {}
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start : start + self.batch_size]
            ids, mask = self._left_pad([prompts[c] for c, _ in chunk])
            generators = []
            for c, j in chunk:
                generator = torch.Generator(device=self.device)
                generator.manual_seed(derive_seed(base, c, j))
                generators.append(generator)
            out = self._generate_batch(
                ids, mask, generators, temperature, top_p, max_new, stops, between_steps
            )
            for (c, j), generation in zip(chunk, out, strict=True):
                results[(c, j)] = generation
        return [[results[(c, j)] for j in range(int(n))] for c in range(len(prompts))]

    def _generate_batch(
        self,
        ids: Any,
        mask: Any,
        generators: list[Any],
        temperature: float,
        top_p: float,
        max_new: int,
        stops: tuple[str, ...],
        between_steps: Callable[[], None] | None = None,
    ) -> list[Generation]:
        """Decode a left-padded batch token by token (see the module docstring)."""
        torch = self._torch
        rows = ids.shape[0]
        tokens: list[list[int]] = [[] for _ in range(rows)]
        logprobs: list[list[float]] = [[] for _ in range(rows)]
        ends: list[tuple[int, float] | None] = [None] * rows
        reasons: list[str | None] = [None] * rows
        cache_arg = self._cache_arg()
        cache = None
        step_ids, step_mask = ids, mask
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        room = [
            None if self.context_length is None else self.context_length - int(length)
            for length in mask.sum(-1).tolist()
        ]
        window = max((len(stop.encode()) for stop in stops), default=0) + 2
        with torch.inference_mode():
            for _ in range(max_new):
                inputs: dict[str, Any] = {
                    "input_ids": step_ids, "attention_mask": step_mask,
                    "position_ids": positions, "use_cache": True,
                }
                if cache is not None:
                    inputs[cache_arg] = cache
                out = self._forward_last(inputs)
                cache = getattr(out, cache_arg, None)
                chosen, chosen_logprobs = sample_next_tokens(
                    out.logits[:, -1, :], generators, temperature, top_p, with_logprobs=True
                )
                for row, (token, logprob) in enumerate(
                    zip(chosen.tolist(), chosen_logprobs.tolist(), strict=True)
                ):
                    if reasons[row] is not None:
                        continue
                    if token in self.eos_ids:
                        reasons[row] = "stop"
                        ends[row] = (token, float(logprob))
                        continue
                    tokens[row].append(token)
                    logprobs[row].append(float(logprob))
                    if room[row] is not None and len(tokens[row]) >= room[row]:
                        reasons[row] = "length"  # the context is full
                        continue
                    if stops:
                        tail = self.tokenizer.decode(tokens[row][-window:], skip_special_tokens=True)
                        if any(stop in tail for stop in stops):
                            reasons[row] = "stop"
                if all(reason is not None for reason in reasons):
                    break
                if between_steps is not None:
                    between_steps()
                # finished rows keep feeding padding; their output is no longer read
                step_ids = torch.where(
                    torch.tensor([r is None for r in reasons], device=chosen.device),
                    chosen, torch.full_like(chosen, self.pad_id),
                ).unsqueeze(-1)
                step_mask = torch.cat([step_mask, torch.ones_like(step_mask[:, :1])], dim=-1)
                positions = positions[:, -1:] + 1
        generations = []
        for row in range(rows):
            row_tokens, row_logprobs, end = tokens[row], logprobs[row], ends[row]
            text = self.tokenizer.decode(row_tokens, skip_special_tokens=True)
            text, stopped = apply_stop(text, stops)
            if stopped:
                # keep only the tokens of the text that is returned, as far as they go
                keep = tokens_covering(self.tokenizer, row_tokens, text)
                row_tokens, row_logprobs, end = row_tokens[:keep], row_logprobs[:keep], None
            generations.append(
                Generation(
                    text, tuple(row_tokens), reasons[row] or "length", tuple(row_logprobs),
                    None if end is None else end[0], None if end is None else end[1],
                )
            )
        return generations

    def _cache_arg(self) -> str:
        """The forward argument (and output field) of the KV cache: ``cache`` in recent
        transformers, ``past_key_values`` before."""
        params = inspect.signature(self.model.forward).parameters
        return "cache" if "cache" in params else "past_key_values"

    def _forward_last(self, inputs: dict[str, Any]) -> Any:
        """A forward pass keeping only the last position's logits where the model can."""
        if self._keeps_logits:
            try:
                return self.model(**inputs, logits_to_keep=1)
            except TypeError as exc:
                if "logits_to_keep" not in str(exc):
                    raise
                self._keeps_logits = False
        return self.model(**inputs)

    def _left_pad(self, sequences: Sequence[Sequence[int]]) -> tuple[Any, Any]:
        torch = self._torch
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for i, seq in enumerate(sequences):
            if seq:
                ids[i, width - len(seq) :] = torch.tensor(list(seq), dtype=torch.long)
                mask[i, width - len(seq) :] = 1
        return ids.to(self.device), mask.to(self.device)

    # ------------------------------------------------------------ scoring
    def score(
        self, conversations: Sequence[Conversation], actions: Sequence[str]
    ) -> list[ActionScore]:
        if len(conversations) != len(actions):
            raise ValueError(
                f"{len(conversations)} conversations but {len(actions)} actions to score"
            )
        sequences = [
            self.formatter.scored_sequence(conv, action)
            for conv, action in zip(conversations, actions, strict=True)
        ]
        return self.score_sequences(sequences)

    @model_faults
    def score_sequences(self, sequences: Sequence[ScoredSequence]) -> list[ActionScore]:
        """Scores of token sequences whose tail (from ``action_start``) is the action."""
        limit = self.context_length
        for i, seq in enumerate(sequences):
            if limit is not None and len(seq.ids) > limit:
                raise PromptTooLongError(
                    f"history and action {i} have {len(seq.ids)} tokens: the model's maximum "
                    f"context length is {limit} tokens"
                )
        logprobs: list[list[float] | None] = [None] * len(sequences)
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, seq in enumerate(sequences):
            groups.setdefault(tuple(seq.ids[: seq.action_start]), []).append(i)
        if self.share_prefix:
            for prefix, members in groups.items():
                if len(members) < 2:
                    continue
                shared = self._score_shared_prefix(
                    list(prefix), [sequences[i].action_ids for i in members]
                )
                if shared is None:
                    break
                for i, lps in zip(members, shared, strict=True):
                    logprobs[i] = lps
        rest = [i for i, lps in enumerate(logprobs) if lps is None]
        plain = self.token_logprobs(
            [sequences[i].ids for i in rest], [sequences[i].action_start for i in rest]
        )
        for i, lps in zip(rest, plain, strict=True):
            logprobs[i] = lps
        scores = []
        for seq, lps in zip(sequences, logprobs, strict=True):
            tokens = self.tokenizer.batch_decode(
                [[t] for t in seq.action_ids],
                skip_special_tokens=False,
                clean_up_tokenization_spaces=False,
            )
            scores.append(ActionScore(float(sum(lps)), tuple(tokens), tuple(lps)))
        return scores

    def _score_shared_prefix(
        self, prefix: list[int], actions: list[list[int]]
    ) -> list[list[float]] | None:
        """Log-probs of several actions after one history, the history run once: its KV
        cache is copied for each batch of actions (e.g. 16 samples from one state cost one
        history pass, not 16). None where the model's cache cannot be shared this way."""
        torch = self._torch
        try:
            with torch.inference_mode():
                ids = torch.tensor([prefix], dtype=torch.long, device=self.device)
                out = self.model(input_ids=ids, use_cache=True)
                first = out.logits[0, -1].float().log_softmax(-1)  # predicts each action's first token
                # the cache's name: `cache` in recent transformers, `past_key_values` before
                cache_arg = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
                cache = getattr(out, cache_arg)
                results: list[list[float]] = []
                for start in range(0, len(actions), self.batch_size):
                    chunk = actions[start : start + self.batch_size]
                    width = max(len(a) for a in chunk)
                    batch = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
                    mask = torch.zeros((len(chunk), len(prefix) + width), dtype=torch.long)
                    mask[:, : len(prefix)] = 1
                    for row, action in enumerate(chunk):  # right padding: pads come after
                        batch[row, : len(action)] = torch.tensor(action, dtype=torch.long)
                        mask[row, len(prefix) : len(prefix) + len(action)] = 1
                    positions = torch.arange(len(prefix), len(prefix) + width).expand(len(chunk), -1)
                    copy_of_cache = copy.deepcopy(cache)
                    copy_of_cache.batch_repeat_interleave(len(chunk))
                    logits = self.model(
                        input_ids=batch.to(self.device),
                        attention_mask=mask.to(self.device),
                        position_ids=positions.to(self.device),
                        **{cache_arg: copy_of_cache},
                        use_cache=True,
                    ).logits
                    for row, action in enumerate(chunk):
                        values = [float(first[action[0]])]
                        if len(action) > 1:
                            rest = logits[row, : len(action) - 1].float().log_softmax(-1)
                            target = batch[row, 1 : len(action)].to(self.device).unsqueeze(-1)
                            values += [float(x) for x in rest.gather(-1, target).squeeze(-1).tolist()]
                        results.append(values)
                return results
        except torch.OutOfMemoryError:
            raise
        except (AttributeError, TypeError, ValueError, NotImplementedError, RuntimeError):
            # a cache type without batch_repeat_interleave, or one that refuses it
            self.share_prefix = False
            return None

    @model_faults
    def token_logprobs(
        self, sequences: Sequence[Sequence[int]], starts: Sequence[int]
    ) -> list[list[float]]:
        """``log p(ids[t] | ids[:t])`` for ``t`` from ``start`` (>= 1) to the end, each sequence."""
        limit = self.context_length
        for ids, start in zip(sequences, starts, strict=True):
            if not 1 <= start <= len(ids):
                raise ValueError(f"start {start} outside 1..{len(ids)} for a {len(ids)}-token sequence")
            if limit is not None and len(ids) > limit:
                raise PromptTooLongError(
                    f"a sequence of {len(ids)} tokens: the model's maximum context length is "
                    f"{limit} tokens"
                )
        order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
        results: dict[int, list[float]] = {}
        for first in range(0, len(order), self.batch_size):
            chunk = order[first : first + self.batch_size]
            ids, mask = self._left_pad([sequences[i] for i in chunk])
            # with left padding every sequence ends in the last column, so the positions
            # that predict its scored tokens are among the last `keep` columns
            keep = max(len(sequences[i]) - starts[i] for i in chunk) + 1
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = self._forward_logits(ids, mask, positions, keep)
            for row, i in enumerate(chunk):
                length, start = len(sequences[i]), starts[i]
                scored = length - start
                # column of the logits that predict token `start` of this sequence
                col = keep - scored - 1
                row_logprobs = logits[row, col : col + scored].float().log_softmax(-1)
                target = ids[row, ids.shape[1] - scored :].unsqueeze(-1)
                gathered = row_logprobs.gather(-1, target).squeeze(-1)
                results[i] = [float(x) for x in gathered.tolist()]
        return [results[i] for i in range(len(sequences))]


    def _forward_logits(self, ids: Any, mask: Any, positions: Any, keep: int) -> Any:
        """Logits of the last ``keep`` columns (all of them for a model without
        ``logits_to_keep``, e.g. older remote code; then sliced here)."""
        inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
        with self._torch.inference_mode():
            if self._keeps_logits:
                try:
                    return self.model(**inputs, logits_to_keep=keep, use_cache=False).logits[:, -keep:]
                except TypeError as exc:
                    if "logits_to_keep" not in str(exc):
                        raise
                    self._keeps_logits = False
            return self.model(**inputs, use_cache=False).logits[:, -keep:]


def set_cpu_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads: ``threads`` if given, else the share of the CPUs that
    a worker pool gave this process (``AGENTENVS_WORKER_THREADS``), else torch's default.

    Several worker processes each using every core slow each other down (on 2 cores, a
    tiny model's actions/s drops 10x with 2 threads per worker instead of 1). Returns the
    number of threads in use."""
    torch = require("torch", "hf")
    from agentenvs.core.procs import THREADS_ENV

    wanted = threads if threads is not None else os.environ.get(THREADS_ENV)
    if wanted is not None:
        count = int(wanted)
        if count < 1:
            raise ValueError(f"threads must be >= 1, got {wanted}")
        if torch.get_num_threads() != count:
            torch.set_num_threads(count)
    return torch.get_num_threads()


def _check_sampling(temperature: float, top_p: float, max_new_tokens: int) -> None:
    if float(temperature) < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0 < float(top_p) <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if int(max_new_tokens) < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")


def _stop_tuple(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,) if stop else ()
    return tuple(s for s in stop if s)


def sample_next_tokens(
    logits: Any,
    generators: Sequence[Any],
    temperature: float,
    top_p: float,
    *,
    with_logprobs: bool = False,
) -> Any:
    """One token per row from ``softmax(logits / temperature)`` (float32), cut to the
    smallest set of most likely tokens whose mass reaches ``top_p`` and renormalized,
    each row drawn with its own generator; ``temperature=0`` takes the argmax. At
    temperature 1 and top-p 1 this is exactly the distribution ``score`` evaluates.

    ``with_logprobs``: also return each chosen token's log-probability under that
    distribution (``(tokens, logprobs)``); at temperature 0, the model's log-softmax."""
    torch = require("torch", "hf")
    if temperature == 0:
        chosen = logits.argmax(-1)
        if not with_logprobs:
            return chosen
        raw = logits.float().log_softmax(-1)
        return chosen, raw.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    scaled = logits.float() / temperature
    probs = scaled.softmax(-1)
    if top_p < 1:
        sorted_probs, index = probs.sort(-1, descending=True)
        # drop a token once the mass before it already reaches top_p
        drop = sorted_probs.cumsum(-1) - sorted_probs >= top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, index, sorted_probs)
    chosen = torch.stack(
        [torch.multinomial(probs[i], 1, generator=g).squeeze(0) for i, g in enumerate(generators)]
    )
    if not with_logprobs:
        return chosen
    # log-softmax rather than log(softmax) keeps small probabilities exact; the nucleus
    # renormalizes by the mass it kept
    logprobs = scaled.log_softmax(-1).gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    if top_p < 1:
        logprobs = logprobs - probs.sum(-1).log()
    return chosen, logprobs
