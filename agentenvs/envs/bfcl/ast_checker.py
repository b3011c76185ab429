"""BFCL's AST checker: is a decoded list of calls an acceptable answer to a task?

Written from the official checker's rules (bfcl-eval, ``eval_checker/ast_eval``), with
the same verdicts and error-type names, including its odd corners:

Dispatch by category name: ``"parallel"`` in it → the counts must match, then each
ground-truth call takes the first still-unmatched model call that passes it (greedy,
any order); else ``"multiple"`` → exactly one call, checked against the doc of the
expected function; otherwise exactly one call, checked against the *first* doc.

Per call: the name must equal the doc's name; every ``required`` parameter must be
given; every given parameter must be in the doc and in the ground truth; a
ground-truth parameter left out must list ``""`` among its acceptable values.

Per value, by the doc's type (Python names; Java/JS values must be strings and are
first converted, see :mod:`agentenvs.envs.bfcl.convert`):

- ``tuple`` values become lists where the doc says ``tuple``; an int is accepted (as a
  float) where the doc says ``float`` (Python only), never a float for an int.
- The type must match exactly (``type(v) is T``: ``True`` is not an int). Arrays and
  tuples also check their elements one level deep against ``items.type``, each element
  against one acceptable list (any one; ``""`` among the acceptable values lets any
  elements through), without the int→float allowance.
- "Variable" rule: when the ground truth's values have another type than the doc's
  (a variable name written as a string), a value of the ground truth's type passes
  the type check, and then only plain membership is checked.
- Strings: spaces and ``,./-_*^`` removed, lowercased, ``'`` → ``"``, then membership.
- Lists: string elements normalized; the list must equal one acceptable list, in order.
- Dicts (one level): every key must be in the acceptable dict with a value among its
  acceptable values (strings normalized); an acceptable key may be missing only if
  its values list ``""``. A list of dicts: same length and order as one acceptable list.
- Anything else: ``value in acceptable``.

Relevance categories: ``irrelevance``/``live_irrelevance`` pass when the reply holds no
call (a reply that does not decode counts as none), ``live_relevance`` when it holds any.

``strict=True`` (the envs' default rules) closes the leniencies of those rules that pay a
reply which does not answer the task; everything else is as above:

- irrelevance: a reply that does not decode but writes a call to one of the functions
  somewhere in it (a fenced block, a call inside prose, a ``"name"`` of a JSON call)
  fails, as a reply that decodes into calls does (officially it counts as no call);
- live_relevance: every call must be one a doc allows (a listed name, the required
  parameters, no unknown one, values of the doc's types); officially any call passes,
  ``[made_up()]`` included;
- values: a boolean never equals a number (officially ``True`` passes for ``1`` inside
  dicts and lists), and a list must be one of the acceptable lists (officially ``[]``
  passes where ``""`` marks the parameter optional, and a string's characters where the
  answer is that string).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentenvs.envs.bfcl.convert import JAVA_TYPES, JS_TYPES, java_value, js_value
from agentenvs.envs.bfcl.decode import Call, DecodeError, decode_calls, surely_not_calls

__all__ = [
    "PYTHON_TYPES",
    "UnsupportedDocError",
    "Verdict",
    "check_call_against_docs",
    "check_calls",
    "check_function_call",
    "check_relevance",
    "check_reply",
    "is_relevance_category",
    "language_of",
    "normalize_string",
    "written_call",
]

#: BFCL's Python type names and the Python type a value must have
PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
_NESTED_PYTHON = ("array", "tuple")
_NESTED_CONVERTED = ("Array", "ArrayList", "array")

RELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")


class UnsupportedDocError(ValueError):
    """A function doc the checker cannot read (unknown type, array without ``items``)."""


@dataclass(frozen=True)
class Verdict:
    """The checker's answer: ``valid``, an official-style ``error_type`` and messages."""

    valid: bool
    error_type: str = ""
    errors: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.valid

    def as_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "error_type": self.error_type, "errors": list(self.errors)}


_OK = Verdict(True)


def _fail(error_type: str, *errors: str) -> Verdict:
    return Verdict(False, error_type, list(errors))


def language_of(category: str) -> str:
    """``"java"``, ``"javascript"`` or ``"python"``, from the category name."""
    language = _LANGUAGE_OF.get(category)
    if language is None:
        if category.endswith("javascript"):
            language = "javascript"
        elif category.endswith("java"):
            language = "java"
        else:
            language = "python"
        if len(_LANGUAGE_OF) < 1024:  # categories are few; a bound for odd callers
            _LANGUAGE_OF[category] = language
    return language


#: ``language_of`` memo (category -> language), asked several times per reply graded
_LANGUAGE_OF: dict[str, str] = {}


def is_relevance_category(category: str) -> bool:
    return "irrelevance" in category or "relevance" in category


_NORMALIZE = re.compile(r"[ ,./\-_*^]")


def normalize_string(text: str) -> str:
    """Remove spaces and ``,./-_*^``, lowercase, and turn ``'`` into ``"``."""
    return _NORMALIZE.sub("", text).lower().replace("'", '"')


# ------------------------------------------------------------------------- entry points
def check_reply(
    text: str,
    functions: Sequence[Mapping[str, Any]],
    ground_truth: Sequence[Mapping[str, Any]] | None,
    category: str,
    *,
    underscore_to_dot: bool = False,
    strict: bool = False,
) -> Verdict:
    """Decode ``text`` and check it, as the official runner does for one entry
    (``strict``: with the leniencies listed in the module doc closed)."""
    relevance = is_relevance_category(category)
    language = language_of(category)
    try:
        if relevance and surely_not_calls(text, language):
            # prose: no call, told without a parse (a relevance verdict needs no message)
            raise DecodeError("not function-call syntax")
        calls = decode_calls(text, language=language, strict=strict)
    except DecodeError as exc:
        if relevance:
            return check_relevance(
                None,
                category,
                text=text,
                functions=functions,
                strict=strict,
                underscore_to_dot=underscore_to_dot,
            )
        return _fail("ast_decoder:decoder_failed", f"Failed to decode the reply: {exc}")
    if relevance:
        return check_relevance(
            calls, category, text=text, functions=functions, strict=strict,
            underscore_to_dot=underscore_to_dot,
        )  # fmt: skip
    return check_calls(
        functions,
        calls,
        ground_truth or [],
        category,
        underscore_to_dot=underscore_to_dot,
        strict=strict,
    )


def check_relevance(
    calls: Sequence[Call] | None,
    category: str,
    *,
    text: str = "",
    functions: Sequence[Mapping[str, Any]] = (),
    strict: bool = False,
    underscore_to_dot: bool = False,
) -> Verdict:
    """``calls`` is ``None`` when the reply did not decode; an empty list is no call too.

    ``strict`` also reads ``text`` (irrelevance: a call to one of ``functions`` written
    anywhere in it fails) and checks live_relevance calls against ``functions``.
    """
    has_call = bool(calls)
    if "irrelevance" in category:
        if has_call:
            return _fail(
                "irrelevance_error:decoder_success",
                "The reply holds a function call where none should be made.",
            )
        if strict:
            written = written_call(text, functions, underscore_to_dot=underscore_to_dot)
            if written is not None:
                return _fail(
                    "irrelevance_error:call_in_text",
                    f"The reply writes a call to {written!r} where none should be made.",
                )
        return _OK
    if not has_call:
        return _fail(
            "relevance_error:decoder_failed", "The reply holds no function call where one is due."
        )
    if strict:
        assert calls is not None
        for i, call in enumerate(calls):
            verdict = check_call_against_docs(functions, call, underscore_to_dot=underscore_to_dot)
            if not verdict.valid:
                return _fail(verdict.error_type, f"call {i}: {'; '.join(verdict.errors)}")
    return _OK


def _shown(name: str, underscore_to_dot: bool) -> str:
    return name.replace(".", "_") if underscore_to_dot else name


def written_call(
    text: str, functions: Sequence[Mapping[str, Any]], *, underscore_to_dot: bool = False
) -> str | None:
    """The name of a function of ``functions`` that ``text`` writes a call to (``name(``,
    or a JSON call's ``"name": "name"``), anywhere in it; None when it writes none."""
    for doc in functions:
        name = str(doc.get("name", ""))
        for shown in {name, _shown(name, True)} if underscore_to_dot else {name}:
            if not shown:
                continue
            quoted = re.escape(shown)
            call = rf"(?<![\w.]){quoted}\s*\("
            json_name = rf"[\"']name[\"']\s*:\s*[\"']{quoted}[\"']"
            if re.search(call, text) or re.search(json_name, text):
                return shown
    return None


def check_call_against_docs(
    functions: Sequence[Mapping[str, Any]], call: Call, *, underscore_to_dot: bool = False
) -> Verdict:
    """Whether ``call`` is one the docs allow: a listed name, every required parameter,
    no unknown one, and each value of its parameter's type (an int for a float too)."""
    docs = {_shown(str(d.get("name", "")), underscore_to_dot): d for d in functions}
    doc = docs.get(call.name)
    if doc is None:
        return _fail(
            "relevance_error:unknown_function", f"{call.name!r} is not one of the functions."
        )
    params = doc.get("parameters", {})
    props: Mapping[str, Any] = params.get("properties", {})
    for param in params.get("required", []):
        if param not in call.args:
            return _fail(
                "relevance_error:missing_required", f"Required parameter {param!r} is missing."
            )
    for param, value in call.args.items():
        if param not in props:
            return _fail("relevance_error:unexpected_param", f"Unexpected parameter {param!r}.")
        expected = PYTHON_TYPES.get(props[param].get("type"))
        if expected is float and type(value) is int:
            continue
        if expected is list and type(value) is tuple:
            continue
        if expected is not None and type(value) is not expected:
            return _fail(
                "relevance_error:type_error",
                f"Parameter {param!r} should be of type {props[param].get('type')}, got "
                f"{type(value).__name__}.",
            )
    return _OK


def check_calls(
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Call],
    ground_truth: Sequence[Mapping[str, Any]],
    category: str,
    *,
    underscore_to_dot: bool = False,
    strict: bool = False,
) -> Verdict:
    """The AST check of decoded ``calls`` for one entry of a non-relevance category."""
    language = language_of(category)
    if "parallel" in category:
        return _check_parallel(functions, calls, ground_truth, language, underscore_to_dot, strict)
    if "multiple" in category:
        if len(calls) != len(ground_truth):
            return _fail(
                "multiple_function_checker:wrong_count",
                f"Expected {len(ground_truth)} call(s), got {len(calls)}.",
            )
        expected = _expected_name(ground_truth[0])
        return check_function_call(
            _find_doc(functions, expected),
            calls[0],
            ground_truth[0],
            language,
            underscore_to_dot=underscore_to_dot,
            strict=strict,
        )
    if len(calls) != 1:
        return _fail("simple_function_checker:wrong_count", f"Expected 1 call, got {len(calls)}.")
    return check_function_call(
        functions[0],
        calls[0],
        ground_truth[0],
        language,
        underscore_to_dot=underscore_to_dot,
        strict=strict,
    )


def _expected_name(answer: Mapping[str, Any]) -> str:
    return next(iter(answer))


def _find_doc(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for doc in functions:
        if doc.get("name") == name:
            return doc
    raise UnsupportedDocError(f"no function doc named {name!r} for the ground truth")


def _check_parallel(
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Call],
    ground_truth: Sequence[Mapping[str, Any]],
    language: str,
    underscore_to_dot: bool,
    strict: bool = False,
) -> Verdict:
    if len(calls) != len(ground_truth):
        return _fail(
            "parallel_function_checker_no_order:wrong_count",
            f"Expected {len(ground_truth)} calls, got {len(calls)}.",
        )
    matched: set[int] = set()
    for i, answer in enumerate(ground_truth):
        doc = _find_doc(functions, _expected_name(answer))
        misses: list[str] = []
        for j, call in enumerate(calls):
            if j in matched:
                continue
            verdict = check_function_call(
                doc, call, answer, language, underscore_to_dot=underscore_to_dot, strict=strict
            )
            if verdict.valid:
                matched.add(j)
                break
            misses.append(f"call {j}: {verdict.error_type}: {'; '.join(verdict.errors)}")
        else:
            left = [j for j in range(len(calls)) if j not in matched]
            return _fail(
                "parallel_function_checker_no_order:cannot_find_match",
                f"No call among {left} matches expected call {i} ({_expected_name(answer)}).",
                *misses,
            )
    return _OK


# ------------------------------------------------------------------------- one call
def check_function_call(
    doc: Mapping[str, Any],
    call: Call,
    answer: Mapping[str, Any],
    language: str = "python",
    *,
    underscore_to_dot: bool = False,
    strict: bool = False,
) -> Verdict:
    """Check one call against one doc and one ground-truth call ``{name: {param: [ok]}}``."""
    accepted: Mapping[str, list[Any]] = next(iter(answer.values()))
    name = str(doc["name"])
    if underscore_to_dot and "." in name:
        # the model was shown names with "_" for "." (tool APIs refuse dots)
        name = name.replace(".", "_")
    params_doc: Mapping[str, Any] = doc["parameters"]["properties"]
    required: Sequence[str] = doc["parameters"].get("required", [])
    if type(call) is Call:
        call_name, args = call.name, call.args
    else:
        call_name, args = call
    if call_name != name:
        return _fail(
            "simple_function_checker:wrong_func_name",
            f"Expected a call to {name!r}, got {call_name!r}.",
        )
    for param in required:
        if param not in args:
            return _fail(
                "simple_function_checker:missing_required",
                f"Required parameter {param!r} is missing.",
            )
    for param, value in args.items():
        if param not in params_doc or param not in accepted:
            return _fail(
                "simple_function_checker:unexpected_param", f"Unexpected parameter {param!r}."
            )
        verdict = _check_param(param, value, params_doc[param], accepted[param], language, strict)
        if not verdict.valid:
            return verdict
    for param, ok_values in accepted.items():
        if param not in args and "" not in ok_values:
            return _fail(
                "simple_function_checker:missing_optional",
                f"Parameter {param!r} was left out but the answer needs it.",
            )
    return _OK


def _types_for(language: str) -> dict[str, type]:
    return _TYPES_BY_LANGUAGE.get(language, PYTHON_TYPES)


_TYPES_BY_LANGUAGE = {"java": JAVA_TYPES, "javascript": JS_TYPES}


def _doc_type(types: Mapping[str, type], type_name: Any, param: str) -> type:
    try:
        return types[type_name]
    except (KeyError, TypeError):
        raise UnsupportedDocError(f"parameter {param!r}: unknown type {type_name!r}") from None


def _item_type_name(spec: Mapping[str, Any], param: str) -> str:
    items = spec.get("items")
    if not isinstance(items, Mapping) or "type" not in items:
        raise UnsupportedDocError(f"parameter {param!r}: an array needs items.type")
    return items["type"]


def _check_param(
    param: str,
    value: Any,
    spec: Mapping[str, Any],
    accepted: list[Any],
    language: str,
    strict: bool = False,
) -> Verdict:
    type_name = spec.get("type")
    types = _TYPES_BY_LANGUAGE.get(language, PYTHON_TYPES)
    try:
        expected = types[type_name]
    except (KeyError, TypeError):
        expected = _doc_type(types, type_name, param)  # raises, saying why
    item_type: type | None = None
    if language in ("java", "javascript"):
        if type(value) is not str:
            return _fail(
                f"type_error:{'java' if language == 'java' else 'js'}",
                f"Parameter {param!r} must be a string of {language} source, got "
                f"{type(value).__name__}: {value!r}.",
            )
        convert = java_value if language == "java" else js_value
        try:
            if type_name in _NESTED_CONVERTED:
                item_name = _item_type_name(spec, param)
                item_type = _doc_type(types, item_name, param)
                value = convert(value, type_name, item_name)
            else:
                value = convert(value, type_name)
        except (ValueError, OverflowError, RecursionError):
            pass  # the text stays a string and fails the checks below
    else:
        if type_name in _NESTED_PYTHON:
            item_type = _doc_type(types, _item_type_name(spec, param), param)
        if type_name == "tuple" and type(value) is tuple:
            value = list(value)
        if type_name == "float" and type(value) is int:
            try:
                value = float(value)
            except OverflowError:  # an int beyond float's range stays an int (a type error)
                pass

    type_verdict, is_variable = _check_type(param, value, accepted, type_name, expected, item_type)
    if not type_verdict.valid:
        return type_verdict
    if not is_variable:
        if expected is dict:
            return _check_dict(param, value, accepted, strict)
        if expected is list and item_type is dict:
            return _check_list_of_dicts(param, value, accepted, strict)
        if expected is str:
            return _check_string(param, value, accepted)
        if expected is list:
            return _check_list(param, value, accepted, strict)
    if not _contains(accepted, value, strict):
        return _fail(
            "value_error:others",
            f"Invalid value for {param!r}: {value!r}; expected one of {accepted}.",
        )
    return _OK


def _contains(container: Any, value: Any, strict: bool = False) -> bool:
    try:
        if strict:
            return any(_same(value, ok) for ok in container)
        return value in container
    except TypeError:
        return False


def _same(a: Any, b: Any) -> bool:
    """``a == b``, except that a boolean equals only a boolean, at any depth."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    return bool(a == b)


def _answer_type(accepted: Any) -> type | None:
    """The type of the first acceptable value that is not the "may be omitted" marker."""
    for ok in accepted if isinstance(accepted, list | tuple) else ():
        if ok != "":
            return type(ok)
    return None


def _check_type(
    param: str,
    value: Any,
    accepted: Any,
    type_name: Any,
    expected: type,
    item_type: type | None,
) -> tuple[Verdict, bool]:
    """(verdict, is_variable); one level of element checks for arrays."""
    answer_type = _answer_type(accepted)
    is_variable = answer_type is not None and answer_type is not expected
    nested_failed = False
    if type(value) is expected:
        if item_type is None:
            return _OK, is_variable
        for ok in accepted:
            # a non-list acceptable value (the "" marker) puts no constraint on elements
            if type(ok) is not list or all(
                _check_type(param, item, ok, item_type.__name__, item_type, None)[0].valid
                for item in value
            ):
                return _OK, is_variable
        nested_failed = True
    if answer_type is not None and type(value) is answer_type:
        if nested_failed:
            return _nested_failure(param, value, type_name, item_type), True
        return _OK, True
    errors = []
    if nested_failed:
        errors = _nested_failure(param, value, type_name, item_type).errors
    errors.append(
        f"Parameter {param!r} should be of type {type_name}, got {type(value).__name__}: {value!r}."
    )
    return Verdict(False, "type_error:simple", errors), is_variable


def _nested_failure(param: str, value: Any, type_name: Any, item_type: type | None) -> Verdict:
    inner = item_type.__name__ if item_type else "?"
    return _fail(
        "type_error:nested",
        f"Elements of {param!r} should be {inner} (in a {type_name}), got {value!r}.",
    )


def _normalized(values: Any) -> list[Any]:
    """Acceptable values with strings normalized (any iterable, as officially indexed)."""
    if not isinstance(values, list | tuple | str):
        values = [values]
    return [normalize_string(v) if type(v) is str else v for v in values]


def _check_string(param: str, value: str, accepted: list[Any]) -> Verdict:
    if value in accepted:  # as written: equal once normalized too (a str equals only a str)
        return _OK
    ok = [normalize_string(v) for v in accepted if type(v) is str]
    if normalize_string(value) not in ok:
        return _fail(
            "value_error:string",
            f"Invalid value for {param!r}: {value!r}; expected one of {accepted} "
            "(spaces, ',./-_*^' and case ignored).",
        )
    return _OK


def _check_list(param: str, value: list[Any], accepted: list[Any], strict: bool = False) -> Verdict:
    mine = _normalized(value)
    # officially a string among the acceptable values (the "" marker too) is a list of
    # its characters; strict rules compare with the acceptable lists only
    kinds = list | tuple if strict else list | tuple | str
    candidates = [_normalized(ok) for ok in accepted if isinstance(ok, kinds)]
    if not _contains(candidates, mine, strict):
        return _fail(
            "value_error:list/tuple",
            f"Invalid value for {param!r}: {value!r}; expected one of {accepted} (in order).",
        )
    return _OK


def _check_dict(param: str, value: Any, accepted: list[Any], strict: bool = False) -> Verdict:
    verdict = _fail("dict_checker:unclear", f"No acceptable dict for {param!r}.")
    for ok in accepted:
        if ok == "":
            continue
        verdict = _match_dict(value, ok, strict)
        if verdict.valid:
            return _OK
    return verdict


def _match_dict(value: Any, ok: Any, strict: bool = False) -> Verdict:
    if not isinstance(value, dict) or not isinstance(ok, Mapping):
        return _fail("dict_checker:unclear", f"Cannot compare {value!r} with {ok!r}.")
    for key, item in value.items():
        if key not in ok:
            return _fail("value_error:dict_key", f"Unexpected dict key {key!r}.")
        mine = normalize_string(item) if type(item) is str else item
        if not _contains(_normalized(ok[key]), mine, strict):
            return _fail(
                "value_error:dict_value",
                f"Invalid value for dict key {key!r}: {item!r}; expected one of {ok[key]}.",
            )
    for key, ok_values in ok.items():
        if key not in value and not _contains(ok_values, ""):
            return _fail("value_error:dict_key", f"Dict key {key!r} is missing.")
    return _OK


def _check_list_of_dicts(
    param: str, value: list[Any], accepted: list[Any], strict: bool = False
) -> Verdict:
    verdict = _fail("list_dict_checker:unclear", f"No acceptable list of dicts for {param!r}.")
    for ok in accepted:
        if not isinstance(ok, list | tuple | str) or len(value) != len(ok):
            verdict = _fail(
                "value_error:list_dict_count",
                f"{param!r} has {len(value)} dicts, the answer {len(ok) if isinstance(ok, list | tuple | str) else '?'}.",
            )
            continue
        for mine, expected in zip(value, ok, strict=True):
            verdict = _match_dict(mine, expected, strict)
            if not verdict.valid:
                break
        else:
            return _OK
    return verdict
