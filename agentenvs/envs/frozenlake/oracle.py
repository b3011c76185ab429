"""The exact FrozenLake transition model and its dynamic-programming oracle.

``lake_model(rows, is_slippery, success_rate)`` builds the transition model of
Gymnasium's FrozenLake-v1: from a non-terminal cell, action ``a`` moves in direction
``(a-1)%4``, ``a`` or ``(a+1)%4`` (the two perpendicular ones and the intended one) with
probabilities ``(1-sr)/2, sr, (1-sr)/2`` when slippery, or in direction ``a`` when not; a
move off the grid leaves the player in place; holes and goals are terminal.

``FrozenLakeOracle`` solves it by finite-horizon DP, in moves:

    V_0(s) = 0
    Q_t(s, a) = sum_{s'} P(s'|s, a) * (1[s' = G] + 1[s' not terminal] * V_{t-1}(s'))
    V_t(s) = max_a Q_t(s, a)

so ``V_t(s)`` is the probability of reaching a goal within ``t`` moves under optimal
play, and ``Q_t(s, a)`` the same after playing ``a`` first (both 0 on terminal cells).
``infinite_values()`` is the limit t -> inf (value iteration to convergence).
Models and oracles are cached per (map, slipperiness, success rate), so each is
computed once per process; horizons are extended on demand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from agentenvs.envs.frozenlake.maps import Rows

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3
#: (row, col) change of each direction, in Gymnasium's action order
DELTAS: tuple[tuple[int, int], ...] = ((0, -1), (1, 0), (0, 1), (-1, 0))


@dataclass(frozen=True, eq=False)
class LakeModel:
    """One map's exact transition model.

    ``next_state[s, a, k]`` is the cell reached when action ``a`` from ``s`` goes in
    direction ``slip_dirs[a][k]`` (k = 0, 1, 2: ``(a-1)%4``, ``a``, ``(a+1)%4``, the order
    of Gymnasium's transition table), with probability ``prob[s, a, k]``.
    ``cumulative`` holds the running sums of the three probabilities, computed as
    Gymnasium's ``categorical_sample`` computes them, so the same uniform draw picks the
    same outcome in both.
    """

    rows: Rows
    nrow: int
    ncol: int
    start: int
    tiles: str
    is_goal: np.ndarray
    is_hole: np.ndarray
    is_terminal: np.ndarray
    next_state: np.ndarray
    prob: np.ndarray
    cumulative: tuple[float, float, float]
    is_slippery: bool
    success_rate: float

    @property
    def n_states(self) -> int:
        return self.nrow * self.ncol


def slip_dirs(action: int) -> tuple[int, int, int]:
    return ((action - 1) % 4, action, (action + 1) % 4)


@lru_cache(maxsize=1024)
def lake_model(rows: Rows, is_slippery: bool = True, success_rate: float = 1.0 / 3.0) -> LakeModel:
    """The transition model of ``rows`` (cached: one per map and dynamics per process)."""
    if not 0.0 <= success_rate <= 1.0:
        raise ValueError(f"success_rate must be in [0, 1], got {success_rate!r}")
    nrow, ncol = len(rows), len(rows[0])
    tiles = "".join(rows)
    n = nrow * ncol
    tile_array = np.array(list(tiles))
    is_goal = tile_array == "G"
    is_hole = tile_array == "H"
    is_terminal = is_goal | is_hole
    # neighbour[s, d]: the cell one step in direction d, clamped at the edges
    r, c = np.divmod(np.arange(n), ncol)
    neighbour = np.empty((n, 4), dtype=np.int64)
    for d, (dr, dc) in enumerate(DELTAS):
        neighbour[:, d] = np.clip(r + dr, 0, nrow - 1) * ncol + np.clip(c + dc, 0, ncol - 1)
    dirs = np.array([slip_dirs(a) for a in range(4)])  # (4, 3)
    next_state = neighbour[:, dirs]  # (n, 4, 3)
    fail = (1.0 - success_rate) / 2.0
    k_prob = np.array([fail, success_rate, fail]) if is_slippery else np.array([0.0, 1.0, 0.0])
    prob = np.broadcast_to(k_prob, (n, 4, 3)).copy()
    # terminal cells are absorbing (their values are pinned to 0 by the oracle)
    next_state[is_terminal] = np.arange(n)[is_terminal, None, None]
    cum = np.cumsum(k_prob)
    for arr in (is_goal, is_hole, is_terminal, next_state, prob):
        arr.flags.writeable = False
    return LakeModel(
        rows=rows,
        nrow=nrow,
        ncol=ncol,
        start=tiles.index("S"),
        tiles=tiles,
        is_goal=is_goal,
        is_hole=is_hole,
        is_terminal=is_terminal,
        next_state=next_state,
        prob=prob,
        cumulative=(float(cum[0]), float(cum[1]), float(cum[2])),
        is_slippery=bool(is_slippery),
        success_rate=float(success_rate),
    )


class FrozenLakeOracle:
    """Exact finite- and infinite-horizon values of one ``LakeModel`` (see module doc).

    Horizons count *moves*. Tables grow on demand, doubling, so asking for horizon ``t``
    costs O(t) vectorized backups once.
    """

    def __init__(self, model: LakeModel) -> None:
        self.model = model
        n = model.n_states
        self._q = np.zeros((1, n, 4))  # _q[t] = Q_t; Q_0 = 0
        self._v = np.zeros((1, n))  # _v[t] = V_t
        self._v_inf: np.ndarray | None = None

    @property
    def horizon(self) -> int:
        """The largest horizon computed so far."""
        return self._v.shape[0] - 1

    def _backup(self, v_prev: np.ndarray) -> np.ndarray:
        m = self.model
        # value of landing in s': 1 for a goal, V(s') for a frozen cell, 0 for a hole
        landing = np.where(m.is_goal, 1.0, np.where(m.is_hole, 0.0, v_prev))
        q = (m.prob * landing[m.next_state]).sum(axis=-1)
        q[m.is_terminal] = 0.0
        return q

    def _extend(self, horizon: int) -> None:
        if horizon <= self.horizon:
            return
        target = max(horizon, 2 * self.horizon, 16)
        old = self.horizon
        q = np.empty((target + 1, *self._q.shape[1:]))
        v = np.empty((target + 1, self._v.shape[1]))
        q[: old + 1] = self._q
        v[: old + 1] = self._v
        for t in range(old + 1, target + 1):
            q[t] = self._backup(v[t - 1])
            v[t] = q[t].max(axis=1)
        q.flags.writeable = False
        v.flags.writeable = False
        self._q, self._v = q, v

    @staticmethod
    def _check_horizon(t: int) -> int:
        if isinstance(t, bool) or not isinstance(t, int | np.integer) or t < 0:
            raise ValueError(f"horizon must be a non-negative integer, got {t!r}")
        return int(t)

    def q_table(self, t: int) -> np.ndarray:
        """``Q_t`` for every cell, shape ``(n_states, 4)`` (read-only)."""
        t = self._check_horizon(t)
        self._extend(t)
        return self._q[t]

    def v_table(self, t: int) -> np.ndarray:
        """``V_t`` for every cell, shape ``(n_states,)`` (read-only)."""
        t = self._check_horizon(t)
        self._extend(t)
        return self._v[t]

    def q_values(self, state: int, t: int) -> np.ndarray:
        """``Q_t(state, a)`` for the four actions (a copy)."""
        return self.q_table(t)[state].copy()

    def value(self, state: int, t: int) -> float:
        return float(self.v_table(t)[state])

    def regret(self, state: int, action: int, t: int) -> float:
        """``V_t(state) - Q_t(state, action)``: what playing ``action`` costs (0 if optimal).

        Called on every env step, so it skips the horizon checks of the table getters.
        """
        if t > self._v.shape[0] - 1:
            self._extend(self._check_horizon(t))
        return float(self._v[t, state] - self._q[t, state, action])

    def infinite_values(self, tol: float = 1e-15, max_iter: int = 1_000_000) -> np.ndarray:
        """``lim V_t`` as t -> inf: the best probability of ever reaching a goal.

        Value iteration from 0 increases monotonically to the limit; it stops when no
        cell changes by more than ``tol``.
        """
        if self._v_inf is None:
            v = np.zeros(self.model.n_states)
            for _ in range(max_iter):
                new = self._backup(v).max(axis=1)
                if np.max(np.abs(new - v)) <= tol:
                    v = new
                    break
                v = new
            v.flags.writeable = False
            self._v_inf = v
        return self._v_inf

    def infinite_q(self) -> np.ndarray:
        """Q-values of the infinite-horizon problem, shape ``(n_states, 4)``."""
        return self._backup(self.infinite_values())

    def sequence_value(self, state: int, moves: Sequence[int], t_after: int) -> float:
        """Exact success probability of playing ``moves`` blindly from ``state`` (stopping
        if a hole or goal is reached), then playing optimally with ``t_after`` moves left.

        For one move this is ``Q_{t_after+1}(state, move)``.
        """
        m = self.model
        if m.is_terminal[state]:
            return 0.0
        dist = np.zeros(m.n_states)
        dist[state] = 1.0
        reached = 0.0
        for a in moves:
            new = np.zeros(m.n_states)
            np.add.at(new, m.next_state[:, a, :], dist[:, None] * m.prob[:, a, :])
            reached += float(new[m.is_goal].sum())
            new[m.is_terminal] = 0.0
            dist = new
        return reached + float(dist @ self.v_table(t_after))


@lru_cache(maxsize=1024)
def oracle_for(
    rows: Rows, is_slippery: bool = True, success_rate: float = 1.0 / 3.0
) -> FrozenLakeOracle:
    """The (cached) oracle of a map under given dynamics."""
    return FrozenLakeOracle(lake_model(rows, bool(is_slippery), float(success_rate)))
