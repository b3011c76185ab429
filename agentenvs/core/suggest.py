"""Names a user typed that are not valid: the error that says so, and the closest match.

Env ids, policy names and parameters, env keyword arguments, demo names and dataset names
are all checked the same way: a ``UsageError`` whose one-line message names what was
given, the closest valid name (``difflib``) and every valid one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from agentenvs.core.errors import AgentEnvsError


class UsageError(AgentEnvsError, ValueError):
    """A name, value or path a user gave that is not valid; the message is one line that
    says what is valid and, where there is one, the closest match."""


def close_match(word: str, choices: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The choice closest to ``word`` (case-insensitive), or None when none is close."""
    by_key: dict[str, str] = {}
    for choice in choices:
        by_key.setdefault(choice.lower(), choice)
    found = difflib.get_close_matches(word.lower(), list(by_key), n=1, cutoff=cutoff)
    return by_key[found[0]] if found else None


def did_you_mean(word: str, choices: Iterable[str], *, cutoff: float = 0.6) -> str:
    """``"; did you mean 'x'?"`` for the closest choice, or ``""``: to append to a message."""
    match = close_match(word, choices, cutoff=cutoff)
    return f"; did you mean {match!r}?" if match is not None else ""


def one_line(text: object) -> str:
    """``text`` on one line (an error message from elsewhere may span several)."""
    return " ".join(str(text).split())
