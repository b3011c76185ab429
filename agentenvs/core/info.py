"""Names of the info keys every env reports on reset and on every step."""

from __future__ import annotations

TASK_ID = "task_id"
TURN = "turn"
MAX_TURNS = "max_turns"
TURNS_LEFT = "turns_left"
SUCCESS = "success"
SCORE = "score"
ACTION_VALID = "action_valid"
STATE_KEY = "state_key"
SYSTEM_PROMPT = "system_prompt"
TOOLS = "tools"
ERROR_INJECTED = "error_injected"
#: where an env's grading found the agent changed what grades it (a list of str: the
#: episode then scores 0); Terminal-Bench's safe grading sets it once the tests ran
GRADING_FINDINGS = "grading_findings"
#: where an env's tests ran past their time limit and were stopped (a bool, on the steps
#: that graded): the task then counts as failed, an outcome apart from failed tests
#: (Terminal-Bench's verifier timeout)
VERIFIER_TIMED_OUT = "verifier_timed_out"
#: the exact quality of the step just taken (a float, on step infos only), where an env can
#: compute one: FrozenLake's oracle advantage ``Q_t(s, a) - V_t(s)`` of the action for the
#: turns it had, InterCode-SQL's reward of the statement's result, DeepCoder-MT's change in
#: the test pass rate, Terminal-Bench's change in the fraction of tests passed (opt-in:
#: ``step_rewards=True``, a test run per step). Envs that cannot compute one exactly leave
#: the key out. Process rewards (``agentenvs.integrations.process``) read it; ``state_key``
#: stays GiGPO's anchor
STEP_REWARD = "step_reward"

STANDARD_KEYS: tuple[str, ...] = (
    TASK_ID,
    TURN,
    MAX_TURNS,
    TURNS_LEFT,
    SUCCESS,
    SCORE,
    ACTION_VALID,
    STATE_KEY,
)
