"""The FrozenLake model and oracle against Gymnasium's own FrozenLake-v1 transition table,
value iteration written here from that table, and Monte Carlo runs of the env itself."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLake

from agentenvs.envs.frozenlake.env import FrozenLakeEnv, format_action
from agentenvs.envs.frozenlake.maps import FIXED_MAPS, generate_solvable_map
from agentenvs.envs.frozenlake.oracle import lake_model, oracle_for

MAPS = {
    "4x4": FIXED_MAPS["4x4"],
    "8x8": FIXED_MAPS["8x8"],
    "gen5": generate_solvable_map(5, 0.75, seed=11),
    "gen7": generate_solvable_map(7, 0.8, seed=4),
}
DYNAMICS = [(True, 1.0 / 3.0), (False, 1.0 / 3.0), (True, 0.75)]
CASES = [(m, s, r) for m in MAPS for s, r in DYNAMICS]


def gym_table(rows: tuple[str, ...], slippery: bool, rate: float) -> dict:
    return GymFrozenLake(desc=list(rows), is_slippery=slippery, success_rate=rate).P


def gym_finite_values(P: dict, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """V_t and Q_t for t = 0..horizon, straight from Gymnasium's (prob, s', r, done) lists."""
    n = len(P)
    v = np.zeros((horizon + 1, n))
    q = np.zeros((horizon + 1, n, 4))
    for t in range(1, horizon + 1):
        for s in range(n):
            for a in range(4):
                q[t, s, a] = sum(
                    p * (r + (0.0 if done else v[t - 1, s2])) for p, s2, r, done in P[s][a]
                )
            v[t, s] = q[t, s].max()
    return v, q


@pytest.mark.parametrize(("name", "slippery", "rate"), CASES)
def test_model_matches_gymnasium_transition_table(name: str, slippery: bool, rate: float) -> None:
    rows = MAPS[name]
    P = gym_table(rows, slippery, rate)
    model = lake_model(rows, slippery, rate)
    for s in range(model.n_states):
        for a in range(4):
            if model.is_terminal[s]:
                assert P[s][a] == [(1.0, s, 0, True)]
                continue
            theirs: dict[int, float] = {}
            for p, s2, r, done in P[s][a]:
                theirs[s2] = theirs.get(s2, 0.0) + p
                assert done == bool(model.is_terminal[s2])
                assert r == float(model.is_goal[s2])
            ours: dict[int, float] = {}
            for k in range(3):
                if model.prob[s, a, k] > 0:
                    s2 = int(model.next_state[s, a, k])
                    ours[s2] = ours.get(s2, 0.0) + float(model.prob[s, a, k])
            assert ours.keys() == theirs.keys(), (s, a)
            for s2 in ours:
                assert ours[s2] == pytest.approx(theirs[s2], abs=1e-15)


@pytest.mark.parametrize(("name", "slippery", "rate"), CASES)
def test_env_follows_gymnasium_step_for_step(name: str, slippery: bool, rate: float) -> None:
    """Same seed, same actions: the same cells, rewards and ends as FrozenLake-v1 itself."""
    rows = MAPS[name]
    theirs = GymFrozenLake(desc=list(rows), is_slippery=slippery, success_rate=rate)
    ours = FrozenLakeEnv(desc=rows, is_slippery=slippery, success_rate=rate, max_turns=10_000)
    actions = np.random.default_rng(5).integers(0, 4, 600)
    episode, steps = 0, 0
    s, _ = theirs.reset(seed=episode)
    ours.reset(seed=episode)
    for a in actions:
        s, r, done, _, _ = theirs.step(int(a))
        _, reward, terminated, truncated, info = ours.step(format_action(int(a)))
        row, col = info["position"]
        assert row * len(rows[0]) + col == s, f"step {steps} of episode {episode}"
        assert (reward, terminated, truncated) == (float(r), done, False)
        steps += 1
        if done:
            episode += 1
            theirs.reset(seed=episode)
            ours.reset(seed=episode)
    assert episode >= 3  # several episodes, so resets are covered too


@pytest.mark.parametrize(("name", "slippery", "rate"), CASES)
def test_finite_horizon_dp_is_exact(name: str, slippery: bool, rate: float) -> None:
    horizon = 25
    v_ref, q_ref = gym_finite_values(gym_table(MAPS[name], slippery, rate), horizon)
    oracle = oracle_for(MAPS[name], slippery, rate)
    for t in range(horizon + 1):
        np.testing.assert_allclose(oracle.v_table(t), v_ref[t], rtol=0, atol=1e-12)
        np.testing.assert_allclose(oracle.q_table(t), q_ref[t], rtol=0, atol=1e-12)


def test_values_are_probabilities_increasing_with_the_budget() -> None:
    oracle = oracle_for(MAPS["8x8"])
    v = np.array([oracle.v_table(t) for t in range(60)])
    assert (v >= 0).all() and (v <= 1).all()
    assert (np.diff(v, axis=0) >= -1e-15).all()
    assert v[13, 0] == 0.0 and v[14, 0] > 0.0  # the shortest path is 14 moves


def test_infinite_horizon_values_of_gymnasiums_maps() -> None:
    # 4x4 slippery: the best probability of ever reaching G is exactly 14/17
    oracle = oracle_for(FIXED_MAPS["4x4"])
    assert abs(oracle.infinite_values()[0] - 14 / 17) < 1e-12
    # Gymnasium's "optimum = 0.74" is this value under FrozenLake-v1's 100-step limit
    assert abs(oracle.value(0, 100) - 0.7441902878292689) < 1e-12
    # and "optimum = 0.91" for 8x8 under its 200-step limit
    assert abs(oracle_for(FIXED_MAPS["8x8"]).value(0, 200) - 0.9132201502016288) < 1e-12
    # finite horizons converge to the limit
    assert abs(oracle.value(0, 2000) - oracle.infinite_values()[0]) < 1e-12


def test_infinite_horizon_satisfies_bellman_optimality() -> None:
    for rows in MAPS.values():
        oracle = oracle_for(rows)
        v = oracle.infinite_values()
        np.testing.assert_allclose(oracle.infinite_q().max(axis=1), v, atol=1e-13)


def test_sequence_value_of_one_move_is_q() -> None:
    oracle = oracle_for(MAPS["gen5"])
    for s in range(oracle.model.n_states):
        for a in range(4):
            assert oracle.sequence_value(s, [a], 6) == pytest.approx(
                oracle.q_table(7)[s, a], abs=1e-13
            )


def test_oracles_are_cached() -> None:
    assert oracle_for(MAPS["4x4"]) is oracle_for(MAPS["4x4"])
    assert oracle_for(MAPS["4x4"], True, 0.5) is not oracle_for(MAPS["4x4"])


def binomial_ok(wins: int, n: int, p: float) -> bool:
    """Inside 4.5 standard deviations (a false alarm about once in 150,000 runs)."""
    return abs(wins / n - p) < 4.5 * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize(
    ("name", "slippery", "rate", "turns"),
    [
        ("4x4", True, 1 / 3, 20),
        ("8x8", True, 1 / 3, 60),
        ("gen5", True, 0.75, 10),
        ("gen7", True, 0.6, 14),
    ],
)
def test_oracle_policy_simulated_on_gymnasium_table(
    name: str, slippery: bool, rate: float, turns: int
) -> None:
    """100k episodes of the oracle's argmax policy, sampled from Gymnasium's own table
    (vectorized): the success rate is V_T(start) within a tight binomial interval."""
    P = gym_table(MAPS[name], slippery, rate)
    n_states = len(P)
    nxt = np.zeros((n_states, 4, 3), dtype=np.int64)
    cum = np.ones((n_states, 4, 3))
    goal = np.array(["".join(MAPS[name])[s] == "G" for s in range(n_states)])
    done_cell = np.array([P[s][0][0][3] and P[s][0][0][1] == s for s in range(n_states)])
    for s in range(n_states):
        for a in range(4):
            probs = [t[0] for t in P[s][a]]
            nxt[s, a, : len(probs)] = [t[1] for t in P[s][a]]
            cum[s, a, : len(probs)] = np.cumsum(probs)
    oracle = oracle_for(MAPS[name], slippery, rate)
    n = 100_000
    rng = np.random.default_rng(99)
    pos = np.zeros(n, dtype=np.int64)
    for left in range(turns, 0, -1):
        act = oracle.q_table(left).argmax(axis=1)[pos]
        k = (rng.random(n)[:, None] >= cum[pos, act]).sum(axis=1).clip(max=2)
        live = ~done_cell[pos] & ~goal[pos]
        pos = np.where(live, nxt[pos, act, k], pos)
    wins = int(goal[pos].sum())
    expected = oracle.value(0, turns)
    assert 0.05 < expected < 0.97
    assert binomial_ok(wins, n, expected), (wins / n, expected)


@pytest.mark.parametrize(("name", "rate", "turns"), [("4x4", 1 / 3, 16), ("gen5", 0.75, 10)])
def test_oracle_play_through_the_env_succeeds_at_the_predicted_rate(
    name: str, rate: float, turns: int
) -> None:
    """Optimal play through the env's own step(): success rate within a binomial interval
    around V_T(start)."""
    env = FrozenLakeEnv(desc=MAPS[name], success_rate=rate, max_turns=turns)
    oracle = oracle_for(MAPS[name], True, rate)
    tables = [oracle.q_table(t).argmax(axis=1).tolist() for t in range(turns + 1)]
    ncol = len(MAPS[name][0])
    moves = [format_action(a) for a in range(4)]
    n, wins = 6000, 0
    env.reset(seed=1234)
    for _ in range(n):
        env.reset()
        pos, left = 0, turns
        while True:
            _, reward, terminated, truncated, info = env.step(moves[tables[left][pos]])
            if terminated or truncated:
                wins += reward > 0
                break
            row, col = info["position"]
            pos, left = row * ncol + col, info["turns_left"]
    expected = oracle.value(0, turns)
    assert 0.05 < expected < 0.95
    assert binomial_ok(wins, n, expected), (wins / n, expected)
