"""FrozenLake budgets: any budget costs what the values' convergence costs, budgets the
oracle cannot reach within its memory bound are refused at reset, and the caches of
models, oracles and views stay within their byte bounds."""

from __future__ import annotations

import numpy as np
import pytest

from agentenvs.core.errors import SnapshotError
from agentenvs.core.snapshot import Snapshot
from agentenvs.envs.frozenlake import oracle as oracle_mod
from agentenvs.envs.frozenlake.env import FrozenLakeEnv, _lake_view
from agentenvs.envs.frozenlake.maps import FIXED_MAPS, desc_id, generate_solvable_map
from agentenvs.envs.frozenlake.oracle import FrozenLakeOracle, HorizonError, lake_model


@pytest.mark.parametrize("rate", [1.0 / 3.0, 0.75, 1.0])
@pytest.mark.parametrize("name", ["4x4", "8x8"])
def test_values_reach_a_fixed_point_and_stay_there(name: str, rate: float) -> None:
    oracle = FrozenLakeOracle(lake_model(FIXED_MAPS[name], True, rate))
    far = oracle.v_table(10**18).copy()
    h = oracle.converged_at
    assert h is not None and oracle.horizon <= h + 1
    # the fixed point: one more backup changes nothing, bit for bit
    assert np.array_equal(oracle._backup(far).max(axis=1), far)
    assert np.array_equal(oracle.v_table(h), far)
    for t in (h + 1, h + 7, 10**6, 10**18):
        assert np.array_equal(oracle.v_table(t), far)
        assert np.array_equal(oracle.q_table(t), oracle._backup(far))
        assert np.array_equal(oracle.q_values(0, t), oracle._backup(far)[0])
    # and the values before it are the plain finite-horizon DP, computed step by step
    v = np.zeros(oracle.model.n_states)
    for t in range(1, h + 1):
        q = oracle._backup(v)
        assert np.array_equal(oracle.q_table(t), q)
        v = q.max(axis=1)
        assert np.array_equal(oracle.v_table(t), v)
    assert np.allclose(far, oracle.infinite_values(), atol=1e-12)


@pytest.mark.parametrize("budget", [10**5, 10**6, 10**18, 2**63 - 1])
def test_huge_budgets_cost_no_more_than_convergence(budget: int) -> None:
    env = FrozenLakeEnv(map_name="8x8")
    _, info = env.reset(seed=0, options={"max_turns": budget})
    assert info["turns_left"] == budget
    oracle = env.oracle
    _, _, _, truncated, info = env.step("Right")
    assert not truncated and info["turns_left"] == budget - 1
    assert oracle.converged_at is not None
    assert oracle.nbytes <= (oracle.converged_at + 2) * oracle.model.n_states * 40
    q = env.q_values()
    assert np.all((q >= 0) & (q <= 1))
    assert env.optimal_success_probability() == pytest.approx(
        float(oracle.infinite_values()[env.unwrapped._pos]), abs=1e-12
    )
    assert 0.0 <= env.score_action("Down") <= 1.0


def test_budgets_past_the_bound_are_refused_at_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = generate_solvable_map(16, 0.8, seed=1)  # converges after ~8,700 moves
    # a bound of 100 moves for a 16x16 map, on maps not cached yet
    monkeypatch.setattr(oracle_mod, "MAX_TABLE_BYTES", 40 * 256 * 101)
    monkeypatch.setattr(
        oracle_mod, "_ORACLES", oracle_mod.BoundedCache(lambda o: o.nbytes, lambda: 1 << 30, 16)
    )
    import agentenvs.envs.frozenlake.env as env_mod

    monkeypatch.setattr(
        env_mod, "_VIEWS", oracle_mod.BoundedCache(lambda v: v.nbytes, lambda: 1 << 30, 16)
    )
    env = FrozenLakeEnv(desc=rows)
    env.reset(seed=1, options={"max_turns": 60})
    env.step("Down")
    before = env.snapshot()
    with pytest.raises(ValueError, match=r"max_turns=5000 cannot be honoured.*max_turns <= 100"):
        env.reset(options={"max_turns": 5000})
    assert env.snapshot() == before  # the live episode is untouched
    with pytest.raises(HorizonError):
        env.oracle.value(0, 5000)
    # two moves per turn halve the budget that fits
    two = FrozenLakeEnv(desc=rows, actions_per_turn=2)
    with pytest.raises(ValueError, match="max_turns <= 50"):
        two.reset(options={"max_turns": 51})
    two.reset(options={"max_turns": 50})
    # a snapshot carrying such a budget is refused too, the env unchanged
    tampered = Snapshot(
        before.env_class, before.version, {**before.base, "episode_max_turns": 5000}, before.state
    )
    live = env.snapshot()
    with pytest.raises(SnapshotError, match="cannot be honoured"):
        env.restore(tampered)
    assert env.snapshot() == live
    # a deterministic lake converges fast: any budget is fine there
    FrozenLakeEnv(desc=rows, is_slippery=False).reset(options={"max_turns": 10**18})


def test_the_caches_stay_within_their_byte_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    bound = 800_000
    models = oracle_mod.BoundedCache(oracle_mod._model_bytes, lambda: bound // 4, 1024)
    oracles = oracle_mod.BoundedCache(lambda o: o.nbytes, lambda: bound - bound // 4, 1024)
    monkeypatch.setattr(oracle_mod, "_MODELS", models)
    monkeypatch.setattr(oracle_mod, "_ORACLES", oracles)
    biggest = 0
    for seed in range(20):
        rows = generate_solvable_map(8, 0.8, seed=seed)
        oracle = oracle_mod.oracle_for(rows)
        oracle.v_table(60)  # grows its table to ~150 kB
        biggest = max(biggest, oracle.nbytes)
        assert oracles.nbytes() <= bound - bound // 4 + biggest
        assert models.nbytes() <= bound // 4
    assert 1 < len(oracles) < 20
    # the most recent map is still there, the first one is gone
    assert (rows, True, 1.0 / 3.0) in oracles
    assert (generate_solvable_map(8, 0.8, seed=0), True, 1.0 / 3.0) not in oracles


def test_big_maps_render_without_precomputed_grids() -> None:
    rows = generate_solvable_map(64, 0.9, seed=3)
    view = _lake_view(rows, False, 1.0 / 3.0)
    assert view.nbytes < 2_000_000
    env = FrozenLakeEnv(desc=rows, is_slippery=False)
    obs, _ = env.reset(options={"task_id": desc_id(rows), "max_turns": 10**9})
    grid = obs.split("Map:\n", 1)[1].splitlines()
    assert len(grid) == 64 and grid[0][0] == "P" and all(len(r) == 64 for r in grid)
    obs, *_ = env.step("Right")
    assert obs.splitlines()[-64:][0][1] == "P"
