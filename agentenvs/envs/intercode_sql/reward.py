"""InterCode-SQL's reward: multiset IoU of result rows, scaled by Kendall's tau of their order.

This follows InterCode's ``SqlEnv.get_reward`` step by step:

1. the agent's side must be a result set (a list of rows), else the reward is 0.0; a
   gold without a result set (a statement, or an error) counts as ``[]``;
2. rows are stringified (``str(tuple)`` of the driver's values) and compared as
   multisets: IoU = Σ of the Counter intersection ÷ Σ of the element-wise max; two
   empty results give the int 1;
3. when the intersection is non-empty, each side's *intersecting items* are taken in
   their original order (an item is kept only as many times as it is in the
   intersection, earliest occurrences first), and Kendall's tau-b between the two lists
   (scipy's ``kendalltau`` on strings: the i-th agent item is paired with the i-th gold
   item, strings ranked lexicographically) scales the IoU: ``round(tau * IoU, 2)``
   with tau a numpy float64 (numpy's rounding); a NaN tau (a single matching row, or all items tied) leaves the IoU as it is.

Reversed order therefore gives a negative reward. Kendall's tau is implemented here in
pure Python (O(n log n)) so the package does not need scipy. ``rules="normalized"``
is the project's mode that makes SQLite and MySQL results comparable (see
``intercode_reward``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

Rows = Sequence[Sequence[Any]]


def stringify_rows(rows: Rows) -> list[str]:
    """Each row as InterCode compares it: ``str`` of the row as a tuple."""
    return [str(tuple(row)) for row in rows]


def _dense_ranks(values: Sequence[Hashable]) -> list[int]:
    order = {v: i for i, v in enumerate(sorted(set(values)))}  # type: ignore[type-var]
    return [order[v] for v in values]


def _tie_pairs(values: Sequence[Any]) -> int:
    return sum(c * (c - 1) // 2 for c in Counter(values).values())


def _count_inversions(values: Sequence[int]) -> int:
    """Pairs i < j with values[i] > values[j] (a Fenwick tree over dense ranks)."""
    size = max(values, default=-1) + 1
    tree = [0] * (size + 1)
    inversions = 0
    seen = 0
    for v in values:
        # number already seen that are <= v
        i, not_greater = v + 1, 0
        while i > 0:
            not_greater += tree[i]
            i -= i & -i
        inversions += seen - not_greater
        i = v + 1
        while i <= size:
            tree[i] += 1
            i += i & -i
        seen += 1
    return inversions


def kendall_tau_b(x: Sequence[Hashable], y: Sequence[Hashable]) -> float:
    """Kendall's tau-b of paired sequences, with ``scipy.stats.kendalltau`` semantics.

    Values only need to be mutually comparable (numbers, or strings ranked by code
    point as numpy ranks them). Returns NaN for fewer than two pairs or when one side
    is entirely tied.
    """
    if len(x) != len(y):
        raise ValueError(f"kendall_tau_b needs sequences of one length, got {len(x)} and {len(y)}")
    n = len(x)
    if n < 2:
        return math.nan
    rx, ry = _dense_ranks(x), _dense_ranks(y)
    pairs = sorted(zip(rx, ry, strict=True))
    total = n * (n - 1) // 2
    x_ties = _tie_pairs(rx)
    y_ties = _tie_pairs(ry)
    joint_ties = _tie_pairs(pairs)
    # sorted by (x, y): a pair is discordant exactly where y decreases
    discordant = _count_inversions([p[1] for p in pairs])
    if x_ties == total or y_ties == total:
        return math.nan
    con_minus_dis = total - x_ties - y_ties + joint_ties - 2 * discordant
    # the same floating-point expression as scipy, so rounding agrees to the last bit
    tau = con_minus_dis / math.sqrt(total - x_ties) / math.sqrt(total - y_ties)
    return min(1.0, max(-1.0, tau))


def intersecting_items(items: Sequence[str], intersection: Counter[str]) -> list[str]:
    """``items`` in order, each kept at most as often as it is in ``intersection``."""
    left = Counter(intersection)
    kept = []
    for item in items:
        if left[item] > 0:
            left[item] -= 1
            kept.append(item)
    return kept


RULES = ("official", "iou", "normalized")


def intercode_reward(
    agent: Rows | None, gold: Rows | None, *, rules: str = "official"
) -> float | int:
    """The reward InterCode gives ``agent``'s result for a task whose gold result is ``gold``.

    ``None`` stands for "no result set": an error, a statement that returns no rows, or
    nothing run yet. The result is in [-1, 1].

    ``rules="official"`` is InterCode's ``SqlEnv.get_reward``, quirks included:

    - a gold with no result set (or a failing gold) counts as ``[]``, so an agent's
      empty result scores 1 against it; an agent without a result set scores 0.0;
    - two empty results give the *int* ``1``;
    - rows compare as ``str(tuple)`` of the driver's values (``(6.0,)`` is not ``(6,)``);
    - tau is a numpy float64, so ``round(tau * IoU, 2)`` rounds as numpy does
      (``0.975`` gives ``0.98``, where Python's ``round`` gives ``0.97``).

    ``rules="iou"``: the same without the sort-order scaling (the IoU alone, unrounded):
    the reward that scored some of InterCode's published trajectories (its GPT-4 runs,
    for one), recorded before the scaling was added.

    ``rules="normalized"`` (the project's comparable mode): values are first made
    canonical (``normalize_value``: ``6.0`` is ``6``, ``Decimal('2.50')`` is ``2.5``, dates
    are text), so SQLite and MySQL results of the same data compare equal; a gold without
    a result set scores 0.0 whatever the agent returns; a result that is not the gold's
    (as multisets, and in its order where tau counts) scores at most 0.99, where
    InterCode's rounding can give 1 (a superset of 250 rows with one extra: 0.996 → 1.0);
    the reward is always a float.
    """
    if rules not in RULES:
        raise ValueError(f"rules must be one of {RULES}, got {rules!r}")
    if agent is None:
        return 0.0
    if gold is None:
        if rules == "normalized":
            return 0.0
        gold = []
    if rules == "normalized":
        from agentenvs.envs.intercode_sql.backends.base import normalize_rows

        agent, gold = normalize_rows(agent), normalize_rows(gold)
    list_agent = stringify_rows(agent)
    list_gold = stringify_rows(gold)
    dist_agent, dist_gold = Counter(list_agent), Counter(list_gold)
    union = dist_agent | dist_gold
    if not union:
        return 1.0 if rules == "normalized" else 1
    intersection = dist_agent & dist_gold
    reward = sum(intersection.values()) * 1.0 / sum(union.values())
    if intersection and rules != "iou":
        agent_items = intersecting_items(list_agent, intersection)
        gold_items = intersecting_items(list_gold, intersection)
        tau = kendall_tau_b(agent_items, gold_items)
        if not math.isnan(tau):
            # numpy's rounding, as InterCode's tau is a numpy float64
            reward = float(round(np.float64(tau) * reward, 2))
    # the same rows in the same order (tau itself may come out a hair below 1)
    if rules == "normalized" and reward >= 1 and list_agent != list_gold:
        # InterCode's rounding pays 1 for 250 of 251 rows (0.996): only the answer does here
        reward = 0.99
    return float(reward)


def clip_score(reward: float) -> float:
    """The ``score`` info key: the reward clipped to [0, 1]."""
    return min(1.0, max(0.0, float(reward)))
