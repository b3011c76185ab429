"""TextArena's games as text envs of the suite: the contract on each, exact replay, solved
games scoring 1, a game that does not replay refused by name, and a Pass@(K,T) run.

The games are TextArena's own (its registry's ids, made by the adapter without TextArena's
wrappers); nothing of them is mocked. The game that does not replay is a real
``textarena.Env`` defined here, registered in TextArena's registry for the test.
"""

from __future__ import annotations

import random
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

ta = pytest.importorskip(
    "textarena", reason="TextArena is not installed: pip install 'agentenvs[ecosystem]'"
)

import agentenvs  # noqa: E402,F401 - registers the ids
from agentenvs.core.errors import SnapshotError  # noqa: E402
from agentenvs.envs.foreign.textarena_env import TextArenaEnv  # noqa: E402
from agentenvs.policy.base import Conversation, ScriptedPolicy  # noqa: E402
from agentenvs.policy.registry import register_policy  # noqa: E402
from agentenvs.testing import check_env_contract  # noqa: E402

ENV_ID = "agentenvs/TextArena-v0"
#: four single-player games and two two-player ones, each against a named opponent
GAMES: list[dict[str, Any]] = [
    {"game": "GuessTheNumber-v0"},
    {"game": "TowerOfHanoi-v0"},
    {"game": "Minesweeper-v0-small"},
    {"game": "Mastermind-v0"},
    {"game": "TicTacToe-v0", "opponent": "random"},
    {"game": "ConnectFour-v0", "opponent": "first"},
]


@pytest.mark.parametrize("kwargs", GAMES, ids=[g["game"] for g in GAMES])
def test_the_contract_holds_on_each_game(kwargs: dict[str, Any]) -> None:
    check_env_contract(ENV_ID, env_kwargs={**kwargs, "n_tasks": 20}, steps=20)


@pytest.mark.parametrize("kwargs", GAMES, ids=[g["game"] for g in GAMES])
def test_a_restore_replays_to_the_same_game_state(kwargs: dict[str, Any]) -> None:
    env = gym.make(ENV_ID, **kwargs).unwrapped
    rng = np.random.default_rng(3)
    env.reset(seed=5)
    for _ in range(3):
        if env.done:
            break
        env.step(env.error_action(rng))
    if env.done:
        env.reset(seed=6)
    snap = env.snapshot()
    key_at_snap = env.state_key()
    seen = []
    for _ in range(3):
        obs, *_ = env.step(env.error_action(np.random.default_rng(9)))
        seen.append(obs)
        if env.done:
            break
    # a fresh env (never reset) restored from the bytes replays to the same point
    other = gym.make(ENV_ID, **kwargs).unwrapped
    other.restore(type(snap).from_bytes(snap.to_bytes()))
    assert other.state_key() == key_at_snap
    replayed = []
    for _ in range(len(seen)):
        obs, *_ = other.step(other.error_action(np.random.default_rng(9)))
        replayed.append(obs)
    assert replayed == seen
    env.close()
    other.close()


def _play(env: TextArenaEnv, actions: list[str]) -> list[str]:
    return [env.step(a)[0] for a in actions if not env.done]


def test_a_game_draws_from_its_own_random_whatever_else_draws_meanwhile() -> None:
    # Minesweeper places its mines at the first click, from Python's global random: a
    # second game reset in between and draws of the caller's must not move them
    moves = ["[2 2]", "[0 0]", "[4 4]", "[0 4]", "[4 0]"]
    alone = TextArenaEnv(game="Minesweeper-v0-small")
    alone.reset(seed=1, options={"task_id": "3"})
    expected = _play(alone, moves)
    env = TextArenaEnv(game="Minesweeper-v0-small")
    other = TextArenaEnv(game="Minesweeper-v0-small")
    env.reset(seed=1, options={"task_id": "3"})
    got = []
    for move in moves:
        other.reset(seed=int(random.random() * 1000))
        random.seed(12345)
        got += _play(env, [move])
    assert got == expected
    for e in (alone, env, other):
        e.close()


def test_a_game_holding_a_function_of_the_shared_random_is_seeded_too() -> None:
    # Secretary draws its values with the ``random.random`` it kept in its constructor
    first = []
    for _ in range(2):
        env = TextArenaEnv(game="Secretary-v0")
        random.random()
        obs, _ = env.reset(seed=0, options={"task_id": "4"})
        first.append(obs)
        env.close()
    assert first[0] == first[1] and "The current value is" in first[0]
    check_env_contract(ENV_ID, env_kwargs={"game": "Secretary-v0", "n_tasks": 10}, steps=15)


def test_text_without_a_move_is_refused_before_the_game_and_costs_only_the_turn() -> None:
    env = TextArenaEnv(game="GuessTheNumber-v0")
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step("I think it is seven")
    assert info["action_valid"] is False and not terminated
    assert "square brackets" in obs and env.turn == 1
    # the game's own rule for a move it refuses stays the game's: a second one in a row
    # loses (an out-of-range guess is well-formed, so it reaches the game)
    obs, _, terminated, _, info = env.step("[99]")
    assert info["action_valid"] is True and not terminated and "invalid move" in obs
    obs, reward, terminated, _, info = env.step("[98]")
    assert terminated and info["success"] is False and "The game is over" in obs
    env.close()


def test_guess_the_number_solved_with_the_games_own_number_scores_1() -> None:
    env = gym.make(ENV_ID, game="GuessTheNumber-v0").unwrapped
    obs, _ = env.reset(seed=0, options={"task_id": "7"})
    assert "Guess The Number" in obs
    secret = env.source.env.game_number
    wrong = 1 if secret != 1 else 2
    obs, reward, terminated, _, info = env.step(f"My guess: [{wrong}]")
    assert not terminated and ("higher" in obs or "lower" in obs)
    obs, reward, terminated, _, info = env.step(f"[{secret}]")
    assert terminated and reward == 1.0
    assert info["success"] is True and info["score"] == 1.0
    assert "You guessed the correct number" in obs
    env.close()


def test_tower_of_hanoi_solved_by_its_recursion_scores_1_and_a_partial_one_less() -> None:
    def hanoi(n: int, a: str, b: str, c: str) -> list[str]:
        return [] if n == 0 else hanoi(n - 1, a, c, b) + [f"[{a} {c}]"] + hanoi(n - 1, b, a, c)

    env = TextArenaEnv(game="TowerOfHanoi-v0", max_turns=20)
    env.reset(seed=0)
    plan = hanoi(3, "A", "B", "C")
    assert len(plan) == 7
    for move in plan:
        obs, reward, terminated, truncated, info = env.step(move)
    assert terminated and reward == 1.0 and info["success"] is True and info["score"] == 1.0
    # the biggest disk on C, then moves to and fro until the game's own turn limit ends
    # it (its 15th move): a third of the disks placed, the game's partial credit
    env.reset(seed=0)
    moves = ["[A C]", "[A B]", "[C B]", "[A C]"] + (["[B A]", "[A B]"] * 6)[:11]
    for move in moves[:-1]:
        obs, reward, terminated, truncated, info = env.step(move)
        assert not terminated
    obs, reward, terminated, truncated, info = env.step(moves[-1])
    assert terminated and info["success"] is False
    assert reward == pytest.approx(1 / 3) and info["score"] == pytest.approx(1 / 3)
    assert "turn limit has been reached" in obs
    env.close()


def test_tictactoe_won_against_the_first_move_opponent_and_lost_by_its_rules() -> None:
    env = TextArenaEnv(game="TicTacToe-v0", opponent="first")
    obs, _ = env.reset(seed=0)
    assert "Player 0" in obs
    # the opponent takes the lowest free cell: 0, then 1; the agent fills 2, 5, 8
    obs, *_ = env.step("[2]")
    assert "[Player 1] [0]" in obs
    env.step("[5]")
    obs, reward, terminated, _, info = env.step("[8]")
    assert terminated and reward == 1.0 and info["success"] is True and info["score"] == 1.0
    # as the second player, two moves the game refuses in a row lose the game
    env = TextArenaEnv(game="TicTacToe-v0", opponent="first", player=1)
    obs, _ = env.reset(seed=0)
    assert "[Player 0] [0]" in obs
    env.step("[0]")
    obs, reward, terminated, _, info = env.step("[0]")
    assert terminated and reward == -1.0 and info["success"] is False and info["score"] == 0.0
    env.close()


def _always_center(game: Any, rng: np.random.Generator) -> str:
    """A callable opponent: the centre, else a random free cell."""
    board = game.state.game_state["board"]
    free = [r * 3 + c for r in range(3) for c in range(3) if board[r][c] == ""]
    return "[4]" if 4 in free else f"[{free[int(rng.integers(len(free)))]}]"


def test_a_callable_opponent_plays_and_the_contract_holds_with_it() -> None:
    env = TextArenaEnv(game="TicTacToe-v0", opponent=_always_center, player=1)
    obs, _ = env.reset(seed=0)
    assert "[Player 0] [4]" in obs
    env.close()
    check_env_contract(
        ENV_ID,
        env_kwargs={"game": "TicTacToe-v0", "opponent": _always_center, "n_tasks": 5},
        steps=15,
        check_processes=False,
    )


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="not a TextArena game id"):
        TextArenaEnv(game="NoSuchGame-v0")
    with pytest.raises(ValueError, match="named opponents know the moves"):
        TextArenaEnv(game="Nim-v0")
    with pytest.raises(ValueError, match="opponent must be one of"):
        TextArenaEnv(game="TicTacToe-v0", opponent="minimax")
    with pytest.raises(ValueError, match="player must be in range"):
        TextArenaEnv(game="GuessTheNumber-v0", player=1)


def _first_bracket(game: Any, rng: np.random.Generator) -> str:
    return "[0]"


@pytest.mark.parametrize(
    ("game", "players"),
    [
        ("GuessTheNumber-v0", 1),
        ("Nim-v0", 2),  # its state refuses one player (an assertion)
        ("GermanWhist-v0", 2),  # its reset refuses one player (a ValueError)
        ("QuantumTicTacToe-v0", 2),  # its state has two players whatever it is told
        ("PublicGoodsGame-v0", 2),  # a many-player state, which takes one too
    ],
)
def test_the_player_count_is_read_from_the_game(game: str, players: int) -> None:
    env = TextArenaEnv(game=game, opponent=_first_bracket)
    assert env.num_players == players
    env.reset(seed=0)
    assert env.source.env.state.num_players == players
    env.close()


class _Unseeded(ta.Env):
    """A TextArena game whose reset ignores the seed: its number comes from the OS."""

    def reset(self, num_players: int, seed: int | None = None) -> None:
        self.state = ta.SinglePlayerState(num_players=num_players, seed=seed, max_turns=50)
        lucky = random.SystemRandom().getrandbits(64)
        self.state.reset(
            game_state={"lucky": lucky},
            player_prompt_function=lambda player_id, game_state: (
                f"Your lucky number is {game_state['lucky']}. Say [anything]."
            ),
        )

    def step(self, action: str) -> tuple[bool, dict[str, Any]]:
        self.state.add_observation(
            message="Noted.", observation_type=ta.ObservationType.GAME_MESSAGE
        )
        return self.state.step()


def test_a_game_that_does_not_replay_is_refused_by_name_and_left_as_it_was() -> None:
    from textarena.envs.registration import ENV_REGISTRY

    ta.register(id="AgentenvsTestUnseeded-v0", entry_point=_Unseeded)
    try:
        env = TextArenaEnv(game="AgentenvsTestUnseeded-v0")
        env.reset(seed=0)
        env.step("[a]")
        snap = env.snapshot()
        env.step("[b]")
        before = env.snapshot()
        with pytest.raises(SnapshotError, match="AgentenvsTestUnseeded-v0 is not replayable"):
            env.restore(snap)
        assert env.snapshot().to_bytes() == before.to_bytes()
        obs, *_ = env.step("[c]")  # and it plays on
        assert "Noted." in obs
        env.close()
    finally:
        ENV_REGISTRY.pop("AgentenvsTestUnseeded-v0", None)


class Bisector(ScriptedPolicy):
    """Guess the Number by bisection on the game's own hints."""

    conditions_on_budget = False

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        game = conversation.env.source.env
        low, high = game.min_number, game.max_number
        for guess, hint in game.state.game_state["guess_history"]:
            if hint == "higher":
                low = max(low, guess + 1)
            else:
                high = min(high, guess - 1)
        return f"[{(low + high) // 2}]"


register_policy("test_foreign_textarena/bisector", f"{__name__}:Bisector")


def test_pass_at_k_t_runs_on_a_textarena_game(tmp_path: Any) -> None:
    from agentenvs.eval.records import TRAJECTORIES_NAME, read_records
    from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t

    config = EvalConfig(
        env_id=ENV_ID,
        policy="test_foreign_textarena/bisector",
        task_ids=["0", "1"],
        n=2,
        budgets=[1, 6],
        env_kwargs={"game": "GuessTheNumber-v0"},
    )
    run_pass_at_k_t(config, tmp_path, workers=0, progress=False)
    records = list(read_records(tmp_path / TRAJECTORIES_NAME))
    assert len(records) == 2 * 2 * 2
    # bisection of 1..20 needs at most 5 guesses: every episode of 6 turns is solved
    long = [r for r in records if r["budget"] == 6]
    assert all(r["success"] for r in long) and len(long) == 4
    secrets = {}
    for r in long:
        assert 1 <= len(r["steps"]) <= 5
        secrets.setdefault(r["task_id"], r["steps"][-1]["action"])
    # the task fixes the secret: both samples of a task end on the same guess
    assert all(r["steps"][-1]["action"] == secrets[r["task_id"]] for r in long)
