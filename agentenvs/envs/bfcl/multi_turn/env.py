"""``agentenvs/BFCLMultiTurn-v0``: BFCL multi-turn function calling against stateful backends."""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import pickle
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentenvs.core import info as keys
from agentenvs.core.env import TextEnv, Transition
from agentenvs.core.errors import SnapshotError
from agentenvs.envs.bfcl.decode import Call, DecodeError, decode_calls, format_calls
from agentenvs.envs.bfcl.multi_turn import official
from agentenvs.envs.bfcl.multi_turn.backends import BACKENDS, backend_class
from agentenvs.envs.bfcl.multi_turn.checker import (
    FORCE_TERMINATED,
    TurnVerdict,
    check_turn,
    execute_call,
    method_table,
    public_state,
)
from agentenvs.envs.bfcl.multi_turn.data import (
    MultiTurnEntry,
    MultiTurnTaskSet,
    doc_to_tool,
    load_tasks,
)

#: BFCL's per-user-turn limit on steps with calls (``MAXIMUM_STEP_LIMIT``)
MAXIMUM_STEP_LIMIT = 20
#: the user message BFCL sends when held-out functions become available (miss_func)
ADDITIONAL_FUNCTIONS_MESSAGE = (
    "I have updated some more functions you can choose from. What about now?"
)
#: ``"strict"`` runs only the functions the agent was given and checks the state of turns
#: that cannot be served; ``"official"`` grades exactly as bfcl-eval
RULES = ("strict", "official")
#: what the scripted policies reply to hand a user turn back (any text without calls does)
END_TURN_REPLY = "I have done what you asked."

# text no model means as a reply: C0 controls (but tab/newline/CR), DEL, U+FFFD, surrogates
_GARBLED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd\ud800-\udfff]")


def _plain(value: Any, _path: frozenset[int] = frozenset()) -> Any:
    """``value`` as JSON-able data with a stable order (objects by class name and fields).

    Private fields of objects are left out. A reference back to an object being
    converted (a directory's parent) becomes ``"<cycle>"``, so linked structures of the
    official backends terminate.
    """
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if id(value) in _path:
        return "<cycle>"
    path = _path | {id(value)}
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
        return {str(k): _plain(v, path) for k, v in items}
    if isinstance(value, list | tuple):
        return [_plain(v, path) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_plain(v, path) for v in value), key=repr)
    if hasattr(value, "__dict__"):
        # private fields (timestamps, caches) are not state, at any depth
        public = {k: v for k, v in vars(value).items() if not k.startswith("_")}
        return {"__class__": type(value).__name__, **_plain(public, path)}
    return repr(value)


class BFCLMultiTurnEnv(TextEnv):
    """Serve a user over several requests by calling functions of stateful services.

    ## Description
    BFCL's multi-turn categories (base, miss_func, miss_param, long_context). An entry
    is a conversation of user turns over backend services (a file system, a messaging
    service, a ticketing service; or BFCL's own backends when ``bfcl-eval`` is
    installed). The env plays the user: it shows one user turn, the agent calls
    functions for as many steps as it needs, each step's calls run at once against the
    agent's instances and the results come back, and a reply without function calls
    hands the turn back. The turn is then checked as BFCL's multi-turn checker does,
    against ground-truth instances that ran the turn's ground-truth calls: the *state*
    check (every public attribute of each instance equal) and the *response* check
    (every ground-truth result of the turn among all the agent's results so far, as a
    multiset). A turn whose ground truth is empty (the request cannot be done: a
    missing parameter or function) is not checked, but the agent's calls still run.
    The ground truth runs as BFCL runs it, as written (``cd('archives')`` with its
    positional argument), and every call, on either side, gets fresh copies of its
    arguments, so a backend that changes a list it was given never changes the stored
    entry and replays give the same verdicts. On the official data these verdicts equal
    those of bfcl-eval's ``multi_turn_checker`` for every entry and perturbed trajectory
    (:mod:`agentenvs.envs.bfcl.agreement`).
    In miss_func entries the held-out functions join the tools at their turn, whose
    user message is BFCL's "I have updated some more functions you can choose from.
    What about now?".

    ## Action Space
    ``FreeText``: function calls in BFCL's syntax, ``[f(a=1), g(b='x')]`` (brackets
    optional; positional arguments are dropped, as BFCL's decoder drops them from a
    model's calls, while the ground truth runs as written, positional ones included), or JSON
    tool calls (``[{"name": ..., "arguments": {...}}]``); several calls in one reply run
    in order. Any other non-empty text (it does not decode to calls) is a message to the
    user and ends the agent's part of the turn. An empty or whitespace reply, or one
    with control or undecodable characters, is an invalid action: the step is spent
    and nothing else happens (BFCL would end the turn on it; the env contract wants
    such input to be harmless). Calls of private or banned names (kill, exit, quit,
    remove, unlink, popen, Popen, run) are refused with an error result.

    ## Observation Space
    ``FreeText``. First: the instructions with the function docs (JSON), then the first
    user turn. After calls: one line per call, ``f(a=1) -> <result>``, a result being
    the method's ``str``, its ``dict`` as JSON, else ``str()``, or ``Error during
    execution: ...``. After a reply without calls: the next user turn (with the newly
    available docs in miss_func), or the end of the episode and why.

    ## Starting State
    An entry drawn with ``self.np_random`` (or ``reset(options={"task_id": ...})``); the
    agent's and the ground truth's instances loaded from its ``initial_config`` (the
    long_context category loads extra filler data); user turn 0.

    ## Rewards
    1 when the last user turn passes (the whole entry is solved), else 0: BFCL scores an
    entry as valid only if every turn passes. Under ``rules="official"`` the verdicts are
    bfcl-eval's. ``rules="strict"`` (the default) differs where those rules let a wrong
    action pass: a call runs only if its function is among the docs the agent has in that
    turn (officially any public method of the involved classes runs: the functions an
    entry leaves out, and the held-out ones of miss_func before their turn), and a turn
    with empty ground truth (it cannot be served) fails when the agent's calls changed
    the services' state (officially it is not checked, so on a last turn anything pays),
    and a last turn that reaches the step limit fails (officially it is checked as it
    stands; see Episode End).

    ## Episode End
    ``terminated`` when a turn check fails (the entry can no longer pass, so the episode
    stops there rather than playing on), when the agent makes more than ``step_limit``
    (BFCL: 20) steps with calls in one user turn, or when the last turn passes (success).
    At the step limit (the step that makes it ``step_limit + 1`` steps with calls) strict
    rules fail the episode (``multi_turn:force_terminated``) in any turn: the agent never
    handed the turn back. Official rules do as bfcl-eval: its inference force-quits the
    turn but keeps it and plays no later turn, and its runner fails a result a turn short
    and checks a full one, so an earlier turn fails (``multi_turn:force_terminated``) and
    the last turn is checked as it stands, as if handed back (success if it passes).
    ``truncated`` when the turn budget ``max_turns``, counted in agent steps, runs out
    first.

    ## Information
    The standard keys: ``success`` (every user turn passed) and ``score`` (the fraction
    of user turns passed). Also ``category``, ``user_turn`` (0-based), ``n_user_turns``,
    ``turns_passed`` and ``call_steps`` (steps with calls in this user turn). A step that
    ends a user turn adds ``turn_check`` (``valid``, ``checked``, ``error_type`` with
    BFCL's names such as ``multi_turn:instance_state_mismatch``, ``message``,
    ``details``); a step with calls adds ``results``. ``info["system_prompt"]`` and
    ``info["tools"]`` (the current docs as OpenAI-style tools with JSON Schema parameters:
    dict -> object, float -> number, tuple -> array) are in the reset info; ``tools`` is
    repeated, with ``tools_changed=True``, on the step where held-out functions appear.

    ## Arguments
    - ``tasks_path``: a data folder or one ``BFCL_v4_multi_turn_<category>.json`` file
      in BFCL's layout (see ``agentenvs.envs.bfcl.multi_turn.data``); default: the
      bundled entries; ``"bfcl-eval"`` loads the official entries of an installed
      ``bfcl-eval`` (``pip install 'agentenvs[bfcl]'``), whose classes run on BFCL's own
      backends, loaded without importing the ``bfcl_eval`` package.
    - ``categories``: keep only these categories (base, miss_func, miss_param,
      long_context).
    - ``step_limit``: steps with calls allowed per user turn (default 20, BFCL's).
    - ``rules`` (``"strict"``): ``"official"`` grades exactly as bfcl-eval does.
    - ``max_result_chars``: longer results are cut in the observation (not in checks).
    - ``max_turns`` (default 60), ``show_budget``, ``render_mode``,
      ``max_action_chars`` (default 100,000), ``max_observation_chars``: as in
      ``TextEnv``.

    ## Version History
    - v0: first version. Before any release, ``rules`` was added, with ``"strict"`` the
      default (the verdicts until then are ``rules="official"``), and ``rules="official"``
      came to check a last turn that reaches the step limit, as bfcl-eval does (it had
      failed it, as strict rules still do).
    """

    default_max_turns = 60
    snapshot_version = 1
    hidden_info_keys = frozenset({"score", "turns_passed", "turn_check", "step_reward"})  # verdicts

    @classmethod
    def calls_wait(cls, **kwargs: Any) -> bool:
        return False  # the backends are Python objects in process

    def __init__(
        self,
        *,
        tasks_path: str | Path | None = None,
        categories: Sequence[str] | str | None = None,
        step_limit: int = MAXIMUM_STEP_LIMIT,
        rules: str = "strict",
        max_result_chars: int = 20_000,
        max_turns: int | None = None,
        show_budget: bool = False,
        render_mode: str | None = None,
        max_action_chars: int = 100_000,
        max_observation_chars: int = 1 << 20,
    ) -> None:
        super().__init__(
            max_turns=max_turns,
            show_budget=show_budget,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
            max_observation_chars=max_observation_chars,
        )
        if step_limit < 1 or max_result_chars < 1:
            raise ValueError("step_limit and max_result_chars must be positive")
        if rules not in RULES:
            raise ValueError(f"rules must be one of {RULES}, got {rules!r}")
        self.rules = rules
        self.strict = rules == "strict"
        self.step_limit = int(step_limit)
        self.max_result_chars = int(max_result_chars)
        self.task_set: MultiTurnTaskSet = load_tasks(tasks_path, categories)
        self._task_ids = list(self.task_set.entries)
        self._tools_cache: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self._entry: MultiTurnEntry | None = None
        self._model: dict[str, Any] = {}
        self._gt: dict[str, Any] = {}
        self._model_table: dict[str, Any] = {}
        self._gt_table: dict[str, Any] = {}
        self._user_turn = 0
        self._call_steps = 0
        self._turn_calls: list[Call] = []
        self._results: list[str] = []
        self._passed = 0
        self._over = False

    # ---------------------------------------------------------------- tasks and prompts
    @property
    def task_ids(self) -> Sequence[str]:
        return self._task_ids

    def _known_task(self, task_id: Any) -> Mapping[str, MultiTurnEntry]:
        return self.task_set.entries

    @property
    def entry(self) -> MultiTurnEntry:
        if self._entry is None:
            raise RuntimeError("no entry yet: call reset() first")
        return self._entry

    @property
    def user_turn(self) -> int:
        return self._user_turn

    @property
    def call_steps(self) -> int:
        """Steps with calls the agent made in the current user turn."""
        return self._call_steps

    @property
    def calls_this_turn(self) -> tuple[Call, ...]:
        """Every call the agent made in the current user turn, in order."""
        return tuple(self._turn_calls)

    def gold_calls(self) -> tuple[Call, ...]:
        """The ground-truth calls of the current user turn, as an agent sends them: with
        keyword arguments only (positional ones of the stored ground truth are named by
        the method's signature, since a decoded reply's positional arguments are dropped).
        """
        entry = self.entry
        turn = entry.ground_truth[min(self._user_turn, entry.n_turns - 1)]
        return tuple(self._keyword_call(c) for c in turn)

    def _keyword_call(self, call: Call) -> Call:
        if not call.positional:
            return call
        method = self._model_table.get(call.name)
        if method is None:
            return call
        try:
            bound = inspect.signature(method).bind_partial(*call.positional, **call.args)
        except (TypeError, ValueError):
            return call
        return Call(call.name, dict(bound.arguments))

    def current_docs(self) -> list[dict[str, Any]]:
        """The function docs the agent has during the current user turn."""
        return self.task_set.tools_at(self.entry, self._user_turn)

    def current_tools(self) -> list[dict[str, Any]]:
        key = (self.entry.id, self._user_turn)
        tools = self._tools_cache.get(key)
        if tools is None:
            tools = [doc_to_tool(doc) for doc in self.current_docs()]
            self._tools_cache[key] = tools
        return copy.deepcopy(tools)  # callers may edit theirs

    def system_prompt(self) -> str:
        docs = json.dumps(self.current_docs(), indent=None)
        return (
            "You are an assistant that acts by calling functions. The functions below act "
            "on live services whose state carries over from one user request to the next. "
            "Reply with function calls only, written as [func_name1(param1=value1, "
            "param2=value2), func_name2(param=value)] (JSON tool calls "
            '[{"name": ..., "arguments": {...}}] are also accepted). The calls of a reply '
            "run in order and you see their results; keep calling functions until the "
            "request is done, then reply with a short message without any function call "
            "to hand the turn back to the user. If no function fits, or the request lacks "
            "a value a function needs, say so in a message without function calls.\n"
            f"The functions, as JSON:\n{docs}"
        )

    def action_format(self) -> str:
        return (
            "Reply with function calls, e.g. [func(param=value), other(param='text')], or "
            "with a short message without calls when the request is done."
        )

    @staticmethod
    def _user_text(messages: Sequence[Mapping[str, str]]) -> str:
        return "\n".join(m["content"] for m in messages)

    def _turn_prompt(self, turn: int) -> str:
        entry = self.entry
        if turn in entry.missed_functions:
            added = set(entry.missed_functions[turn])
            docs = [d for d in self.task_set.tools_at(entry, turn) if d["name"] in added]
            return f"{ADDITIONAL_FUNCTIONS_MESSAGE}\n{json.dumps(docs)}"
        return self._user_text(entry.question[turn])

    # ---------------------------------------------------------------- backends
    def _classes(self, entry: MultiTurnEntry) -> dict[str, type]:
        classes = {}
        for name in entry.involved_classes:
            if name in BACKENDS:
                classes[name] = backend_class(name)
            else:  # the loader only lets known class names through
                classes[name] = official.official_class(name)
        return classes

    def _instances(self, entry: MultiTurnEntry, classes: Mapping[str, type]) -> dict[str, Any]:
        instances = {}
        for name, cls in classes.items():
            instance = cls()
            if not official.is_stateless(name):
                config = copy.deepcopy(dict(entry.initial_config.get(name, {})))
                instance._load_scenario(config, long_context=entry.long_context)
            instances[name] = instance
        return instances

    def _bind(self) -> None:
        self._model_table = method_table(self._model)
        self._gt_table = method_table(self._gt)

    def _available_table(self) -> dict[str, Any]:
        """The agent's methods whose docs it has in the current user turn."""
        names = {doc["name"] for doc in self.current_docs()}
        return {name: m for name, m in self._model_table.items() if name in names}

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        entry = self.task_set.entries[task_id]
        self._entry = entry
        classes = self._classes(entry)
        self._model = self._instances(entry, classes)
        # the ground-truth side starts equal: a pickle copy is cheaper than loading again
        self._gt = pickle.loads(pickle.dumps(self._model, protocol=pickle.HIGHEST_PROTOCOL))
        self._bind()
        self._user_turn = 0
        self._call_steps = 0
        self._turn_calls = []
        self._results = []
        self._passed = 0
        self._over = False
        return f"{self.system_prompt()}\n\nUser: {self._turn_prompt(0)}"

    def _reset_info(self) -> dict[str, Any]:
        return {keys.SYSTEM_PROMPT: self.system_prompt(), keys.TOOLS: self.current_tools()}

    def _extra_info(self) -> dict[str, Any]:
        entry = self._entry
        return {
            "category": entry.category if entry else None,
            "user_turn": self._user_turn,
            "n_user_turns": entry.n_turns if entry else 0,
            "turns_passed": self._passed,
            "call_steps": self._call_steps,
        }

    # ---------------------------------------------------------------- actions
    def _fraction_passed(self) -> float:
        return self._passed / self.entry.n_turns

    def _format_results(self, calls: Sequence[Call], results: Sequence[str]) -> str:
        lines = []
        for call, result in zip(calls, results, strict=True):
            if len(result) > self.max_result_chars:
                result = (
                    result[: self.max_result_chars]
                    + f" [cut to {self.max_result_chars} of {len(result)} characters]"
                )
            lines.append(f"{format_calls([call])[1:-1]} -> {result}")
        return "\n".join(lines)

    def _apply(self, action: str) -> Transition:
        if not action.strip():
            return Transition(
                observation=f"Invalid action: the reply is empty. {self.action_format()}",
                action_valid=False,
            )
        if _GARBLED.search(action):
            return Transition(
                observation=(
                    "Invalid action: the reply holds control characters or undecodable "
                    f"text. {self.action_format()}"
                ),
                action_valid=False,
            )
        try:
            calls = decode_calls(action, strict=self.strict)
        except DecodeError:
            calls = []  # a message to the user: BFCL ends the turn on undecodable replies
        if not calls:
            return self._end_turn()
        table = self._available_table() if self.strict else self._model_table
        results = [execute_call(table, c.name, c.args) for c in calls]
        self._results.extend(results)
        self._turn_calls.extend(calls)
        self._call_steps += 1
        observation = self._format_results(calls, results)
        info: dict[str, Any] = {"results": results}
        if self._call_steps > self.step_limit:
            return self._force_quit(observation, info)
        return Transition(observation=observation, info=info)

    def _force_quit(self, observation: str, info: dict[str, Any]) -> Transition:
        """The step after which the turn has more than ``step_limit`` steps with calls.

        bfcl-eval's inference force-quits the turn there but keeps it, and asks for no
        later turn; its runner then fails a result with fewer turns than the ground truth
        (``multi_turn:force_terminated``) and checks one with all of them. So under
        official rules a last turn is checked as if the agent had handed it back, and an
        earlier one fails. Strict rules fail the episode in every turn: the agent never
        said it was done, and hitting the limit must not pay where stopping would not be
        needed (BFCL's inference marks a force-quit entry as one to fail).
        """
        turn = self._user_turn
        reached = f"more than {self.step_limit} steps with function calls in user turn {turn + 1}"
        if not self.strict and turn + 1 == self.entry.n_turns:
            ended = self._end_turn()
            ended.info.update(info)
            ended.observation = (
                f"{observation}\n\nStep limit reached ({reached}): the turn is checked as it "
                f"stands. {ended.observation}"
            )
            return ended
        verdict = TurnVerdict(False, FORCE_TERMINATED, reached)
        self._over = True
        info["turn_check"] = verdict.as_info()
        return Transition(
            observation=f"{observation}\n\nStep limit reached: the episode is over ({reached}).",
            terminated=True,
            success=False,
            score=self._fraction_passed(),
            info=info,
        )

    def _end_turn(self) -> Transition:
        entry = self.entry
        turn = self._user_turn
        gt_calls = entry.ground_truth[turn]
        gt_results = [execute_call(self._gt_table, c.name, c.args, c.positional) for c in gt_calls]
        verdict = check_turn(
            turn=turn,
            ground_truth_calls=gt_calls,
            model_acted=bool(self._turn_calls),
            model_instances=self._model,
            ground_truth_instances=self._gt,
            model_results_so_far=self._results,
            ground_truth_results=gt_results,
            strict=self.strict,
        )
        info: dict[str, Any] = {"turn_check": verdict.as_info()}
        if not verdict.valid:
            self._over = True
            return Transition(
                observation=(
                    f"User turn {turn + 1} of {entry.n_turns} was not completed correctly "
                    f"({verdict.error_type}: {verdict.message}). The episode is over."
                ),
                terminated=True,
                success=False,
                score=self._fraction_passed(),
                info=info,
            )
        self._passed += 1
        if turn + 1 == entry.n_turns:
            self._over = True
            return Transition(
                observation=f"All {entry.n_turns} user requests are done. The episode is over.",
                reward=1.0,
                terminated=True,
                success=True,
                score=1.0,
                info=info,
            )
        self._user_turn = turn + 1
        self._call_steps = 0
        self._turn_calls = []
        if self._user_turn in entry.missed_functions:
            info["tools"] = self.current_tools()
            info["tools_changed"] = True
        return Transition(
            observation=f"User: {self._turn_prompt(self._user_turn)}",
            score=self._fraction_passed(),
            info=info,
        )

    # ---------------------------------------------------------------- scoring and errors
    def score_action(self, action: str) -> float:
        """1.0 if the current user turn would pass were it handed back right after
        ``action``, else 0.0, without advancing (a snapshot is stepped and restored).

        A reply without calls is scored as it is (it ends the turn); calls are run and
        the turn is then ended as if the agent stopped there, so in a turn that needs
        several steps only the step that completes it scores 1. An invalid action, and
        any action once the episode is over, scores 0 (1 after a solved episode).
        """
        if self._task_id is None:
            raise RuntimeError("no entry yet: call reset() first")
        if self._over or self._done:
            return float(self._success)
        text, problem = self._coerce_action(action)
        if problem is not None:
            return 0.0
        turn, passed = self._user_turn, self._passed
        snap = self.snapshot()
        try:
            transition = self._apply(text)
            if transition.action_valid is False:
                return 0.0
            if not self._over and self._user_turn == turn:
                self._end_turn()
            return 1.0 if self._passed > passed else 0.0
        finally:
            self.restore(snap)

    def error_action(self, rng: np.random.Generator) -> str:
        """A near-miss call for the current user turn, in BFCL's syntax: a ground-truth
        call with a wrong argument value, without one of its required arguments, or
        with the wrong function (another available one, same arguments).

        In a turn with no ground truth, a ground-truth call of another turn is used.
        """
        entry = self.entry
        pool = list(self.gold_calls()) or [c for turn in entry.ground_truth for c in turn]
        docs = {d["name"]: d for d in self.current_docs()}
        if not pool:
            name = sorted(docs)[int(rng.integers(len(docs)))]
            return format_calls([Call(name, {})])
        call = pool[int(rng.integers(len(pool)))]
        required = [
            p
            for p in docs.get(call.name, {}).get("parameters", {}).get("required", [])
            if p in call.args
        ]
        others = sorted(n for n in docs if n != call.name)
        kinds = [
            k for k, ok in (("value", call.args), ("drop", required), ("function", others)) if ok
        ]
        if not kinds:
            return format_calls([Call(call.name, {"unexpected": "value"})])
        kind = kinds[int(rng.integers(len(kinds)))]
        args = dict(call.args)
        if kind == "value":
            param = sorted(args)[int(rng.integers(len(args)))]
            args[param] = _wrong_value(args[param], rng)
            return format_calls([Call(call.name, args)])
        if kind == "drop":
            del args[required[int(rng.integers(len(required)))]]
            return format_calls([Call(call.name, args)])
        return format_calls([Call(others[int(rng.integers(len(others)))], args)])

    # ---------------------------------------------------------------- state
    def _state_key(self) -> str:
        head = [self._user_turn, bool(self._turn_calls), sorted(Counter(self._results).items())]
        model = {name: public_state(inst) for name, inst in self._model.items()}
        try:
            # the project's backends hold plain JSON data: no conversion needed
            raw = json.dumps([head, model], sort_keys=True)
        except (TypeError, ValueError):  # objects, sets or mixed-type keys (official backends)
            raw = json.dumps([head, _plain(model)], sort_keys=True, default=repr)
        return hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()

    def _get_state(self) -> dict[str, Any]:
        return {
            # one pickle of both sides' instances: cheaper than deepcopy and self-contained
            "instances": pickle.dumps((self._model, self._gt), protocol=pickle.HIGHEST_PROTOCOL),
            "user_turn": self._user_turn,
            "call_steps": self._call_steps,
            "turn_calls": tuple(self._turn_calls),
            "results": tuple(self._results),
            "passed": self._passed,
            "over": self._over,
        }

    def _fork(self, k: int) -> list[TextEnv]:
        # the backends' instances are copied through _get_state's pickle, once per child
        return self._fork_by_copy(k)

    def _check_state(self, state: Any, base: Mapping[str, Any]) -> None:
        fields = {"instances", "user_turn", "call_steps", "turn_calls", "results", "passed", "over"}
        if not isinstance(state, dict) or set(state) != fields:
            raise SnapshotError(f"a BFCLMultiTurn state is a dict with {sorted(fields)}")
        entry = self.task_set.entries.get(base["task_id"])
        if entry is None:
            raise SnapshotError(f"entry {base['task_id']!r} is not among this env's entries")
        for name, high in (
            ("user_turn", entry.n_turns),
            ("passed", entry.n_turns),
            ("call_steps", None),
        ):
            value = state[name]
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < 0
                or (high is not None and value > high)
            ):
                raise SnapshotError(
                    f"{name} must be an int in [0, {high or 'inf'}], got {value!r:.40}"
                )
        if not isinstance(state["over"], bool):
            raise SnapshotError("over must be a bool")
        if not isinstance(state["results"], tuple) or not all(
            isinstance(r, str) for r in state["results"]
        ):
            raise SnapshotError("results must be a tuple of str")
        if not isinstance(state["turn_calls"], tuple) or not all(
            isinstance(c, Call) for c in state["turn_calls"]
        ):
            raise SnapshotError("turn_calls must be a tuple of calls")
        if not isinstance(state["instances"], bytes):
            raise SnapshotError("instances must be bytes")
        self._classes(entry)  # official backend modules must be loaded before unpickling
        instances = pickle.loads(state["instances"])
        if not (isinstance(instances, tuple) and len(instances) == 2):
            raise SnapshotError("instances must hold the model's and the ground truth's backends")

    def _set_state(self, state: Any) -> None:
        if not isinstance(state, dict) or "instances" not in state:
            raise SnapshotError("not a BFCLMultiTurn snapshot state")
        entry = self.task_set.entries.get(self._task_id or "")
        if entry is None:
            raise SnapshotError(f"entry {self._task_id!r} is not among this env's entries")
        self._entry = entry
        self._classes(entry)  # official backend modules must be loaded before unpickling
        self._model, self._gt = pickle.loads(state["instances"])
        self._bind()
        self._user_turn = state["user_turn"]
        self._call_steps = state["call_steps"]
        self._turn_calls = list(state["turn_calls"])
        self._results = list(state["results"])
        self._passed = state["passed"]
        self._over = state["over"]


def _wrong_value(value: Any, rng: np.random.Generator) -> Any:
    """A plausible but different value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + (1 if rng.random() < 0.5 else -1)
    if isinstance(value, float):
        return round(value * 1.5 + 1.0, 2)
    if isinstance(value, str):
        if not value:
            return "none"
        suffix = ("_old", "2", "_backup", "s")[int(rng.integers(4))]
        stem, dot, ext = value.rpartition(".")
        return f"{stem}{suffix}{dot}{ext}" if dot and stem else value + suffix
    if isinstance(value, list | tuple):
        return list(value[:-1]) if value else ["item"]
    if isinstance(value, dict):
        if value:
            drop = sorted(value, key=str)[int(rng.integers(len(value)))]
            return {k: v for k, v in value.items() if k != drop}
        return {"key": "value"}
    return "none"
