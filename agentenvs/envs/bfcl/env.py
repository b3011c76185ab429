"""``agentenvs/BFCL-v0``: answer a request with function calls, graded by BFCL's AST checker."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentenvs.core import info as keys
from agentenvs.core.env import TextEnv, Transition
from agentenvs.core.errors import SnapshotError, TaskError
from agentenvs.envs.bfcl.ast_checker import (
    UnsupportedDocError,
    Verdict,
    check_calls,
    check_relevance,
    is_relevance_category,
)
from agentenvs.envs.bfcl.data import (
    BfclTask,
    check_tool_schemas,
    gold_calls,
    load_tasks,
    task_tools,
)
from agentenvs.envs.bfcl.decode import (
    Call,
    DecodeError,
    decode_calls,
    format_calls,
    format_calls_json,
    format_calls_source,
    is_python_formattable,
    surely_not_calls,
)

_INSTRUCTIONS = (
    "You answer requests by calling functions. Reply with the calls only, as a Python-style "
    "list with keyword arguments: [func_name1(param1=value1, param2=value2), "
    'func_name2(param=value)]. JSON tool calls, [{"name": ..., "arguments": {...}}], are '
    "accepted too. If none of the functions fits the request, or it lacks the arguments a "
    "function needs, say so in plain text and call nothing."
)
_LANGUAGE_NOTES = {
    "java": (
        "The functions are Java methods: give every argument as a string holding a Java "
        'value of the parameter\'s type, e.g. "42", "3.5f" (float), "10L" (long), "true", '
        '"new ArrayList<>(Arrays.asList(1, 2))", '
        '"new HashMap<String, Object>() {{ put(\\"k\\", 1); }}".'
    ),
    "javascript": (
        "The functions are JavaScript functions: give every argument as a string holding a "
        'JavaScript value of the parameter\'s type, e.g. "42", "3.5", "10n" (Bigint), "true", '
        '"[1, 2]", "{\'k\': 1}".'
    ),
}
#: ``"strict"`` closes the official rules' leniencies that pay a non-answer; ``"official"``
#: grades exactly as bfcl-eval
RULES = ("strict", "official")
_ROLES = {"user": "User", "system": "System", "assistant": "Assistant", "tool": "Tool"}


def render_prompt(task: BfclTask) -> str:
    """The first observation: instructions, the functions as JSON, then the conversation."""
    parts = [_INSTRUCTIONS, "Functions you can call (JSON):"]
    docs = "\n".join(json.dumps(doc, ensure_ascii=False) for doc in task.functions)
    parts.append(docs or "(none)")
    note = _LANGUAGE_NOTES.get(task.language)
    if note:
        parts.append(note)
    lines = []
    for turn in task.question:
        for message in turn:
            role = _ROLES.get(message["role"], message["role"].capitalize())
            lines.append(f"{role}: {message['content']}")
    parts.append("\n".join(lines))
    return "\n\n".join(parts)


#: Unicode's control characters (category Cc) but tab, newline and carriage return, and
#: the surrogates (Cs): exactly these code points, as ``unicodedata`` classes them
_UNREADABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def unreadable(text: str) -> bool:
    """Empty, blank, or holding control characters or lone surrogates: not an answer."""
    return not text.strip() or _UNREADABLE.search(text) is not None


def reply_text(calls: Sequence[Call], language: str = "python") -> str:
    """Calls in the official syntax of ``language`` (Java/JS: values as source text), or,
    for Python, as JSON when that syntax cannot hold them."""
    if language in ("java", "javascript") and len(calls) == 1:
        # BFCL reads one call from a Java/JS reply
        return format_calls_source(calls)
    return format_calls(calls) if is_python_formattable(calls) else format_calls_json(calls)


class BFCLEnv(TextEnv):
    """Answer a request by calling the right functions with the right arguments.

    ## Description
    The single-turn categories of the Berkeley Function-Calling Leaderboard (BFCL v4):
    simple_python/java/javascript, multiple, parallel, parallel_multiple, irrelevance,
    live_simple, live_multiple, live_parallel, live_parallel_multiple, live_irrelevance
    and live_relevance. Each episode is one entry: a request and the docs of the
    functions that may serve it. The reply is graded by a reimplementation of BFCL's
    AST checker (:mod:`agentenvs.envs.bfcl.ast_checker`), with its verdicts and error
    types; the relevance categories by BFCL's relevance rule.

    ## Action Space
    ``FreeText``, read as the leaderboard reads a prompting model's reply
    (:mod:`agentenvs.envs.bfcl.decode`): backticks, newlines and spaces trimmed at both
    ends, brackets added where missing, then BFCL's call syntax ``[f(a=1), g(b="x")]``
    (keyword arguments only: positional ones are dropped, as BFCL does). In the Java and
    JavaScript categories the reply is parsed by the language's tree-sitter grammar, as
    officially, and every value is source text: ``[getPage(pageNo=3)]`` gives ``"3"``,
    ``sa=new InetSocketAddress("10.0.0.1", 80)`` is read as written, and parameter names
    may be Python keywords (``from``, ``async``). JSON tool calls
    (``[{"name": ..., "arguments": {...}}]`` / ``{"tool_calls": [...]}``), the form of a
    function-calling model's calls, are accepted too and graded like BFCL's FC models'.

    ## Observation Space
    ``FreeText``. First: the instructions, the function docs (one JSON object a line),
    a note on Java/JS argument syntax where it applies, and the conversation (``User:``
    lines, plus ``System:`` lines where the entry has them). After a reply: the verdict
    (``Correct.`` or the checker's error type and message), or, for a reply that could
    not be read as calls, what was wrong and the expected format.

    ## Starting State
    A task drawn with ``self.np_random`` (or ``reset(options={"task_id": ...})``); no
    reply yet.

    ## Rewards
    1 when the checker accepts the reply, else 0, under ``rules``: ``"strict"`` (the
    default) or ``"official"``, which differ only where BFCL's rules pay a reply that
    does not answer the task (see below and ``docs/bfcl.md``). AST categories: the official dispatch
    (count, greedy any-order matching for parallel, the expected function's doc for
    multiple) and per-value rules. ``irrelevance``/``live_irrelevance``: 1 when the
    reply holds no call (plain text that does not decode, or ``[]``);
    ``live_relevance``: 1 when it holds any call. Every reply to a relevance entry is
    graded, an empty one included (BFCL decodes it as no call, so an irrelevance entry
    passes). Under ``rules="official"`` these verdicts equal bfcl-eval's own on every
    entry and perturbed reply of the official data (:mod:`agentenvs.envs.bfcl.agreement`).
    ``rules="strict"`` also fails an irrelevance reply that writes a call to one of the
    functions inside text that does not decode (a fenced block, a call in a sentence),
    a live_relevance call that no doc allows (an unknown name, a missing required or
    unknown parameter, a value of the wrong type), a boolean given for a number inside a
    dict or list, and a list value that is not one of the acceptable lists (``[]`` for an
    optional one); see :mod:`agentenvs.envs.bfcl.ast_checker`.

    ## Episode End
    ``terminated`` on the first reply that is graded: in the AST categories, the first
    reply that decodes into calls (``[]`` included, which fails the count); in the
    relevance categories, the first reply, whatever it holds. A reply to an AST entry
    that is not graded (one that does not decode, an empty or blank one, or one with
    control characters; BFCL fails all of them) costs a turn and says why, so with
    ``max_turns`` > 1 the agent can retry; ``truncated`` when the budget runs out first.
    No reply, however hostile (numbers of thousands of digits, thousands of nested
    brackets, lone surrogates), raises: it is an observation.
    ``max_turns=1`` is BFCL's own protocol (one reply, graded or failed); the default, 3,
    leaves room to fix a reply's format (Gymnasium's checker also refuses an env that
    truncates after one step).

    ## Information
    The standard keys; ``success`` and ``score`` are the verdict (1.0/0.0). Also
    ``category`` and ``language`` on every info; ``info["system_prompt"]`` (the
    instructions) and ``info["tools"]`` (the docs as OpenAI-style tools whose
    parameters are Draft 2020-12 JSON Schema: ``dict`` → ``object``, ``float`` →
    ``number``, ``tuple`` → ``array``, ``any`` and every Java/JS type → ``string``) on
    reset. Steps add ``verdict`` (``{"valid", "error_type", "errors"}``) when the reply
    was graded and ``num_calls`` (decoded calls) when it decoded; each is absent
    otherwise rather than ``None``, so that vector envs can batch infos (Gymnasium
    masks a missing key, but cannot put ``None`` beside a dict or an int).

    ## Arguments
    - ``categories``: a category name or a list of them (default: every single-turn
      category the data folder holds; an entry may have no function docs where no call
      is expected, as 4 official live_irrelevance entries do).
    - ``tasks_path``: a folder in BFCL's layout (``BFCL_v4_<category>.json`` plus
      ``possible_answer/``), or ``"bfcl-eval"`` for the data of an installed bfcl-eval
      package (found without importing it); default: the bundled subset.
    - ``underscore_to_dot``: show tool names with ``.`` replaced by ``_`` (tool APIs refuse
      dots) and expect them so in replies, as BFCL does for such models.
    - ``rules`` (``"strict"``): ``"official"`` grades exactly as bfcl-eval does, its
      leniencies included.
    - ``max_turns`` (default 3; 1 for BFCL's single attempt), ``show_budget``,
      ``render_mode``, ``max_action_chars`` (default 100,000): as in ``TextEnv``.

    ## Version History
    - v0: first version. Before any release, ``rules`` was added, with ``"strict"`` the
      default (the verdicts until then are ``rules="official"``).
    """

    default_max_turns = 3
    snapshot_version = 1

    @classmethod
    def calls_wait(cls, **kwargs: Any) -> bool:
        return False  # parsing and checking in process

    def __init__(
        self,
        *,
        categories: str | Sequence[str] | None = None,
        tasks_path: str | Path | None = None,
        underscore_to_dot: bool = False,
        rules: str = "strict",
        max_turns: int | None = None,
        show_budget: bool = False,
        render_mode: str | None = None,
        max_action_chars: int = 100_000,
    ) -> None:
        if rules not in RULES:
            raise ValueError(f"rules must be one of {RULES}, got {rules!r}")
        super().__init__(
            max_turns=max_turns,
            show_budget=show_budget,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
        )
        self.underscore_to_dot = bool(underscore_to_dot)
        self.rules = rules
        self.strict = rules == "strict"
        self.tasks: dict[str, BfclTask] = {t.id: t for t in load_tasks(tasks_path, categories)}
        self._task_ids = list(self.tasks)
        self.categories = list(dict.fromkeys(t.category for t in self.tasks.values()))
        self._tools: dict[str, list[dict[str, Any]]] = {}
        self._prompts: dict[str, str] = {}
        #: per task, what every reply and info reads: (task, relevance, language, the
        #: info's category/language keys), built on the task's first reset
        self._facts: dict[str, tuple[BfclTask, bool, str, dict[str, Any]]] = {}
        self._verdict: Verdict | None = None

    # ---------------------------------------------------------------- reset
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The base's reset. A reset to a task met before, with ``options={"task_id":
        id}`` alone and no seed (a trainer's or a grader's loop), takes a shorter path to
        the same effects: the task is known, its tools checked and its prompt rendered,
        so nothing is left to validate or to undo (a test holds the env's every field,
        the observation and the info equal to the base's)."""
        if seed is None and type(options) is dict and len(options) == 1:
            task_id = options.get("task_id")
            prompt = self._prompts.get(task_id) if type(task_id) is str else None
            if prompt is not None and task_id in self._tools:
                budget = self._check_budget(self.max_turns)
                self._task_id = task_id
                self._episode_max_turns = budget
                self._turn = 0
                self._done = False
                self._success = False
                self._score = 0.0
                self._verdict = None
                observation = self._finish_observation(prompt)
                info = self._info(action_valid=True)
                info.update(self._reset_info())
                return observation, info
        return super().reset(seed=seed, options=options)

    # ---------------------------------------------------------------- task and prompts
    @property
    def task_ids(self) -> Sequence[str]:
        return self._task_ids

    def _known_task(self, task_id: Any) -> Mapping[str, BfclTask]:
        return self.tasks

    @property
    def task(self) -> BfclTask:
        if self._task_id is None:
            raise RuntimeError("no task yet: call reset() first")
        return self.tasks[self._task_id]

    def action_format(self) -> str:
        hint = "Reply with function calls, e.g. [func_name(param1=value1, param2=value2)]"
        if self._task_id is not None and is_relevance_category(self.task.category):
            return hint + ", or with plain text when no function fits."
        return hint + " (JSON tool calls are accepted too)."

    def tools(self) -> list[dict[str, Any]]:
        """The current task's docs as tools, schema-checked once per task."""
        return self._tools_of(self.task)

    def _check_reset(self, task_id: str, max_turns: int, options: Mapping[str, Any]) -> None:
        # a task whose docs are not valid schemas is refused before the episode changes
        if task_id not in self._tools:
            self._tools_of(self.tasks[task_id])

    def _tools_of(self, task: BfclTask) -> list[dict[str, Any]]:
        if task.id not in self._tools:
            tools = task_tools(task, underscore_to_dot=self.underscore_to_dot)
            try:
                check_tool_schemas(tools)
            except Exception as exc:
                # jsonschema is imported only when a schema needs its check
                from jsonschema.exceptions import SchemaError

                if not isinstance(exc, SchemaError):
                    raise
                raise TaskError(
                    task.source, "function", f"not a valid JSON Schema: {exc.message}"
                ) from None
            self._tools[task.id] = tools
        return self._tools[task.id]

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        self._verdict = None
        prompt = self._prompts.get(task_id)
        if prompt is None:  # rendered once per task: the prompt is the task's alone
            prompt = self._prompts[task_id] = render_prompt(self.tasks[task_id])
        return prompt

    def _facts_of(self, task_id: str) -> tuple[BfclTask, bool, str, dict[str, Any]]:
        """The current task's :attr:`_facts`, derived once per task (a restore or a fork
        may set the task without a reset, so they are looked up by id)."""
        facts = self._facts.get(task_id)
        if facts is None:
            task = self.tasks[task_id]
            language = task.language
            extra = {"category": task.category, "language": language}
            facts = (task, is_relevance_category(task.category), language, extra)
            self._facts[task_id] = facts
        return facts

    def _reset_info(self) -> dict[str, Any]:
        tools = self._tools.get(self._task_id)  # type: ignore[arg-type]
        if tools is None:
            tools = self.tools()
        return {keys.SYSTEM_PROMPT: _INSTRUCTIONS, keys.TOOLS: tools}

    def _info(self, *, action_valid: bool) -> dict[str, Any]:
        """The base's info (the same keys, values and order; a test holds them equal),
        built in one literal: it is made twice a reset + step, a fifth of the env's own
        cost there."""
        task_id = self._task_id
        budget = self._episode_max_turns
        turn = self._turn
        facts = self._facts.get(task_id) if task_id else None  # type: ignore[arg-type]
        extra = facts[3] if facts is not None else self._extra_info()
        return {
            keys.TASK_ID: task_id,
            keys.TURN: turn,
            keys.MAX_TURNS: budget,
            keys.TURNS_LEFT: max(budget - turn, 0),
            keys.SUCCESS: self._success,
            keys.SCORE: self._score,
            keys.ACTION_VALID: bool(action_valid),
            keys.STATE_KEY: self.state_key(),
            **extra,
        }

    def _extra_info(self) -> dict[str, Any]:
        # the base copies these keys into each info: the per-task dict is not handed out
        if not self._task_id or self._task_id not in self.tasks:
            return {"category": None, "language": None}
        return self._facts_of(self._task_id)[3]

    # ---------------------------------------------------------------- grading
    def verdict_of(self, action: str) -> tuple[Verdict | None, list[Call] | None, str]:
        """(verdict, calls, why): ``verdict`` is None when the reply is not graded."""
        if self._task_id is None:
            raise RuntimeError("no task yet: call reset() first")
        task, relevance, language, _ = self._facts_of(self._task_id)
        # a relevance reply is always graded, as BFCL grades it: any text that does not
        # decode into calls (an empty one included) is "no call"
        if not relevance and unreadable(action):
            return None, None, "The reply is empty or holds control characters."
        try:
            if relevance and surely_not_calls(action, language):
                # prose: no call, told without a parse (a relevance verdict needs no message)
                raise DecodeError("not function-call syntax")
            calls = decode_calls(action, language=language, strict=self.strict)
        except DecodeError as exc:
            if relevance:
                return self._relevance(None, action, task), None, ""
            return None, None, f"Could not read the reply as function calls: {exc}."
        if relevance:
            return self._relevance(calls, action, task), calls, ""
        try:
            verdict = check_calls(
                task.functions,
                calls,
                task.ground_truth or [],
                task.category,
                underscore_to_dot=self.underscore_to_dot,
                strict=self.strict,
            )
        except UnsupportedDocError as exc:
            # the official checker stops with an error here; count it as not accepted
            verdict = Verdict(False, "checker:unsupported_doc", [str(exc)])
        return verdict, calls, ""

    def _relevance(self, calls: list[Call] | None, action: str, task: BfclTask) -> Verdict:
        return check_relevance(
            calls,
            task.category,
            text=action,
            functions=task.functions,
            strict=self.strict,
            underscore_to_dot=self.underscore_to_dot,
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The base's step. A reply that is text within the length limit, in an episode
        under way, takes a shorter path to the same effects: the verdict goes to the
        base's fields without a :class:`Transition` between (a test holds every field,
        the observation and the info equal to the base's)."""
        if (
            type(action) is not str
            or len(action) > self.max_action_chars
            or self._task_id is None
            or self._done
        ):
            return super().step(action)
        self._turn += 1
        verdict, calls, why = self.verdict_of(action)
        if verdict is None:
            truncated = self._turn >= self._episode_max_turns
            self._done = truncated
            observation = self._finish_observation(self._invalid_observation(why))
            return observation, 0.0, False, truncated, self._info(action_valid=False)
        self._verdict = verdict
        reward = 1.0 if verdict.valid else 0.0
        self._success = bool(verdict.valid)
        self._score = reward
        self._done = True
        observation = self._finish_observation(_graded_observation(verdict))
        info = self._info(action_valid=True)
        info["verdict"] = verdict.as_dict()
        if calls is not None:
            info["num_calls"] = len(calls)
        return observation, reward, True, False, info

    def _invalid_observation(self, why: str) -> str:
        return f"Invalid reply: {why} {self.action_format()}"

    def _apply(self, action: str) -> Transition:
        verdict, calls, why = self.verdict_of(action)
        if verdict is None:
            return Transition(observation=self._invalid_observation(why), action_valid=False)
        self._verdict = verdict
        reward = 1.0 if verdict.valid else 0.0
        info: dict[str, Any] = {"verdict": verdict.as_dict()}
        if calls is not None:
            info["num_calls"] = len(calls)
        return Transition(
            observation=_graded_observation(verdict),
            reward=reward,
            terminated=True,
            success=verdict.valid,
            score=reward,
            info=info,
        )

    def score_action(self, action: str) -> float:
        """The checker's verdict on ``action`` (1.0 or 0.0), without advancing.

        A reply that would not be graded keeps the current score.
        """
        if not isinstance(action, str) or len(action) > self.max_action_chars:
            return self._score
        verdict, _, _ = self.verdict_of(action)
        if verdict is None:
            return self._score
        return 1.0 if verdict.valid else 0.0

    # ---------------------------------------------------------------- references
    def gold_calls(self) -> list[Call]:
        return gold_calls(self.task, underscore_to_dot=self.underscore_to_dot)

    def gold_reply(self) -> str:
        """A reply the checker accepts: each parameter's first acceptable value."""
        task = self.task
        if "irrelevance" in task.category:
            return "None of the available functions can serve this request."
        return reply_text(self.gold_calls(), task.language)

    def error_action(self, rng: np.random.Generator) -> str:
        """A near miss built from the ground truth, which the checker rejects.

        One of: a wrong argument value, a missing required argument, a wrong function
        name, a dropped call (parallel); in irrelevance, a call to the first function;
        in live_relevance, a reply with no call.
        """
        task = self.task
        if "irrelevance" in task.category:
            return reply_text(
                gold_calls(_as_relevance(task), underscore_to_dot=self.underscore_to_dot)
            )
        if task.ground_truth is None:
            return "I cannot help with that using these functions."
        gold = self.gold_calls()
        kinds = ["wrong_value", "missing_required", "wrong_name", "missing_call"]
        for index in rng.permutation(len(kinds)):
            for _ in range(4):
                calls = near_miss(gold, kinds[int(index)], task, rng, self.underscore_to_dot)
                if calls is None:
                    break
                text = reply_text(calls, task.language)
                if self.score_action(text) == 0.0:
                    return text
        return "[]"  # an empty call list always fails the count

    # ---------------------------------------------------------------- state
    def _state_key(self) -> str:
        if self._verdict is None:
            return "open"
        return f"graded:{int(self._verdict.valid)}:{self._verdict.error_type}"

    def _get_state(self) -> dict[str, Any]:
        return {"verdict": None if self._verdict is None else self._verdict.as_dict()}

    def _fork(self, k: int) -> list[TextEnv]:
        return self._fork_by_copy(k)  # the verdict alone: copied

    def _check_state(self, state: Any, base: Mapping[str, Any]) -> None:
        if not isinstance(state, dict) or set(state) != {"verdict"}:
            raise SnapshotError("a BFCL state is a dict with 'verdict'")
        raw = state["verdict"]
        if raw is None:
            return
        if (
            not isinstance(raw, dict)
            or set(raw) != {"valid", "error_type", "errors"}
            or not isinstance(raw["valid"], bool)
            or not (raw["error_type"] is None or isinstance(raw["error_type"], str))
            or not isinstance(raw["errors"], list | tuple)
            or not all(isinstance(e, str) for e in raw["errors"])
        ):
            raise SnapshotError(
                "a BFCL verdict is {valid: bool, error_type: str|None, errors: [str]}"
            )

    def _set_state(self, state: Any) -> None:
        if not isinstance(state, dict) or "verdict" not in state:
            raise SnapshotError(f"not a BFCL state: {type(state).__name__}")
        raw = state["verdict"]
        self._verdict = (
            None if raw is None else Verdict(raw["valid"], raw["error_type"], list(raw["errors"]))
        )


def _graded_observation(verdict: Verdict) -> str:
    if verdict.valid:
        return "Correct."
    detail = f": {verdict.errors[0]}" if verdict.errors else ""
    return f"Not accepted ({verdict.error_type}){detail}"


# ---------------------------------------------------------------------- near misses
def _as_relevance(task: BfclTask) -> BfclTask:
    """The task seen as live_relevance, whose gold reply is a call to the first function."""
    return BfclTask(task.id, "live_relevance", task.question, task.functions, None, task.source)


def _perturb(value: Any, rng: np.random.Generator) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + int(rng.integers(1, 10)) * (1 if rng.random() < 0.5 else -1)
    if isinstance(value, float):
        return round(value * 1.5 + 1.0, 4)
    if isinstance(value, str):
        if len(value) > 3 and rng.random() < 0.5:
            cut = int(rng.integers(len(value)))
            return value[:cut] + value[cut + 1 :]
        return value + "X"
    if isinstance(value, list | tuple):
        if len(value) > 1:
            return list(value)[::-1] if rng.random() < 0.5 else list(value)[:-1]
        return [*value, _perturb(value[0], rng)] if value else ["X"]
    if isinstance(value, dict):
        return {**value, "extra_key": 1}
    return "X"


def _perturb_source(text: str, rng: np.random.Generator) -> str:
    """Java/JS source: change a digit or a letter, keeping the syntax plausible."""
    digits = [i for i, ch in enumerate(text) if ch.isdigit()]
    if digits:
        i = digits[int(rng.integers(len(digits)))]
        return text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1 :]
    if text in ("true", "false"):
        return "false" if text == "true" else "true"
    return text + "X"


def near_miss(
    gold: list[Call],
    kind: str,
    task: BfclTask,
    rng: np.random.Generator,
    underscore_to_dot: bool,
) -> list[Call] | None:
    """The gold calls with one mistake of ``kind``, or None when it does not apply."""
    calls = [Call(c.name, dict(c.args)) for c in gold]
    if not calls:
        return None
    docs = {
        (d["name"].replace(".", "_") if underscore_to_dot else d["name"]): d for d in task.functions
    }
    i = int(rng.integers(len(calls)))
    target = calls[i]
    if kind == "wrong_value":
        if not target.args:
            return None
        param = sorted(target.args)[int(rng.integers(len(target.args)))]
        value = target.args[param]
        if task.language in ("java", "javascript") and isinstance(value, str):
            target.args[param] = _perturb_source(value, rng)
        else:
            target.args[param] = _perturb(value, rng)
        return calls
    if kind == "missing_required":
        doc = docs.get(target.name, {})
        required = [p for p in doc.get("parameters", {}).get("required", []) if p in target.args]
        if not required:
            return None
        del target.args[required[int(rng.integers(len(required)))]]
        return calls
    if kind == "wrong_name":
        others = [name for name in docs if name != target.name]
        if others and rng.random() < 0.6:
            new = others[int(rng.integers(len(others)))]
        elif "." in target.name:
            new = target.name.rsplit(".", 1)[1]
        else:
            new = target.name + "s"
        calls[i] = Call(new, target.args)
        return calls
    if kind == "missing_call":
        if len(calls) < 2:
            return None
        del calls[i]
        return calls
    raise ValueError(f"unknown mistake kind {kind!r}")
