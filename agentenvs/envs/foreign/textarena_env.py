"""TextArena's games as text envs of the suite (replay restore).

TextArena (``textarena``, the ``ecosystem`` extra) is a collection of text games, each a
``textarena.Env`` that is reset with a player count and a seed and stepped with one
player's action text. :class:`TextArenaEnv` plays one of them: a single-player game
(GuessTheNumber, TowerOfHanoi, Minesweeper, Mastermind, LightsOut, ...) by the agent
alone, a two-player game (TicTacToe, ConnectFour) against a fixed opponent policy whose
moves the env makes itself between the agent's turns.

The games draw from Python's shared ``random`` generator (their reset seeds it with
``random.seed``). Every call into a game runs with that generator's state swapped for the
game's own, so two games, or the live game and the spare a replay runs on, never draw
from each other's stream, a game's ``random.seed`` leaves the process's stream as it was,
and nothing else that uses ``random`` moves a game (calls are serialised by a lock; code
on another thread that draws from ``random`` meanwhile would still do so). The swap costs
about 30 us a call, half the adapter's cost on a small game
(``benchmarks/bench_foreign_ecosystem.py``). What a game prints while it runs is dropped.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np

from agentenvs.core.env import short_repr
from agentenvs.envs.foreign.replay import SEED_BOUND, ReplayTextEnv, SourceStep, _digest

EXTRA_HINT = "pip install 'agentenvs[ecosystem]'"

#: an opponent: (the game, a generator seeded for the episode) -> its action text
Opponent = Callable[[Any, np.random.Generator], str]

_RANDOM_LOCK = threading.RLock()

#: what a move looks like in the games played here: a token in square brackets
MOVE_PATTERN = r"\[[^\[\]\x00-\x1f]+\]"


def _import_textarena() -> Any:
    try:
        import textarena
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(f"TextArenaEnv needs TextArena: {EXTRA_HINT}") from exc
    return textarena


def _family(game: str) -> str:
    """The game's name without its version and variant (``"TicTacToe-v0"`` -> ``"TicTacToe"``)."""
    return game.split("-v", 1)[0]


# ------------------------------------------------------------ legal moves and errors
def _tictactoe_moves(env: Any) -> list[str]:
    board = env.state.game_state["board"]
    return [f"[{r * 3 + c}]" for r in range(3) for c in range(3) if board[r][c] == ""]


def _connect_four_moves(env: Any) -> list[str]:
    top = env.state.game_state["board"][0]
    return [f"[{c}]" for c in range(len(top)) if top[c] == "."]


#: the legal moves of the two-player games the named opponents can play, by family
LEGAL_MOVES: dict[str, Callable[[Any], list[str]]] = {
    "TicTacToe": _tictactoe_moves,
    "ConnectFour": _connect_four_moves,
}


def _random_move(family: str) -> Opponent:
    moves = LEGAL_MOVES[family]

    def play(env: Any, rng: np.random.Generator) -> str:
        legal = moves(env)
        return legal[int(rng.integers(len(legal)))] if legal else "[0]"

    return play


def _first_move(family: str) -> Opponent:
    moves = LEGAL_MOVES[family]

    def play(env: Any, rng: np.random.Generator) -> str:
        legal = moves(env)
        return legal[0] if legal else "[0]"

    return play


#: the named opponents: "random" plays a legal move drawn from the episode's generator,
#: "first" the legal move with the lowest number
OPPONENTS: dict[str, Callable[[str], Opponent]] = {"random": _random_move, "first": _first_move}


def _error_action(env: Any, family: str, rng: np.random.Generator) -> str:
    """A well-formed move drawn at random (the games have no oracle to tell a bad one)."""
    raw = getattr(env, "env", env)
    if family == "GuessTheNumber":
        return f"[{int(rng.integers(raw.min_number, raw.max_number + 1))}]"
    if family == "TowerOfHanoi":
        a, b = rng.choice(["A", "B", "C"], size=2, replace=False)
        return f"[{a} {b}]"
    if family == "Minesweeper":
        return f"[{int(rng.integers(raw.rows))} {int(rng.integers(raw.cols))}]"
    if family == "LightsOut":
        return f"[{int(rng.integers(raw.size))} {int(rng.integers(raw.size))}]"
    if family == "Mastermind":
        digits = rng.choice(
            np.arange(1, raw.num_numbers + 1), size=raw.code_length, replace=raw.duplicate_numbers
        )
        return "[" + " ".join(str(int(d)) for d in digits) + "]"
    if family == "Secretary":
        return "[accept]" if rng.random() < 0.2 else "[continue]"
    if family in LEGAL_MOVES:
        legal = LEGAL_MOVES[family](raw)
        if legal:
            return legal[int(rng.integers(len(legal)))]
    return f"[{int(rng.integers(10))}]"


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(_canonical(v) for v in value)
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    return f"<{type(value).__name__}>"


def _state_text(value: Any) -> str:
    """:func:`_canonical` of a game's state, by ``json`` where it can (the usual case, in
    a tenth of the time)."""
    try:
        return json.dumps(value, sort_keys=True, default=_json_default)
    except (TypeError, ValueError):  # keys of mixed types, cycles
        return _canonical(value)


def _canonical(value: Any, depth: int = 0) -> str:
    """A text of ``value`` equal in every process for equal values (no ids, no set order)."""
    if depth > 8:
        return "..."
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    if isinstance(value, np.ndarray):
        return f"array({value.tolist()!r})"
    if isinstance(value, np.generic):
        return repr(value.item())
    if isinstance(value, Mapping):
        items = sorted(
            (_canonical(k, depth + 1), _canonical(v, depth + 1)) for k, v in value.items()
        )
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(value, set | frozenset):
        return "set(" + ", ".join(sorted(_canonical(v, depth + 1) for v in value)) + ")"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_canonical(v, depth + 1) for v in value) + "]"
    return f"<{type(value).__name__}>"


class _Game:
    """A TextArena game and the randomness that is its own: the state of Python's shared
    ``random`` generator while it runs, and its opponent's generator."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.random_state = random.Random(0).getstate()
        self.opponent_rng = np.random.default_rng(0)

    @contextmanager
    def running(self) -> Iterator[None]:
        """Python's shared ``random`` generator is in this game's state while the block
        runs, and what the game prints is dropped (some print their progress: it would
        corrupt a server that speaks on stdout)."""
        # The state, not the module's functions, is swapped: a game may hold a function
        # of the shared generator taken before (Secretary keeps ``random.random`` from
        # its constructor), which only the state reaches.
        with _RANDOM_LOCK:
            outside = random.getstate()
            random.setstate(self.random_state)
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    yield
            finally:
                self.random_state = random.getstate()
                random.setstate(outside)

    def close(self) -> None:
        self.env = None


class TextArenaEnv(ReplayTextEnv):
    """One TextArena game, played in text.

    Description:
        ``game`` is a TextArena id (``"GuessTheNumber-v0"``, ``"TowerOfHanoi-v0"``,
        ``"Minesweeper-v0-small"``, ``"TicTacToe-v0"``, ...; ``game_kwargs`` override its
        registered arguments). The game is made without TextArena's wrappers: the env
        shows the game's own messages and passes the agent's text to the game as it is.
        A two-player game is played against ``opponent``: a name (:data:`OPPONENTS`:
        ``"random"`` or ``"first"``, for the games of :data:`LEGAL_MOVES`) or a callable
        ``opponent(game, rng) -> str`` (module-level, so envs can be rebuilt in another
        process) that is given the TextArena env and a generator seeded for the episode.
        The agent is player ``player`` (0 moves first).

    Action Space:
        Free text, handed to the game as it is: each game reads its own format (``[5]``,
        ``[A C]``, ``[3 2]``), said in its first message. Text with no move in it (nothing
        that matches ``move_pattern``, by default a token in square brackets, the form
        every game played here reads) is an invalid action: it costs the turn, never
        reaches the game and says the format. A move the game itself refuses is the
        game's business: it says so and, by its rules, ends the game on a second one in a
        row (a loss).

    Observation Space:
        The messages the game sent the agent since its last action, one a line as
        ``[GAME] ...`` or ``[Player 1] ...`` (the opponent's moves); the agent's own
        action, which the games echo, is left out. At the end, the game's reason and the
        agent's reward.

    Starting State:
        Task ids are seeds: ``n_tasks`` ids ``"0"``, ``"1"``, ... (any decimal id below
        2**31 is accepted). Task ``i`` is the game reset with ``seed=i`` (the secret
        number, the code, the scrambled grid). What the game draws later (Minesweeper's
        mines, placed at the first click) and the opponent's draws come from a seed of
        the episode's own, so samples of one task differ and equal ``reset(seed=...)``
        calls give equal episodes.

    Rewards:
        The game's own reward for the agent, given at the end (0 before).

    Episode End:
        The game's end (a win, a loss, its own turn limit, a second invalid move) ends
        the episode; the suite's turn budget truncates as in every env. ``success``: a
        single-player reward of 1 or more, a two-player win. ``score``: a single-player
        reward clipped to [0, 1] (the games give partial credit, e.g. the share of disks
        placed), for two players 1 a win, 0.5 a draw, 0 a loss.

    Information:
        ``source`` (the game id). ``state_key`` is the game's state (its ``game_state``
        and whose turn it is). Snapshots, ``restore`` and ``fork`` replay the episode
        (``ReplayTextEnv``); a game that does not replay is refused with
        ``SnapshotError``. ``error_action`` is a well-formed move drawn at random.

    Arguments:
        game, game_kwargs, opponent, player, n_tasks, move_pattern (a regular
        expression; ``None``: every action reaches the game), and the base env's
        arguments.

    Version History:
        v0: first version.
    """

    default_max_turns: ClassVar[int] = 30

    @classmethod
    def calls_wait(cls, **kwargs: Any) -> bool:
        return False  # the games are in-process computations

    def __init__(
        self,
        *,
        game: str = "GuessTheNumber-v0",
        game_kwargs: Mapping[str, Any] | None = None,
        opponent: str | Opponent = "random",
        player: int = 0,
        n_tasks: int = 100,
        move_pattern: str | None = MOVE_PATTERN,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._move = None if move_pattern is None else re.compile(move_pattern)
        if (
            isinstance(n_tasks, bool)
            or not isinstance(n_tasks, int)
            or not 1 <= n_tasks <= SEED_BOUND
        ):
            raise ValueError(
                f"n_tasks must be an int in [1, {SEED_BOUND}], got {short_repr(n_tasks)}"
            )
        ta = _import_textarena()
        from textarena.envs.registration import ENV_REGISTRY

        if not isinstance(game, str) or game not in ENV_REGISTRY:
            raise ValueError(f"{short_repr(game)} is not a TextArena game id")
        self.game = game
        self.game_kwargs = dict(game_kwargs or {})
        self._family = _family(game)
        self._ta = ta
        self.source = self._make_source()
        self.num_players = self._count_players(self.source)
        if self.num_players not in (1, 2):
            raise ValueError(f"{game} is a {self.num_players}-player game; one or two are played")
        if player not in range(self.num_players):
            raise ValueError(
                f"player must be in range({self.num_players}), got {short_repr(player)}"
            )
        self.player = int(player)
        self.opponent: Opponent | None = None
        if self.num_players == 2:
            if isinstance(opponent, str):
                if opponent not in OPPONENTS:
                    raise ValueError(f"opponent must be one of {sorted(OPPONENTS)} or a callable")
                if self._family not in LEGAL_MOVES:
                    raise ValueError(
                        f"the named opponents know the moves of {sorted(LEGAL_MOVES)}, not "
                        f"{self._family}: pass a callable opponent(game, rng) -> str"
                    )
                self.opponent = OPPONENTS[opponent](self._family)
            elif callable(opponent):
                self.opponent = opponent
            else:
                raise ValueError(
                    f"opponent must be a name or a callable, got {short_repr(opponent)}"
                )
        self._task_list = [str(i) for i in range(n_tasks)]
        self._example = _error_action(self.source.env, self._family, np.random.default_rng(0))

    def _count_players(self, game: _Game) -> int:
        """1 or 2: a game that takes one player keeps a ``SinglePlayerState``; the others
        refuse a count they do not play (an assertion or a ``ValueError``) or keep their
        own (QuantumTicTacToe's state always has two)."""
        for n in (1, 2):
            try:
                with game.running():
                    game.env.reset(num_players=n, seed=0)
            except (AssertionError, ValueError):
                continue
            state = game.env.state
            if n == 1 and not isinstance(state, self._ta.SinglePlayerState):
                continue
            if state.num_players == n:
                return n
        raise ValueError(f"{self.game} is played by neither one nor two players")

    @property
    def source_name(self) -> str:
        return f"TextArena {self.game}"

    @property
    def task_ids(self) -> Sequence[str]:
        return self._task_list

    def _known_task(self, task_id: Any) -> Sequence[str]:
        ok = isinstance(task_id, str) and task_id.isdigit() and task_id.isascii()
        return (
            (task_id,) if ok and int(task_id) < SEED_BOUND and str(int(task_id)) == task_id else ()
        )

    # ------------------------------------------------------------ the source
    def _make_source(self) -> _Game:
        from textarena.envs.registration import ENV_REGISTRY

        spec = ENV_REGISTRY[self.game]
        entry = spec.entry_point
        if isinstance(entry, str):
            module, _, attr = entry.partition(":")
            entry = getattr(__import__(module, fromlist=[attr]), attr)
        # the bare game: no wrapper reformats its messages or the agent's text
        return _Game(entry(**{**spec.kwargs, **self.game_kwargs}))

    def _close_source(self, source: Any) -> None:
        source.close()

    def _render(self, game: _Game, messages: list[Any]) -> str:
        roles = game.env.state.role_mapping
        action = self._ta.ObservationType.PLAYER_ACTION
        lines = []
        for sender, text, kind in messages:
            if kind == action and sender in (self.player, self._ta.GAME_ID):
                continue  # the agent's own action, echoed back
            name = "GAME" if sender == self._ta.GAME_ID else roles.get(sender, f"Player {sender}")
            lines.append(f"[{name}] {str(text).strip()}")
        return "\n".join(lines)

    def _take_messages(self, game: _Game) -> list[Any]:
        queue = game.env.state.observations
        messages = list(queue.get(self.player, []))
        queue[self.player] = []
        return messages

    def _opponents_turns(self, game: _Game, done: bool) -> bool:
        """Let the opponent move until it is the agent's turn or the game is over."""
        env = game.env
        moves = 0
        while not done and self.opponent is not None and env.state.current_player_id != self.player:
            env.get_observation()  # the opponent's messages, consumed as a player would
            done, _ = env.step(str(self.opponent(env, game.opponent_rng)))
            moves += 1
            if moves > 1000:
                raise RuntimeError(f"the opponent of {self.game} moved 1000 times in a row")
        return bool(done)

    def _game_key(self, game: _Game, done: bool) -> str:
        state = game.env.state
        return _state_text((state.game_state, state.current_player_id, done))

    def _source_reset(self, source: Any, task_id: str, seed: int) -> tuple[str, str]:
        game: _Game = source
        with game.running():
            game.env.reset(num_players=self.num_players, seed=int(task_id))
            # the task fixed the start; the episode's own seed draws what happens next
            random.seed(seed)
            game.opponent_rng = np.random.default_rng(seed)
            done = self._opponents_turns(game, False)
            text = self._render(game, self._take_messages(game))
        return text, _digest(self._game_key(game, done))

    def _source_step(self, source: Any, action: str) -> tuple[SourceStep, str]:
        game: _Game = source
        if self._move is not None and not self._move.search(action):
            refused = f"Invalid action: no move in {short_repr(action, 60)}. {self.action_format()}"
            return SourceStep(observation=refused, action_valid=False), self._key
        with game.running():
            done, _ = game.env.step(action)
            done = self._opponents_turns(game, bool(done))
            text = self._render(game, self._take_messages(game))
        key = _digest(self._game_key(game, done))
        if not done:
            return SourceStep(observation=text), key
        state = game.env.state
        rewards = state.rewards or {}
        reward = float(rewards.get(self.player, 0.0))
        if self.num_players == 1:
            success, score = reward >= 1.0, min(max(reward, 0.0), 1.0)
        else:
            success, score = reward > 0, (1.0 if reward > 0 else 0.5 if reward == 0 else 0.0)
        reason = state.game_info.get(self.player, {}).get("reason") or "the game ended."
        end = f"The game is over: {str(reason).strip()} Your reward: {reward:g}."
        observation = f"{text}\n{end}" if text else end
        done_step = SourceStep(
            observation=observation, reward=reward, terminated=True, success=success, score=score
        )
        return done_step, key

    # ------------------------------------------------------------ actions
    def action_format(self) -> str:
        if self._move is None:
            return "Answer as the game's rules say (its first message gives the move format)."
        return (
            "Answer with a move in square brackets, as the game's first message says "
            f"(e.g. {self._example})."
        )

    def error_action(self, rng: np.random.Generator) -> str:
        return _error_action(self.source.env, self._family, rng)

    def _extra_info(self) -> dict[str, Any]:
        return {"source": self.game}
