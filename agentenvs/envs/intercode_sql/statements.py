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
from collections.abc import Mapping
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


@lru_cache(maxsize=256)
def _tokens(sql: str, dialect: str) -> list[Any] | None:
    """sqlglot's tokens (cached: the guard and the table-name pass read the same text)."""
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


def match_table_case(sql: str, tables: Mapping[str, str], dialect: str = "mysql") -> str:
    """``sql`` with table names spelt as the server stores them, and aliases as defined.

    ``tables`` maps each table's lower-cased name to its stored name. On a MySQL server
    with ``lower_case_table_names=0`` table names and aliases are case-sensitive, so a
    query written for a case-insensitive server (``FROM Highschooler AS T1 ... t1.id``)
    fails there; only the letter case of identifiers changes (columns are
    case-insensitive on every server), never strings, comments or anything else.
    """
    from sqlglot.tokens import TokenType

    tokens = _tokens(sql, dialect)
    if not tokens:
        return sql
    names = (TokenType.VAR, TokenType.IDENTIFIER)
    aliases: dict[str, str] = {}
    for i, token in enumerate(tokens[:-1]):
        nxt = tokens[i + 1]
        if token.token_type == TokenType.ALIAS and nxt.token_type in names:
            aliases.setdefault(nxt.text.lower(), nxt.text)
        elif (
            token.token_type in names
            and token.text.lower() in tables
            and nxt.token_type == TokenType.VAR
        ):
            aliases.setdefault(nxt.text.lower(), nxt.text)
    edits = []
    for i, token in enumerate(tokens):
        if token.token_type not in names:
            continue
        if i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN:
            continue  # a function
        lower = token.text.lower()
        wanted = tables.get(lower) or aliases.get(lower)
        if wanted is None or wanted == token.text:
            continue
        quoted = token.token_type == TokenType.IDENTIFIER
        start, end = (token.start + 1, token.end) if quoted else (token.start, token.end + 1)
        if sql[start:end] == token.text:  # only where the text is the name itself
            edits.append((start, end, wanted))
    for start, end, wanted in reversed(edits):
        sql = sql[:start] + wanted + sql[end:]
    return sql
