"""What an agent's reply asks the shell to do: commands, and whether the task is complete.

Accepted forms, tried in this order:
- Terminus JSON ``{"analysis", "plan", "commands": [{"keystrokes", "duration"}],
  "task_complete"}`` (the whole reply, or a ```json block);
- one or more ```bash / ```sh / ```shell / ```console blocks (run in order as one script);
- bare text: the whole reply is the script.
A reply that is just ``submit`` (or ``task_complete``), or a script whose last line is
``submit``, completes the task after the rest runs.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

_BLOCK = re.compile(r"```(bash|sh|shell|console|zsh)?[ \t]*\n(.*?)```", re.S | re.I)
_JSON_BLOCK = re.compile(r"```json[ \t]*\n(.*?)```", re.S | re.I)
# control characters other than tab/newline/CR, and the replacement char of undecodable bytes
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")
SUBMIT_WORDS = frozenset({"submit", "task_complete"})
#: tmux key names Terminus sends; between commands nothing is running, so they do nothing
_KEY_NAMES = re.compile(r"^(C-[a-z]|Enter|Escape|Tab|BSpace|Up|Down|Left|Right|\^C|\^D)$")

FORMAT = (
    "Reply with shell commands in a ```bash block (or as bare text, or as Terminus JSON "
    '{"analysis": ..., "plan": ..., "commands": [{"keystrokes": "ls\\n", "duration": 1}], '
    '"task_complete": false}). When the task is done, reply `submit` (or set '
    '"task_complete": true); the tests then run.'
)


@dataclass(frozen=True)
class ParsedAction:
    script: str
    complete: bool
    problem: str | None = None


def _from_json(data: object) -> ParsedAction | None:
    if not isinstance(data, dict) or not ({"commands", "task_complete"} & set(data)):
        return None
    commands = data.get("commands", [])
    if not isinstance(commands, list):
        return ParsedAction("", False, '"commands" must be a list of {"keystrokes", "duration"}')
    parts = []
    for i, cmd in enumerate(commands):
        keys = cmd.get("keystrokes") if isinstance(cmd, dict) else None
        if not isinstance(keys, str):
            return ParsedAction("", False, f'commands[{i}] has no "keystrokes" string')
        # JSON escapes can produce what the raw text could not hold: a lone surrogate
        # (\ud800) or a control character
        if not _encodable(keys):
            return ParsedAction(
                "", False, f"commands[{i}].keystrokes is not valid Unicode (a lone surrogate)"
            )
        if _CONTROL.search(keys):
            return ParsedAction(
                "", False, f"commands[{i}].keystrokes holds control characters a shell rejects"
            )
        if _KEY_NAMES.match(keys.strip()):
            continue
        parts.append(keys.rstrip("\n"))
    complete = data.get("task_complete", False)
    if not isinstance(complete, bool):
        return ParsedAction("", False, '"task_complete" must be true or false')
    return ParsedAction("\n".join(p for p in parts if p.strip()), complete)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _json_reply(candidate: str) -> ParsedAction | None:
    """The reply read as Terminus JSON; None when it is not JSON (or not that shape).

    Text a model can emit must never raise: nesting deeper than the parser's recursion
    limit and integers longer than Python's digit limit are reported as problems.
    """
    try:
        data = json.loads(candidate)
    except json.JSONDecodeError:
        return None
    except RecursionError:
        return ParsedAction("", False, "the JSON is nested too deeply to read")
    except ValueError as exc:  # e.g. an integer past sys.get_int_max_str_digits()
        return ParsedAction("", False, f"the JSON cannot be read ({exc})")
    try:
        return _from_json(data)
    except RecursionError:
        return ParsedAction("", False, "the JSON is nested too deeply to read")


def parse_action(text: str) -> ParsedAction:
    """The script and completion flag of a reply (``problem`` set when it is unusable)."""
    if not _encodable(text):
        return ParsedAction("", False, "the text is not valid Unicode (a lone surrogate)")
    if _CONTROL.search(text):
        return ParsedAction("", False, "control characters are not keystrokes a shell accepts")
    stripped = text.strip()
    if stripped.lower() in SUBMIT_WORDS:
        return ParsedAction("", True)
    for candidate in (stripped, *(m.group(1) for m in _JSON_BLOCK.finditer(text))):
        if candidate.startswith("{"):
            parsed = _json_reply(candidate)
            if parsed is not None:
                return parsed
    matches = list(_BLOCK.finditer(text))
    blocks = [m.group(2) for m in matches]
    script = "\n".join(b.strip("\n") for b in blocks) if blocks else stripped
    # a `submit` line in the prose after the last block counts too
    after = text[matches[-1].end() :].splitlines() if matches else []
    if any(line.strip().lower() in SUBMIT_WORDS for line in after):
        script += "\nsubmit"
    if "```" in script:
        return ParsedAction("", False, "unclosed or unsupported code block")
    lines = script.rstrip().splitlines()
    complete = bool(lines) and lines[-1].strip().lower() in SUBMIT_WORDS
    if complete:
        script = "\n".join(lines[:-1])
    if not script.strip() and not complete:
        return ParsedAction("", False, "no command found")
    return ParsedAction(script, complete)


def oracle_action(task: Any) -> str:
    """A task's solution as one action, run as the official oracle runs it: TB1's
    ``solution.sh`` as ``/oracle/solution.sh``, Harbor's ``solution/`` at ``/solution``
    with ``solve.sh`` run from the work dir, TB1's ``solution.yaml`` commands in order."""
    from agentenvs.core.errors import TaskError
    from agentenvs.envs.terminal.images import tar_of

    if task.solution_path is None and task.solution_commands:
        return "```bash\n" + "\n".join(task.solution_commands) + "\n```"
    if task.solution_path is None:
        raise TaskError(str(task.path), "solution", "the task has no solution script")
    if task.layout == "tb1":
        payload = tar_of([(task.solution_path, "/oracle/solution.sh")])
        run = "bash /oracle/solution.sh"
    else:
        payload = tar_of([(task.solution_path.parent, "/solution")])
        assigns = " ".join(shlex.quote(f"{k}={v}") for k, v in task.solution_env)
        run = f"env {assigns} bash /solution/solve.sh" if assigns else "bash /solution/solve.sh"
    data = base64.b64encode(payload).decode()
    lines = [data[i : i + 76] for i in range(0, len(data), 76)]
    return (
        "```bash\n"
        "base64 -d > /tmp/.oracle.tar <<'AGENTENVS_ORACLE'\n"
        + "\n".join(lines)
        + "\nAGENTENVS_ORACLE\n"
        "tar -x -C / --no-same-owner -f /tmp/.oracle.tar && rm -f /tmp/.oracle.tar\n"
        f"{run}\n```"
    )
