"""What an agent's SQL statement is, decided from its tokens rather than from how its text starts.

Comments, parentheses and odd spacing cannot hide a statement's kind: the text is tokenized
(sqlglot's tokenizer for the backend's dialect, which knows each dialect's comments and
quoting), and the kind is the first keyword token. The MySQL backend runs only statements
of an allowed kind; everything else (``SET``, transaction control, ``GRANT``, ``KILL``,
``HANDLER``, ``CALL``, ``LOAD``, ...) is refused before it reaches the server, as are MySQL's
executable comments (``/*! ... */``, ``/*M! ... */``), whose content the server runs, and
optimizer hints that set variables (``/*+ SET_VAR(...) */``). Wherever it appears (a
sub-query, a view's body, an ``INSERT ... SELECT``, in any letter case, spacing or
quoting), a statement is also refused when it calls a named-lock function (``GET_LOCK``
and its kin: locks are the server's, shared by every session) or a function that reads a
file, or when it places a table's files or data anywhere but the server's own storage:
``DATA``/``INDEX DIRECTORY``, tablespaces, ``CONNECTION=``, an ``ENGINE`` other than InnoDB
(the engine of every episode table), ``INTO OUTFILE``/``DUMPFILE``. ``CREATE``, ``ALTER``,
``DROP`` and ``RENAME`` act on tables, views and indexes only (``OR REPLACE`` read past).

The guard fails closed. Text the tokenizer cannot read (an unterminated string, quote or
comment, and whatever else it raises on) is refused, never judged by its first word. On
MySQL the text is also read as the server reads it (``server_reading``: its quotes,
backslash escapes, ``#``, ``-- `` and unnested ``/* */`` comments), and it is refused when
the two readings disagree anywhere (code that the tokenizer took for a comment or a string,
or the reverse), or when its code holds characters that are not ASCII or control
characters (look-alike letters and spaces): what the server runs is what the guard judged.

``writes`` is conservative: a statement counts as a write when it is of a writing kind or
when any writing keyword appears in it outside strings and identifiers (``WITH ... DELETE``,
``SELECT ... FOR UPDATE``), whatever it returns (``DELETE ... RETURNING``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

READ_KINDS = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "VALUES", "TABLE"})
WRITE_KINDS = frozenset(
    {"INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER", "TRUNCATE", "RENAME"}
)
#: what CREATE/DROP/ALTER may act on (the word after it, past OR REPLACE, ONLINE, IGNORE)
_OBJECTS = frozenset({"TABLE", "VIEW", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL"})
_EXECUTABLE_COMMENT = re.compile(r"/\*M?!")
_VARIABLE_HINT = re.compile(r"/\*\+.*?SET_VAR", re.I | re.S)
#: functions on the server's named locks (shared by every session of every user) and on
#: its host's files; MySQL's locking service included
LOCK_FUNCTIONS = frozenset(
    {
        "GET_LOCK",
        "RELEASE_LOCK",
        "RELEASE_ALL_LOCKS",
        "IS_FREE_LOCK",
        "IS_USED_LOCK",
        "SERVICE_GET_READ_LOCKS",
        "SERVICE_GET_WRITE_LOCKS",
        "SERVICE_RELEASE_LOCKS",
    }
)
FILE_FUNCTIONS = frozenset({"LOAD_FILE", "SYS_EXEC", "SYS_EVAL"})
#: the only storage engine an episode's tables may use (the templates' own)
ENGINE = "INNODB"
#: table options that place a table's files or data outside the server's storage
_PLACING_OPTIONS = {
    "DIRECTORY": "DATA/INDEX DIRECTORY is",
    "TABLESPACE": "tablespaces are",
    "CONNECTION": "CONNECTION= is",
}
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
    """sqlglot's tokens (cached: the guard and the table-name pass read the same text).

    sqlglot reads the rest of a "command" statement (``REPLACE ...``, ``RENAME ...``) as
    one string token; that rest is tokenized too, at its own positions, so nothing in it
    escapes the guard.
    """
    import sqlglot
    from sqlglot.tokens import TokenType

    engine = sqlglot.Dialect.get_or_raise(dialect)
    commands = engine.tokenizer_class.COMMANDS
    head: list[Any] = []
    text = sql
    try:
        while True:
            tokens = list(engine.tokenize(text))
            first = next((i for i, t in enumerate(tokens) if t.token_type in commands), None)
            if (
                first is None
                or first + 2 != len(tokens)
                or tokens[first + 1].token_type != TokenType.STRING
                or any(t.token_type != TokenType.SEMICOLON for t in tokens[:first])
            ):
                return head + tokens
            # blank out what is read, so the rest keeps its positions in ``sql``
            head += tokens[: first + 1]
            cut = tokens[first].end + 1
            text = " " * cut + sql[cut:]
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


_UNREADABLE = (
    "the statement could not be read ({why}); check its quotes, comments and characters"
)


@lru_cache(maxsize=4096)
def classify(sql: str, dialect: str = "mysql") -> Statement:
    """Classify one action's SQL for ``dialect`` (``"mysql"`` or ``"sqlite"``).

    ``problem`` is set for text the guard cannot read (any dialect), for several
    statements in one action, and, on MySQL, for every statement of a kind the episode may
    not run and for text the server would read otherwise than the guard.
    """
    from sqlglot.tokens import TokenType

    if "\x00" in sql:
        return Statement("", True, _UNREADABLE.format(why="it holds a NUL character"))
    tokens = _tokens(sql, dialect)
    if tokens is None:
        return Statement("", True, _UNREADABLE.format(why="the tokenizer cannot split it"))
    if dialect == "mysql":
        why = _readings_differ(sql, tokens)
        if why is not None:
            return Statement("", True, _UNREADABLE.format(why=why))
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
    return Statement(kind, writes, _mysql_problem(sql, kind, tokens))


def gold_writes(sql: str) -> bool:
    """Whether a gold query (the task's own text, not the agent's) may write: as
    ``classify`` says, or, for text the guard cannot read, unless its first word reads."""
    statement = classify(sql, "mysql")
    if statement.problem is None or not statement.problem.startswith(_UNREADABLE[:20]):
        return statement.writes
    head = sql.lstrip().lstrip("(").split(None, 1)
    return not head or head[0].upper() not in READ_KINDS


#: what each character of a statement is to the server (``server_reading``)
CODE, SPACE, TEXT, COMMENT = "c", " ", "s", "#"


def server_reading(sql: str) -> tuple[str, str | None]:
    """What MySQL/MariaDB (default ``sql_mode``: backslash escapes, no ``ANSI_QUOTES``)
    reads each character of ``sql`` as: one of ``CODE``, ``SPACE`` (outside strings and
    comments), ``TEXT`` (a string or a quoted name, quotes included) or ``COMMENT``; and why
    it cannot read it (an unterminated string, name or comment), or None."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            j = i + 1
            while True:
                if j >= n:
                    return "".join(out), f"an unterminated {ch}...{ch}"
                if sql[j] == "\\" and ch != "`":
                    j += 2
                    continue
                if sql[j] == ch:
                    if j + 1 < n and sql[j + 1] == ch:  # a doubled quote
                        j += 2
                        continue
                    break
                j += 1
            out.append(TEXT * (j + 1 - i))
            i = j + 1
        elif ch == "#" or (
            # the server's rule, byte by byte: an ASCII space or control character after --
            sql.startswith("--", i) and i + 2 < n and (sql[i + 2] <= " " or sql[i + 2] == "\x7f")
        ):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(COMMENT * (j - i))
            i = j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            if j < 0:
                return "".join(out), "an unterminated /* comment"
            out.append(COMMENT * (j + 2 - i))
            i = j + 2
        else:
            out.append(SPACE if ch in " \t\r\n\f\v" else CODE)
            i += 1
    return "".join(out), None


def _readings_differ(sql: str, tokens: list[Any]) -> str | None:
    """Why the tokenizer's reading of ``sql`` is not the server's (``server_reading``),
    or None: every character of code must be in a token of code, every character of a
    string in a string token, every comment outside every token."""
    server, why = server_reading(sql)
    if why is not None:
        return why
    guard = [SPACE] * len(sql)
    text = _text_types() | {_identifier_type()}
    for token in tokens:
        kind = TEXT if token.token_type in text else CODE
        for k in range(token.start, min(token.end + 1, len(sql))):
            guard[k] = kind
    for k, (seen, judged) in enumerate(zip(server, guard, strict=True)):
        if seen == CODE:
            ch = sql[k]
            if not (" " <= ch < "\x7f"):
                return f"{ch!r} at character {k}: only ASCII outside quotes"
            # a string's prefix (N'..', X'..', B'..') is part of its token
            prefix = judged == TEXT and ch in "nNxXbB" and sql[k + 1 : k + 2] in ("'", '"')
            if judged != CODE and not prefix:
                return f"the server reads character {k} as code, the guard as a string or comment"
        elif seen == TEXT and judged != TEXT:
            return f"the server reads character {k} as a string, the guard as code or a comment"
        elif seen == COMMENT and judged != SPACE:
            return f"the server reads character {k} as a comment, the guard as code"
    return None


@lru_cache(maxsize=1)
def _identifier_type() -> Any:
    from sqlglot.tokens import TokenType

    return TokenType.IDENTIFIER


def _mysql_problem(sql: str, kind: str, tokens: list[Any]) -> str | None:
    from sqlglot.tokens import TokenType

    if _EXECUTABLE_COMMENT.search(sql):
        return "executable comments (/*! ... */) are not allowed"
    if _VARIABLE_HINT.search(sql):
        return "optimizer hints that set variables (SET_VAR) are not allowed"
    if kind in _REFUSALS:
        return _REFUSALS[kind]
    if kind not in READ_KINDS and kind not in WRITE_KINDS:
        return f"{kind or 'this'} statements are not allowed here"
    words = [_word(t) for t in tokens if t.token_type != TokenType.L_PAREN]
    text = _text_types()
    for i, token in enumerate(tokens):
        # a call, whatever its spelling: `get_lock`(...) is the built-in too
        name = token.text.upper() if token.token_type not in text else ""
        called = i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN
        if called and name in LOCK_FUNCTIONS:
            return (
                f"{name} is not allowed: named locks are the server's, shared with every "
                "other session"
            )
        if called and name in FILE_FUNCTIONS:
            return f"{name} is not allowed: reading or running files on the server is not"
    if "OUTFILE" in words or "DUMPFILE" in words:
        return "writing files is not allowed"
    if kind in ("CREATE", "DROP", "ALTER", "RENAME"):
        rest = words[1:]
        while rest and rest[0] in ("OR", "REPLACE", "ONLINE", "IGNORE"):
            rest = rest[1:]
        target = rest[0] if rest else ""
        if target in ("TEMPORARY", "TEMP") or "TEMPORARY" in words:
            return "temporary tables are not supported; create a regular table"
        if target in ("DATABASE", "SCHEMA"):
            return "creating or dropping databases is not allowed"
        allowed = ("TABLE",) if kind == "RENAME" else _OBJECTS
        if target not in allowed:
            return f"{kind} {target or '...'} is not allowed here (tables, views and indexes are)"
        return _placement_problem(tokens)
    return None


#: tokens whose text is data, not SQL
_TEXT_NAMES = ("STRING", "NATIONAL_STRING", "HEX_STRING", "BIT_STRING", "BYTE_STRING")


@lru_cache(maxsize=1)
def _text_types() -> frozenset[Any]:
    from sqlglot.tokens import TokenType

    return frozenset(getattr(TokenType, n) for n in _TEXT_NAMES if hasattr(TokenType, n))


def _placement_problem(tokens: list[Any]) -> str | None:
    """Why a CREATE/ALTER's table options may not run: files placed outside the server's
    storage, or an engine that is not the episode's."""
    from sqlglot.tokens import TokenType

    for i, token in enumerate(tokens):
        if token.token_type == TokenType.IDENTIFIER:  # a quoted name: `engine`, `directory`
            continue
        word = token.text.upper()
        if word in _PLACING_OPTIONS:
            return f"{_PLACING_OPTIONS[word]} not allowed: an episode's tables stay in its database"
        if word == "ENGINE":
            j = i + 1
            if j < len(tokens) and tokens[j].token_type == TokenType.EQ:
                j += 1
            engine = tokens[j].text.upper() if j < len(tokens) else ""
            if engine != ENGINE:
                return (
                    f"ENGINE={engine or '...'} is not allowed: tables use InnoDB (the engine "
                    "of every table here; quote a column named engine)"
                )
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


def sqlite_strings(sql: str, names: Iterable[str]) -> str:
    """``sql``, read as SQLite, with each double-quoted token that names nothing written as
    the single-quoted string SQLite takes it for.

    SQLite reads ``"Asia"`` as an identifier where it names something and as the string
    ``'Asia'`` elsewhere (Spider's gold queries quote their strings so); sqlglot reads it
    as an identifier always, so its MySQL version of ``T1.Continent = "Asia"`` would
    compare with a column `` `Asia` ``. A double-quoted token stays an identifier when it
    is one of ``names`` (the database's tables and columns, in any letter case), an alias
    the query defines (after ``AS``), a name with a dot beside it, or a function's name.
    """
    from sqlglot.tokens import TokenType

    tokens = _tokens(sql, "sqlite")
    if not tokens:
        return sql
    known = {name.lower() for name in names}
    known |= {
        tokens[i + 1].text.lower()
        for i, token in enumerate(tokens[:-1])
        if token.token_type == TokenType.ALIAS
    }
    edits = []
    for i, token in enumerate(tokens):
        if token.token_type != TokenType.IDENTIFIER or sql[token.start : token.start + 1] != '"':
            continue
        before = tokens[i - 1].token_type if i > 0 else None
        after = tokens[i + 1].token_type if i + 1 < len(tokens) else None
        if (
            token.text.lower() in known
            or before in (TokenType.ALIAS, TokenType.DOT)
            or after in (TokenType.DOT, TokenType.L_PAREN)
        ):
            continue
        edits.append((token.start, token.end + 1, "'" + token.text.replace("'", "''") + "'"))
    for start, end, literal in reversed(edits):
        sql = sql[:start] + literal + sql[end:]
    return sql


def sqlite_gold_for_mysql(sql: str, names: Iterable[str]) -> str:
    """A query written for SQLite (Spider's gold queries) rewritten for MySQL by sqlglot,
    its double-quoted strings kept strings (``sqlite_strings``); ``sql`` itself when
    sqlglot cannot read it."""
    import sqlglot

    try:
        return sqlglot.transpile(sqlite_strings(sql, names), read="sqlite", write="mysql")[0]
    except sqlglot.errors.ParseError:
        return sql
