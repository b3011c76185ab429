"""``VLLMPolicy``: an offline ``vllm.LLM`` engine as a sampling and scoring policy.

- Prompts are rendered to token ids with the engine's tokenizer through ``ChatFormatter``
  (the same rules as ``HFPolicy``) and passed as ``{"prompt_token_ids": ids}`` prompts,
  so vLLM samples from, and scores, exactly the tokens the HF adapter would.
- ``sample``: one ``LLM.generate`` call for the whole batch with one ``SamplingParams``
  per conversation (``n``, ``temperature``, ``top_p``, ``max_tokens``, ``stop``, and
  ``seed=derive_seed(seed, c)`` for conversation ``c``), so a seeded call is
  reproducible and a conversation's samples do not depend on the others in the batch.
  Penalties and ``min_p`` are set to off explicitly, and the engine is built with
  ``generation_config="vllm"`` so the model's own generation defaults never apply:
  samples follow the distribution that ``score`` evaluates (temperature, top-p only).
  Two engines in one process must split the GPU: ``registry.make_policies`` does.
- ``sample_tokens``: the same, returning ``Sample``s: prompt ids, the sampled ids
  (``CompletionOutput.token_ids``, EOS included when drawn, cut after the last token the
  text needs at a stop string) and the sampled tokens' log-probs (``logprobs=0``). An
  engine this policy builds is asked for ``logprobs_mode="processed_logprobs"``, the
  log-probs of the distribution sampled from (after temperature and top-p: ``"sampled"``);
  a vLLM without the option, or an engine built elsewhere in its default mode, gives the
  model's raw ones (``logprob_kind="raw"``, equal only at temperature 1 and top-p 1).
  ``conversation="tokens"`` (default) and ``check_drift``: token-in, token-out turns as
  for ``HFPolicy`` (``agentenvs.policy.tokens``); vLLM's prefix cache then reuses each
  turn's prompt, which starts with the previous turn's ids.
- ``score``: ``SamplingParams(max_tokens=1, prompt_logprobs=1)`` over history+action;
  the engine returns, for every prompt position after the first, a mapping from token
  id to ``Logprob`` that always includes the prompt's own token; the action positions'
  values are summed. (``max_tokens=0`` is not allowed by vLLM; the one generated token
  is ignored.)

Failures: a prompt (or scored sequence) that does not fit the engine's ``max_model_len``
with room for one token is refused before the engine sees it, as a
``PromptTooLongError`` (the agent's history: the trajectory ends, unsuccessful). A dead
engine (vLLM's ``EngineDeadError``: its process crashed or was killed), a request the
engine failed (``EngineGenerateError``), memory that ran out and CUDA errors are the
deployment's: ``Fault(kind="model")``, which the runner retries.

The conversion from vLLM's output objects (``RequestOutput.outputs[i].text``,
``.prompt_logprobs[t][token_id].logprob``) is in two functions that take any objects
with those attributes, so they are tested without vLLM installed.
vllm is imported when a policy is built (extra ``vllm``), never by ``import agentenvs``.
Spec: ``vllm:model=NAME_OR_PATH[,dtype=bfloat16,max_new_tokens=256,conversation=tokens,...]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentenvs.core.errors import Fault, require
from agentenvs.policy.base import ActionScore, Conversation, Sample
from agentenvs.policy.chat import (
    ChatFormatter,
    ChatTemplateError,
    PromptTooLongError,
    ScoredSequence,
    apply_stop,
)
from agentenvs.policy.hf import derive_seed, is_deployment_failure
from agentenvs.policy.tokens import TurnPrompt, TurnPrompts, tokens_covering

#: vLLM's exceptions for an engine that died or failed a request (matched by name within
#: the ``vllm`` package, whose module paths move between versions)
ENGINE_FAILURES = frozenset({"EngineDeadError", "EngineGenerateError"})

#: sampling options set explicitly to "off", so that only temperature and top-p shape the
#: distribution: what ``score``'s prompt log-probs (raw logits) describe
NEUTRAL_SAMPLING: dict[str, float] = {
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "min_p": 0.0,
}


class VLLMPolicy:
    """A vLLM offline engine behind the policy protocol (see the module docstring).

    ``engine_kwargs`` go to ``vllm.LLM`` as they are (e.g. ``tensor_parallel_size``,
    ``max_model_len``, ``enable_prefix_caching``); an ``llm`` already built may be passed
    instead of ``model``.
    """

    name = "vllm"
    #: a model sees only the messages: it reads the budget only where the env shows it
    conditions_on_budget = False

    def __init__(
        self,
        model: str | None = None,
        *,
        llm: Any = None,
        tokenizer: str | None = None,
        dtype: str = "auto",
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: str | Sequence[str] | None = None,
        gpu_memory_utilization: float = 0.9,
        chat_template: str | None = None,
        engine_kwargs: Mapping[str, Any] | None = None,
        conversation: str = "tokens",
        check_drift: bool = True,
    ) -> None:
        vllm = require("vllm", "vllm")
        if float(temperature) < 0 or not 0 < float(top_p) <= 1 or int(max_new_tokens) < 1:
            raise ValueError(
                f"need temperature >= 0, 0 < top_p <= 1, max_new_tokens >= 1; got "
                f"{temperature}, {top_p}, {max_new_tokens}"
            )
        if llm is None:
            if model is None:
                raise ValueError("pass model (a name or path) or a built llm")
            options = {
                # vLLM's own defaults, not the model's generation_config (a repetition
                # penalty there would bend samples away from the scored distribution)
                "generation_config": "vllm",
                **dict(engine_kwargs or {}),
            }
            build = dict(
                model=model,
                tokenizer=tokenizer,
                dtype=dtype,
                gpu_memory_utilization=gpu_memory_utilization,
                **options,
            )
            try:  # log-probs of the distribution sampled from, where this vLLM offers them
                llm = vllm.LLM(**{"logprobs_mode": "processed_logprobs", **build})
            except TypeError as exc:
                if "logprobs_mode" not in str(exc):
                    raise
                llm = vllm.LLM(**build)
        self._vllm = vllm
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()
        self.formatter = ChatFormatter(self.tokenizer, chat_template)
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.stop: tuple[str, ...] = (stop,) if isinstance(stop, str) else tuple(stop or ())
        self.end_ids = self._end_ids()
        self.turns = TurnPrompts(
            self.formatter, conversation, check_drift=check_drift, end_ids=self.end_ids
        )
        config = getattr(getattr(llm, "llm_engine", None), "model_config", None)
        mode = str(getattr(config, "logprobs_mode", "") or "")
        #: what the sampled log-probs are: "sampled" (after temperature/top-p) or "raw"
        self.logprob_kind = "sampled" if mode.endswith("processed_logprobs") else "raw"

    def _end_ids(self) -> list[int]:
        """EOS and the chat template's end-of-turn token: a completion ending in one of
        them closed its turn itself."""
        ids = [self.tokenizer.eos_token_id]
        try:
            end_of_turn = self.formatter.end_of_turn_token()
        except ChatTemplateError:
            end_of_turn = ""
        if end_of_turn:
            ids.append(self.tokenizer.convert_tokens_to_ids(end_of_turn))
        return [int(i) for i in ids if i is not None and int(i) >= 0]

    def sample(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[str]]:
        return [[s.text for s in row] for row in self.sample_tokens(conversations, n, seed=seed)]

    def sample_tokens(
        self, conversations: Sequence[Conversation], n: int = 1, *, seed: int | None = None
    ) -> list[list[Sample]]:
        """``n`` samples per conversation with their prompt and sampled ids and log-probs."""
        if int(n) < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        turns = [self.turns.build(c) for c in conversations]
        prompts = [{"prompt_token_ids": list(t.ids)} for t in turns]
        self._check_lengths([p["prompt_token_ids"] for p in prompts])
        params = [
            self._vllm.SamplingParams(
                n=int(n),
                temperature=self.temperature,
                top_p=self.top_p,
                max_tokens=self.max_new_tokens,
                stop=list(self.stop) or None,
                seed=None if seed is None else derive_seed(int(seed), c),
                logprobs=0,  # the sampled token's own log-prob
                **NEUTRAL_SAMPLING,
            )
            for c in range(len(prompts))
        ]
        outputs = self._generate(prompts, params)
        return samples_from_outputs(
            outputs, turns, self.turns, self.tokenizer, self.stop, self.logprob_kind
        )

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

    def score_sequences(self, sequences: Sequence[ScoredSequence]) -> list[ActionScore]:
        """Scores of token sequences whose tail (from ``action_start``) is the action
        (e.g. recorded prompt + completion ids, scored as sampled)."""
        self._check_lengths([s.ids for s in sequences])
        params = self._vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1)
        outputs = self._generate([{"prompt_token_ids": s.ids} for s in sequences], params)
        return [
            score_from_prompt_logprobs(out, seq, self.tokenizer)
            for out, seq in zip(outputs, sequences, strict=True)
        ]

    @property
    def max_model_len(self) -> int | None:
        """The engine's context window in tokens (None where the engine does not say)."""
        engine = getattr(self.llm, "llm_engine", None)
        value = getattr(getattr(engine, "model_config", None), "max_model_len", None)
        return int(value) if value else None

    def _check_lengths(self, sequences: Sequence[Sequence[int]]) -> None:
        limit = self.max_model_len
        for i, ids in enumerate(sequences):
            if limit is not None and len(ids) >= limit:
                raise PromptTooLongError(
                    f"prompt {i} has {len(ids)} tokens: the engine's maximum model length is "
                    f"{limit} tokens, leaving no room for an answer"
                )

    def _generate(self, prompts: list[dict[str, Any]], params: Any) -> Any:
        try:
            return self.llm.generate(prompts, params, use_tqdm=False)
        except Exception as exc:
            name, module = type(exc).__name__, type(exc).__module__
            engine_failed = name in ENGINE_FAILURES and module.split(".")[0] == "vllm"
            if not engine_failed and not is_deployment_failure(exc):
                raise
            evidence = f"{module}.{name}: {str(exc)[:300]}"
            raise Fault(
                f"the vLLM engine failed: {evidence}", kind="model", evidence=evidence
            ) from exc


def texts_from_outputs(outputs: Sequence[Any], stop: Sequence[str] = ()) -> list[list[str]]:
    """Sampled texts per request from vLLM ``RequestOutput``s, in ``CompletionOutput.index``
    order (vLLM already cut stop strings; cutting again only guards other engines)."""
    texts = []
    for output in outputs:
        completions = sorted(output.outputs, key=lambda c: c.index)
        texts.append([apply_stop(c.text, stop)[0] for c in completions])
    return texts


def samples_from_outputs(
    outputs: Sequence[Any],
    prompts: Sequence[TurnPrompt],
    turns: TurnPrompts,
    tokenizer: Any,
    stop: Sequence[str] = (),
    logprob_kind: str = "raw",
) -> list[list[Sample]]:
    """``Sample``s per request from vLLM ``RequestOutput``s (``CompletionOutput.index``
    order): ``.token_ids`` as sampled (cut after the tokens the text needs where a stop
    string ended it), ``.logprobs[t][token_id].logprob`` for each (``None`` where the
    engine gave none). An engine that returns no ids gets the text's tokens, without
    log-probs."""
    samples = []
    for output, prompt in zip(outputs, prompts, strict=True):
        row = []
        for completion in sorted(output.outputs, key=lambda c: c.index):
            text, stopped = apply_stop(completion.text, stop)
            ids = [int(i) for i in (getattr(completion, "token_ids", None) or ())]
            steps = getattr(completion, "logprobs", None)
            logprobs: list[float] | None = None
            if steps is not None and len(steps) >= len(ids):
                try:
                    logprobs = [float(steps[t][token].logprob) for t, token in enumerate(ids)]
                except (KeyError, TypeError, IndexError, AttributeError):
                    logprobs = None
            if not ids and text:
                ids, logprobs = list(turns.formatter.encode(text)), None
            if stopped or isinstance(getattr(completion, "stop_reason", None), str):
                keep = tokens_covering(tokenizer, ids, text)
                ids = ids[:keep]
                logprobs = None if logprobs is None else logprobs[:keep]
            reason = str(completion.finish_reason or "stop")
            row.append(turns.sample(prompt, text, ids, logprobs, reason, logprob_kind))
        samples.append(row)
    return samples


def score_from_prompt_logprobs(
    output: Any, sequence: ScoredSequence, tokenizer: Any = None
) -> ActionScore:
    """The action's score from a ``RequestOutput`` whose prompt was ``sequence.ids``.

    ``output.prompt_logprobs[t]`` is ``None`` for ``t == 0`` and otherwise maps token ids
    to ``Logprob(logprob, rank, decoded_token)``, the prompt's own token always among them.
    """
    prompt_logprobs = output.prompt_logprobs
    if prompt_logprobs is None or len(prompt_logprobs) < len(sequence.ids):
        raise ValueError("the engine returned no prompt log-probs (prompt_logprobs was not set?)")
    logprobs, tokens = [], []
    for t in range(sequence.action_start, len(sequence.ids)):
        token_id = sequence.ids[t]
        position = prompt_logprobs[t]
        if position is None or token_id not in position:
            raise ValueError(f"no log-prob for prompt token {token_id} at position {t}")
        entry = position[token_id]
        logprobs.append(float(entry.logprob))
        text = getattr(entry, "decoded_token", None)
        if text is None and tokenizer is not None:
            text = tokenizer.decode([token_id])
        tokens.append(text if text is not None else str(token_id))
    return ActionScore(float(sum(logprobs)), tuple(tokens), tuple(logprobs))
