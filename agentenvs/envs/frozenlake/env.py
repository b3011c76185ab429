"""FrozenLake as a text env, with Gymnasium FrozenLake-v1's exact dynamics and a DP oracle."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from agentenvs.core.env import TextEnv, Transition, short_repr
from agentenvs.core.errors import UnknownTaskError
from agentenvs.core.info import STEP_REWARD
from agentenvs.envs.frozenlake.maps import (
    MAP_ID_FORMS,
    Rows,
    bundled_tasks,
    desc_id,
    map_id_problem,
    parse_random_id,
    random_id,
    rows_for_id,
    validate_rows,
)
from agentenvs.envs.frozenlake.oracle import (
    CACHE_ENTRIES,
    BoundedCache,
    FrozenLakeOracle,
    HorizonError,
    LakeModel,
    oracle_for,
    slip_dirs,
)

ACTION_NAMES: tuple[str, ...] = ("Left", "Down", "Right", "Up")
#: words an answer may use for a move (matched case-insensitively); 1-4 as RAGEN numbers them
MOVE_WORDS: dict[str, int] = {
    "left": 0, "down": 1, "right": 2, "up": 3,
    "l": 0, "d": 1, "r": 2, "u": 3,
    "1": 0, "2": 1, "3": 2, "4": 3,
}
PLAYER, FROZEN, HOLE, GOAL, PLAYER_IN_HOLE, PLAYER_ON_GOAL = "P", "_", "O", "G", "X", "√"
#: how many seeded random maps a ``size``/``p`` env draws from
GENERATED_POOL = 10_000

_SEPARATORS = re.compile(r"\|+|,")
_STRIP = " \t\r\n.!*`'\"()[]"
_ANSWER_OPEN, _ANSWER_CLOSE = "<answer>", "</answer>"


def format_action(action: int) -> str:
    """The canonical text of a move, e.g. ``format_action(0) == "<answer>Left</answer>"``."""
    return f"{_ANSWER_OPEN}{ACTION_NAMES[action]}{_ANSWER_CLOSE}"


def parse_moves(text: str, max_moves: int = 1) -> tuple[int, ...] | str:
    """The moves an answer names, or a message saying why it names none.

    The answer is the content of the last ``<answer>...</answer>`` tag if there is one,
    else the whole text; it lists 1 to ``max_moves`` moves separated by ``||`` or commas,
    each a word of ``MOVE_WORDS`` (surrounding punctuation ignored).
    """
    fast = _FAST_MOVES.get(text)
    if fast is not None:
        return fast
    lowered = text.lower()
    start = lowered.rfind(_ANSWER_OPEN)
    if start >= 0:
        end = lowered.find(_ANSWER_CLOSE, start)
        body = text[start + len(_ANSWER_OPEN) : end if end >= 0 else len(text)]
    else:
        body = text
    if len(body) > 32 * max_moves + 64:  # no valid answer is this long; don't scan it
        return "your answer is too long to be a move"
    parts = [p.strip(_STRIP) for p in _SEPARATORS.split(body)]
    parts = [p for p in parts if p]
    if not parts:
        return "your answer names no move"
    moves = []
    for part in parts:
        move = MOVE_WORDS.get(part.lower())
        if move is None:
            return f"{part[:40]!r} is not a move"
        moves.append(move)
    if len(moves) > max_moves:
        return f"{len(moves)} moves given but at most {max_moves} are allowed per turn"
    return tuple(moves)


# the forms policies and most models emit, answered without any scanning
_FAST_MOVES: dict[str, tuple[int, ...]] = {}
for _a, _name in enumerate(ACTION_NAMES):
    for _word in (_name, _name.lower(), _name.upper(), str(_a + 1)):
        _FAST_MOVES[_word] = (_a,)
        _FAST_MOVES[f"{_ANSWER_OPEN}{_word}{_ANSWER_CLOSE}"] = (_a,)


@dataclass(frozen=True, eq=False)
class _LakeView:
    """Per-map data the env reads every step, precomputed once (cached by map + dynamics)."""

    model: LakeModel
    oracle: FrozenLakeOracle
    next_state: list[list[list[int]]]
    text: str  # the grid without the player, rows joined by newlines
    marks: tuple[str, ...]  # the player's symbol on each cell
    terminal: tuple[bool, ...]
    goal: tuple[bool, ...]

    def grid(self, cell: int) -> str:
        """The grid text with the player on ``cell`` (made on demand: big maps stay small)."""
        i = cell + cell // self.model.ncol  # one newline per row above
        return f"{self.text[:i]}{self.marks[cell]}{self.text[i + 1 :]}"

    @property
    def nbytes(self) -> int:
        """What this view adds to its oracle, roughly (lists of small ints, text)."""
        return 100 * len(self.next_state) + 2 * len(self.text)


def _lake_view(rows: Rows, is_slippery: bool, success_rate: float) -> _LakeView:
    key = (tuple(rows), bool(is_slippery), float(success_rate))
    return _VIEWS.get(key, lambda: _build_view(*key))


def _build_view(rows: Rows, is_slippery: bool, success_rate: float) -> _LakeView:
    oracle = oracle_for(rows, is_slippery, success_rate)
    model = oracle.model
    base = [FROZEN if t in "SF" else HOLE if t == "H" else GOAL for t in model.tiles]
    text = "\n".join("".join(base[r * model.ncol : (r + 1) * model.ncol]) for r in range(model.nrow))
    marks = tuple(
        PLAYER_IN_HOLE if tile == "H" else PLAYER_ON_GOAL if tile == "G" else PLAYER
        for tile in model.tiles
    )
    return _LakeView(
        model=model,
        oracle=oracle,
        next_state=model.next_state.tolist(),
        text=text,
        marks=marks,
        terminal=tuple(bool(x) for x in model.is_terminal),
        goal=tuple(bool(x) for x in model.is_goal),
    )


#: the views of recent maps (their oracles are counted by the oracle cache)
_VIEWS: BoundedCache[_LakeView] = BoundedCache(lambda v: v.nbytes, lambda: 64 << 20, CACHE_ENTRIES)


def _outcome_text(action: int, direction: int, bumped: bool) -> str:
    name, went = ACTION_NAMES[action], ACTION_NAMES[direction]
    if direction == action:
        if bumped:
            return f"You tried to move {name} but hit the edge of the lake and stayed in place."
        return f"You moved {name}."
    if bumped:
        return f"You tried to move {name}, slipped {went} into the edge of the lake and stayed in place."
    return f"You tried to move {name} but slipped and moved {went}."


#: (action, direction actually taken, bumped into the edge) -> sentence
_OUTCOMES: dict[tuple[int, int, bool], str] = {
    (a, d, b): _outcome_text(a, d, b) for a in range(4) for d in range(4) for b in (False, True)
}
#: ``slip_dirs(a)`` of each move, looked up on every step
_SLIPS: tuple[tuple[int, int, int], ...] = tuple(slip_dirs(a) for a in range(4))
_FELL = " You fell into a hole. Game over."
_WON = " You reached the goal!"


class _GeneratedPool(Sequence[str]):
    """The ids ``random:size=N,p=P,seed=K`` for K in ``range(n)``, built on access."""

    def __init__(self, size: int, p: float, n: int) -> None:
        self.size, self.p, self.n = size, p, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.n))]
        i = int(index)
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(index)
        return random_id(self.size, self.p, i)


class FrozenLakeEnv(TextEnv):
    """Cross a frozen lake from the start to the goal without falling into a hole, in text.

    ## Description
    Gymnasium's FrozenLake-v1 with the same dynamics, told and answered in text, as RAGEN
    plays it. The player starts on the start cell and moves until it reaches a goal or
    falls into a hole. On slippery ice a move goes in the intended direction with
    probability ``success_rate`` and in each perpendicular direction with probability
    ``(1 - success_rate) / 2``; a move off the grid leaves the player in place. An exact
    dynamic-programming oracle gives the optimal success probability and the Q-value of
    any move for the current cell and turn budget (``q_values``, ``score_action``,
    ``optimal_success_probability``): see ``agentenvs.envs.frozenlake.oracle``.

    ## Action Space
    Text. The answer is the content of the last ``<answer>...</answer>`` tag if there is
    one, else the whole text. It names 1 to ``actions_per_turn`` moves separated by ``||``
    or commas; a move is ``Left``, ``Down``, ``Right`` or ``Up`` in any case, their first
    letters ``L``/``D``/``R``/``U``, or RAGEN's numbers ``1`` (Left), ``2`` (Down), ``3``
    (Right), ``4`` (Up); Gymnasium's action ids are these numbers minus one. Anything
    else (empty, too long, garbage, too many moves) is an invalid action: the turn is
    spent, the player does not move, and the observation explains the format.

    ## Observation Space
    Text. The first observation states the rules, the symbols, the slipperiness and the
    action format, then shows the grid. Each later one says what each move did (moved,
    slipped and moved, bumped into the edge, fell into a hole, reached the goal) and shows
    the grid. Grid symbols (RAGEN's): ``P`` the player, ``_`` frozen ice (the start cell
    too), ``O`` a hole, ``G`` the goal, ``X`` the player in a hole, ``√`` the player on
    the goal. With ``show_budget`` every observation ends with "[N turns left]".

    ## Starting State
    The player is on the map's ``S`` cell. Without ``map_name``/``desc``/``size``/``p``,
    ``reset`` draws a bundled task (``tasks/frozenlake/tasks.json``: Gymnasium's "4x4" and
    "8x8" and seeded solvable 4x4 and 6x6 maps) from the env's ``np_random``; with
    ``map_name`` or ``desc`` that map is the task; with ``size``/``p`` the task is one of
    ``GENERATED_POOL`` seeded solvable random maps. ``reset(options={"task_id": ...})``
    accepts any bundled id, ``"4x4"``, ``"8x8"``, ``"random:size=N,p=P,seed=K"`` (the map
    ``generate_solvable_map(N, P, seed=K)``: S top left, G bottom right) or
    ``"desc:ROW/ROW/..."`` (rows of S, F, H, G). ``reset`` draws once from ``np_random``
    for the start as Gymnasium does, so a seeded episode on a fixed map follows the same
    random stream as ``gym.make("FrozenLake-v1")`` (same seed, same moves, same slips).

    ## Rewards
    1 on entering a goal, 0 otherwise. ``info["score"]`` is 1.0 once the goal is reached.

    ## Episode End
    - Termination: the player falls into a hole or reaches a goal (``success`` is True
      only for the goal). With several moves per turn, moves after the end are ignored.
    - Truncation: ``max_turns`` turns were spent (invalid actions count).

    Any budget up to ``2**63 - 1`` turns costs what the oracle's convergence costs: past
    the horizon where its values reach their fixed point no table grows. A budget whose
    oracle values cannot be computed within the oracle's memory bound (only on large
    slippery maps, whose values converge late) is refused at reset with a ``ValueError``
    that names the largest budget the map allows.

    ## Information
    Besides the standard keys (``task_id``, ``turn``, ``max_turns``, ``turns_left``,
    ``success``, ``score``, ``action_valid``, ``state_key``, the last being a hash of the
    task and the player's cell only), every info has ``position`` (row, col),
    ``last_action`` (the moves of the last valid action, e.g. ``"Left"``, or None) and
    ``last_regret`` (``V(s) - score_action(a)`` for the last valid action ``a`` taken from
    ``s``, from the budget it had: 0 for an optimal move, > 0 for a mistake; 0 after
    reset; an invalid action leaves both unchanged). Every step's info has
    ``step_reward``, the oracle's advantage of the action for the turns it had:
    ``score_action(a) - V(s)`` (for one move a turn ``Q_t(s, a) - V_t(s)``, i.e.
    ``-last_regret``; an invalid action's is ``V_{t-1}(s) - V_t(s)``, the cost of the
    wasted turn), 0 for an optimal action and negative for a worse one. ``reset``'s info
    also has ``system_prompt`` (the rules).

    ``snapshot()`` holds the state (map, cell, last action and regret, plus the base's
    turn, budget and RNG), a few hundred bytes; not the constructor's settings
    (slipperiness, ``actions_per_turn``, ``show_budget``): restore into an env made with
    the same settings, e.g. a fresh ``gym.make("agentenvs/FrozenLake-v0")``.

    Oracle values count moves: with ``actions_per_turn`` = k and t turns left the move
    budget is t * k. ``q_values()`` is ``Q_{t*k}(s, a)`` for one move, exact for k = 1
    and, for k > 1, the value when the agent sees the result of every move (an upper
    bound on what a whole turn of blind moves can achieve). ``score_action(text)`` is the
    exact success probability of the text's moves played blind from ``s`` then optimal
    play with the ``(t-1)*k`` moves of the remaining turns (for k = 1 exactly
    ``Q_t(s, a)``); an invalid action scores ``V_{(t-1)*k}(s)``, the value of staying put
    for one wasted turn.

    ## Arguments
    All keyword-only.
    - ``map_name``: any task id ``reset(options={"task_id": ...})`` accepts, played as
      the only task under that id: ``"4x4"`` or ``"8x8"`` (Gymnasium's maps), a bundled
      id, ``"random:size=N,p=P,seed=K"`` or ``"desc:ROW/ROW/..."``; or None. A string
      that names no map is a ``ValueError`` saying why and listing the forms.
    - ``desc``: the map as a list of row strings (S start, F frozen, H hole, G goal).
    - ``size``, ``p``: draw seeded solvable ``size`` x ``size`` maps whose cells are frozen
      with probability ``p`` (defaults 4 and 0.8 when only one is given).
    - ``is_slippery`` (True), ``success_rate`` (1/3): as Gymnasium.
    - ``actions_per_turn`` (1): the most moves one turn may name (RAGEN allows several).
    - ``max_turns`` (20), ``show_budget`` (False), ``render_mode`` (``"ansi"``/``"human"``),
      ``max_action_chars``: as every agentenvs env.

    ## Version History
    - v0: initial version. Before any release, ``map_name`` came to accept every task-id
      form (it took only ``"4x4"`` and ``"8x8"``); the maps themselves are unchanged.
    """

    default_max_turns: ClassVar[int] = 20
    hidden_info_keys = frozenset({"last_regret", "step_reward"})  # the oracle's values
    #: ``_set_state`` only assigns what ``_check_state`` has checked: nothing to roll back
    restore_rollback: ClassVar[bool] = False

    @classmethod
    def calls_wait(cls, **kwargs: Any) -> bool:
        return False  # in-process arithmetic

    def __init__(
        self,
        *,
        map_name: str | None = None,
        desc: Sequence[str] | None = None,
        size: int | None = None,
        p: float | None = None,
        is_slippery: bool = True,
        success_rate: float = 1.0 / 3.0,
        actions_per_turn: int = 1,
        max_turns: int | None = None,
        show_budget: bool = False,
        render_mode: str | None = None,
        max_action_chars: int = 1 << 20,
    ) -> None:
        super().__init__(
            max_turns=max_turns,
            show_budget=show_budget,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
        )
        given = [n for n, v in (("map_name", map_name), ("desc", desc)) if v is not None]
        if len(given) > 1 or (given and (size is not None or p is not None)):
            raise ValueError("give at most one of map_name, desc, or size/p")
        if not 0.0 <= float(success_rate) <= 1.0:
            raise ValueError(f"success_rate must be in [0, 1], got {success_rate!r}")
        if isinstance(actions_per_turn, bool) or not isinstance(actions_per_turn, int) or actions_per_turn < 1:
            raise ValueError(f"actions_per_turn must be a positive integer, got {actions_per_turn!r}")
        self.is_slippery = bool(is_slippery)
        self.success_rate = float(success_rate)
        self.actions_per_turn = actions_per_turn
        self._fixed: tuple[str, Rows] | None = None
        self._pool: Sequence[str] | None = None
        if map_name is not None:
            problem = map_id_problem(map_name)
            if problem is not None:
                raise ValueError(
                    f"map_name {short_repr(map_name)} names no map ({problem}); {MAP_ID_FORMS}"
                )
            # the map reset(options={"task_id": map_name}) plays, under the same id
            self._fixed = (map_name, self._rows_of(map_name))
        elif desc is not None:
            rows = validate_rows(desc)
            self._fixed = (desc_id(rows), rows)
        elif size is not None or p is not None:
            size = 4 if size is None else size
            p = 0.8 if p is None else p
            if (
                isinstance(size, bool)
                or not isinstance(size, int)
                or not isinstance(p, int | float)
                or parse_random_id(random_id(size, p, 0)) is None
            ):
                raise ValueError(f"size must be an int in [2, 64] and p in (0, 1], got {size!r}, {p!r}")
            self._pool = _GeneratedPool(int(size), float(p), GENERATED_POOL)
        self._view: _LakeView | None = None
        self._pos = 0
        self._last_action: str | None = None
        self._last_regret = 0.0
        self._intro = self._rules()

    # ------------------------------------------------------------ tasks
    @property
    def task_ids(self) -> Sequence[str]:
        if self._fixed is not None:
            return [self._fixed[0]]
        if self._pool is not None:
            return self._pool
        return _bundled_ids()

    def _known_task(self, task_id: Any) -> Sequence[str] | set[str]:
        # ids are open-ended (generated and spelled-out maps): answer for this one only
        if self._fixed is not None and task_id == self._fixed[0]:
            return (task_id,)
        return (task_id,) if rows_for_id(task_id) is not None else ()

    def _check_task_id(self, task_id: Any) -> None:
        try:
            super()._check_task_id(task_id)
        except UnknownTaskError as exc:
            problem = map_id_problem(task_id) if isinstance(task_id, str) else None
            why = f" ({problem})" if problem else ""
            raise UnknownTaskError(f"{exc}{why}; {MAP_ID_FORMS}") from None

    def _rows_of(self, task_id: str) -> Rows:
        if self._fixed is not None and task_id == self._fixed[0]:
            return self._fixed[1]
        rows = rows_for_id(task_id)
        assert rows is not None  # reset validated the id
        return rows

    def _view_of(self, task_id: str) -> _LakeView:
        rows = self._rows_of(task_id)
        view = self._view
        if view is not None and view.model.rows is rows:  # the same map again: no lookup
            return view
        return _lake_view(rows, self.is_slippery, self.success_rate)

    def _check_reset(self, task_id: str, max_turns: int, options: Mapping[str, Any]) -> None:
        self._check_horizon(self._view_of(task_id), max_turns)

    def _check_horizon(self, view: _LakeView, max_turns: int) -> None:
        """Refuse a budget whose oracle values cannot be computed within the memory bound."""
        try:
            view.oracle.ensure_horizon(max_turns * self.actions_per_turn)
        except HorizonError as exc:
            longest = view.oracle.max_horizon // self.actions_per_turn
            raise ValueError(
                f"max_turns={max_turns} cannot be honoured: {exc}; use max_turns <= {longest} "
                "on this map"
            ) from None

    def _load_task(self, task_id: str, options: Mapping[str, Any]) -> str:
        self._view = self._view_of(task_id)
        self._pos = self._view.model.start
        self._last_action = None
        self._last_regret = 0.0
        # Gymnasium draws the start cell from np_random; drawing once too keeps seeded
        # episodes on the same random stream as FrozenLake-v1
        self.np_random.random()
        return f"{self._intro}\n\nMap:\n{self._view.grid(self._pos)}"

    # ------------------------------------------------------------ text
    def action_format(self) -> str:
        k = self.actions_per_turn
        many = (
            f"Give 1 to {k} moves per turn, separated by ' || ', e.g. <answer>Left || Down</answer>."
            if k > 1
            else "Give one move per turn, e.g. <answer>Left</answer>."
        )
        return (
            "Moves: Left, Down, Right, Up (or 1 = Left, 2 = Down, 3 = Right, 4 = Up), "
            f"inside <answer></answer>. {many}"
        )

    def _rules(self) -> str:
        if self.is_slippery:
            side = (1.0 - self.success_rate) / 2.0
            ice = (
                "The ice is slippery: a move goes the intended way with probability "
                f"{self.success_rate:.3g}, and sideways (perpendicular to it) with probability "
                f"{side:.3g} to each side."
            )
        else:
            ice = "The ice is not slippery: every move goes the intended way."
        return (
            "You are playing FrozenLake. Walk from your position to the goal without "
            "falling into a hole.\n"
            f"Map symbols: {PLAYER} = you, {FROZEN} = frozen ice (safe), {HOLE} = hole "
            f"(falling in ends the game, no reward), {GOAL} = goal (reaching it wins, "
            f"reward 1), {PLAYER_IN_HOLE} = you in a hole, {PLAYER_ON_GOAL} = you on the goal. "
            "The top row of the map is the north (Up) edge.\n"
            f"{ice} A move into the edge of the lake leaves you where you are.\n"
            f"{self.action_format()}"
        )

    def _reset_info(self) -> dict[str, Any]:
        return {"system_prompt": self._intro}

    # ------------------------------------------------------------ dynamics
    def _wasted_turn_advantage(self) -> float:
        """A wasted turn's advantage: the value of staying put with one turn fewer, less the
        value now."""
        view = self._view
        assert view is not None
        moves_left = self._decision_turns() * self.actions_per_turn
        wasted = view.oracle.value(self._pos, moves_left - self.actions_per_turn)
        return wasted - view.oracle.value(self._pos, moves_left)

    def _refused(self, problem: str) -> Transition:
        return Transition(
            observation=problem, action_valid=False,
            info={STEP_REWARD: self._wasted_turn_advantage()},
        )

    def _apply(self, action: str) -> Transition:
        view = self._view
        assert view is not None
        moves = parse_moves(action, self.actions_per_turn)
        moves_left = self._decision_turns() * self.actions_per_turn
        if isinstance(moves, str):
            return Transition(
                observation=f"Invalid action: {moves}. {self.action_format()}\n"
                f"Map:\n{view.grid(self._pos)}",
                action_valid=False,
                info={STEP_REWARD: self._wasted_turn_advantage()},
            )
        start = self._pos
        cum0, cum1, cum2 = view.model.cumulative
        if len(moves) == 1 and self.actions_per_turn == 1:  # the usual turn: one move
            a = moves[0]
            # Gymnasium's categorical_sample: the first outcome whose running sum exceeds u
            u = self.np_random.random()
            k = 0 if u < cum0 else 1 if u < cum1 else 2 if u < cum2 else 0
            pos = view.next_state[start][a][k]
            text = _OUTCOMES[(a, _SLIPS[a][k], pos == start)]
            reward = 0.0
            ended = view.terminal[pos]
            if ended:
                if view.goal[pos]:
                    reward = 1.0
                    text += _WON
                else:
                    text += _FELL
            self._pos = pos
            self._last_action = ACTION_NAMES[a]
            self._last_regret = regret = view.oracle.regret(start, a, moves_left)
            return Transition(
                observation=f"{text}\n{view.grid(pos)}",
                reward=reward,
                terminated=ended,
                success=reward > 0.0,
                score=reward,
                info={STEP_REWARD: 0.0 - regret},
            )
        lines = []
        pos = start
        reward = 0.0
        ended = False
        rand = self.np_random.random
        for a in moves:
            # Gymnasium's categorical_sample: the first outcome whose running sum exceeds u
            u = rand()
            k = 0 if u < cum0 else 1 if u < cum1 else 2 if u < cum2 else 0
            new = view.next_state[pos][a][k]
            text = _OUTCOMES[(a, _SLIPS[a][k], new == pos)]
            pos = new
            if view.terminal[pos]:
                ended = True
                if view.goal[pos]:
                    reward = 1.0
                    text += _WON
                else:
                    text += _FELL
                lines.append(text)
                break
            lines.append(text)
        self._pos = pos
        self._last_action = (
            ACTION_NAMES[moves[0]] if len(moves) == 1 else " || ".join(ACTION_NAMES[a] for a in moves)
        )
        oracle = view.oracle
        if len(moves) == 1 and self.actions_per_turn == 1:
            self._last_regret = oracle.regret(start, moves[0], moves_left)
        else:
            best = oracle.value(start, moves_left)
            got = oracle.sequence_value(start, moves, moves_left - self.actions_per_turn)
            self._last_regret = max(best - got, 0.0)
        return Transition(
            observation=f"{lines[0]}\n{view.grid(pos)}"
            if len(lines) == 1
            else "\n".join([*lines, view.grid(pos)]),
            reward=reward,
            terminated=ended,
            success=reward > 0.0,
            score=reward,
            info={STEP_REWARD: 0.0 - self._last_regret},
        )

    def _decision_turns(self) -> int:
        """Turns left when the current action was chosen (``_apply`` runs after the count)."""
        return self._episode_max_turns - self._turn + 1

    # ------------------------------------------------------------ state
    def _get_state(self) -> dict[str, Any]:
        assert self._view is not None
        return {
            "rows": self._view.model.rows,
            "pos": self._pos,
            "last_action": self._last_action,
            "last_regret": self._last_regret,
        }

    def _check_state(self, state: Any, base: Mapping[str, Any]) -> None:
        if not isinstance(state, dict) or set(state) != {"rows", "pos", "last_action", "last_regret"}:
            raise ValueError("a FrozenLake state is a dict with rows, pos, last_action, last_regret")
        rows = state["rows"]
        if self._view is None or rows is not self._view.model.rows:
            if not isinstance(rows, tuple) or tuple(validate_rows(rows)) != self._rows_of(base["task_id"]):
                raise ValueError(f"the state's map is not the map of task {base['task_id']!r}")
        pos = state["pos"]
        if isinstance(pos, bool) or not isinstance(pos, int) or not 0 <= pos < len(rows) * len(rows[0]):
            raise ValueError(f"pos must be a cell of the map, got {pos!r}")
        if state["last_action"] is not None and not isinstance(state["last_action"], str):
            raise ValueError("last_action must be None or a str")
        regret = state["last_regret"]
        if isinstance(regret, bool) or not isinstance(regret, float | int) or not math.isfinite(regret):
            raise ValueError(f"last_regret must be a finite number, got {regret!r}")
        view = self._view
        if view is None or rows is not view.model.rows:
            view = _lake_view(rows, self.is_slippery, self.success_rate)
        oracle = view.oracle
        moves = base["episode_max_turns"] * self.actions_per_turn
        if oracle.converged_at is None and moves > oracle.horizon:
            self._check_horizon(view, base["episode_max_turns"])

    def _set_state(self, state: dict[str, Any]) -> None:
        rows = state["rows"]
        if self._view is None or rows is not self._view.model.rows:  # skip the cache lookup
            self._view = _lake_view(tuple(rows), self.is_slippery, self.success_rate)
        self._pos = int(state["pos"])
        self._last_action = state["last_action"]
        self._last_regret = float(state["last_regret"])

    def _fork(self, k: int) -> list[TextEnv]:
        # the state is a few immutable values beside the shared map and oracle: copied
        return self._fork_by_copy(k)

    def _state_key(self) -> str:
        return str(self._pos)

    def _extra_info(self) -> dict[str, Any]:
        ncol = self._view.model.ncol if self._view is not None else 1
        return {
            "position": divmod(self._pos, ncol),
            "last_action": self._last_action,
            "last_regret": self._last_regret,
        }

    # ------------------------------------------------------------ oracle
    @property
    def position(self) -> tuple[int, int]:
        """The player's (row, col)."""
        return divmod(self._pos, self._require_view().model.ncol)

    @property
    def last_regret(self) -> float:
        """Optimal value minus the value of the last valid action (0 after reset)."""
        return self._last_regret

    @property
    def last_action(self) -> str | None:
        """The moves of the last valid action, e.g. ``"Left"``; None after reset."""
        return self._last_action

    @property
    def oracle(self) -> FrozenLakeOracle:
        """The exact oracle of the current map and dynamics."""
        return self._require_view().oracle

    def _require_view(self) -> _LakeView:
        if self._view is None:
            raise RuntimeError("call reset() first")
        return self._view

    def _move_budget(self) -> int:
        return 0 if self._done else self.turns_left * self.actions_per_turn

    def q_values(self) -> np.ndarray:
        """``Q`` of the four moves (Left, Down, Right, Up) for the current cell and budget."""
        view = self._require_view()
        return view.oracle.q_values(self._pos, self._move_budget())

    def score_action(self, action: str) -> float:
        """The exact success probability after ``action`` from the current state (see the
        class doc); an invalid action scores the value of one wasted turn. No state changes."""
        view = self._require_view()
        budget = self._move_budget()
        if budget == 0:
            return 0.0
        after = budget - self.actions_per_turn
        moves: tuple[int, ...] | str = "not text"
        if isinstance(action, str) and len(action) <= self.max_action_chars:
            moves = parse_moves(action, self.actions_per_turn)
        if isinstance(moves, str):
            return view.oracle.value(self._pos, after)
        if len(moves) == 1 and self.actions_per_turn == 1:
            return float(view.oracle.q_values(self._pos, budget)[moves[0]])
        return view.oracle.sequence_value(self._pos, moves, after)

    def optimal_success_probability(
        self, turns: int | float | None = None, *, from_start: bool = False
    ) -> float:
        """The best achievable success probability from the current cell (or the start)
        with ``turns`` turns (default: the turns left; ``math.inf``: no limit)."""
        view = self._require_view()
        cell = view.model.start if from_start else self._pos
        if turns is None:
            turns = self.episode_max_turns if from_start else (0 if self._done else self.turns_left)
        if turns == float("inf"):
            return float(view.oracle.infinite_values()[cell])
        return view.oracle.value(cell, int(turns) * self.actions_per_turn)

    def error_action(self, rng: np.random.Generator) -> str:
        """A lowest-Q move, preferring one aimed at a hole, then one that may slip into a
        hole; remaining ties broken by ``rng``. Its regret ``max(q) - min(q)`` is positive
        unless every move is as good as the best (a goal out of the budget's reach, or one
        no move can miss): then no move is a mistake, and ``InjectError`` and the
        error-state analysis inject none (``agentenvs.wrappers.inject_error``)."""
        view = self._require_view()
        q = view.oracle.q_values(self._pos, max(self._move_budget(), 1))
        worst = np.flatnonzero(q <= q.min() + 1e-12)
        model = view.model
        landing = model.next_state[self._pos, worst]  # (n, 3)
        may_fall = ((model.prob[self._pos, worst] > 0) & model.is_hole[landing]).any(axis=1)
        aimed = model.is_hole[landing[:, 1]]
        rank = 2 * aimed.astype(int) + may_fall.astype(int)
        choices = worst[rank == rank.max()]
        return format_action(int(choices[int(rng.integers(len(choices)))]))

    @staticmethod
    def format_action(action: int) -> str:
        return format_action(action)


@lru_cache(maxsize=1)
def _bundled_ids() -> tuple[str, ...]:
    return tuple(bundled_tasks())
