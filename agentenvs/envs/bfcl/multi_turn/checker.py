"""Executing decoded calls against backend instances, and the multi-turn turn checker.

The rules follow BFCL's multi-turn checker:

- **Execution**: a call runs the public method of that name on the involved instance
  whose class defines it, with the call's arguments (nothing is ``eval``'d): keyword
  arguments for the agent's calls (their positional ones were dropped when decoding),
  positional and keyword arguments for the ground truth, which BFCL runs as written.
  Each call gets fresh copies of its arguments.
  Banned names (``kill``, ``exit``, ``quit``, ``remove``, ``unlink``, ``popen``,
  ``Popen``, ``run``) and private names are refused. A ``str`` result is kept as it is,
  a ``dict`` goes through ``json.dumps``, anything else through ``str()``; an exception
  becomes ``"Error during execution: <message>"``.
- **Turn check** (after the agent's part of a user turn): if the turn's ground truth is
  empty, nothing is checked (``strict``: the state check still runs, so a turn that
  cannot be served fails when the agent's calls changed the services); if it is not empty and the agent made no call, the turn
  fails; otherwise the *state* check (every public attribute of each model-side
  instance equals the ground-truth instance's) and then the *response* check (every
  ground-truth result of the turn is found, as a multiset, among all the agent's
  results so far, from every turn) must pass.
"""

from __future__ import annotations

import copy
import decimal
import inspect
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: names the official executor refuses, whatever class defines them
BANNED_NAMES = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})
ERROR_PREFIX = "Error during execution: "

EMPTY_TURN = "multi_turn:empty_turn_model_response"
STATE_MISMATCH = "multi_turn:instance_state_mismatch"
RESPONSE_MISMATCH = "multi_turn:execution_response_mismatch"
FORCE_TERMINATED = "multi_turn:force_terminated"

_METHODS: dict[type, tuple[str, ...]] = {}


def public_methods(cls: type) -> tuple[str, ...]:
    """Names of the public methods a backend class offers as tools (cached per class)."""
    names = _METHODS.get(cls)
    if names is None:
        names = tuple(
            sorted(
                name
                for name, member in inspect.getmembers(cls, inspect.isfunction)
                if not name.startswith("_")
            )
        )
        _METHODS[cls] = names
    return names


def method_table(instances: Mapping[str, Any]) -> dict[str, Callable[..., Any]]:
    """Tool name -> bound method, over the involved instances (names must not repeat)."""
    table: dict[str, Callable[..., Any]] = {}
    owner: dict[str, str] = {}
    for class_name, instance in instances.items():
        for name in public_methods(type(instance)):
            if name in owner:
                raise ValueError(
                    f"method {name!r} is defined by both {owner[name]} and {class_name}; "
                    "tool names must be unique across the involved classes"
                )
            owner[name] = class_name
            table[name] = getattr(instance, name)
    return table


def render_result(result: Any) -> str:
    """A method's return value as the text the agent and the response checker see."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except (TypeError, ValueError):  # objects that JSON cannot hold
            return str(result)
    return str(result)


def execute_call(
    table: Mapping[str, Callable[..., Any]],
    name: str,
    args: Mapping[str, Any],
    positional: Sequence[Any] = (),
) -> str:
    """Run one call and return its rendered result (errors included, never raised).

    The method gets deep copies of the arguments: BFCL evaluates each call from its
    text, so a backend that changes an argument it was given (TwitterAPI's ``mention``
    extends the list) never changes the stored call.
    """
    if name in BANNED_NAMES:
        return f"{ERROR_PREFIX}Function call {name} is not allowed."
    method = None if name.startswith("_") else table.get(name)
    if method is None:
        # the wording of the NameError the official eval-based executor would raise
        return f"{ERROR_PREFIX}name '{name}' is not defined"
    refusal = _unbounded_work(method, name, args, positional)
    if refusal is not None:
        return f"{ERROR_PREFIX}{refusal}"
    # process-wide precision that a backend sets (MathAPI sets decimal's and mpmath's for
    # its call) is put back after the call, so that it reaches nothing else in the process
    mpmath = sys.modules.get("mpmath")
    saved_prec = mpmath.mp.prec if mpmath is not None else None
    try:
        with decimal.localcontext():
            fresh_positional = copy.deepcopy(tuple(positional))
            return render_result(method(*fresh_positional, **copy.deepcopy(dict(args))))
    except Exception as exc:  # a backend error is a result the agent sees
        return f"{ERROR_PREFIX}{exc}"
    finally:
        if mpmath is not None and mpmath.mp.prec != saved_prec:
            mpmath.mp.prec = saved_prec


#: the most work a call of the official MathAPI may ask for: its ``power`` builds
#: ``base ** exponent`` and its ``logarithm``/``square_root`` compute to ``precision``
#: digits, without bounds (``power(base=10, exponent=10**9)`` would hold the process for
#: minutes; no official entry comes near these limits)
MAX_POWER_BITS = 1_000_000
MAX_PRECISION = 100_000


def _unbounded_work(
    method: Callable[..., Any], name: str, args: Mapping[str, Any], positional: Sequence[Any]
) -> str | None:
    """Why the call is refused, for the few official methods whose work the agent sets."""
    if type(getattr(method, "__self__", None)).__name__ != "MathAPI":
        return None
    try:
        bound = inspect.signature(method).bind(*positional, **args).arguments
    except TypeError:
        return None  # the call itself raises the TypeError the agent should see
    if name == "power":
        base, exponent = bound.get("base"), bound.get("exponent")
        if isinstance(base, int) and isinstance(exponent, int) and exponent > 0:
            if abs(base) > 1 and exponent * abs(base).bit_length() > MAX_POWER_BITS:
                return f"the result of power is too large (more than {MAX_POWER_BITS} bits)"
    if name in ("logarithm", "square_root"):
        precision = bound.get("precision")
        if isinstance(precision, int) and precision > MAX_PRECISION:
            return f"precision above {MAX_PRECISION} digits is not supported"
    return None


def execute_calls(table: Mapping[str, Callable[..., Any]], calls: Iterable[Any]) -> list[str]:
    """Run calls (``Call`` objects or ``(name, kwargs)`` pairs) in order; one result each."""
    results = []
    for call in calls:
        name, args = call
        results.append(execute_call(table, name, args, getattr(call, "positional", ())))
    return results


def public_state(instance: Any) -> dict[str, Any]:
    """The attributes the state checker compares: every one not starting with ``_``."""
    return {k: v for k, v in vars(instance).items() if not k.startswith("_")}


@dataclass(frozen=True)
class TurnVerdict:
    """The checker's outcome for one user turn; ``error_type`` uses BFCL's names."""

    valid: bool
    error_type: str | None = None
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    checked: bool = True

    def as_info(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "checked": self.checked,
            "error_type": self.error_type,
            "message": self.message,
            "details": self.details,
        }


_MISSING = object()


def state_check(model: Mapping[str, Any], ground_truth: Mapping[str, Any]) -> TurnVerdict:
    """Every public attribute of each ground-truth instance equals the model instance's."""
    for class_name, gt_instance in ground_truth.items():
        model_instance = model[class_name]
        differences = {}
        for attr, expected in public_state(gt_instance).items():
            got = getattr(model_instance, attr, _MISSING)
            if got is _MISSING or got != expected:
                differences[attr] = {
                    "model": "<missing>" if got is _MISSING else got,
                    "ground_truth": expected,
                }
        if differences:
            return TurnVerdict(
                False,
                STATE_MISMATCH,
                f"the state of {class_name} differs from the ground truth's "
                f"(attributes: {', '.join(sorted(differences))})",
                {"class": class_name, "differences": differences},
            )
    return TurnVerdict(True)


def response_check(
    model_results: Sequence[str], ground_truth_results: Sequence[str], turn: int
) -> TurnVerdict:
    """Every ground-truth result (with repeats) is among the model's results so far."""
    available = Counter(model_results)
    missing = []
    for item in ground_truth_results:
        if available[item] > 0:
            available[item] -= 1
        else:
            missing.append(item)
    if missing:
        return TurnVerdict(
            False,
            RESPONSE_MISMATCH,
            f"turn {turn}: {len(missing)} ground-truth result(s) never appeared among the "
            "agent's results so far",
            {"missing_items": missing},
        )
    return TurnVerdict(True)


def check_turn(
    *,
    turn: int,
    ground_truth_calls: Sequence[Any],
    model_acted: bool,
    model_instances: Mapping[str, Any],
    ground_truth_instances: Mapping[str, Any],
    model_results_so_far: Sequence[str],
    ground_truth_results: Sequence[str],
    strict: bool = False,
) -> TurnVerdict:
    """The verdict for user turn ``turn``, after both sides executed their calls."""
    if not ground_truth_calls:
        if strict:
            verdict = state_check(model_instances, ground_truth_instances)
            if not verdict.valid:
                return TurnVerdict(
                    False,
                    STATE_MISMATCH,
                    f"turn {turn} cannot be served (it has no ground truth), but the agent's "
                    f"calls changed the services: {verdict.message}",
                    verdict.details,
                )
        return TurnVerdict(
            True, checked=False, message="no ground truth for this turn: not checked"
        )
    if not model_acted:
        return TurnVerdict(
            False, EMPTY_TURN, f"turn {turn}: the request needed function calls and none was made"
        )
    verdict = state_check(model_instances, ground_truth_instances)
    if not verdict.valid:
        return verdict
    return response_check(model_results_so_far, ground_truth_results, turn)
