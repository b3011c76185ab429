"""InterCode-SQL's reward: the odd cases, table-driven, and Kendall's tau against scipy."""

from __future__ import annotations

import datetime as dt
import math
import random
import warnings
from decimal import Decimal

import pytest

from agentenvs.envs.intercode_sql.backends.base import normalize_value
from agentenvs.envs.intercode_sql.reward import (
    clip_score,
    intercode_reward,
    intersecting_items,
    kendall_tau_b,
)

A, B, C, D = ("a",), ("b",), ("c",), ("d",)

# (name, agent rows, gold rows, expected reward)
CASES = [
    ("identical", [A, B, C], [A, B, C], 1.0),
    ("both empty", [], [], 1.0),
    ("agent empty", [], [A], 0.0),
    ("gold empty", [A], [], 0.0),
    ("agent error", None, [A], 0.0),
    ("gold error", [A], None, 0.0),
    ("both error", None, None, 0.0),
    ("reversed order is negative", [C, B, A], [A, B, C], -1.0),
    ("one swap of three", [B, A, C], [A, B, C], 0.33),
    ("single matching row: no order penalty", [A], [A, B], 0.5),
    ("single matching row among extras", [D, A], [A, B], 1 / 3),
    ("partial overlap, same order", [A, B, C], [A, B, D], 0.5),
    ("partial overlap, reversed", [B, A, C], [A, B, D], -0.5),
    ("same set, other multiplicity", [A, A, B], [A, B], 0.67),
    ("duplicates: earliest occurrences are the intersecting items", [B, A, A], [A, B], -0.67),
    ("all tied: tau is NaN, IoU stays", [A, A], [A, A], 1.0),
    ("rows compare as strings: 1 is not '1'", [(1,)], [("1",)], 0.0),
    ("NULLs match NULLs", [(None, 1)], [(None, 1)], 1.0),
    ("strings rank lexicographically: '(10,)' < '(9,)'", [(10,), (9,)], [(10,), (9,)], 1.0),
    ("disjoint", [A], [B], 0.0),
    ("wider rows differ", [("a", 1)], [A], 0.0),
]


@pytest.mark.parametrize(
    ("agent", "gold", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_reward_cases(agent, gold, expected) -> None:
    assert intercode_reward(agent, gold) == pytest.approx(expected)


def test_unrounded_iou_when_tau_is_nan() -> None:
    # InterCode rounds only when it scales by tau
    assert intercode_reward([D, A], [A, B]) == 1 / 3


def test_intersecting_items_keep_original_order_and_counts() -> None:
    from collections import Counter

    inter = Counter(["x", "y"])
    assert intersecting_items(["y", "z", "x", "x", "y"], inter) == ["y", "x"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Decimal("3.0000"), 3),
        (Decimal("2.5"), 2.5),
        (3.0, 3),
        (2.5, 2.5),
        (True, 1),
        (b"abc", "abc"),
        (dt.date(2020, 1, 2), "2020-01-02"),
        (dt.datetime(2020, 1, 2, 3, 4, 5), "2020-01-02 03:04:05"),
        (dt.timedelta(hours=1, minutes=2, seconds=3), "01:02:03"),
        (None, None),
        ("x", "x"),
        (7, 7),
    ],
)
def test_values_normalize_the_same_for_both_backends(value, expected) -> None:
    got = normalize_value(value)
    assert got == expected and type(got) is type(expected)


def test_clip_score() -> None:
    assert clip_score(-0.5) == 0.0 and clip_score(0.25) == 0.25 and clip_score(1.0) == 1.0


def test_kendall_tau_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats", reason="scipy is only used to cross-check")
    rng = random.Random(0)
    for _ in range(1500):
        n = rng.randint(0, 25)
        k = rng.randint(1, 6)
        x = [f"({rng.randint(0, k)},)" for _ in range(n)]
        y = [f"({rng.randint(0, k)},)" for _ in range(n)]
        ours = kendall_tau_b(x, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy warns about samples under 2
            theirs = stats.kendalltau(x, y, nan_policy="omit").statistic
        assert (math.isnan(ours) and math.isnan(theirs)) or ours == theirs, (x, y)


def test_kendall_tau_is_fast_on_big_results() -> None:
    n = 20_000
    x = list(range(n))
    assert kendall_tau_b(x, x) == pytest.approx(1.0)
    assert kendall_tau_b(x, x[::-1]) == pytest.approx(-1.0)


def test_kendall_tau_needs_equal_lengths() -> None:
    with pytest.raises(ValueError):
        kendall_tau_b([1, 2], [1])


def test_iou_rules_leave_the_sort_order_scaling_out() -> None:
    """``rules="iou"``: InterCode's reward before its Kendall-tau scaling (unrounded)."""
    from agentenvs.envs.intercode_sql.reward import intercode_reward

    ascending, descending = [(1,), (2,), (3,)], [(3,), (2,), (1,)]
    assert intercode_reward(descending, ascending, rules="official") == -1.0
    assert intercode_reward(descending, ascending, rules="iou") == 1.0
    nine_of_fourteen = [(i,) for i in range(9)] + [(100 + i,) for i in range(5)]
    assert intercode_reward(nine_of_fourteen, [(i,) for i in range(9)], rules="iou") == 9 / 14
    assert (
        intercode_reward([], [], rules="iou") == 1
        and intercode_reward(None, [], rules="iou") == 0.0
    )
