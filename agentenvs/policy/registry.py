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


def make_policy(spec: str, **overrides: Any) -> Policy:
    """Build a registered policy from its spec string."""
    _, kwargs = parse_policy_spec(spec)
    factory = policy_factory(spec)
    kwargs.update(overrides)
    policy = factory(**kwargs)
    policy.name = spec
    return policy
