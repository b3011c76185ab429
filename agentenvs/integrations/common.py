"""What every trainer adapter needs, free of any framework.

- The prompt convention: a reset observation is ``info["system_prompt"]``, a blank line,
  then the task; ``split_prompt`` gives the two parts, for trainers that send the system
  prompt as a system message (so the rules are never shown twice).
- Per-rollout random streams: the K rollouts of a group start from the same row (task and
  seed) and must still diverge through the env's own randomness, as in ``GroupEnv``.
- The env's actions as tools: one small table per env id (FrozenLake's ``move``,
  InterCode-SQL's ``execute_sql``/``submit``, ...), and BFCL's functions as tools per task;
  in tool mode the env's text speaks of those tools, not of the text format its free-text
  actions take (``tool_mode_text``: no ``<answer>`` tags, fenced blocks or ``submit``
  replies).
- Faults (``agentenvs.core.errors.Fault``: an episode's infrastructure failed, not the
  agent): ``reset_with_retries`` tries a reset again on a fresh env (nothing the agent
  did is lost before its first action), ``log_fault`` puts each fault in the trainer's
  log (logger ``agentenvs.integrations``, a warning with the fault's record). What a
  faulted rollout becomes is each framework's own: see its module.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import gymnasium as gym

from agentenvs.core.errors import Fault
from agentenvs.core.rng import stream_rng

logger = logging.getLogger("agentenvs.integrations")

#: tries of a reset that raises a retryable ``Fault`` before it is given up
RESET_TRIES = 3

T = TypeVar("T")

#: mixed into the seeds of per-rollout streams, so they never equal an env's own draws
ROLLOUT_STREAM = 0x54524C52  # "TRLR"


def split_prompt(observation: str, info: Mapping[str, Any]) -> tuple[str, str]:
    """``(system, user)``: the system prompt and the rest of a reset observation.

    When the observation does not start with ``info["system_prompt"]`` it is returned
    whole as the user part (and the system part is still the system prompt, if any).
    """
    system = str(info.get("system_prompt") or "")
    if system and observation.startswith(system):
        return system, observation[len(system) :].lstrip("\n")
    return system, observation


def log_fault(fault: Fault, where: str) -> None:
    """Report ``fault`` in the trainer's log: a warning naming ``where`` it happened, with
    the fault's record (kind, attribution, message, evidence, retryable) as JSON."""
    logger.warning("agentenvs fault in %s: %s", where, json.dumps(fault.record()))


def reset_with_retries(
    attempt: Callable[[], T], discard: Callable[[], None], *, where: str, tries: int = RESET_TRIES
) -> T:
    """``attempt()`` (make the env if need be and reset it), tried up to ``tries`` times
    while it raises a retryable ``Fault``: each fault is logged and ``discard()`` closes
    the failed env first, so the next try starts on a fresh one. A reset precedes every
    action, so a retry loses nothing; the last fault is raised."""
    if tries < 1:
        raise ValueError(f"tries must be >= 1, got {tries}")
    for number in range(1, tries + 1):
        try:
            return attempt()
        except Fault as fault:
            log_fault(fault, f"{where} (reset, try {number} of {tries})")
            discard()
            if not fault.retryable or number == tries:
                raise
    raise AssertionError("unreachable")


def reseed_rollout(env: gym.Env, seed: int | None, rollout: int) -> None:
    """Give a freshly reset env its own random stream for rollout number ``rollout``."""
    env.unwrapped.np_random = stream_rng(ROLLOUT_STREAM, seed, rollout)


@dataclass(frozen=True)
class ActionTool:
    """One tool that maps to an env action: ``template`` receives the tool's arguments."""

    name: str
    description: str
    params: tuple[tuple[str, str, tuple[str, ...] | None], ...]  # (name, description, choices)
    template: Callable[..., str]


def _fenced(lang: str, key: str) -> Callable[..., str]:
    return lambda **kw: f"```{lang}\n{kw[key]}\n```"


ACTION_TOOLS: dict[str, tuple[ActionTool, ...]] = {
    "FrozenLake": (
        ActionTool(
            "move",
            "Take one step on the frozen lake (the ice may make you slip sideways).",
            (("direction", "The direction to move", ("Left", "Down", "Right", "Up")),),
            lambda direction: f"<answer>{direction}</answer>",
        ),
    ),
    "InterCodeSQL": (
        ActionTool(
            "execute_sql",
            "Run one SQL statement on the database and see its result.",
            (("query", "The SQL statement", None),),
            _fenced("sql", "query"),
        ),
        ActionTool(
            "submit",
            "Submit the result of the last statement as the answer (ends the episode).",
            (),
            lambda: "submit",
        ),
    ),
    "DeepCoderMT": (
        ActionTool(
            "run_tests",
            "Run a complete Python program against the public tests; the last program "
            "sent is the answer, graded on all tests.",
            (("code", "The complete Python program", None),),
            _fenced("python", "code"),
        ),
    ),
    "TerminalBench": (
        ActionTool(
            "run_command",
            "Run shell commands in the task's persistent bash shell and see their output.",
            (("command", "The shell commands", None),),
            _fenced("bash", "command"),
        ),
        ActionTool(
            "submit",
            "Say the task is done: its tests run and the episode ends.",
            (),
            lambda: "submit",
        ),
    ),
}

GENERIC_TOOL = ActionTool(
    "act",
    "Send your next turn to the environment and see its answer.",
    (("action", "The text of your turn, in the format the task asks for", None),),
    lambda action: action,
)


@dataclass(frozen=True)
class ToolText:
    """How an env's text speaks of its tools in tool mode: the env's own
    ``action_format()`` line becomes ``format``, then each ``(text mode, tool mode)`` pair of
    ``phrases`` is replaced (the env's sentences about fenced blocks, ``<answer>`` tags and
    replies of ``submit``)."""

    format: str
    phrases: tuple[tuple[str, str], ...] = ()


TOOL_TEXTS: dict[str, ToolText] = {
    "FrozenLake": ToolText(
        "Call the `move` tool once per turn with one direction: Left, Down, Right or Up.",
        (
            ("your answer is too long to be a move", "the direction is too long to be a move"),
            ("your answer names no move", "the direction is empty"),
        ),
    ),
    "InterCodeSQL": ToolText(
        "Call `execute_sql` with one SQL statement, or `submit`.",
        (
            (
                "Each turn, send exactly one SQL statement, in a ```sql ... ``` block or as "
                "plain SQL, and you will see its result.",
                "Each turn, call the `execute_sql` tool with exactly one SQL statement and you "
                "will see its result.",
            ),
            ("reply `submit` to end the task", "call the `submit` tool to end the task"),
            ("The ```sql block is empty.", "The query is empty."),
        ),
    ),
    "DeepCoderMT": ToolText(
        "Call `run_tests` with your complete program (the last one sent is the answer).",
        (
            (
                "write the solution to the problem and enclose your code within delimiters.",
                "write the solution to the problem and pass your complete program to the "
                "`run_tests` tool.",
            ),
            (
                "Enclose your code within delimiters as follows.",
                "Pass your complete program to the `run_tests` tool; it starts as follows.",
            ),
            (
                "### Answer: (use the provided format with backticks)",
                "### Answer: (call the `run_tests` tool with your program)",
            ),
            ("(Your answer has no ```python code block.)", "(No program was sent.)"),
            ("(Your last ```python block is empty.)", "(The program is empty.)"),
            ("(Your code block is not closed with ```.)", "(The program holds a ``` fence.)"),
            ("No code found in model response", "No program was sent to `run_tests`"),
            ("output your final code", "call `run_tests` with your final code"),
            ("outputting your final solution", "sending your final solution to `run_tests`"),
        ),
    ),
    "TerminalBench": ToolText(
        "Call `run_command` with shell commands to run them in the shell; when the task is "
        "done, call `submit` and the tests run.",
        (("Invalid action: no command found.", "Invalid action: the command is empty."),),
    ),
    "BFCL": ToolText(
        "Call the functions as tools.",
        (
            (
                "Reply with the calls only, as a Python-style list with keyword arguments: "
                "[func_name1(param1=value1, param2=value2), func_name2(param=value)]. JSON tool "
                'calls, [{"name": ..., "arguments": {...}}], are accepted too.',
                "Call them as tools, with their arguments by name; the calls you make are "
                "your answer.",
            ),
            ("Functions you can call (JSON):", "The functions, also given to you as tools (JSON):"),
        ),
    ),
}

#: put before the system prompt of an env whose only tool is ``act`` (its turns as text)
ACT_NOTE = (
    "You act through the `act` tool: each call's `action` is one turn of yours, as text, "
    "written as the rules below say."
)


def tool_mode_text(env_id: str, env: gym.Env, text: str) -> str:
    """``text`` of ``env`` (made as ``env_id``: its system prompt, its task or an
    observation) as tool mode shows it: speaking of the env's tools rather than of a text
    format (``TOOL_TEXTS``). An env with no entry (its one tool is ``act``, which takes its
    turns as text) keeps its text; see ``tool_mode_system_prompt``."""
    spec = TOOL_TEXTS.get(env_family(env_id))
    if spec is None or not text:
        return text
    for old, new in spec.phrases:
        text = text.replace(old, new)
    action_format = env.unwrapped.action_format()  # type: ignore[attr-defined]
    if action_format:
        text = text.replace(action_format, spec.format)
    return text


def tool_mode_system_prompt(env_id: str, env: gym.Env, system: str) -> str:
    """The system prompt of ``env`` in tool mode: ``tool_mode_text``, or, for an env whose
    only tool is ``act``, ``ACT_NOTE`` before its rules."""
    if env_family(env_id) in TOOL_TEXTS:
        return tool_mode_text(env_id, env, system)
    return f"{ACT_NOTE}\n{system}" if system else ACT_NOTE


def env_family(env_id: str) -> str:
    """``"agentenvs/FrozenLake-v0"`` → ``"FrozenLake"``."""
    return env_id.rsplit("/", 1)[-1].rsplit("-v", 1)[0]


def action_tools(env_id: str) -> tuple[ActionTool, ...]:
    return ACTION_TOOLS.get(env_family(env_id), (GENERIC_TOOL,))


def is_bfcl_single_turn(env_id: str) -> bool:
    return env_family(env_id) == "BFCL"


def calls_action(calls: list[tuple[str, dict[str, Any]]]) -> str:
    """Recorded tool calls as the BFCL env's JSON tool-call reply (no calls: plain text)."""
    if not calls:
        return "None of the functions fits this request."
    return json.dumps([{"name": name, "arguments": args} for name, args in calls])


def json_safe(value: Any) -> Any:
    """``value`` with every part JSON can carry as is: numpy scalars and arrays become
    Python numbers and lists, tuples and sets lists, bytes text, NaN/inf ``None``,
    anything else its ``str``."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((json_safe(v) for v in value), key=repr)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and getattr(value, "shape", None) == ():
        return json_safe(item())
    tolist = getattr(value, "tolist", None)  # numpy arrays
    if callable(tolist):
        return json_safe(tolist())
    return str(value)


__all__ = [
    "ACTION_TOOLS",
    "ACT_NOTE",
    "ROLLOUT_STREAM",
    "TOOL_TEXTS",
    "ActionTool",
    "ToolText",
    "action_tools",
    "calls_action",
    "env_family",
    "is_bfcl_single_turn",
    "json_safe",
    "log_fault",
    "reseed_rollout",
    "reset_with_retries",
    "split_prompt",
    "tool_mode_system_prompt",
    "tool_mode_text",
]
