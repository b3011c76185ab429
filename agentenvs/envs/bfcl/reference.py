"""bfcl-eval's own decoders and checkers, loaded to compare the project's verdicts with.

The official checker modules import ``bfcl_eval.constants.model_config``, which imports
the client library of every model the leaderboard supports (they are not installed
here: bfcl-eval is installed without its dependencies, see docs/bfcl.md). This module
imports the official decoders (``default_decode_ast_prompting``,
``default_decode_execute_prompting``), the AST checker and the multi-turn checker with
that one module replaced by a table of two model configs, ``agentenvs-reference``
(names kept) and ``agentenvs-reference-underscore`` (``.`` shown as ``_``), and with
``BFCL_PROJECT_ROOT`` pointed at a temporary folder when unset (the package creates
result folders when imported). The official code itself is run unchanged.

:func:`official_single_turn` and :func:`official_multi_turn` give the leaderboard's
verdict for one entry, following the steps of its evaluation runner: decode the reply
(a failure fails an AST entry, and is "no call" for a relevance entry), check that the
output is a call list, then run the checker. :func:`official_multi_turn_run` runs the
official inference loop itself on a scripted model's replies, then the runner's own
multi-turn evaluation: what the step limit does is decided there, before the checker
(the loop and the runner also import ``overrides`` and ``python-dotenv``).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import importlib.util
import io
import itertools
import os
import sys
import tempfile
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentenvs.core.errors import MissingExtraError

__all__ = [
    "MODEL",
    "MODEL_UNDERSCORE",
    "OfficialVerdict",
    "available",
    "official",
    "official_multi_turn",
    "official_multi_turn_run",
    "official_single_turn",
]

MODEL = "agentenvs-reference"
MODEL_UNDERSCORE = "agentenvs-reference-underscore"
_CONFIG_MODULE = "bfcl_eval.constants.model_config"


@dataclass(frozen=True)
class OfficialVerdict:
    """The leaderboard's verdict: ``valid`` and its error type (None when valid)."""

    valid: bool
    error_type: str | None = None
    detail: Any = None


@dataclass(frozen=True)
class _ModelConfig:
    underscore_to_dot: bool


def available() -> bool:
    """Whether bfcl-eval and its checker dependencies can be loaded."""
    try:
        official()
    except MissingExtraError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def official() -> types.SimpleNamespace:
    """The official functions (loaded once); MissingExtraError without bfcl-eval."""
    try:
        found = importlib.util.find_spec("bfcl_eval") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingExtraError("bfcl-eval", "bfcl")
    os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp(prefix="agentenvs-bfcl-"))
    if _CONFIG_MODULE not in sys.modules:
        config = types.ModuleType(_CONFIG_MODULE)
        config.MODEL_CONFIG_MAPPING = {  # type: ignore[attr-defined]
            MODEL: _ModelConfig(underscore_to_dot=False),
            MODEL_UNDERSCORE: _ModelConfig(underscore_to_dot=True),
        }
        sys.modules[_CONFIG_MODULE] = config
    try:
        enums = importlib.import_module("bfcl_eval.constants.enums")
        ast_checker = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
        handler_utils = importlib.import_module("bfcl_eval.model_handler.utils")
        checks = importlib.import_module("bfcl_eval.utils")
        mt_checker = importlib.import_module(
            "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker"
        )
        mt_utils = importlib.import_module(
            "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"
        )
    except ImportError as exc:
        raise MissingExtraError(f"bfcl-eval's checker dependencies ({exc.name})", "bfcl") from exc
    return types.SimpleNamespace(
        Language=enums.Language,
        ReturnFormat=enums.ReturnFormat,
        ast_checker=ast_checker.ast_checker,
        decode_ast=handler_utils.default_decode_ast_prompting,
        decode_execute=handler_utils.default_decode_execute_prompting,
        is_function_calling_format_output=checks.is_function_calling_format_output,
        is_empty_output=checks.is_empty_output,
        is_empty_execute_response=mt_utils.is_empty_execute_response,
        multi_turn_checker=mt_checker.multi_turn_checker,
        multi_turn_globals=vars(mt_utils),
    )


def _language(category: str) -> tuple[Any, Any]:
    ref = official()
    if category.endswith("javascript"):
        return ref.Language.JAVASCRIPT, ref.ReturnFormat.JAVASCRIPT
    if category.endswith("java"):
        return ref.Language.JAVA, ref.ReturnFormat.JAVA
    return ref.Language.PYTHON, ref.ReturnFormat.PYTHON


def official_single_turn(
    reply: str,
    functions: Sequence[Mapping[str, Any]],
    ground_truth: Sequence[Mapping[str, Any]] | None,
    category: str,
    *,
    underscore_to_dot: bool = False,
) -> OfficialVerdict:
    """The leaderboard's verdict on a prompting model's ``reply`` to one entry."""
    ref = official()
    if "relevance" in category:  # irrelevance, live_irrelevance, live_relevance
        try:
            decoded = ref.decode_ast(reply, ref.ReturnFormat.PYTHON, False)
            has_call = not ref.is_empty_output(decoded)
        except Exception:  # noqa: BLE001 - the runner counts any decoding failure as no call
            has_call = False
        if "irrelevance" in category:
            if has_call:
                return OfficialVerdict(False, "irrelevance_error:decoder_success")
            return OfficialVerdict(True)
        if not has_call:
            return OfficialVerdict(False, "relevance_error:decoder_failed")
        return OfficialVerdict(True)
    language, return_format = _language(category)
    try:
        decoded = ref.decode_ast(reply, return_format, False)
    except Exception as exc:  # noqa: BLE001 - as the runner: a failed decoding fails
        return OfficialVerdict(False, "ast_decoder:decoder_failed", str(exc)[:200])
    if not ref.is_function_calling_format_output(decoded):
        return OfficialVerdict(False, "ast_decoder:decoder_wrong_output_format")
    result = ref.ast_checker(
        list(functions),
        decoded,
        list(ground_truth or []),
        language,
        category,
        MODEL_UNDERSCORE if underscore_to_dot else MODEL,
    )
    return OfficialVerdict(bool(result["valid"]), result.get("error_type"), result.get("error"))


_RUN = itertools.count()


def official_multi_turn(
    replies: Sequence[Sequence[str]],
    entry: Mapping[str, Any],
    ground_truth: Sequence[Sequence[str]],
) -> OfficialVerdict:
    """The leaderboard's verdict on a prompting model's replies to a multi-turn entry.

    ``replies[t]`` are the model's replies during user turn ``t``, in order; each is
    decoded as BFCL does (a reply that fails to decode, or holds no call, is skipped) and
    the decoded steps go to the official ``multi_turn_checker``. ``entry`` needs ``id``,
    ``initial_config`` and ``involved_classes``.
    """
    ref = official()
    decoded_turns: list[list[list[str]]] = []
    for turn in replies:
        steps = []
        for reply in turn:
            try:
                decoded = ref.decode_execute(reply, False)
            except Exception:  # noqa: BLE001 - the runner skips replies that do not decode
                continue
            if ref.is_empty_execute_response(decoded):
                continue
            steps.append(decoded)
        decoded_turns.append(steps)
    # the official executor keeps instances in its module's globals, keyed by model name
    # and entry id: a fresh model name per run keeps runs apart, and they are dropped after
    model = f"{MODEL}-{next(_RUN)}"
    store = ref.multi_turn_globals
    before = set(store)
    try:
        result = ref.multi_turn_checker(
            decoded_turns, [list(t) for t in ground_truth], dict(entry), entry["id"], model
        )
    finally:
        for name in set(store) - before:
            del store[name]
    return OfficialVerdict(bool(result["valid"]), result.get("error_type"))


#: what the scripted model says once a turn's replies run out (no call: the turn ends)
_END_OF_SCRIPT = "I have done what you asked."


@functools.lru_cache(maxsize=1)
def _official_runner() -> types.SimpleNamespace:
    """bfcl-eval's inference loop (``BaseHandler``) and evaluation runner, loaded once."""
    ref = official()
    try:
        base_handler = importlib.import_module("bfcl_eval.model_handler.base_handler")
        eval_runner = importlib.import_module("bfcl_eval.eval_checker.eval_runner")
    except ImportError as exc:
        raise MissingExtraError(
            f"bfcl-eval's inference loop dependencies ({exc.name})", "bfcl"
        ) from exc

    class ScriptedHandler(base_handler.BaseHandler):
        """A prompting model that says the given replies, turn by turn; a turn whose
        replies run out goes on with a message without calls (that ends it)."""

        def __init__(self, model_name: str, replies: Sequence[Sequence[str]]) -> None:
            super().__init__(model_name, 0.0, model_name, False)
            self._replies = [list(turn) for turn in replies]
            self._turn = 0

        def decode_execute(self, result: str, has_tool_call_tag: bool) -> list[str]:
            return ref.decode_execute(result, has_tool_call_tag)

        def _pre_query_processing_prompting(self, test_entry: dict) -> dict:
            return {}

        def add_first_turn_message_prompting(self, data: dict, message: list) -> dict:
            self._turn = 0
            return data

        def _add_next_turn_user_message_prompting(self, data: dict, message: list) -> dict:
            self._turn += 1
            return data

        def _query_prompting(self, data: dict) -> tuple[str, float]:
            turn = self._replies[self._turn] if self._turn < len(self._replies) else []
            return (turn.pop(0) if turn else _END_OF_SCRIPT), 0.0

        def _parse_query_response_prompting(self, api_response: Any) -> dict:
            return {"model_responses": api_response, "input_token": 0, "output_token": 0}

        def _add_assistant_message_prompting(self, data: dict, response: dict) -> dict:
            return data

        def _add_execution_results_prompting(
            self, data: dict, results: list, response: dict
        ) -> dict:
            return data

    return types.SimpleNamespace(
        handler=ScriptedHandler,
        evaluate=eval_runner._evaluate_single_multi_turn_entry,
    )


def official_multi_turn_run(
    replies: Sequence[Sequence[str]],
    entry: Mapping[str, Any],
    ground_truth: Sequence[Sequence[str]],
) -> OfficialVerdict:
    """The leaderboard's verdict on a prompting model that says ``replies``, found by
    running bfcl-eval's own inference loop and evaluation runner on them.

    Unlike :func:`official_multi_turn`, which hands the replies to the checker as they
    are, the replies go through ``BaseHandler.inference_multi_turn_prompting`` as a model's
    answers (``replies[t]`` during user turn ``t``): a reply that does not decode or holds
    no call ends the turn (later replies of that turn are never asked for), and a turn
    with more than ``MAXIMUM_STEP_LIMIT`` steps with calls is force-quit, which keeps that
    turn and asks for no later one. The runner's ``_evaluate_single_multi_turn_entry``
    then gives the verdict (a result with fewer turns than the ground truth fails as
    ``multi_turn:force_terminated``). ``entry`` needs ``id``, ``question``,
    ``initial_config`` and ``involved_classes`` (``missed_function`` for miss_func). The
    verdict's ``detail`` holds ``turns_played`` and the runner's ``error_message``.
    """
    ref = official()
    runner = _official_runner()
    model = f"{MODEL}-{next(_RUN)}"
    store = ref.multi_turn_globals
    before = set(store)
    test_entry = copy.deepcopy(dict(entry))
    try:
        handler = runner.handler(model, replies)
        with contextlib.redirect_stdout(io.StringIO()):  # the loop prints every step
            result, _ = handler.inference_multi_turn_prompting(test_entry, False, True)
        verdict = runner.evaluate(
            handler,
            entry["id"],
            result,
            [list(t) for t in ground_truth],
            copy.deepcopy(dict(entry)),
            model,
            entry["id"].rsplit("_", 1)[0],
        )
    finally:
        for name in set(store) - before:
            del store[name]
    error = verdict.get("error", {})
    detail = {"turns_played": len(result), "error_message": error.get("error_message")}
    return OfficialVerdict(bool(verdict["valid"]), error.get("error_type"), detail)
