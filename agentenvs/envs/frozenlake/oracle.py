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

The backup is monotone, so ``V_0 <= V_1 <= ...`` holds in floating point too and the
sequence reaches a fixed point ``V_H = V_{H+1}`` after finitely many backups (a few
thousand on the bundled maps); from there every ``V_t`` and ``Q_t`` equals the ones at
``H``, so no table grows past ``H`` and any budget costs what ``H`` costs. The tables
of one oracle take at most ``MAX_TABLE_BYTES``: a horizon beyond that on a map whose
values have not converged by then raises ``HorizonError`` (FrozenLake refuses such a
budget at reset).

Models and oracles are cached per (map, slipperiness, success rate), so each is
computed once per process, in caches bounded by entries and by bytes
(``ORACLE_CACHE_BYTES``; least recently used first out).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from agentenvs.envs.frozenlake.maps import Rows

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3
#: the most bytes one oracle's value tables may take
MAX_TABLE_BYTES = 64 << 20
#: the most bytes all cached models and oracles of a process may take (plus one oracle)
ORACLE_CACHE_BYTES = 256 << 20
#: the most maps each cache keeps
CACHE_ENTRIES = 1024

T = TypeVar("T")


class HorizonError(ValueError):
    """A horizon an oracle cannot reach within its memory bound (values not converged)."""


class BoundedCache(Generic[T]):
    """A least-recently-used cache bounded by entries and by the bytes its values report.

    ``sizeof(value)`` is asked again at every trim, so values that grow (an oracle's
    tables) are counted at their current size.
    """

    def __init__(self, sizeof: Callable[[T], int], max_bytes: Callable[[], int], max_entries: int) -> None:
        self._sizeof = sizeof
        self._max_bytes = max_bytes
        self.max_entries = max_entries
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
                return value
        value = build()
        with self._lock:
            value = self._items.setdefault(key, value)
            self._items.move_to_end(key)
        self.trim()
        return value

    def trim(self) -> None:
        """Drop the least recently used entries until both bounds hold (the newest stays)."""
        with self._lock:
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)
            total = sum(self._sizeof(v) for v in self._items.values())
            while len(self._items) > 1 and total > self._max_bytes():
                _, dropped = self._items.popitem(last=False)
                total -= self._sizeof(dropped)

    def nbytes(self) -> int:
        with self._lock:
            return sum(self._sizeof(v) for v in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

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


def lake_model(rows: Rows, is_slippery: bool = True, success_rate: float = 1.0 / 3.0) -> LakeModel:
    """The transition model of ``rows`` (cached: one per map and dynamics per process)."""
    key = (tuple(rows), bool(is_slippery), float(success_rate))
    return _MODELS.get(key, lambda: _build_model(*key))


def _model_bytes(model: LakeModel) -> int:
    return sum(a.nbytes for a in (model.is_goal, model.is_hole, model.is_terminal, model.next_state, model.prob))


def _build_model(rows: Rows, is_slippery: bool, success_rate: float) -> LakeModel:
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

    Horizons count *moves*. Tables grow on demand, doubling, up to the horizon where
    the values converge (``converged_at``) or the memory bound, so asking for horizon
    ``t`` costs at most ``min(t, H)`` vectorized backups once.
    """

    def __init__(self, model: LakeModel, max_table_bytes: int | None = None) -> None:
        self.model = model
        n = model.n_states
        self._q = np.zeros((1, n, 4))  # _q[t] = Q_t; Q_0 = 0
        self._v = np.zeros((1, n))  # _v[t] = V_t
        self._v_inf: np.ndarray | None = None
        #: H such that V_t = V_H for every t >= H (None until found)
        self.converged_at: int | None = None
        limit = MAX_TABLE_BYTES if max_table_bytes is None else int(max_table_bytes)
        #: the largest horizon whose table fits the memory bound
        self.max_horizon = max(limit // (40 * n) - 1, 1)  # 5 floats a cell: V and 4 Q
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict[int, object]) -> FrozenLakeOracle:
        return self  # read-only tables shared by every env on the map (a deep-copied env too)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def horizon(self) -> int:
        """The largest horizon computed so far."""
        return self._v.shape[0] - 1

    @property
    def nbytes(self) -> int:
        return self._v.nbytes + self._q.nbytes

    def _backup(self, v_prev: np.ndarray) -> np.ndarray:
        m = self.model
        # value of landing in s': 1 for a goal, V(s') for a frozen cell, 0 for a hole
        landing = np.where(m.is_goal, 1.0, np.where(m.is_hole, 0.0, v_prev))
        q = (m.prob * landing[m.next_state]).sum(axis=-1)
        q[m.is_terminal] = 0.0
        return q

    def _index(self, t: int) -> int:
        """The table row that holds horizon ``t`` (extending the table if needed)."""
        if t <= self.horizon:
            return t
        if self.converged_at is not None:
            return self.horizon  # V and Q stay what they are from here on
        self._extend(t)
        return min(t, self.horizon)

    def _extend(self, horizon: int) -> None:
        with self._lock:
            if horizon <= self.horizon or self.converged_at is not None:
                return
            old = self.horizon
            if horizon > self.max_horizon and old >= self.max_horizon:
                raise self._too_long(horizon)
            target = min(max(horizon, 2 * old, 16), self.max_horizon)
            q = np.empty((target + 1, *self._q.shape[1:]))
            v = np.empty((target + 1, self._v.shape[1]))
            q[: old + 1] = self._q
            v[: old + 1] = self._v
            end = target
            for t in range(old + 1, target + 1):
                q[t] = self._backup(v[t - 1])
                v[t] = q[t].max(axis=1)
                if np.array_equal(v[t], v[t - 1]):
                    # a fixed point: V_t = V_{t-1} for every later t, and Q_t too
                    end = t
                    self.converged_at = t - 1
                    break
            if end < target:
                q, v = q[: end + 1].copy(), v[: end + 1].copy()
            q.flags.writeable = False
            v.flags.writeable = False
            self._q, self._v = q, v
        _ORACLES.trim()
        if horizon > self.horizon and self.converged_at is None:
            raise self._too_long(horizon)

    def _too_long(self, horizon: int) -> HorizonError:
        m = self.model
        return HorizonError(
            f"a horizon of {horizon} moves is out of reach on this {m.nrow}x{m.ncol} map: "
            f"its values have not converged within {self.max_horizon} moves, the most its "
            f"tables hold in {MAX_TABLE_BYTES >> 20} MiB"
        )

    def ensure_horizon(self, t: int) -> None:
        """Compute what horizon ``t`` needs now; ``HorizonError`` if it cannot be reached."""
        self._index(self._check_horizon(t))

    @staticmethod
    def _check_horizon(t: int) -> int:
        if isinstance(t, bool) or not isinstance(t, int | np.integer) or t < 0:
            raise ValueError(f"horizon must be a non-negative integer, got {t!r}")
        return int(t)

    def q_table(self, t: int) -> np.ndarray:
        """``Q_t`` for every cell, shape ``(n_states, 4)`` (read-only)."""
        i = self._index(self._check_horizon(t))
        return self._q[i]

    def v_table(self, t: int) -> np.ndarray:
        """``V_t`` for every cell, shape ``(n_states,)`` (read-only)."""
        i = self._index(self._check_horizon(t))
        return self._v[i]

    def q_values(self, state: int, t: int) -> np.ndarray:
        """``Q_t(state, a)`` for the four actions (a copy)."""
        return self.q_table(t)[state].copy()

    def value(self, state: int, t: int) -> float:
        return float(self.v_table(t)[state])

    def regret(self, state: int, action: int, t: int) -> float:
        """``V_t(state) - Q_t(state, action)``: what playing ``action`` costs (0 if optimal).

        Called on every env step, so it skips the horizon checks of the table getters.
        """
        i = t if t < self._v.shape[0] else self._index(t)
        # ``item`` reads each as a Python float: the same double subtraction, without
        # numpy's scalars
        return self._v.item(i, state) - self._q.item(i, state, action)

    def infinite_values(self, tol: float = 1e-15, max_iter: int = 1_000_000) -> np.ndarray:
        """``lim V_t`` as t -> inf: the best probability of ever reaching a goal.

        Value iteration from 0 increases monotonically to the limit; it stops when no
        cell changes by more than ``tol``.
        """
        if self._v_inf is None and self.converged_at is not None:
            self._v_inf = self._v[self.horizon]  # the exact fixed point, already found
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


def oracle_for(
    rows: Rows, is_slippery: bool = True, success_rate: float = 1.0 / 3.0
) -> FrozenLakeOracle:
    """The (cached) oracle of a map under given dynamics."""
    key = (tuple(rows), bool(is_slippery), float(success_rate))
    return _ORACLES.get(key, lambda: FrozenLakeOracle(lake_model(*key)))


def cache_bytes() -> int:
    """What the cached models and oracles of this process take, in bytes."""
    return _MODELS.nbytes() + _ORACLES.nbytes()


_MODELS: BoundedCache[LakeModel] = BoundedCache(
    _model_bytes, lambda: ORACLE_CACHE_BYTES // 4, CACHE_ENTRIES
)
_ORACLES: BoundedCache[FrozenLakeOracle] = BoundedCache(
    lambda o: o.nbytes, lambda: ORACLE_CACHE_BYTES - ORACLE_CACHE_BYTES // 4, CACHE_ENTRIES
)
