"""Policies by name, so runs and worker processes can build them from a plain string.

A spec is ``name`` or ``name:key=value,key=value`` (values parsed as JSON when they can
be, else kept as strings), e.g. ``frozenlake/noisy:error_rate=0.3,recover=0.5``.

Model-backed policies are registered here (``MODEL_POLICIES``), env-independent; the
scripted reference policies are registered by their envs. Their specs:

- ``hf:model=PATH_OR_NAME[,device=cuda,dtype=bfloat16,max_new_tokens=256,temperature=1.0,
  top_p=1.0,stop=</answer>,batch_size=16]`` (``agentenvs.policy.hf.HFPolicy``)
- ``vllm:model=PATH_OR_NAME[,dtype=...,max_new_tokens=...,...]`` (``VLLMPolicy``)
- ``openai:base_url=http://HOST:PORT/v1,model=NAME[,api_key_env=NAME,api_key_file=PATH,
  tokenizer=PATH,max_new_tokens=...]`` (``OpenAICompatPolicy``; the key from the
  environment variable or the file named, else ``AGENTENVS_MODEL_API_KEY`` or
  ``OPENAI_API_KEY``; an inline ``api_key=`` is shown as ``***`` wherever the spec is
  written down, ``agentenvs.policy.credentials``)

A value cannot contain a comma, so a spec gives at most one stop string.

``check_policy_spec`` checks a spec before anything is built: its name, its parameters
against the policy's signature, and, for a scripted policy registered with the env it
reads (``register_policy(..., env=...)``), that the env is that one; each refusal is a
one-line ``UsageError`` naming the closest valid choice.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable
from typing import Any

from agentenvs.core.suggest import UsageError, did_you_mean
from agentenvs.policy.base import Policy
from agentenvs.policy.credentials import SECRET_KEYS, redact, redact_spec, remember_secret

#: model-backed policies: name -> entry point (heavy imports happen only when built)
MODEL_POLICIES: dict[str, str] = {
    "hf": "agentenvs.policy.hf:HFPolicy",
    "vllm": "agentenvs.policy.vllm:VLLMPolicy",
    "openai": "agentenvs.policy.openai_compat:OpenAICompatPolicy",
}

_REGISTRY: dict[str, str] = dict(MODEL_POLICIES)
#: scripted policies that read one env's live state: name -> that env's class entry point
_ENVS: dict[str, str] = {}


class UnknownPolicyError(UsageError, KeyError):
    """A policy name nobody registered."""

    def __str__(self) -> str:  # a KeyError would quote its message
        return str(self.args[0]) if self.args else ""


def register_policy(name: str, entry_point: str, *, env: str | None = None) -> None:
    """Register ``entry_point`` (``"module:callable"``) under ``name``.

    ``env``: the entry point (``"module:Class"``) of the env class a scripted policy
    reads the live state of; a run of the policy on an env that is not one (a subclass
    counts) is refused before it starts. ``None``: any env (model policies).
    """
    _REGISTRY[name] = entry_point
    if env is None:
        _ENVS.pop(name, None)
    else:
        _ENVS[name] = env


def policy_names() -> list[str]:
    return sorted(_REGISTRY)


def parse_policy_spec(spec: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(spec, str) or not spec.strip():
        raise UsageError(f"expected a policy spec such as frozenlake/oracle, got {spec!r}")
    name, _, rest = spec.partition(":")
    kwargs: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, sep, raw = part.partition("=")
        if not sep or not key:
            raise UsageError(
                f"policy spec {redact_spec(spec)!r}: expected key=value, got {redact(part)!r}"
            )
        if key.strip() in SECRET_KEYS:  # kept as text, and masked wherever it is written
            remember_secret(raw)
            kwargs[key.strip()] = raw
            continue
        try:
            kwargs[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            kwargs[key.strip()] = raw
    return name.strip(), kwargs


def policy_factory(spec: str) -> Callable[..., Policy]:
    """The class (or callable) a spec builds, without building it (no model is loaded)."""
    name, _ = parse_policy_spec(spec)
    if name not in _REGISTRY:
        raise UnknownPolicyError(
            f"unknown policy {name!r}{did_you_mean(name, _REGISTRY)} "
            f"(policies: {', '.join(policy_names())})"
        )
    module_name, _, attr = _REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module_name), attr)


#: parameters a factory takes from code, never from a spec string (a loaded model)
_CODE_ONLY = {"vllm": ("llm",)}


def policy_parameters(name: str) -> dict[str, Any] | None:
    """The parameters a spec of policy ``name`` may set, with their defaults
    (``inspect.Parameter.empty``: required); None where the policy takes any."""
    try:
        signature = inspect.signature(policy_factory(name))
    except (TypeError, ValueError):  # a callable without a signature
        return None
    params: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if param.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            if param.name not in _CODE_ONLY.get(name, ()):
                params[param.name] = param.default
    return params


def describe_parameters(params: dict[str, Any] | None) -> str:
    """``error_rate=0.2, recover=0.5`` (``model (required)``; ``any`` for None)."""
    if params is None:
        return "any"
    if not params:
        return "none"
    return ", ".join(
        f"{k} (required)" if v is inspect.Parameter.empty else f"{k}={v!r}"
        for k, v in params.items()
    )


def policy_env(name: str) -> str | None:
    """The entry point of the env class a scripted policy reads, or None (any env)."""
    return _ENVS.get(name)


def check_policy_spec(spec: str, *, env_id: str | None = None, scoring: bool = False) -> None:
    """Refuse, with a one-line ``UsageError``, a spec that cannot work, before anything
    is built: an unknown name, a parameter the policy does not take or a required one
    left out, a scripted policy for another env than ``env_id``'s, and with
    ``scoring`` a policy that cannot score given actions. Values are the policy's to
    check when it is built."""
    name, kwargs = parse_policy_spec(spec)
    factory = policy_factory(spec)
    params = policy_parameters(name)
    if params is not None:
        shown = describe_parameters(params)
        for key in kwargs:
            if key not in params:
                raise UsageError(
                    f"policy {name} has no parameter {key!r}{did_you_mean(key, params)} "
                    f"(its parameters: {shown})"
                )
        missing = [k for k, v in params.items() if v is inspect.Parameter.empty and k not in kwargs]
        if missing:
            example = ",".join(f"{k}=..." for k in missing)
            raise UsageError(
                f"policy {name} needs {', '.join(missing)} (e.g. {name}:{example}; its "
                f"parameters: {shown})"
            )
    if scoring and not callable(getattr(factory, "score", None)):
        scorers = [n for n in policy_names() if callable(getattr(policy_factory(n), "score", None))]
        raise UsageError(
            f"policy {name} cannot score actions (it samples only); scoring policies: "
            f"{', '.join(scorers)}"
        )
    if env_id is not None and name in _ENVS:
        _check_env_of(name, env_id)


def _check_env_of(name: str, env_id: str) -> None:
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    # the env id itself is checked where it is given (agentenvs.envs.lookup, a floor up)
    spec = gym.registry.get(env_id.rpartition(":")[2].strip())
    if spec is None or spec.entry_point is None:
        return
    wanted = load_env_creator(_ENVS[name])
    target = spec.entry_point
    actual = load_env_creator(target) if isinstance(target, str) else target
    if not inspect.isclass(actual) or issubclass(actual, wanted):
        return  # a function's env cannot be told before it is built
    fits = [
        n
        for n in policy_names()
        if n not in _ENVS or issubclass(actual, load_env_creator(_ENVS[n]))
    ]
    raise UsageError(
        f"policy {name} reads a {wanted.__name__}'s state and cannot play {env_id} (a "
        f"{actual.__name__}){did_you_mean(name, [n for n in fits if n in _ENVS])}; policies "
        f"for {env_id}: {', '.join(fits)}"
    )


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
            policy.name = redact_spec(spec)
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
    policy.name = redact_spec(spec)
    return policy
