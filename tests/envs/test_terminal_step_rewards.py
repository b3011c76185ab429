"""Terminal-Bench's opt-in ``info["step_reward"]``: after each command the task's tests run
on a copy of the state in another sandbox; the agent's sandbox never shows them."""

from __future__ import annotations

import pickle

import gymnasium as gym
import pytest

import agentenvs  # noqa: F401 - registers the ids
from agentenvs.core.info import STEP_REWARD

pytestmark = pytest.mark.bwrap  # skipped with the reason where bubblewrap cannot run

TOP_WORDS = (
    "tr 'A-Z' 'a-z' < book.txt | tr -cs 'a-z' '\\n' | grep -v '^$' > /tmp/words; "
    "sort /tmp/words | uniq -c | awk '{print $2, $1}' | sort -k2,2nr -k1,1 | head -n 10 "
    "> top_words.txt"
)
# a restore brings back the work dir only (not /tmp/words): the words are read again
STATS = (
    "tr 'A-Z' 'a-z' < book.txt | tr -cs 'a-z' '\\n' | grep -v '^$' > /tmp/words; "
    'printf "total %s\\nunique %s\\n" "$(wc -l < /tmp/words)" "$(sort -u /tmp/words | wc -l)"'
    " > word_stats.txt"
)
# what the agent's sandbox would show of the tests or their verdict, had they run in it
TRACES = (
    "ls -A /tests /logs/verifier 2>&1; find / -xdev \\( -name 'test_outputs.py' -o -name "
    "'run-tests.sh' -o -name 'reward.txt' \\) 2>/dev/null; ps -eo args | grep -c '[p]ytest'"
)


def _bash(script: str) -> str:
    return f"```bash\n{script}\n```"


def test_each_command_is_graded_on_a_copy_and_the_sandbox_shows_no_test() -> None:
    env = gym.make("agentenvs/TerminalBench-v0", step_rewards=True, max_turns=8)
    _, info = env.reset(seed=0, options={"task_id": "word-frequency"})
    assert STEP_REWARD not in info
    # word-frequency has 5 tests: 4 check top_words.txt, 1 word_stats.txt
    _, _, _, _, info = env.step(_bash("cd /app && ls"))
    assert info[STEP_REWARD] == 0.0 and "test_results" not in info
    _, _, _, _, info = env.step(_bash(f"cd /app && {TOP_WORDS}"))
    assert info[STEP_REWARD] == pytest.approx(0.8)  # a step that solves part: graded > 0
    assert info["score"] == 0.0 and "test_results" not in info  # no verdict of the episode
    obs, _, _, _, info = env.step(_bash(TRACES))
    assert info[STEP_REWARD] == 0.0
    assert "No such file or directory" in obs and "/tests" in obs and "/logs/verifier" in obs
    assert "test_outputs.py" not in obs and "run-tests.sh" not in obs and "reward.txt" not in obs
    assert "\n0\n" in obs  # no pytest process of the grader is visible
    _, _, _, _, info = env.step("```bash\n\n```")
    assert info["action_valid"] is False and info[STEP_REWARD] == 0.0
    before = pickle.dumps(env.unwrapped.snapshot())
    _, _, _, _, info = env.step(_bash("rm /app/top_words.txt"))
    assert info[STEP_REWARD] == pytest.approx(-0.8)  # undoing it is graded < 0
    # the baseline travels with a snapshot
    env.unwrapped.restore(pickle.loads(before))
    _, _, _, _, info = env.step(_bash(f"cd /app && {STATS}"))
    assert info[STEP_REWARD] == pytest.approx(0.2)
    _, reward, terminated, _, info = env.step("submit")
    assert terminated and reward == 1.0 and info["score"] == 1.0
    assert info[STEP_REWARD] == pytest.approx(0.0)  # the episode's verdict agrees with the copy
    env.close()


def test_step_rewards_are_off_by_default() -> None:
    env = gym.make("agentenvs/TerminalBench-v0")
    env.reset(seed=0, options={"task_id": "word-frequency"})
    assert STEP_REWARD not in env.step(_bash("true"))[4]
    env.close()
    with pytest.raises(ValueError, match="step_rewards"):
        gym.make("agentenvs/TerminalBench-v0", step_rewards=1)
