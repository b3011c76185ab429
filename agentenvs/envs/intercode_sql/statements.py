"""What an agent's SQL statement is, decided from its tokens rather than from how its text starts.

Comments, parentheses and odd spacing cannot hide a statement's kind: the text is tokenized
(sqlglot's tokenizer for the backend's dialect, which knows each dialect's comments and
quoting), and the kind is the first keyword token. The MySQL backend runs only statements
of an allowed kind; everything else (``SET``, transaction control, ``GRANT``, ``KILL``,
``HANDLER``, ``CALL``, ...) is refused before it reaches the server, as are MySQL's
executable comments (``/*! ... */``, ``/*M! ... */``), whose content the server runs.

``writes`` is conservative: a statement counts as a write when it is of a writing kind or
when any writing keyword appears in it outside strings and identifiers (``WITH ... DELETE``,
``SELECT ... FOR UPDATE``), whatever it returns (``DELETE ... RETURNING``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

READ_KINDS = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "VALUES", "TABLE"})
WRITE_KINDS = frozenset(
    {"INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER", "TRUNCATE", "RENAME"}
)
#: what CREATE/DROP/ALTER may act on (the word after it)
_SCHEMA_OBJECTS = frozenset(
    {"TABLE", "VIEW", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL", "OR", "ONLINE", "IGNORE"}
)
_EXECUTABLE_COMMENT = re.compile(r"/\*M?!")
_NO_TRANSACTIONS = "transaction control and locks are not available (every statement commits)"
_REFUSALS = {
    "USE": "USE is not available: the episode's database is already selected",
    **{
        word: _NO_TRANSACTIONS
        for word in (
            "BEGIN",
            "START",
            "COMMIT",
            "ROLLBACK",
            "SAVEPOINT",
            "RELEASE",
            "XA",
            "LOCK",
            "UNLOCK",
        )
    },
}


@dataclass(frozen=True)
class Statement:
    """One action's SQL, classified."""

    #: the first keyword, upper-cased (``""`` when the text has no token)
    kind: str
    #: it may change data or schema
    writes: bool
    #: why it may not run on the server, or None
    problem: str | None = None


def _tokens(sql: str, dialect: str) -> list[Any] | None:
    import sqlglot

    try:
        return list(sqlglot.Dialect.get_or_raise(dialect).tokenize(sql))
    except Exception:  # an unterminated string and the like: the server says what is wrong
        return None


def _word(token: Any) -> str:
    from sqlglot.tokens import TokenType

    if token.token_type in (TokenType.STRING, TokenType.IDENTIFIER, TokenType.NATIONAL_STRING):
        return ""
    return token.text.upper()


def _writes(tokens: list[Any]) -> bool:
    from sqlglot.tokens import TokenType

    for i, token in enumerate(tokens):
        word = _word(token)
        if word in WRITE_KINDS:
            follows = tokens[i + 1].token_type if i + 1 < len(tokens) else None
            # REPLACE(...) and INSERT(...) are also string functions
            if word in ("REPLACE", "INSERT") and follows == TokenType.L_PAREN:
                continue
            return True
    return False


@lru_cache(maxsize=4096)
def classify(sql: str, dialect: str = "mysql") -> Statement:
    """Classify one action's SQL for ``dialect`` (``"mysql"`` or ``"sqlite"``).

    ``problem`` is set for several statements in one action, and, on MySQL, for every
    statement of a kind the episode may not run.
    """
    from sqlglot.tokens import TokenType

    tokens = _tokens(sql, dialect)
    if tokens is None:
        head = sql.lstrip().split(None, 1)
        kind = head[0].upper() if head else ""
        problem = None
        if dialect == "mysql" and _EXECUTABLE_COMMENT.search(sql):
            problem = "executable comments (/*! ... */) are not allowed"
        return Statement(kind, kind not in READ_KINDS, problem)
    for i, token in enumerate(tokens):
        if token.token_type == TokenType.SEMICOLON and any(
            t.token_type != TokenType.SEMICOLON for t in tokens[i + 1 :]
        ):
            return Statement("", True, "only one SQL statement per action is allowed")
    words = [t for t in tokens if t.token_type != TokenType.L_PAREN]
    kind = _word(words[0]) if words else ""
    writes = kind not in READ_KINDS or _writes(tokens)
    if dialect != "mysql":
        return Statement(kind, writes)
    return Statement(kind, writes, _mysql_problem(sql, kind, [_word(t) for t in words]))


def _mysql_problem(sql: str, kind: str, words: list[str]) -> str | None:
    if _EXECUTABLE_COMMENT.search(sql):
        return "executable comments (/*! ... */) are not allowed"
    if kind in _REFUSALS:
        return _REFUSALS[kind]
    if kind not in READ_KINDS and kind not in WRITE_KINDS:
        return f"{kind or 'this'} statements are not allowed here"
    if "OUTFILE" in words or "DUMPFILE" in words:
        return "writing files is not allowed"
    if kind in ("CREATE", "DROP", "ALTER"):
        target = words[1] if len(words) > 1 else ""
        if target in ("TEMPORARY", "TEMP"):
            return "temporary tables are not supported; create a regular table"
        if target in ("DATABASE", "SCHEMA"):
            return "creating or dropping databases is not allowed"
        if target not in _SCHEMA_OBJECTS:
            return f"{kind} {target or '...'} is not allowed here (tables, views and indexes are)"
        if "TEMPORARY" in words:
            return "temporary tables are not supported; create a regular table"
    return None
