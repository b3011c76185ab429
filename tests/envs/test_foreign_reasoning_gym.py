"""reasoning-gym's generators as multi-turn text envs: the contract on each, restore
equivalence, answers graded by the dataset's own ``score_answer`` (the best grade kept),
a solved episode with the dataset's own answer, and a Pass@(K,T) run.

The datasets are reasoning-gym's own (``create_dataset``); nothing of them is mocked.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

rg = pytest.importorskip(
    "reasoning_gym", reason="reasoning-gym is not installed: pip install 'agentenvs[ecosystem]'"
)

import agentenvs  # noqa: E402,F401 - registers the ids
from agentenvs.core.errors import UnknownTaskError  # noqa: E402
from agentenvs.envs.foreign.reasoning_gym_env import ReasoningGymEnv, extract_answer  # noqa: E402
from agentenvs.policy.base import Conversation, ScriptedPolicy  # noqa: E402
from agentenvs.policy.registry import register_policy  # noqa: E402
from agentenvs.testing import check_env_contract  # noqa: E402

ENV_ID = "agentenvs/ReasoningGym-v0"
#: fast generators of several kinds: arithmetic, counting, words, sorting, number theory
GENERATORS = [
    "leg_counting",
    "basic_arithmetic",
    "chain_sum",
    "gcd",
    "spell_backward",
    "word_sorting",
]


@pytest.mark.parametrize("name", GENERATORS)
def test_the_contract_holds_on_each_generator(name: str) -> None:
    check_env_contract(ENV_ID, env_kwargs={"dataset": name, "size": 20}, steps=20)


@pytest.mark.parametrize("name", GENERATORS)
def test_the_dataset_own_answer_solves_the_task_after_a_wrong_one(name: str) -> None:
    env = gym.make(ENV_ID, dataset=name, size=10).unwrapped
    obs, info = env.reset(seed=0, options={"task_id": f"{name}/4"})
    entry = rg.create_dataset(name, seed=0, size=10)[4]
    assert entry["question"].strip() in obs and "<answer>" in obs
    assert entry["answer"] not in info.values()  # the answer never shows in the info
    obs, reward, terminated, truncated, info = env.step(env.error_action(np.random.default_rng(1)))
    assert not terminated and "Not correct" in obs and "Answer again" in obs
    assert info["action_valid"] is True and info["success"] is False
    obs, reward, terminated, truncated, info = env.step(
        f"Reasoning...\n<answer>{entry['answer']}</answer>"
    )
    assert terminated and info["success"] is True and info["score"] == 1.0
    assert obs.startswith("Correct")
    env.close()


def test_the_best_grade_is_kept_and_the_rewards_add_up_to_it() -> None:
    # leg_counting grades with reasoning-gym's default: an answer that holds the right
    # one among other characters gets the share of its length that is right
    env = ReasoningGymEnv(dataset="leg_counting", size=10, max_turns=6)
    env.reset(seed=0, options={"task_id": "leg_counting/2"})
    right = env.current_entry["answer"]
    ds = env.datasets["leg_counting"]
    grades, rewards = [], []
    for answer in (f"{right} legs", f"x{right}", "0"):
        _, reward, terminated, _, info = env.step(f"<answer>{answer}</answer>")
        grades.append(ds.score_answer(answer, env.current_entry))
        rewards.append(reward)
        assert not terminated
        assert info["score"] == pytest.approx(max(grades))
    assert 0 < grades[0] < grades[1] < 1 and grades[2] == 0
    assert sum(rewards) == pytest.approx(max(grades))
    env.close()


def test_a_restore_gives_the_same_episode_in_a_fresh_env() -> None:
    env = gym.make(ENV_ID, dataset="leg_counting", size=10, max_turns=6).unwrapped
    env.reset(seed=0, options={"task_id": "leg_counting/3"})
    right = env.current_entry["answer"]
    env.step(f"<answer>x{right}</answer>")  # a partial grade
    snap = env.snapshot()
    key, score = env.state_key(), snap.base["score"]
    after = [env.step(a)[:4] for a in ("<answer>1</answer>", f"<answer>{right}</answer>")]
    other = gym.make(ENV_ID, dataset="leg_counting", size=10, max_turns=6).unwrapped
    other.restore(type(snap).from_bytes(snap.to_bytes()))
    assert other.state_key() == key and other.snapshot().base["score"] == score > 0
    assert other.turn == 1
    again = [other.step(a)[:4] for a in ("<answer>1</answer>", f"<answer>{right}</answer>")]
    assert again == after
    env.close()
    other.close()


def test_text_without_an_answer_tag_costs_the_turn_and_says_the_format() -> None:
    env = ReasoningGymEnv(dataset="gcd", size=5)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("the answer is 4")
    assert info["action_valid"] is False and not terminated and reward == 0.0
    assert "<answer>" in obs and env.turn == 1
    assert extract_answer("a <answer> 1 </answer> b <answer>2</answer>") == "2"
    assert extract_answer("<answer></answer>") == ""
    env.close()


def test_several_generators_in_one_env_and_unknown_ids_refused() -> None:
    env = ReasoningGymEnv(
        dataset=["gcd", "chain_sum"], size=3, config={"chain_sum": {"min_terms": 2, "max_terms": 2}}
    )
    assert list(env.task_ids) == [f"{n}/{i}" for n in ("gcd", "chain_sum") for i in range(3)]
    obs, info = env.reset(seed=0, options={"task_id": "chain_sum/1"})
    assert info["dataset"] == "chain_sum"
    assert (
        env.current_entry["question"]
        == rg.create_dataset("chain_sum", seed=0, size=3, min_terms=2, max_terms=2)[1]["question"]
    )
    for bad in ("gcd/3", "gcd/01", "lcm/0", "gcd", "gcd/-1"):
        with pytest.raises(UnknownTaskError):
            env.reset(options={"task_id": bad})
    env.close()
    with pytest.raises(ValueError, match="unknown reasoning-gym generator"):
        ReasoningGymEnv(dataset="no_such_generator")
    with pytest.raises(ValueError, match="config names generators not in dataset"):
        ReasoningGymEnv(dataset="gcd", config={"lcm": {}})


_SNAPSHOT_CHILD = """
import sys, warnings
from agentenvs.core.errors import SnapshotError
from agentenvs.envs.foreign.reasoning_gym_env import ReasoningGymEnv
from agentenvs.core.snapshot import Snapshot
warnings.simplefilter("ignore")
env = ReasoningGymEnv(dataset="ransom_note", size=5)
if sys.argv[1] == "take":
    env.reset(seed=0, options={"task_id": "ransom_note/2"})
    env.step("<answer>False</answer>")
    sys.stdout.write(env.snapshot().to_bytes().hex())
else:
    try:
        env.restore(Snapshot.from_bytes(bytes.fromhex(sys.stdin.read())))
        print("restored", env.turn)
    except SnapshotError as exc:
        print("refused:", exc)
"""


def _child(arg: str, hash_seed: str, data: str = "") -> str:
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [sys.executable, "-c", _SNAPSHOT_CHILD, arg],
        input=data,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return done.stdout


def test_a_snapshot_of_a_hash_seed_dependent_generator_is_refused_under_another() -> None:
    # ransom_note's entries depend on the hash seed: under another one, task 2 is another
    # question, and a restore there would pair the grade with it
    data = _child("take", "1")
    assert _child("restore", "1", data).strip() == "restored 1"
    refused = _child("restore", "2", data)
    assert refused.startswith("refused:") and "generates another entry 2" in refused


def test_generators_that_do_not_reproduce_warn() -> None:
    with pytest.warns(UserWarning, match="set PYTHONHASHSEED"):
        ReasoningGymEnv(dataset="ransom_note", size=2)
    with pytest.warns(UserWarning, match="other entries from one run to the next"):
        ReasoningGymEnv(dataset="list_functions", size=2)


class WrongThenRight(ScriptedPolicy):
    """A plausible wrong answer first, then the dataset's own answer."""

    conditions_on_budget = False

    def act(self, conversation: Conversation, rng: np.random.Generator) -> str:
        env = conversation.env
        if not any(m["role"] == "assistant" for m in conversation.messages):
            return env.error_action(rng)
        return f"<answer>{env.current_entry['answer']}</answer>"


register_policy("test_foreign_reasoning_gym/wrong-then-right", f"{__name__}:WrongThenRight")


def test_pass_at_k_t_runs_on_reasoning_gym_tasks(tmp_path: Any) -> None:
    from agentenvs.eval.records import TRAJECTORIES_NAME, read_records
    from agentenvs.eval.runner import EvalConfig, run_pass_at_k_t

    config = EvalConfig(
        env_id=ENV_ID,
        policy="test_foreign_reasoning_gym/wrong-then-right",
        task_ids=["leg_counting/0", "leg_counting/1"],
        n=2,
        budgets=[1, 2],
        env_kwargs={"dataset": "leg_counting", "size": 5},
    )
    run_pass_at_k_t(config, tmp_path, workers=0, progress=False)
    records = list(read_records(tmp_path / TRAJECTORIES_NAME))
    assert len(records) == 2 * 2 * 2
    # one turn only ever holds the wrong answer; two turns always end on the right one
    assert all(r["success"] == (r["budget"] == 2) for r in records)
    assert {r["task_id"] for r in records} == {"leg_counting/0", "leg_counting/1"}
