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
