"""The project's reward against InterCode's own ``SqlEnv.get_reward`` (package ``intercode-bench``).

The official method is called as it is, on an ``SqlEnv`` built without its Docker
container: its cursor is a stand-in that hands it the gold side's outcome (rows, no result
set, or a gold that fails with mysql-connector's own error class), and its
``observation`` is the agent's side, as ``SqlEnv.exec_action`` leaves it. These tests
need the ``intercode`` extra; outside CI they skip when it is missing.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from decimal import Decimal
from typing import Any

import pytest

from agentenvs.envs.intercode_sql.reward import intercode_reward

sql_env = pytest.importorskip("intercode.envs.sql.sql_env")
mysql_errors = pytest.importorskip("mysql.connector.errors")

# scipy warns when InterCode hands kendalltau a single pair (its NaN case)
pytestmark = pytest.mark.filterwarnings("ignore:One or more sample arguments is too small")

NO_RESULT = object()  # a statement without a result set
FAILS = object()  # a gold query the server rejects


class GoldCursor:
    """What InterCode's cursor does when it runs the gold query, for one known outcome."""

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome
        self.description: Any = None

    def execute(self, sql: str) -> None:
        self.description = None
        if self.outcome is FAILS:
            raise mysql_errors.ProgrammingError(msg="Table 'x.y' doesn't exist", errno=1146)
        if self.outcome is not NO_RESULT:
            self.description = [("c",)]

    def fetchall(self) -> list:
        return list(self.outcome)


def official_reward(agent_obs: Any, gold: Any) -> Any:
    env = sql_env.SqlEnv.__new__(sql_env.SqlEnv)  # no container, no server
    env.logger = logging.getLogger("intercode-official")
    env.logger.disabled = True
    env.cur = GoldCursor(gold)
    env.gold = "SELECT ..."
    env.observation = agent_obs
    reward, _ = env.get_reward()
    return reward


def ours(agent_obs: Any, gold: Any, rules: str = "official") -> Any:
    agent_rows = agent_obs if isinstance(agent_obs, list) else None
    gold_rows = None if gold is NO_RESULT or gold is FAILS else gold
    return intercode_reward(agent_rows, gold_rows, rules=rules)


def same(a: Any, b: Any) -> bool:
    """Equal values, and the int 1 only where the other is the int 1 too."""
    return a == b and (type(a) is int) == (type(b) is int)


# ---------------------------------------------------------------------- seeded pairs
VALUES = [
    0,
    1,
    6,
    -3,
    377,
    6.0,
    377.0,
    -0.0,
    0.1,
    2.5,
    1e16,
    Decimal("6"),
    Decimal("2.50"),
    Decimal("3.0000"),
    "6",
    "Kyle",
    "kyle",
    "",
    "O'Brien",
    None,
    dt.date(2020, 1, 2),
    dt.timedelta(seconds=61),
]


def _row(rng: random.Random, width: int) -> tuple:
    return tuple(rng.choice(VALUES) for _ in range(width))


def _retype(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Decimal):
        return float(value)
    return value


def seeded_pair(rng: random.Random) -> tuple[Any, Any]:
    width = rng.randint(1, 3)
    gold: Any = [_row(rng, width) for _ in range(rng.choice([0, 1, 2, 3, 5, 8, 13, 40]))]
    if gold and rng.random() < 0.3:  # repeated rows
        gold += [rng.choice(gold) for _ in range(rng.randint(1, 4))]
    how = rng.choice(
        ["same", "shuffle", "reverse", "swap", "subset", "extra", "retype", "empty", "disjoint"]
    )
    agent: Any = list(gold)
    if how == "shuffle":
        rng.shuffle(agent)
    elif how == "reverse":
        agent.reverse()
    elif how == "swap" and len(agent) > 1:
        i, j = rng.sample(range(len(agent)), 2)
        agent[i], agent[j] = agent[j], agent[i]
    elif how == "subset":
        agent = [r for r in agent if rng.random() < 0.7]
    elif how == "extra":
        for _ in range(rng.randint(1, 3)):
            agent.insert(rng.randint(0, len(agent)), _row(rng, width))
    elif how == "retype":
        agent = [tuple(_retype(v) for v in r) for r in agent]
    elif how == "empty":
        agent = []
    elif how == "disjoint":
        agent = [_row(rng, width) for _ in range(rng.randint(0, 4))]
    roll = rng.random()
    if roll < 0.05:
        agent = None  # the last statement had no result set
    elif roll < 0.1:
        agent = "Error executing query: Unknown column 'x' in 'field list'"
    roll = rng.random()
    if roll < 0.04:
        gold = NO_RESULT
    elif roll < 0.08:
        gold = FAILS
    return agent, gold


def test_official_rules_agree_with_intercode_on_3000_seeded_pairs() -> None:
    rng = random.Random(11)
    pairs = [seeded_pair(rng) for _ in range(3000)]
    results = [
        (agent, gold, official_reward(agent, gold), ours(agent, gold)) for agent, gold in pairs
    ]
    disagree = [r for r in results if not same(r[2], r[3])]
    assert not disagree, f"{len(disagree)}/3000 differ, e.g. {disagree[:3]}"
    # the seeds reach every quirk below, not only the easy cases
    reached = {
        "gold without rows, agent []": any(
            (g is NO_RESULT or g is FAILS) and a == [] for a, g, _, _ in results
        ),
        "negative": any(off < 0 for _, _, off, _ in results),
        "int 1": any(type(off) is int for _, _, off, _ in results),
        "6.0 vs 6": any(
            ours(a, g) != ours(a, g, "normalized") for a, g, _, _ in results if isinstance(a, list)
        ),
        "partial credit": any(0 < off < 1 for _, _, off, _ in results),
    }
    assert all(reached.values()), reached


# ---------------------------------------------------------------------- the four known differences
def test_gold_without_rows_counts_as_empty() -> None:
    for gold in (NO_RESULT, FAILS):
        assert official_reward([], gold) == 1 == ours([], gold)
        assert official_reward([(1,)], gold) == 0.0 == ours([(1,)], gold)
        assert official_reward(None, gold) == 0.0 == ours(None, gold)
        # the comparable mode refuses to score against a gold without rows
        assert ours([], gold, "normalized") == 0.0


def test_rounding_is_numpys() -> None:
    gold = [(i,) for i in range(40)]
    agent = gold[:39]  # IoU 39/40 = 0.975, tau 1
    assert official_reward(agent, gold) == 0.98 == ours(agent, gold)
    assert ours(agent, gold, "normalized") == 0.98
    assert round(39 / 40, 2) == 0.97  # what Python's own round gives


def test_both_empty_is_the_int_one() -> None:
    official = official_reward([], [])
    assert official == 1 and type(official) is int
    assert type(ours([], [])) is int
    assert ours([], [], "normalized") == 1.0 and type(ours([], [], "normalized")) is float


def test_values_compare_as_the_driver_gives_them() -> None:
    agent, gold = [(6.0, 377.0)], [(6, 377)]
    assert official_reward(agent, gold) == 0.0 == ours(agent, gold)
    assert ours(agent, gold, "normalized") == 1.0
    agent, gold = [(Decimal("2.50"),)], [(2.5,)]
    assert official_reward(agent, gold) == 0.0 == ours(agent, gold)
    assert ours(agent, gold, "normalized") == 1.0
