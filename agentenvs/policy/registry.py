"""Policies by name, so runs and worker processes can build them from a plain string.

A spec is ``name`` or ``name:key=value,key=value`` (values parsed as JSON when they can
be, else kept as strings), e.g. ``frozenlake/noisy:error_rate=0.3,recover=0.5``.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

from agentenvs.policy.base import Policy

_REGISTRY: dict[str, str] = {}


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


def make_policy(spec: str, **overrides: Any) -> Policy:
    """Build a registered policy from its spec string."""
    name, kwargs = parse_policy_spec(spec)
    if name not in _REGISTRY:
        raise KeyError(f"unknown policy {name!r}; known: {policy_names()}")
    module_name, _, attr = _REGISTRY[name].partition(":")
    factory: Callable[..., Policy] = getattr(importlib.import_module(module_name), attr)
    kwargs.update(overrides)
    policy = factory(**kwargs)
    policy.name = spec
    return policy
