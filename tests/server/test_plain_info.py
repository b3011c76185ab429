"""A reply's info as the server writes it is ``json_safe``'s, whatever the values."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from agentenvs.integrations.common import json_safe
from agentenvs.server.app import _plain_info

INFOS = [
    {"turn": 1, "score": 0.5, "ok": True, "none": None, "text": "x", "at": (1, 2)},
    {"score": math.inf},
    {"score": -math.inf},
    {"score": math.nan},
    {"score": 1e308 * 10},
    {"score": -0.0, "tiny": 5e-324, "big": 1.7976931348623157e308},
    {"at": (1.0, math.nan)},
    {"at": [0.25, math.inf]},
    {1: "a non-text key"},
    {"n": np.float64(0.5)},
    {"n": np.int64(3)},
    {"nested": {"a": math.nan}},
]


@pytest.mark.parametrize("info", INFOS, ids=range(len(INFOS)))
def test_plain_info_writes_what_json_safe_writes(info: dict) -> None:
    got, want = _plain_info(info), json_safe(info)
    assert json.dumps(got, allow_nan=False) == json.dumps(want, allow_nan=False)
