"""BFCLMultiTurn-v0: gold episodes, checker verdicts, held-out functions, limits, snapshots, contract."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.snapshot import Snapshot
from agentenvs.envs.bfcl.decode import decode_calls
from agentenvs.envs.bfcl.multi_turn.checker import (
    EMPTY_TURN,
    FORCE_TERMINATED,
    RESPONSE_MISMATCH,
    STATE_MISMATCH,
    response_check,
)
from agentenvs.envs.bfcl.multi_turn.env import (
    ADDITIONAL_FUNCTIONS_MESSAGE,
    END_TURN_REPLY,
    BFCLMultiTurnEnv,
)
from agentenvs.policy.base import Conversation
from agentenvs.policy.registry import make_policy
from agentenvs.testing import check_env_contract

ENV_ID = "agentenvs/BFCLMultiTurn-v0"


@pytest.fixture(scope="module")
def env() -> BFCLMultiTurnEnv:
    return BFCLMultiTurnEnv(max_turns=200)


def _reset(env: BFCLMultiTurnEnv, task_id: str) -> tuple[str, dict]:
    return env.reset(seed=0, options={"task_id": task_id})


def _play(env: BFCLMultiTurnEnv, actions: list[str]) -> tuple[str, float, bool, bool, dict]:
    result = None
    for action in actions:
        result = env.step(action)
        if result[2] or result[3]:
            break
    assert result is not None
    return result


def _run_policy(env: gym.Env, spec: str, task_id: str, seed: int = 0) -> dict:
    policy = make_policy(spec)
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    conversation = Conversation.start(obs, info, env=env)
    rng = np.random.default_rng(seed)
    while True:
        action = policy.act(conversation, rng)
        obs, _, terminated, truncated, info = env.step(action)
        conversation.add_turn(action, obs)
        if terminated or truncated:
            return info


def test_every_bundled_entry_passes_with_the_gold_policy() -> None:
    env = gym.make(ENV_ID)
    ids = list(env.unwrapped.task_ids)
    assert len(ids) >= 24
    categories = {env.unwrapped.task_set.entries[i].category for i in ids}
    assert categories == {"base", "miss_func", "miss_param", "long_context"}
    for task_id in ids:
        info = _run_policy(env, "bfcl_mt/gold", task_id)
        assert info["success"] is True, (task_id, info.get("turn_check"))
        assert info["score"] == 1.0
        assert info["turns_passed"] == info["n_user_turns"]


def test_a_gold_episode_step_by_step(env: BFCLMultiTurnEnv) -> None:
    obs, info = _reset(env, "multi_turn_base_0")
    assert "Go into the docs folder" in obs and info["system_prompt"] in obs
    assert {t["function"]["name"] for t in info["tools"]} >= {"cd", "ls", "mkdir"}
    obs, reward, terminated, _, info = env.step("[cd(folder='docs'), ls()]")
    assert "/workspace/docs" in obs and '"notes.txt", "report.txt"' in obs
    assert (reward, terminated, info["user_turn"], info["call_steps"]) == (0.0, False, 0, 1)
    obs, reward, terminated, _, info = env.step(END_TURN_REPLY)
    assert info["turn_check"]["valid"] and info["user_turn"] == 1
    assert obs.startswith("User: Create a folder named 2024")
    assert info["score"] == pytest.approx(1 / 3)
    _play(env, ["mkdir(dir_name='2024')", "mv(source='report.txt', destination='2024')", "ok"])
    obs, reward, terminated, _, info = _play(
        env, ["[grep(file_name='2024/report.txt', pattern='revenue')]", "Here they are."]
    )
    assert (reward, terminated, info["success"], info["score"]) == (1.0, True, True, 1.0)


def test_a_wrong_state_fails_the_turn(env: BFCLMultiTurnEnv) -> None:
    _reset(env, "multi_turn_base_0")
    _play(env, ["[cd(folder='docs'), ls()]", "done"])
    _, reward, terminated, _, info = _play(
        env, ["[mkdir(dir_name='2025'), mv(source='report.txt', destination='2025')]", "done"]
    )
    assert terminated and reward == 0.0 and info["success"] is False
    assert info["turn_check"]["error_type"] == STATE_MISMATCH
    assert "tree" in info["turn_check"]["details"]["differences"]
    assert info["score"] == pytest.approx(1 / 3)


def test_a_missing_result_fails_the_response_check(env: BFCLMultiTurnEnv) -> None:
    _reset(env, "multi_turn_base_0")
    # the state is right (ls changes nothing) but the ls result never appeared
    _, _, terminated, _, info = _play(env, ["cd(folder='docs')", "done"])
    assert terminated and info["turn_check"]["error_type"] == RESPONSE_MISMATCH
    assert info["turn_check"]["details"]["missing_items"] == [
        '{"current_directory_content": ["notes.txt", "report.txt"]}'
    ]


def test_results_from_earlier_turns_count(env: BFCLMultiTurnEnv) -> None:
    _reset(env, "multi_turn_base_7")  # turn 2's ground truth is list_users()
    _play(env, ["[search_messages(keyword='lunch'), list_users()]", "done"])
    _play(env, ["delete_message(message_id=3)", "done"])
    # list_users ran in turn 0: its result counts for turn 2 (any call avoids an empty turn)
    _, _, terminated, _, info = _play(env, ["view_inbox()", "done"])
    assert terminated and info["success"]

    _reset(env, "multi_turn_base_6")  # turn 2's ground truth is find(path='.')
    _play(env, ["[pwd(), find(path='.')]", "done"])
    _play(env, ["echo(content='v0.1: first release', file_name='CHANGELOG.md')", "done"])
    # the early find result predates CHANGELOG.md, so it does not match the new one
    _, _, terminated, _, info = _play(env, ["pwd()", "done"])
    assert terminated and info["turn_check"]["error_type"] == RESPONSE_MISMATCH


def test_doing_nothing_fails_and_empty_ground_truth_is_not_checked(env: BFCLMultiTurnEnv) -> None:
    _reset(env, "multi_turn_base_1")
    _, _, terminated, _, info = env.step("I cannot help with that.")
    assert terminated and info["turn_check"]["error_type"] == EMPTY_TURN

    _reset(env, "multi_turn_miss_param_0")  # turn 1 lacks the file name: ground truth []
    _play(env, ["cd(folder='docs')", "done"])
    _, _, terminated, _, info = env.step("Which file should I rename?")
    assert not terminated and info["turn_check"]["checked"] is False and info["user_turn"] == 2
    _, _, _, _, info = _play(env, ["mv(source='notes.txt', destination='summary.txt')", "done"])
    assert info["success"]


def test_calls_in_an_unchecked_turn_still_run() -> None:
    # officially the turn that cannot be served is not checked: the change fails later
    env = BFCLMultiTurnEnv(max_turns=200, rules="official")
    _reset(env, "multi_turn_miss_param_0")
    _play(env, ["cd(folder='docs')", "done"])
    _, _, terminated, _, info = _play(env, ["mkdir(dir_name='guess')", "done"])
    assert not terminated and info["turn_check"]["checked"] is False
    _, _, terminated, _, info = _play(
        env, ["mv(source='notes.txt', destination='summary.txt')", "done"]
    )
    assert terminated and info["turn_check"]["error_type"] == STATE_MISMATCH
    # strict rules fail that turn itself, as the agent's call changed the file system
    env = BFCLMultiTurnEnv(max_turns=200)
    _reset(env, "multi_turn_miss_param_0")
    _play(env, ["cd(folder='docs')", "done"])
    _, reward, terminated, _, info = _play(env, ["mkdir(dir_name='guess')", "done"])
    assert terminated and reward == 0.0
    assert info["turn_check"]["error_type"] == STATE_MISMATCH


def test_held_out_functions_appear_at_their_turn(env: BFCLMultiTurnEnv) -> None:
    obs, info = _reset(env, "multi_turn_miss_func_0")  # cp is held out until turn 2
    names = {t["function"]["name"] for t in info["tools"]}
    assert "cp" not in names and "mv" in names
    assert '"name": "cp"' not in obs
    _play(env, ["cd(folder='docs')", "done"])
    obs, _, _, _, info = env.step("There is no copy function.")
    assert info["user_turn"] == 2 and info["turn_check"]["checked"] is False
    assert obs.startswith(f"User: {ADDITIONAL_FUNCTIONS_MESSAGE}")
    assert '"name": "cp"' in obs
    assert info["tools_changed"] is True
    assert "cp" in {t["function"]["name"] for t in info["tools"]}
    assert "cp" in {d["name"] for d in env.current_docs()}
    _, _, _, _, info = _play(
        env, ["cp(source='notes.txt', destination='notes_backup.txt')", "ok", "ls()", "ok"]
    )
    assert info["success"]


def test_step_limit_force_terminates(env: BFCLMultiTurnEnv) -> None:
    _reset(env, "multi_turn_base_0")
    for _ in range(20):
        _, _, terminated, truncated, _ = env.step("pwd()")
        assert not (terminated or truncated)
    _, _, terminated, _, info = env.step("")  # invalid: does not count as a call step
    assert not terminated and info["action_valid"] is False and info["call_steps"] == 20
    _, reward, terminated, _, info = env.step("pwd()")
    assert terminated and reward == 0.0 and info["success"] is False
    assert info["turn_check"]["error_type"] == FORCE_TERMINATED


def test_invalid_and_refused_calls(env: BFCLMultiTurnEnv) -> None:
    _reset(env, "multi_turn_base_0")
    for bad in ("", "  \n", "ls(\x00)", "\ufffd\ufffd"):
        obs, _, terminated, _, info = env.step(bad)
        assert info["action_valid"] is False and not terminated and "Invalid action" in obs
    obs, _, terminated, _, info = env.step(
        "[run(), _load_scenario(config={}), remove(path='x'), nope(a=1), cd(dir='x')]"
    )
    assert not terminated and info["action_valid"] is True
    results = info["results"]
    assert results[0] == "Error during execution: Function call run is not allowed."
    assert results[1] == "Error during execution: name '_load_scenario' is not defined"
    assert results[2].startswith("Error during execution: Function call remove")
    assert results[3] == "Error during execution: name 'nope' is not defined"
    assert results[4].startswith("Error during execution:") and "dir" in results[4]
    assert env._model["FileSystemAPI"].cwd == "/workspace"


def test_json_tool_calls_are_accepted(env: BFCLMultiTurnEnv) -> None:
    _reset(env, "multi_turn_base_0")
    _, _, _, _, info = env.step('[{"name": "cd", "arguments": {"folder": "docs"}}]')
    assert info["results"] == ['{"current_working_directory": "/workspace/docs"}']


def test_response_check_is_a_multiset() -> None:
    assert response_check(["a", "b", "a"], ["a", "a"], 0).valid
    verdict = response_check(["a", "b"], ["a", "a"], 0)
    assert not verdict.valid and verdict.details["missing_items"] == ["a"]


def test_snapshot_restore_equivalence() -> None:
    env = BFCLMultiTurnEnv()
    _reset(env, "multi_turn_base_9")
    _play(env, ["cat(file_name='weekly.txt')", "ok", "ticket_login(username='dana')"])
    snap = env.snapshot()
    key = env.state_key()
    actions = [
        "open_ticket(title='Returns spike', description='returns 4 this week', priority=2)",
        "ok",
        "[messaging_login(user_id='USR004'), send_message(receiver_id='USR003', message='x')]",
        "ok",
    ]
    first = [env.step(a) for a in actions]
    env.restore(snap)
    assert env.state_key() == key
    assert [env.step(a) for a in actions] == first
    fresh = BFCLMultiTurnEnv()
    fresh.restore(Snapshot.from_bytes(snap.to_bytes()))
    assert fresh.state_key() == key
    assert [fresh.step(a) for a in actions] == first
    # restoring twice gives independent copies: the snapshot is never mutated
    env.restore(snap)
    env.step(actions[0])
    env.restore(snap)
    assert env._model["TicketingAPI"].next_ticket_id == 3


def test_score_action_is_the_turn_verdict(env: BFCLMultiTurnEnv) -> None:
    _reset(env, "multi_turn_base_0")
    key, turn = env.state_key(), env.turn
    assert env.score_action("[cd(folder='docs'), ls()]") == 1.0
    assert env.score_action("cd(folder='docs')") == 0.0  # ls's result is still missing
    assert env.score_action("done") == 0.0  # nothing done yet
    assert env.score_action("") == 0.0
    assert (env.state_key(), env.turn) == (key, turn)
    env.step("[cd(folder='docs'), ls()]")
    assert env.score_action("done") == 1.0
    assert env.score_action("mkdir(dir_name='x')") == 0.0


def test_error_actions_are_near_misses_that_fail(env: BFCLMultiTurnEnv) -> None:
    for task_id in env.task_ids:
        _reset(env, task_id)
        gold = {repr(c) for c in env.gold_calls()}
        for seed in range(4):
            action = env.error_action(np.random.default_rng(seed))
            assert action == env.error_action(np.random.default_rng(seed))
            (call,) = decode_calls(action)
            assert repr(call) not in gold
            if env.gold_calls():
                assert env.score_action(action) == 0.0, (task_id, action)


def test_noisy_policy_errs_and_gold_recovers_where_it_can() -> None:
    env = gym.make(ENV_ID)
    assert _run_policy(env, "bfcl_mt/noisy:error_rate=0.0", "multi_turn_base_2")["success"]
    outcomes = [
        _run_policy(env, "bfcl_mt/noisy:error_rate=1.0", task_id, seed)["success"]
        for task_id in env.unwrapped.task_ids[:6]
        for seed in range(2)
    ]
    assert not all(outcomes)


def test_budget_counts_agent_steps(env: BFCLMultiTurnEnv) -> None:
    env.reset(seed=0, options={"task_id": "multi_turn_base_0", "max_turns": 2})
    env.step("cd(folder='docs')")
    _, _, terminated, truncated, info = env.step("ls()")
    assert truncated and not terminated and info["turns_left"] == 0


def test_same_seed_same_entry() -> None:
    a, b = BFCLMultiTurnEnv(), BFCLMultiTurnEnv()
    assert a.reset(seed=3)[0] == b.reset(seed=3)[0]


@pytest.mark.parametrize(
    "task_id", ["multi_turn_miss_func_3", "multi_turn_long_context_1", "multi_turn_miss_param_4"]
)
def test_contract_on_pinned_entries(task_id: str) -> None:
    check_env_contract(ENV_ID, options={"task_id": task_id}, check_processes=False)


def test_contract_with_processes() -> None:
    check_env_contract(ENV_ID)


NUMBER = "1" * 5000
HOSTILE = [
    "[{name}({param}=" + NUMBER + ")]",
    '[{{"name": "{name}", "arguments": {{"{param}": ' + NUMBER + "}}}}]",
    "[{name}({param}=" + "[" * 5000 + "]" * 5000 + ")]",
    '[{{"name": "{name}", "arguments": {{"{param}": ' + "[" * 5000 + "]" * 5000 + "}}}}]",
    '[{{"name": "{name}", "arguments": {{"{param}": ' + "[" * 900 + "]" * 900 + "}}}}]",
    "[{name}({param}=2**100000)]",
    "[{name}({param}=" + "1" * 4200 + ")]",
    "[{name}({param}='\ud800')]",
    "[" * 100_000,
]


def test_hostile_replies_are_observations_never_exceptions() -> None:
    env = BFCLMultiTurnEnv()
    for task_id in env.task_ids[:3]:
        env.reset(options={"task_id": task_id})
        tool = env.current_tools()[0]["function"]
        name, param = tool["name"], next(iter(tool["parameters"]["properties"]), "a")
        for template in HOSTILE:
            reply = template.format(name=name, param=param)
            env.reset(options={"task_id": task_id})
            score = env.score_action(reply)
            obs, reward, *_ = env.step(reply)
            assert isinstance(obs, str) and obs and score in (0.0, 1.0)
