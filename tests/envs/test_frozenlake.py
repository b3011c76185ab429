"""The FrozenLake text env: parsing, episode ends, budget, determinism, snapshots, tasks,
oracle-backed scoring, error actions and the scripted policies."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import agentenvs  # noqa: F401  (registers the ids)
from agentenvs.core import Snapshot
from agentenvs.core.errors import UnknownTaskError
from agentenvs.envs.frozenlake import make_tasks
from agentenvs.envs.frozenlake.env import FrozenLakeEnv, format_action, parse_moves
from agentenvs.envs.frozenlake.maps import (
    FIXED_MAPS,
    bundled_tasks,
    generate_solvable_map,
    is_solvable,
    parse_random_id,
    shortest_path,
)
from agentenvs.envs.frozenlake.oracle import oracle_for
from agentenvs.envs.frozenlake.policies import NoisyOraclePolicy, OraclePolicy, RandomPolicy
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import make_policy

STANDARD_KEYS = (
    "task_id",
    "turn",
    "max_turns",
    "turns_left",
    "success",
    "score",
    "action_valid",
    "state_key",
)
LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3


def still(map_name: str = "4x4", **kwargs) -> FrozenLakeEnv:  # type: ignore[no-untyped-def]
    """A non-slippery env, so every move is predictable."""
    env = FrozenLakeEnv(map_name=map_name, is_slippery=False, **kwargs)
    env.reset(seed=0)
    return env


# ------------------------------------------------------------------ parsing
@pytest.mark.parametrize(
    ("text", "moves"),
    [
        ("Left", (LEFT,)),
        ("left", (LEFT,)),
        ("LEFT", (LEFT,)),
        ("L", (LEFT,)),
        ("<answer>Left</answer>", (LEFT,)),
        ("<ANSWER> down </ANSWER>", (DOWN,)),
        ("1", (LEFT,)),
        ("2", (DOWN,)),
        ("3", (RIGHT,)),
        ("4", (UP,)),
        ("<answer>4</answer>", (UP,)),
        ("u", (UP,)),
        ("Right.", (RIGHT,)),
        ("**Up**", (UP,)),
        ("<think>Left is a hole, so go Down.</think> <answer>Down</answer>", (DOWN,)),
        ("<answer>Up</answer> wait, no: <answer>Right</answer>", (RIGHT,)),
        ("I'll go <answer>Right", (RIGHT,)),
        ("\n  Down \n", (DOWN,)),
    ],
)
def test_parse_accepts_the_documented_forms(text: str, moves: tuple[int, ...]) -> None:
    assert parse_moves(text) == moves


def test_parse_several_moves_per_turn() -> None:
    assert parse_moves("<answer>Left || Up</answer>", 2) == (LEFT, UP)
    assert parse_moves("Right, Down, 4", 3) == (RIGHT, DOWN, UP)
    assert isinstance(parse_moves("Left || Up"), str)  # over the one-move limit
    assert isinstance(parse_moves("Left || Up || Down", 2), str)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "go left",
        "Leftt",
        "5",
        "0",
        "<answer></answer>",
        "<answer>jump</answer>",
        "\x00Left",
        "Left\x07",
        "||",
        "Left || sideways",
        "x" * 5000,
        "é" * 100,
        "\ud800",
    ],
)
def test_parse_rejects_with_a_reason(text: str) -> None:
    assert isinstance(parse_moves(text), str)


# ------------------------------------------------------------------ episodes
def test_reset_observation_explains_rules_symbols_and_format() -> None:
    env = FrozenLakeEnv(map_name="4x4")
    obs, info = env.reset(seed=3)
    for needle in (
        "P = you",
        "_ = frozen",
        "O = hole",
        "G = goal",
        "slippery",
        "<answer>Left</answer>",
        "1 = Left",
        "P___\n_O_O\n___O\nO__G",
    ):
        assert needle in obs
    assert info["system_prompt"] in obs
    assert all(k in info for k in STANDARD_KEYS)
    assert info["position"] == (0, 0) and info["last_action"] is None and info["last_regret"] == 0.0
    assert env.observation_space.contains(obs)
    assert "not slippery" in FrozenLakeEnv(is_slippery=False).reset(seed=0)[0]


def test_reaching_the_goal_terminates_with_reward() -> None:
    env = still()
    path = [RIGHT, RIGHT, DOWN, DOWN, DOWN]
    for a in path:
        obs, reward, terminated, truncated, info = env.step(format_action(a))
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert "You moved" in obs
    obs, reward, terminated, truncated, info = env.step("Right")
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["success"] and info["score"] == 1.0 and info["position"] == (3, 3)
    assert "reached the goal" in obs and obs.endswith("O__√")
    with pytest.raises(gym.error.ResetNeeded):
        env.step("Left")


def test_falling_into_a_hole_terminates_without_success() -> None:
    env = still()
    env.step("Down")
    obs, reward, terminated, truncated, info = env.step("Right")
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert not info["success"] and info["score"] == 0.0
    assert "fell into a hole" in obs and "_X_O" in obs


def test_bumping_into_the_edge_stays_in_place() -> None:
    env = still()
    obs, *_, info = env.step("Up")
    assert "edge" in obs and info["position"] == (0, 0) and info["action_valid"]


def test_slips_are_reported() -> None:
    env = FrozenLakeEnv(map_name="8x8", max_turns=200)
    env.reset(seed=0)
    seen = set()
    for _ in range(60):
        obs, *_, terminated, truncated, info = env.step("Right")
        seen.add(obs.splitlines()[0].split(" but ")[-1].split(",")[0][:20])
        if terminated or truncated:
            env.reset()
    assert any("slipped" in s for s in seen) and "You moved Right." in seen


def test_budget_truncates_not_terminates() -> None:
    env = still(max_turns=3)
    for i in range(3):
        _, _, terminated, truncated, info = env.step("Left")
        assert not terminated and truncated == (i == 2)
    assert info["turns_left"] == 0
    _, info = env.reset(options={"max_turns": 5})
    assert info["max_turns"] == 5 and info["turns_left"] == 5


def test_budget_is_shown_when_asked() -> None:
    env = FrozenLakeEnv(map_name="4x4", show_budget=True, max_turns=4)
    obs, _ = env.reset(seed=0)
    assert obs.endswith("[4 turns left]")
    assert env.step("Left")[0].endswith("[3 turns left]")


@pytest.mark.parametrize(
    "action",
    [
        "",
        "garbage",
        "x" * (1 << 20),
        "<answer>" * 10_000,
        "\x00\x01\x02",
        "Left" * 100,
        "\ud800\udfff",
        "Left || Down",
        None,
        3,
        b"\xff\xfe",
    ],
)
def test_invalid_actions_cost_a_turn_and_nothing_else(action: object) -> None:
    env = still()
    env.step("Right")
    before = env.snapshot()
    obs, reward, terminated, truncated, info = env.step(action)  # type: ignore[arg-type]
    assert not info["action_valid"] and reward == 0.0 and not terminated and not truncated
    assert info["turn"] == 2 and info["position"] == (0, 1)
    assert "Invalid action" in obs and "<answer>Left</answer>" in obs
    if isinstance(action, str | bytes):  # text reaches the parser, which shows the map again
        assert "_P__" in obs
    assert info["last_action"] == "Right" and info["last_regret"] == before.state["last_regret"]


def test_oversized_action_is_invalid() -> None:
    env = still()
    _, _, _, _, info = env.step("L" * ((1 << 20) + 1))
    assert not info["action_valid"] and info["position"] == (0, 0)


def test_several_moves_per_turn() -> None:
    env = FrozenLakeEnv(map_name="4x4", is_slippery=False, actions_per_turn=3, max_turns=2)
    obs, _ = env.reset(seed=0)
    assert "1 to 3 moves" in obs
    obs, _, terminated, _, info = env.step("<answer>Right || Right || Down</answer>")
    assert info["position"] == (1, 2) and info["last_action"] == "Right || Right || Down"
    assert obs.count("You moved") == 3 and not terminated
    # the episode stops at the hole; the last move is ignored
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step("Down, Right, Right")
    assert terminated and info["position"] == (1, 1) and obs.count("You moved") == 2
    assert "fell into a hole" in obs and obs.count("\n") == 5  # two move lines, four rows
    env.reset(seed=0)
    assert not env.step("Down, Down, Down, Down")[4]["action_valid"]


# ------------------------------------------------------------------ tasks
def test_default_env_draws_bundled_tasks_by_seed() -> None:
    env = gym.make("agentenvs/FrozenLake-v0")
    ids = env.unwrapped.task_ids
    assert {"4x4", "8x8"} <= set(ids) and len(ids) >= 30
    drawn = {env.reset(seed=s)[1]["task_id"] for s in range(60)}
    assert len(drawn) > 10 and drawn <= set(ids)
    for task_id in ids:
        obs, info = env.reset(seed=0, options={"task_id": task_id})
        assert info["task_id"] == task_id and "P" in obs


def test_fixed_map_is_the_only_task() -> None:
    env = FrozenLakeEnv(desc=["SFH", "FFG"])
    assert list(env.task_ids) == ["desc:SFH/FFG"]
    assert {env.reset(seed=s)[1]["task_id"] for s in range(5)} == {"desc:SFH/FFG"}
    assert FrozenLakeEnv(map_name="8x8").task_ids == ["8x8"]


def test_generated_and_spelled_out_ids() -> None:
    env = FrozenLakeEnv()
    obs, info = env.reset(seed=0, options={"task_id": "random:size=5,p=0.8,seed=3"})
    rows = generate_solvable_map(5, 0.8, seed=3)
    assert info["task_id"] == "random:size=5,p=0.8,seed=3"
    assert env.snapshot().state["rows"] == rows
    assert env.reset(options={"task_id": "random:seed=3,p=0.8,size=5"})[0] == obs
    env.reset(options={"task_id": "desc:SFFF/FHFH/FFFH/HFFG"})
    assert env.snapshot().state["rows"] == FIXED_MAPS["4x4"]
    for bad in [
        "nope",
        "random:size=5,p=0.8",
        "random:size=1,p=0.8,seed=0",
        "desc:SFX/FFG",
        "desc:FFF/FFG",
        "random:size=4,p=0,seed=1",
        7,
        ["4x4"],
    ]:
        with pytest.raises(UnknownTaskError):
            env.reset(options={"task_id": bad})
    with pytest.raises(ValueError):
        env.reset(options={"colour": "blue"})


@pytest.mark.parametrize(
    "map_name",
    [
        "4x4",
        "8x8",
        "random:size=4,p=0.8,seed=0",  # bundled
        "random:size=6,p=0.8,seed=11",  # bundled
        "random:size=5,p=0.7,seed=3",  # generated on demand
        "random:seed=3,p=0.7,size=5",  # keys in any order
        "desc:SFH/FFG",
    ],
)
def test_map_name_takes_every_task_id_form(map_name) -> None:
    env = gym.make("agentenvs/FrozenLake-v0", map_name=map_name, max_turns=5)
    assert list(env.unwrapped.task_ids) == [map_name]
    played = FrozenLakeEnv(max_turns=5)
    for seed in (0, 1):
        obs, info = env.reset(seed=seed)
        assert info["task_id"] == map_name
        assert (obs, info) == played.reset(seed=seed, options={"task_id": map_name})
        assert env.unwrapped.snapshot().state["rows"] == played.snapshot().state["rows"]
        for move in ("Down", "Right", "Right", "Down", "Right"):
            got, want = env.step(move), played.step(move)
            assert got == want
            if got[2] or got[3]:
                break
    env.close()


def test_map_name_accepts_the_readme_maps_list() -> None:
    ids = list(bundled_tasks())
    assert {"4x4", "8x8"} <= set(ids) and len(ids) == 38
    for task_id in ids:
        env = FrozenLakeEnv(map_name=task_id)
        env.reset(seed=0)
        assert env.snapshot().state["rows"] == bundled_tasks()[task_id]
    env = FrozenLakeEnv(map_name="random:size=5,p=0.7,seed=3")  # not bundled: generated
    env.reset(seed=0)
    assert env.snapshot().state["rows"] == generate_solvable_map(5, 0.7, seed=3)


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("5x5", "no such map"),
        ("random:size=5,p=0.8", "needs size, p and seed"),
        ("random:size=1,p=0.8,seed=0", "in range"),
        ("desc:SFX/FFG", "unknown tile(s) ['X']"),
        ("desc:FFF/FFG", "exactly one start tile"),
        (7, "a map id is a str, got int"),
    ],
)
def test_a_bad_map_name_says_why_and_lists_the_forms(bad, why) -> None:
    with pytest.raises(ValueError) as raised:
        gym.make("agentenvs/FrozenLake-v0", map_name=bad)
    message = str(raised.value)
    assert why in message
    for form in ("'4x4'", "'8x8'", "'random:size=N,p=P,seed=K'", "'desc:ROW/ROW/...'"):
        assert form in message
    with pytest.raises(UnknownTaskError, match="random:size=N,p=P,seed=K"):
        FrozenLakeEnv().reset(options={"task_id": bad})


def test_size_and_p_draw_seeded_random_maps() -> None:
    env = FrozenLakeEnv(size=5, p=0.7)
    ids = {env.reset(seed=s)[1]["task_id"] for s in range(20)}
    assert len(ids) > 15 and all(parse_random_id(i)[:2] == (5, 0.7) for i in ids)  # type: ignore[index]
    assert env.reset(seed=4)[0] == FrozenLakeEnv(size=5, p=0.7).reset(seed=4)[0]
    for args in [
        dict(size=1),
        dict(p=0.0),
        dict(map_name="4x4", size=4),
        dict(map_name="5x5"),
        dict(desc=["SFF", "FG"]),
        dict(success_rate=2.0),
        dict(actions_per_turn=0),
    ]:
        with pytest.raises(ValueError):
            FrozenLakeEnv(**args)  # type: ignore[arg-type]


def test_generated_maps_are_solvable_and_reproducible() -> None:
    for size in (2, 3, 4, 6, 8, 12):
        for seed in range(25):
            rows = generate_solvable_map(size, 0.6, seed=seed)
            assert rows == generate_solvable_map(size, 0.6, seed=seed)
            assert len(rows) == size and all(len(r) == size for r in rows)
            assert rows[0][0] == "S" and rows[-1][-1] == "G" and is_solvable(rows)
            # solvable on slippery ice too: the goal is reachable along the shortest path
            assert oracle_for(rows).value(0, shortest_path(rows)) > 0  # type: ignore[arg-type]
    assert not is_solvable(("SH", "HG"))


def test_bundled_tasks_match_their_generator() -> None:
    tasks = bundled_tasks()
    path = make_tasks.DEFAULT_OUT
    assert path.read_text(encoding="utf-8") == make_tasks.render(make_tasks.build_tasks())
    assert tasks["4x4"] == FIXED_MAPS["4x4"] and tasks["8x8"] == FIXED_MAPS["8x8"]
    assert len(set(tasks.values())) == len(tasks)
    for task_id, rows in tasks.items():
        assert shortest_path(rows) is not None
        parsed = parse_random_id(task_id)
        if parsed is not None:
            assert generate_solvable_map(parsed[0], parsed[1], seed=parsed[2]) == rows
    assert json.loads(path.read_text())["format"] == 1


# ------------------------------------------------------------------ determinism and state
def rollout(env: gym.Env, seed: int, actions: list[str]) -> list:  # type: ignore[type-arg]
    out = [env.reset(seed=seed)]
    for a in actions:
        step = env.step(a)
        out.append(step)
        if step[2] or step[3]:
            out.append(env.reset())
    return out


ACTIONS = [format_action(a) for a in np.random.default_rng(1).integers(0, 4, 80)]


def play(env: gym.Env, actions: list[str]) -> list:  # type: ignore[type-arg]
    """Step through ``actions`` until the episode ends; every step's output."""
    out = []
    for a in actions:
        out.append(env.step(a))
        if out[-1][2] or out[-1][3]:
            break
    return out


def alive_after(env: FrozenLakeEnv, actions: list[str]) -> None:
    """Reset with the first seed whose episode survives ``actions``, then play them."""
    for seed in range(100):
        env.reset(seed=seed)
        if len(play(env, actions)) == len(actions) and not env.done:
            return
    raise AssertionError("no surviving seed")


def test_same_seed_same_episode() -> None:
    a = rollout(gym.make("agentenvs/FrozenLake-v0"), 7, ACTIONS)
    b = rollout(gym.make("agentenvs/FrozenLake-v0"), 7, ACTIONS)
    assert a == b
    c = rollout(gym.make("agentenvs/FrozenLake-v0"), 8, ACTIONS)
    assert a != c


def test_state_key_depends_on_task_and_cell_only() -> None:
    env = still()
    k0 = env.state_key()
    env.step("Right")
    k1 = env.state_key()
    env.step("Left")
    assert env.state_key() == k0 != k1
    env.step("garbage")
    assert env.state_key() == k0
    other = FrozenLakeEnv(map_name="4x4")
    other.reset(seed=99)
    assert other.state_key() == k0
    other.reset(options={"task_id": "8x8"})
    assert other.state_key() != k0


def test_snapshot_restore_replays_identically_including_slips() -> None:
    env = FrozenLakeEnv(map_name="8x8", max_turns=50)
    alive_after(env, ["Right", "Down", "Right", "Down"])
    snap = env.snapshot()
    first = play(env, ACTIONS[5:40])
    env.restore(snap)
    second = play(env, ACTIONS[5:40])
    assert first == second and len(first) >= 3
    assert any("slipped" in step[0] for step in first)
    assert len(pickle.dumps(snap)) < 2000  # the state stays tiny


def test_pickled_snapshot_restores_into_a_fresh_env() -> None:
    env = FrozenLakeEnv(desc=generate_solvable_map(6, 0.7, seed=2))
    alive_after(env, ["Down", "Right"])
    data = env.snapshot().to_bytes()
    expected = play(env, ACTIONS)

    fresh = gym.make("agentenvs/FrozenLake-v0")
    # Gymnasium's passive checker wrapper cannot take a first step() before a reset()
    fresh.reset(seed=999, options={"task_id": "8x8"})
    fresh.unwrapped.restore(Snapshot.from_bytes(data))
    assert play(fresh, ACTIONS) == expected and len(expected) >= 2
    never_reset = FrozenLakeEnv()
    never_reset.restore(Snapshot.from_bytes(data))
    assert play(never_reset, ACTIONS) == expected


def test_make_in_a_fresh_process_is_deterministic() -> None:
    code = (
        "import json, gymnasium as gym\n"
        "env = gym.make('agentenvs:agentenvs/FrozenLake-v0')\n"
        "obs, info = env.reset(seed=123)\n"
        "out = [obs] + [env.step(a)[0] for a in ('Left', 'Down', 'Right')]\n"
        "print(json.dumps([info['task_id'], out]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    env = gym.make("agentenvs/FrozenLake-v0")
    obs, info = env.reset(seed=123)
    out = [obs] + [env.step(a)[0] for a in ("Left", "Down", "Right")]
    assert json.loads(done.stdout) == [info["task_id"], out]


def test_passes_gymnasium_check_env() -> None:
    from gymnasium.utils.env_checker import check_env

    check_env(FrozenLakeEnv(), skip_render_check=True)


# ------------------------------------------------------------------ oracle through the env
def test_q_values_and_score_action_follow_the_budget() -> None:
    env = FrozenLakeEnv(map_name="4x4", max_turns=12)
    env.reset(seed=0)
    oracle = oracle_for(FIXED_MAPS["4x4"])
    np.testing.assert_array_equal(env.q_values(), oracle.q_table(12)[0])
    for a in range(4):
        assert env.score_action(format_action(a)) == oracle.q_table(12)[0, a]
    assert env.score_action("nonsense") == oracle.value(0, 11)
    assert env.score_action("x" * ((1 << 20) + 1)) == oracle.value(0, 11)
    assert env.optimal_success_probability() == oracle.value(0, 12)
    assert env.optimal_success_probability(float("inf")) == pytest.approx(14 / 17, abs=1e-12)
    snap = env.snapshot()
    env.score_action("Left")
    assert env.snapshot() == snap  # scoring changes nothing
    env.step("Right")
    row, col = env.position
    np.testing.assert_array_equal(env.q_values(), oracle.q_table(11)[row * 4 + col])
    assert env.optimal_success_probability(from_start=True) == oracle.value(0, 12)


def test_score_action_of_several_moves() -> None:
    env = FrozenLakeEnv(map_name="4x4", actions_per_turn=2, max_turns=4)
    env.reset(seed=0)
    oracle = oracle_for(FIXED_MAPS["4x4"])
    assert env.score_action("Down || Right") == pytest.approx(
        oracle.sequence_value(0, [DOWN, RIGHT], 6), abs=1e-15
    )
    np.testing.assert_array_equal(env.q_values(), oracle.q_table(8)[0])
    assert env.score_action("Down") <= env.optimal_success_probability() + 1e-15


def test_last_regret_is_value_minus_q() -> None:
    env = FrozenLakeEnv(map_name="4x4", max_turns=15)
    env.reset(seed=2)
    rng = np.random.default_rng(0)
    for _ in range(10):
        q = env.q_values()
        a = int(rng.integers(4))
        _, _, terminated, truncated, info = env.step(format_action(a))
        assert info["last_regret"] == pytest.approx(q.max() - q[a], abs=1e-15)
        assert info["last_action"] == ("Left", "Down", "Right", "Up")[a]
        if terminated or truncated:
            break


def test_error_action_has_the_lowest_q() -> None:
    rng = np.random.default_rng(3)
    for name in ("4x4", "8x8"):
        env = FrozenLakeEnv(map_name=name, max_turns=30)
        env.reset(seed=1)
        checked = 0
        for _ in range(300):
            q = env.q_values()
            bad = env.error_action(rng)
            assert bad.startswith("<answer>") and parse_moves(bad) != ()
            (a,) = parse_moves(bad)  # type: ignore[misc]
            assert q[a] == q.min()
            assert env.score_action(bad) == q.min()
            checked += 1
            _, _, term, trunc, info = env.step(
                bad if rng.random() < 0.3 else format_action(int(q.argmax()))
            )
            if term or trunc:
                env.reset()
        assert checked == 300


def test_error_action_prefers_a_hole() -> None:
    env = FrozenLakeEnv(desc=["SFF", "HFF", "FFG"], is_slippery=False)
    env.reset(seed=0)
    # Left and Up bump and Down falls: all lose a turn, Down is the plausible "error"
    rng = np.random.default_rng(0)
    assert {env.error_action(rng) for _ in range(20)} == {"<answer>Down</answer>"}


# ------------------------------------------------------------------ policies
def conversation(env: FrozenLakeEnv, obs: str, info: dict) -> Conversation:  # type: ignore[type-arg]
    return Conversation.start(obs, info, env=env)


def test_oracle_policy_plays_argmax_q() -> None:
    env = FrozenLakeEnv(map_name="8x8", max_turns=40)
    obs, info = env.reset(seed=0)
    policy = OraclePolicy()
    for _ in range(20):
        (actions,) = policy.sample([conversation(env, obs, info)], n=4, seed=1)
        q = env.q_values()
        for act in actions:
            assert env.score_action(act) == q.max()
        obs, _, term, trunc, info = env.step(actions[0])
        assert info["last_regret"] <= 1e-12
        if term or trunc:
            break


def test_random_policy_is_uniform() -> None:
    env = FrozenLakeEnv()
    obs, info = env.reset(seed=0)
    (actions,) = RandomPolicy().sample([conversation(env, obs, info)], n=4000, seed=0)
    counts = {a: actions.count(a) for a in set(actions)}
    assert set(counts) == {format_action(a) for a in range(4)}
    assert all(900 < c < 1100 for c in counts.values())


def test_noisy_policy_errs_at_its_rates() -> None:
    env = FrozenLakeEnv(map_name="4x4", max_turns=20)
    obs, info = env.reset(seed=0)
    conv = conversation(env, obs, info)

    def error_share(policy: NoisyOraclePolicy) -> float:
        q = env.q_values()
        (acts,) = policy.sample([conv], n=4000, seed=5)
        return float(np.mean([env.score_action(a) == q.min() and q.min() < q.max() for a in acts]))

    # an ordinary state: errors at error_rate, whatever recover is
    assert abs(error_share(NoisyOraclePolicy(0.2, recover=0.9)) - 0.2) < 0.03
    assert abs(error_share(NoisyOraclePolicy(0.2, recover=0.1)) - 0.2) < 0.03
    # an error state (injected error): errs again with probability 1 - recover
    env.step(env.error_action(np.random.default_rng(0)))
    assert env.last_regret > 1e-9 and not env.done
    assert abs(error_share(NoisyOraclePolicy(0.2, recover=0.9)) - 0.1) < 0.03
    assert abs(error_share(NoisyOraclePolicy(0.2, recover=0.1)) - 0.9) < 0.03
    with pytest.raises(ValueError):
        NoisyOraclePolicy(error_rate=1.5)


def test_policies_are_registered_by_name() -> None:
    policy = make_policy("frozenlake/noisy:error_rate=0.3,recover=0.6")
    assert isinstance(policy, NoisyOraclePolicy) and policy.error_rate == 0.3
    assert isinstance(make_policy("frozenlake/oracle"), OraclePolicy)
    with pytest.raises(TypeError):
        OraclePolicy().act(Conversation(), np.random.default_rng(0))


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"map_name": "8x8", "is_slippery": False},
        {"size": 5, "p": 0.7, "show_budget": True},
        {"desc": ["SFH", "FFG"], "actions_per_turn": 2, "success_rate": 0.6},
    ],
)
def test_keeps_the_env_contract(kwargs: dict) -> None:  # type: ignore[type-arg]
    from agentenvs.testing.contract import assert_env_contract

    # the fresh-interpreter replay runs once, for the default settings
    assert_env_contract("agentenvs/FrozenLake-v0", env_kwargs=kwargs, check_processes=not kwargs)
