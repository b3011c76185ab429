"""One env episode as MCP tools, free of any transport (``agentenvs.server.mcp`` serves it).

An :class:`Episode` is one MCP session's env. Its tools:

- ``reset(task_id?, seed?, max_turns?)``: starts an episode (the first call makes the env);
  answers the system prompt and the task, as tool mode shows them
  (``integrations.common.tool_mode_text``: they speak of the tools, not of a text format);
- ``state()``: the episode's figures (also the resource ``agentenvs://episode/state``);
- the env's actions as typed tools, the table ``integrations.common.ACTION_TOOLS`` that the
  trainer adapters use: FrozenLake ``move(direction)``, InterCode-SQL ``execute_sql(query)``
  and ``submit()``, DeepCoder-MT ``run_tests(code)``, Terminal-Bench ``run_command(command)``
  and ``submit()``; each call is one turn;
- BFCL: the task's functions, each with its JSON schema (listed after a reset, as the task
  decides them). A call is recorded; ``submit()`` sends the recorded calls as one reply, the
  turn that BFCL grades. BFCL multi-turn: each function call is one step (the call runs on
  the task's services and its result comes back); ``reply(message)`` answers the user
  without calls, which hands the turn back. Their tools follow the user turn (miss_func adds
  functions at its turn: the server then notifies ``tools/list_changed``).

Every action's result is the observation as text (``content``) and the step's figures as
``structuredContent``: ``reward``, ``terminated``, ``truncated``, ``done``, ``return`` (the
episode's summed reward), ``turn``, ``turns_left``, ``success``, ``score``, ``action_valid``,
less the keys the env hides from the agent (its ``hidden_info_keys``: DeepCoder's
``score``, a pass rate over hidden tests, is never sent; nor is it in ``state``). A reset's
``max_turns`` above the server's cap is refused, and a call while another of the same
episode runs is answered ``SESSION_BUSY``.

Errors are results with ``isError`` and a ``code`` in ``structuredContent``, the session
kept: ``UNKNOWN_TOOL``, ``VALIDATION_ERROR`` (arguments that do not fit the tool's schema,
or a call larger than the message bound), ``NO_EPISODE`` (an action before ``reset``),
``EPISODE_OVER``, ``SESSION_BUSY``, ``INFRASTRUCTURE_FAULT`` (the env raised a
:class:`~agentenvs.core.errors.Fault`, whose record is ``fault``; a ``reset`` starts afresh)
and ``EXECUTION_ERROR``. The arguments of a BFCL function are recorded as sent, without
checking them against its schema: judging them (a wrong type included) is BFCL's checker's
part, as in-process.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from agentenvs.core.aio import AsyncEnv, calls_wait
from agentenvs.core.errors import Fault
from agentenvs.integrations.common import (
    action_tools,
    calls_action,
    env_family,
    json_safe,
    split_prompt,
    tool_mode_system_prompt,
    tool_mode_text,
)

#: the resource that reads an episode's state
STATE_URI = "agentenvs://episode/state"
FAULT_CODE = "INFRASTRUCTURE_FAULT"
CONTROL_TOOLS = ("reset", "state")


@dataclass(frozen=True)
class ToolSpec:
    """A tool as MCP lists it: name, description and the JSON Schema of its arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass
class ToolAnswer:
    """A tool's result: the text shown to the agent, the figures, whether it is an error."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    error: bool = False


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


RESET_TOOL = ToolSpec(
    "reset",
    "Start a new episode (the previous one, if any, ends): a task by id or drawn from the "
    "seed, and the turn budget. Answers the rules and the task.",
    _object(
        {
            "task_id": {"type": "string", "description": "The task's id (default: drawn)"},
            "seed": {"type": "integer", "description": "The seed of the episode's randomness"},
            "max_turns": {"type": "integer", "minimum": 1, "description": "The turn budget"},
        }
    ),
)
STATE_TOOL = ToolSpec(
    "state",
    "The episode's state: task, turn, turns left, done, success, score and summed reward.",
    _object({}),
)
SUBMIT_CALLS_TOOL = ToolSpec(
    "submit",
    "Send the function calls made so far as your answer; they are graded and the episode ends.",
    _object({}),
)
REPLY_TOOL = ToolSpec(
    "reply",
    "Answer the user with a short message and no function calls: hands the turn back (the "
    "next request follows, or the episode ends).",
    _object(
        {"message": {"type": "string", "description": "Your message to the user"}}, ("message",)
    ),
)


class EpisodeError(Exception):
    """A call this episode refuses; the session goes on."""

    def __init__(self, message: str, code: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.extra = extra or {}

    def answer(self) -> ToolAnswer:
        return ToolAnswer(str(self), {"code": self.code, **self.extra}, error=True)


def _validator(schema: dict[str, Any]) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema)


class Episode:
    """One MCP session's env and its episode (see the module docstring).

    The env is made on the first ``reset`` (``make_env``) and closed by ``aclose``. Calls
    are answered one at a time, in the order they arrive.
    """

    def __init__(
        self,
        env_id: str,
        make_env: Callable[[], gym.Env],
        *,
        message_limit: int,
        inline: bool | None = None,
        turns_cap: int | None = None,
        hidden: frozenset[str] = frozenset(),
    ) -> None:
        self.env_id = env_id
        self.turns_cap = turns_cap
        self.hidden = frozenset(hidden)
        self.family = env_family(env_id)
        self._make_env = make_env
        self._inline = (not calls_wait(env_id)) if inline is None else inline
        self.message_limit = int(message_limit)
        self.env: AsyncEnv | None = None
        self.started = False
        self.done = False
        self.episode_return = 0.0
        self._calls: list[tuple[str, dict[str, Any]]] = []
        self._functions: dict[str, ToolSpec] = {}
        self._lock = asyncio.Lock()
        self._closed = False
        specs = [RESET_TOOL, STATE_TOOL]
        if self.family == "BFCL":
            specs.append(SUBMIT_CALLS_TOOL)
        elif self.family == "BFCLMultiTurn":
            specs.append(REPLY_TOOL)
        else:
            for tool in action_tools(env_id):
                props = {}
                for name, desc, choices in tool.params:
                    props[name] = {"type": "string", "description": desc}
                    if choices:
                        props[name]["enum"] = list(choices)
                specs.append(ToolSpec(tool.name, tool.description, _object(props, tuple(props))))
        self._fixed = {spec.name: spec for spec in specs}
        self._validators = {
            name: _validator(spec.input_schema) for name, spec in self._fixed.items()
        }
        self._templates = {tool.name: tool.template for tool in action_tools(env_id)}

    @classmethod
    def for_config(cls, config: Any) -> Episode:
        """The episode a server with this ``ServerConfig`` gives a session: its message
        limit, its cap on turns, and the env's hidden info keys kept from the agent."""
        return cls(
            config.env_id,
            config.make_env,
            message_limit=config.message_limit,
            inline=config.inline,
            turns_cap=config.turns_cap,
            hidden=config.hidden_info_keys,
        )

    # ------------------------------------------------------------------ listing
    @property
    def bfcl(self) -> bool:
        return self.family in ("BFCL", "BFCLMultiTurn")

    def tools(self) -> list[ToolSpec]:
        """The tools now: the fixed ones, then the task's functions (BFCL, after a reset)."""
        return [*self._fixed.values(), *self._functions.values()]

    def _set_functions(self, tools: Any) -> bool:
        """Take the task's functions (OpenAI-style tools); True when the list changed."""
        functions: dict[str, ToolSpec] = {}
        for spec in tools or []:
            fn = spec.get("function", spec)
            name = str(fn["name"])
            if name in self._fixed:
                raise EpisodeError(
                    f"the task's function {name!r} has the name of an episode tool",
                    "EXECUTION_ERROR",
                )
            params = fn.get("parameters") or {"type": "object", "properties": {}}
            functions[name] = ToolSpec(name, str(fn.get("description") or name), dict(params))
        changed = list(functions) != list(self._functions)
        self._functions = functions
        return changed

    # ------------------------------------------------------------------ calls
    async def call(self, name: str, arguments: dict[str, Any] | None) -> tuple[ToolAnswer, bool]:
        """Answer one tool call: ``(answer, tools_changed)``; never raises for what a
        client sends. One call at a time: a call while another runs is refused
        (``SESSION_BUSY``), so a client cannot queue work past its session's end or its
        idle timeout."""
        if self._lock.locked():
            return ToolAnswer(
                "another call of this session is still running: one call at a time",
                {"code": "SESSION_BUSY"},
                error=True,
            ), False
        async with self._lock:
            try:
                return await self._call(name, dict(arguments or {}))
            except EpisodeError as exc:
                return exc.answer(), False
            except Fault as exc:
                self.done = True
                return ToolAnswer(
                    f"infrastructure fault ({exc.kind}): {exc}; the episode is over and is not "
                    "scored: call reset to start again",
                    {"code": FAULT_CODE, "fault": exc.record()},
                    error=True,
                ), False
            except Exception as exc:  # an env bug: report it, keep the session
                return ToolAnswer(
                    f"{type(exc).__name__}: {str(exc)[:500]}",
                    {"code": "EXECUTION_ERROR"},
                    error=True,
                ), False

    async def _call(self, name: str, arguments: dict[str, Any]) -> tuple[ToolAnswer, bool]:
        if self._closed:
            raise EpisodeError("the session is closed", "EXECUTION_ERROR")
        size = len(json.dumps(arguments, ensure_ascii=False))
        if size > self.message_limit:
            raise EpisodeError(
                f"the call's arguments are {size} bytes, over this server's limit of "
                f"{self.message_limit}",
                "VALIDATION_ERROR",
            )
        if name not in self._fixed and name not in self._functions:
            raise EpisodeError(
                f"unknown tool {name[:100]!r}; this episode's tools: "
                + ", ".join(spec.name for spec in self.tools()),
                "UNKNOWN_TOOL",
            )
        if name in self._fixed:
            errors = sorted(self._validators[name].iter_errors(arguments), key=str)
            if errors:
                where = "/".join(str(p) for p in errors[0].absolute_path) or "arguments"
                raise EpisodeError(
                    f"invalid arguments for {name}: {where}: {errors[0].message}; expected "
                    f"{json.dumps(self._fixed[name].input_schema['properties'])}",
                    "VALIDATION_ERROR",
                )
        if name == "reset":
            return await self._reset(arguments)
        if name == "state":
            state = await self.state()
            return ToolAnswer(json.dumps(state), state), False
        if not self.started:
            raise EpisodeError("no episode yet: call reset first", "NO_EPISODE")
        if self.done:
            raise EpisodeError("the episode is over: call reset to start another", "EPISODE_OVER")
        if self.family == "BFCL":
            if name == "submit":
                return await self._step(calls_action(self._calls))
            self._calls.append((name, arguments))
            return ToolAnswer(
                f"Call {len(self._calls)} recorded: {name}({json.dumps(arguments)}). "
                "Call submit when your calls are complete.",
                {"recorded_calls": len(self._calls)},
            ), False
        if self.family == "BFCLMultiTurn":
            if name == "reply":
                return await self._step(str(arguments["message"]))
            return await self._step(calls_action([(name, arguments)]))
        return await self._step(self._templates[name](**arguments))

    async def _reset(self, arguments: dict[str, Any]) -> tuple[ToolAnswer, bool]:
        if self.env is None:
            try:
                self.env = await AsyncEnv.create(self._make_env, inline=self._inline)
            except Fault:
                raise
            except Exception as exc:
                raise EpisodeError(
                    f"could not make {self.env_id}: {str(exc)[:500]}", "FACTORY_ERROR"
                ) from None
        options = {k: arguments[k] for k in ("task_id", "max_turns") if k in arguments}
        wanted = options.get("max_turns")
        if self.turns_cap is not None and isinstance(wanted, int) and wanted > self.turns_cap:
            raise EpisodeError(
                f"max_turns {wanted} is over this server's cap of {self.turns_cap} "
                "(--max-turns-cap)",
                "VALIDATION_ERROR",
            )
        self.started, self.done = False, False
        self.episode_return = 0.0
        self._calls = []
        try:
            obs, info = await self.env.areset(seed=arguments.get("seed"), options=options or None)
        except (ValueError, KeyError, TypeError) as exc:
            raise EpisodeError(f"reset failed: {str(exc)[:500]}", "VALIDATION_ERROR") from None
        self.started = True
        changed = self._set_functions(info.get("tools")) if self.bfcl else False
        system, task = split_prompt(obs, info)
        env: Any = self.env
        if system and obs.startswith(system):
            text = (
                f"{tool_mode_system_prompt(self.env_id, env, system)}\n\n"
                f"{tool_mode_text(self.env_id, env, task)}"
            )
        else:
            text = tool_mode_text(self.env_id, env, obs)
        data = {
            "task_id": info.get("task_id"),
            "max_turns": info.get("max_turns"),
            "turns_left": info.get("turns_left"),
            "tools": [spec.name for spec in self.tools()],
        }
        return ToolAnswer(text, json_safe(data)), changed

    async def _step(self, action: str) -> tuple[ToolAnswer, bool]:
        assert self.env is not None
        obs, reward, terminated, truncated, info = await self.env.astep(action)
        self.episode_return += float(reward)
        self.done = bool(terminated or truncated)
        changed = False
        if self.family == "BFCLMultiTurn" and not self.done:
            changed = self._set_functions(
                await self.env.call(lambda e: e.unwrapped.current_tools())
            )
        text = tool_mode_text(self.env_id, self.env, obs)  # type: ignore[arg-type]
        if self.done:
            outcome = "solved" if info.get("success") else "not solved"
            text = f"{text}\n\n[The episode is over. Outcome: {outcome}.]"
        data = {
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "done": self.done,
            "return": self.episode_return,
            "turn": info.get("turn"),
            "turns_left": info.get("turns_left"),
            "success": bool(info.get("success")),
            "score": info.get("score"),
            "action_valid": info.get("action_valid"),
        }
        return ToolAnswer(text, json_safe(self._visible(data))), changed

    def _visible(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` without the env's hidden info keys (a pass rate over hidden tests)."""
        return {k: v for k, v in data.items() if k not in self.hidden}

    async def state(self) -> dict[str, Any]:
        """The episode's figures (before any reset: ``started`` false and nothing else)."""
        if self.env is None or not self.started:
            return {"env_id": self.env_id, "started": False}

        def read(env: gym.Env) -> dict[str, Any]:
            inner: Any = env.unwrapped
            return {
                "task_id": inner.task_id,
                "turn": inner.turn,
                "max_turns": inner.episode_max_turns,
                "turns_left": inner.turns_left,
                "success": bool(inner._success),
                "score": float(inner._score),
                "state_key": inner.state_key(),
            }

        fields = await self.env.call(read)
        return json_safe(
            self._visible(
                {
                    "env_id": self.env_id,
                    "started": True,
                    "done": self.done,
                    "return": self.episode_return,
                    **fields,
                }
            )
        )

    async def aclose(self) -> None:
        """Close the env (idempotent): shell, sandbox, container or database released."""
        self._closed = True
        env, self.env = self.env, None
        if env is not None:
            await env.aclose()


__all__ = ["STATE_URI", "Episode", "EpisodeError", "ToolAnswer", "ToolSpec"]
