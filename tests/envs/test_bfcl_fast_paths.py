"""The BFCL env's fast paths decide exactly as the slow ones they stand in for."""

from __future__ import annotations

import copy
import sys
import unicodedata

import numpy as np
import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agentenvs.envs.bfcl.data import check_tool_schemas, plainly_valid_schema, task_tools
from agentenvs.envs.bfcl.env import BFCLEnv, unreadable


def test_unreadable_matches_unicode_categories_on_every_code_point() -> None:
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        expected = ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cs")
        assert unreadable(f"[f(a='{ch}')]") is expected, hex(code)
    assert unreadable("") and unreadable(" \n\t ") and not unreadable("[f()]")


def _tool_schemas() -> list[dict]:
    env = BFCLEnv()
    return [t["function"]["parameters"] for task in env.tasks.values() for t in task_tools(task)]


_ODD_VALUES = [None, 1, 1.5, True, "x", "strin", [], {}, ["string", "string"], ["a", 1], {"a": 1}]
_KEYS = [
    "type",
    "properties",
    "required",
    "description",
    "title",
    "enum",
    "default",
    "items",
    "additionalProperties",
    "minimum",
    "$ref",
]


def test_a_plainly_valid_schema_is_valid_and_others_keep_jsonschemas_verdict() -> None:
    rng = np.random.default_rng(0)
    schemas = _tool_schemas()
    assert schemas and all(plainly_valid_schema(s) for s in schemas)
    plain = 0
    for schema in schemas:
        for _ in range(4):
            mutant = copy.deepcopy(schema)
            node = mutant
            while isinstance(node, dict) and node.get("properties") and rng.random() < 0.6:
                props = node["properties"]
                node = props[list(props)[int(rng.integers(len(props)))]]
            if not isinstance(node, dict):
                continue
            node[_KEYS[int(rng.integers(len(_KEYS)))]] = copy.deepcopy(
                _ODD_VALUES[int(rng.integers(len(_ODD_VALUES)))]
            )
            try:
                Draft202012Validator.check_schema(mutant)
                valid = True
            except SchemaError:
                valid = False
            if plainly_valid_schema(mutant):
                plain += 1
                assert valid, mutant
            tool = [{"function": {"parameters": mutant}}]
            if valid:
                check_tool_schemas(tool)
            else:
                with pytest.raises(SchemaError):
                    check_tool_schemas(tool)
    assert plain > 50  # the mutants exercised the fast path, not only the fallback
