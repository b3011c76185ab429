"""Policies by name, so runs and worker processes can build them from a plain string.

A spec is ``name`` or ``name:key=value,key=value`` (values parsed as JSON when they can
be, else kept as strings), e.g. ``frozenlake/noisy:error_rate=0.3,recover=0.5``.

Model-backed policies are registered here (``MODEL_POLICIES``), env-independent; the
scripted reference policies are registered by their envs. Their specs:

- ``hf:model=PATH_OR_NAME[,device=cuda,dtype=bfloat16,max_new_tokens=256,temperature=1.0,
  top_p=1.0,stop=</answer>,batch_size=16]`` (``agentenvs.policy.hf.HFPolicy``)
- ``vllm:model=PATH_OR_NAME[,dtype=...,max_new_tokens=...,...]`` (``VLLMPolicy``)
- ``openai:base_url=http://HOST:PORT/v1,model=NAME[,tokenizer=PATH,max_new_tokens=...]``
  (``OpenAICompatPolicy``; the key comes from ``OPENAI_API_KEY``, not the spec)

A value cannot contain a comma, so a spec gives at most one stop string.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

from agentenvs.policy.base import Policy

#: model-backed policies: name -> entry point (heavy imports happen only when built)
MODEL_POLICIES: dict[str, str] = {
    "hf": "agentenvs.policy.hf:HFPolicy",
    "vllm": "agentenvs.policy.vllm:VLLMPolicy",
    "openai": "agentenvs.policy.openai_compat:OpenAICompatPolicy",
}

_REGISTRY: dict[str, str] = dict(MODEL_POLICIES)


def register_policy(name: str, entry_point: str) -> None:
    """Register ``entry_point`` (``"module:callable"``) under ``name``."""
    _REGISTRY[name] = entry_point


def policy_names() -> list[str]:
    return sorted(_REGISTRY)


def parse_policy_spec(spec: str) -> tuple[str, dict[str, Any]]:
    name, _, rest = spec.partition(":")
    kwargs: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, sep, raw = part.partition("=")
        if not sep or not key:
            raise ValueError(f"policy spec {spec!r}: expected key=value, got {part!r}")
        try:
            kwargs[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            kwargs[key.strip()] = raw
    return name.strip(), kwargs


def policy_factory(spec: str) -> Callable[..., Policy]:
    """The class (or callable) a spec builds, without building it (no model is loaded)."""
    name, _ = parse_policy_spec(spec)
    if name not in _REGISTRY:
        raise KeyError(f"unknown policy {name!r}; known: {policy_names()}")
    module_name, _, attr = _REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module_name), attr)


def is_model_policy(spec: str) -> bool:
    """Whether a spec names a model-backed policy (slow to build, heavy in memory)."""
    return parse_policy_spec(spec)[0] in MODEL_POLICIES


#: options of a model spec that decide the loaded model (the rest only decide sampling):
#: two specs equal on these can share one model in memory
ENGINE_OPTIONS = {
    "hf": ("model", "tokenizer", "device", "dtype", "trust_remote_code", "chat_template"),
    "vllm": ("model", "tokenizer", "dtype", "gpu_memory_utilization", "engine_kwargs",
             "chat_template"),
}


def make_policies(specs: dict[str, str], **overrides: Any) -> dict[str, Policy]:
    """Build several policies for one process, sharing what can be shared.

    Model specs that name the same model with the same loading options (they may differ
    in temperature, top-p, tokens, stop strings) share one loaded model or engine. vLLM
    engines that cannot be shared split the GPU memory between them (each takes
    ``0.9 / count`` unless its spec sets ``gpu_memory_utilization``), where two engines
    at vLLM's default would not both fit.
    """
    parsed = {slot: parse_policy_spec(spec) for slot, spec in specs.items()}
    engines: dict[tuple[Any, ...], Policy] = {}
    vllm_keys = {
        _engine_key(name, {**kwargs, **overrides})
        for name, kwargs in parsed.values() if name == "vllm"
    }
    built: dict[str, Policy] = {}
    for slot, spec in specs.items():
        name, kwargs = parsed[slot]
        kwargs = {**kwargs, **overrides}
        if name not in ENGINE_OPTIONS:
            built[slot] = make_policy(spec, **overrides)
            continue
        key = _engine_key(name, kwargs)
        shared = engines.get(key)
        if shared is not None:
            extra = {k: v for k, v in kwargs.items() if k not in ENGINE_OPTIONS[name]}
            if name == "hf":
                extra.update(model=shared.model, tokenizer=shared.tokenizer)  # type: ignore[attr-defined]
            else:
                extra.update(llm=shared.llm)  # type: ignore[attr-defined]
            policy = policy_factory(spec)(**extra)
            policy.name = spec
            built[slot] = policy
            continue
        extra = dict(overrides)
        if name == "vllm" and len(vllm_keys) > 1 and "gpu_memory_utilization" not in kwargs:
            extra["gpu_memory_utilization"] = round(0.9 / len(vllm_keys), 3)
        policy = make_policy(spec, **extra)
        engines[key] = policy
        built[slot] = policy
    return built


def _engine_key(name: str, kwargs: dict[str, Any]) -> tuple[Any, ...]:
    return (name, *(json.dumps(kwargs.get(k), sort_keys=True, default=str)
                    for k in ENGINE_OPTIONS[name]))


def make_policy(spec: str, **overrides: Any) -> Policy:
    """Build a registered policy from its spec string."""
    _, kwargs = parse_policy_spec(spec)
    factory = policy_factory(spec)
    kwargs.update(overrides)
    policy = factory(**kwargs)
    policy.name = spec
    return policy
