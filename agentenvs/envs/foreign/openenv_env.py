"""OpenEnv environments as text envs of the suite (replay restore).

OpenEnv (``openenv-core``, the ``ecosystem`` extra) defines an env as an
``openenv.core.env_server.interfaces.Environment``: ``reset(seed=, episode_id=)`` and
``step(action)`` return a pydantic ``Observation`` with ``reward`` and ``done``, and
actions are pydantic ``Action`` models. Such an env is served by OpenEnv's own app
(``create_app``: one env per WebSocket session at ``/ws``) and reached with its clients
(``GenericEnvClient``). :class:`OpenEnvTextEnv` plays either:

- in process: ``env_class="module:Class"`` (or the class itself) built with
  ``env_kwargs``; the action model is read from the class (``action_class`` names it
  where the class does not say);
- remote: ``base_url="http://host:port"`` of a running OpenEnv server, each source a
  WebSocket session of its own (``GenericEnvClient``); the action model's JSON schema is
  read from the server's ``/schema``.

Observation: the observation's fields other than ``reward``, ``done`` and ``metadata``:
its text field (``text_field``, or the only field holding a string) followed by the other
fields as JSON, or, where it has no text field, all of them as JSON. After each step the
reward follows, and at the end that the episode is over.

Action: a JSON object is the action model's fields; any other text fills the model's
text field (``action_field``, or its only field, or its only string field), alone or inside
``<answer>...</answer>`` (the model coerces it: ``"7"`` fills an int field). An action the model refuses (a field missing, a wrong type) is
an invalid action: it never reaches the env and costs only the turn.

Tasks: ``n_tasks`` ids ``"0"``, ``"1"``, ...: task ``i`` is the env reset with
``seed=i`` (an OpenEnv env has one seed, so the episode's own seed goes to it as the
``episode_id``). Ends: the observation's ``done`` ends the episode; the suite's turn budget
truncates it. ``success``: the episode ended with a reward of at least ``success_reward``
(1.0 by default); ``score``: the final reward over ``success_reward``, clipped to [0, 1]
(0 until the episode ends). ``reward`` is the env's own (None counts 0).

Faults: a remote env that cannot be reached, whose connection drops or times out, whose
server refuses a session (capacity, a factory error) or answers ``/schema`` with a 5xx
raises :class:`~agentenvs.core.errors.Fault` (kind ``env-server``), never an outcome of
the agent's; an env whose step raised on the server (``EXECUTION_ERROR``) is a Fault
attributed ``unknown``: the server's answer does not say whether the action or the env
was at fault. In process, what the env raises is raised as it is (its own traceback).
"""

from __future__ import annotations

import importlib
import json
import re
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agentenvs.core.env import short_repr
from agentenvs.core.errors import INFRASTRUCTURE, UNKNOWN, Fault
from agentenvs.envs.foreign.replay import (
    ReplayTextEnv,
    SourceStep,
    _digest,
    known_seed_task,
    seed_task_ids,
)

EXTRA_HINT = "pip install 'agentenvs[ecosystem]'"
#: observation fields that are not the observation's content
_NOT_CONTENT = ("reward", "done", "metadata")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_SERVER_ERROR = re.compile(r"\(code: ([A-Z_]+)\)\s*$")


def _import_openenv() -> Any:
    try:
        import openenv.core.env_server.interfaces as interfaces
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(f"OpenEnvTextEnv needs OpenEnv (openenv-core): {EXTRA_HINT}") from exc
    return interfaces


def _load(path: Any, what: str) -> Any:
    if not isinstance(path, str):
        return path
    module, sep, attr = path.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"{what} must be 'module:Class', got {path!r}")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{what} {path!r}: cannot import it ({exc})") from None
    return obj


def _action_model(env_class: type) -> type | None:
    """The Action model an Environment class takes: its ``step`` annotation, else the
    first type argument of its generic base."""
    from openenv.core.env_server.types import Action

    try:
        hint = typing.get_type_hints(env_class.step).get("action")
    except Exception:  # noqa: BLE001 - annotations that do not resolve say nothing
        hint = None
    if isinstance(hint, type) and issubclass(hint, Action) and hint is not Action:
        return hint
    for klass in env_class.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            for arg in typing.get_args(base):
                if isinstance(arg, type) and issubclass(arg, Action) and arg is not Action:
                    return arg
    return None


def _text_fields(schema: Mapping[str, Any]) -> list[str]:
    props = schema.get("properties", {})
    return [k for k, v in props.items() if k != "metadata" and v.get("type") == "string"]


class _Refused(Exception):
    """An action the env's action model refused (it never reached the env)."""


class _InProcess:
    """An OpenEnv Environment in this process."""

    def __init__(self, env_class: type, env_kwargs: Mapping[str, Any], action_model: type):
        self.env = env_class(**env_kwargs)
        self.action_model = action_model

    def reset(self, seed: int, episode_id: str) -> tuple[dict[str, Any], float | None, bool]:
        return self._result(self.env.reset(seed=seed, episode_id=episode_id))

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float | None, bool]:
        from pydantic import ValidationError

        try:
            model = self.action_model.model_validate(action)
        except ValidationError as exc:
            raise _Refused(_validation_message(exc.errors())) from None
        return self._result(self.env.step(model))

    @staticmethod
    def _result(observation: Any) -> tuple[dict[str, Any], float | None, bool]:
        # as the server serialises it, so both paths read the same
        fields = observation.model_dump(mode="json", exclude=set(_NOT_CONTENT))
        return fields, observation.reward, bool(observation.done)

    def close(self) -> None:
        self.env.close()


class _Remote:
    """A WebSocket session on an OpenEnv server (OpenEnv's ``GenericEnvClient``)."""

    def __init__(self, base_url: str, connect_timeout_s: float, message_timeout_s: float):
        from openenv.core.generic_client import GenericEnvClient

        self.base_url = base_url
        self.client = GenericEnvClient(
            base_url=base_url,
            connect_timeout_s=connect_timeout_s,
            message_timeout_s=message_timeout_s,
        ).sync()
        self._call(self.client.connect)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise _fault(self.base_url, exc) from exc

    def reset(self, seed: int, episode_id: str) -> tuple[dict[str, Any], float | None, bool]:
        result = self._call(self.client.reset, seed=seed, episode_id=episode_id)
        return dict(result.observation), result.reward, bool(result.done)

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float | None, bool]:
        try:
            result = self.client.step(action)
        except RuntimeError as exc:
            found = _SERVER_ERROR.search(str(exc))
            if found and found.group(1) == "VALIDATION_ERROR":
                raise _Refused("the env's action model refused it") from None
            raise _fault(self.base_url, exc) from exc
        except Exception as exc:
            raise _fault(self.base_url, exc) from exc
        return dict(result.observation), result.reward, bool(result.done)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # noqa: BLE001 - a session already gone is closed
            pass


def _fault(base_url: str, exc: BaseException) -> Fault:
    text = f"{type(exc).__name__}: {exc}"[:400]
    found = _SERVER_ERROR.search(str(exc)) if isinstance(exc, RuntimeError) else None
    if found and found.group(1) == "EXECUTION_ERROR":
        return Fault(
            f"the OpenEnv env at {base_url} raised while stepping: {text}",
            kind="env-server",
            attribution=UNKNOWN,
            evidence="the server answered EXECUTION_ERROR (the env's step raised)",
            retryable=False,
        )
    return Fault(
        f"the OpenEnv server at {base_url} failed: {text}",
        kind="env-server",
        attribution=INFRASTRUCTURE,
        evidence=f"the client's call raised {type(exc).__name__}"
        + (f" with server code {found.group(1)}" if found else ""),
    )


def _validation_message(errors: Sequence[Mapping[str, Any]]) -> str:
    parts = [
        f"{'.'.join(str(p) for p in e.get('loc', ())) or 'action'}: {e.get('msg', '')}"
        for e in errors[:3]
    ]
    return "; ".join(parts)


class OpenEnvTextEnv(ReplayTextEnv):
    """An OpenEnv Environment, in process or behind its server, played in text.

    Arguments: ``env_class`` ("module:Class" or the class) with ``env_kwargs`` and
    optionally ``action_class``, or ``base_url`` (one of the two); ``n_tasks``;
    ``text_field`` (the observation's text field, found by itself where the observation
    has one string field); ``action_field`` (the action's text field, likewise);
    ``success_reward``; ``connect_timeout_s`` / ``message_timeout_s`` (remote). The
    module docstring says how observations, actions, ends and faults map.
    """

    default_max_turns = 20

    def __init__(
        self,
        *,
        env_class: Any = None,
        env_kwargs: Mapping[str, Any] | None = None,
        action_class: Any = None,
        base_url: str | None = None,
        n_tasks: int = 100,
        text_field: str | None = None,
        action_field: str | None = None,
        success_reward: float = 1.0,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        interfaces = _import_openenv()
        if (env_class is None) == (base_url is None):
            raise ValueError("give exactly one of env_class (in process) and base_url (remote)")
        task_list = seed_task_ids(n_tasks)
        if not isinstance(success_reward, int | float) or not success_reward > 0:
            raise ValueError(f"success_reward must be a number > 0, got {success_reward!r}")
        self.success_reward = float(success_reward)
        self.text_field = text_field
        self.env_kwargs = dict(env_kwargs or {})
        self.base_url = None if base_url is None else str(base_url).rstrip("/")
        self._timeouts = (float(connect_timeout_s), float(message_timeout_s))
        if env_class is not None:
            cls = _load(env_class, "env_class")
            if not (isinstance(cls, type) and issubclass(cls, interfaces.Environment)):
                raise ValueError(f"env_class {env_class!r} is not an OpenEnv Environment")
            self._env_class: type | None = cls
            model = _load(action_class, "action_class") if action_class else _action_model(cls)
            if model is None:
                raise ValueError(f"{cls.__name__} does not say its Action model: give action_class")
            self._action_model: type | None = model
            schema = model.model_json_schema()
            self._name = cls.__name__
        else:
            self._env_class, self._action_model = None, None
            schema = self._remote_schema()
            self._name = f"OpenEnv server {self.base_url}"
        props = schema.get("properties", {})
        self._action_fields = [k for k in props if k != "metadata"]
        if action_field is None:
            strings = _text_fields(schema)
            if len(self._action_fields) == 1:
                action_field = self._action_fields[0]
            elif len(strings) == 1:
                action_field = strings[0]
        elif action_field not in props:
            raise ValueError(f"action_field {action_field!r} is not a field of the action")
        self.action_field = action_field
        self._task_list = task_list
        self.source = self._make_source()

    def _remote_schema(self) -> dict[str, Any]:
        import httpx

        url = f"{self.base_url}/schema"
        try:
            response = httpx.get(url, timeout=self._timeouts[0])
        except httpx.HTTPError as exc:
            raise _fault(str(self.base_url), exc) from exc
        if response.status_code >= 500:
            raise Fault(
                f"the OpenEnv server at {self.base_url} answered {response.status_code} "
                "for /schema",
                kind="env-server",
                evidence=f"HTTP {response.status_code}",
            )
        if response.status_code != 200:
            raise ValueError(f"{url} answered {response.status_code}: not an OpenEnv server")
        return dict(response.json().get("action", {}))

    @property
    def source_name(self) -> str:
        return self._name

    @property
    def task_ids(self) -> Sequence[str]:
        return self._task_list

    def _known_task(self, task_id: Any) -> Sequence[str]:
        return known_seed_task(task_id)

    # ------------------------------------------------------------ the source
    def _make_source(self) -> Any:
        if self._env_class is not None:
            return _InProcess(self._env_class, self.env_kwargs, self._action_model)
        return _Remote(str(self.base_url), *self._timeouts)

    def _text(self, fields: Mapping[str, Any]) -> str:
        name = self.text_field
        if name is None:
            strings = [k for k, v in fields.items() if isinstance(v, str)]
            name = strings[0] if len(strings) == 1 else None
        if name is None or name not in fields:
            return json.dumps(dict(fields), sort_keys=True, default=str)
        rest = {k: v for k, v in fields.items() if k != name}
        text = str(fields[name])
        return f"{text}\n{json.dumps(rest, sort_keys=True, default=str)}" if rest else text

    def _source_reset(self, source: Any, task_id: str, seed: int) -> tuple[str, str]:
        fields, _, done = source.reset(int(task_id), f"{task_id}-{seed}")
        text = f"{self._text(fields)}\n{self.action_format()}"
        return text, _digest(fields, done)

    def _source_step(self, source: Any, action: str) -> tuple[SourceStep, str]:
        parsed = self.parse_action(action)
        if isinstance(parsed, str):
            return SourceStep(observation=parsed, action_valid=False), self._key
        try:
            fields, reward, done = source.step(parsed)
        except _Refused as exc:
            message = f"Invalid action: {exc}. {self.action_format()}"
            return SourceStep(observation=message, action_valid=False), self._key
        reward = 0.0 if reward is None else float(reward)
        lines = [self._text(fields), f"Reward: {reward:g}"]
        if done:
            lines.append("The episode is over.")
        solved = done and reward >= self.success_reward
        step = SourceStep(
            observation="\n".join(lines),
            reward=reward,
            terminated=done,
            success=solved if done else None,
            score=min(max(reward / self.success_reward, 0.0), 1.0) if done else None,
        )
        return step, _digest(fields, done)

    # ------------------------------------------------------------ actions
    def action_format(self) -> str:
        fields = ", ".join(self._action_fields) or "none"
        text = (
            f"Answer with the text of {self.action_field!r}, e.g. <answer>...</answer>, or "
            if self.action_field
            else "Answer with "
        )
        return f"{text}a JSON object of the action's fields ({fields})."

    def parse_action(self, text: str) -> dict[str, Any] | str:
        """The action's fields ``text`` gives, or a message saying why it gives none."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # no JSON a server reads can carry it (OpenEnv's server drops the session)
            return (
                f"Invalid action: it is not UTF-8 text (a lone surrogate). {self.action_format()}"
            )
        found = _ANSWER.findall(text)
        body = (found[-1] if found else text).strip()
        if body.startswith("{"):
            try:
                value = json.loads(body)
            except ValueError:
                value = None
            if isinstance(value, dict) and (
                self.action_field is None or set(value) <= {*self._action_fields, "metadata"}
            ):
                return value
        if self.action_field is not None:
            return {self.action_field: body}
        return (
            f"Invalid action: {short_repr(body, 40)} is not a JSON object. {self.action_format()}"
        )

    def error_action(self, rng: np.random.Generator) -> str:
        if self.action_field is not None:
            return f"<answer>{int(rng.integers(100))}</answer>"
        return "{}"

    def _extra_info(self) -> dict[str, Any]:
        return {"source": self._name}
