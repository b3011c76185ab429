"""The simple commands of a POSIX shell text, as the shell would split them.

A small lexer for reading scripts without running them (``needs.py`` reads Dockerfile
``RUN`` steps, solutions and tests with it). It follows the shell's own rules where they
decide which words a command gets:

- quotes (``'...'``, ``"..."``, ``$'...'``) and backslashes are removed, a backslash-newline
  joins lines, ``#`` at the start of a word begins a comment;
- ``&& || ; | |& & ( )`` and newlines end a command; ``{ } ! if then do ...`` in front of
  a command are left out;
- redirections (``>``, ``2>/dev/null``, ``>/dev/null 2>&1``, ``&>``, ``<<<``) are left out
  with their targets; a here-document's body is not part of any command (it is kept as
  the command's ``stdin``, and read as a script when ``sh``/``bash`` reads it);
- ``$VAR``, ``${VAR}`` and ``${VAR:-word}`` take their values from ``env`` and from the
  script's own assignments (``A=1``, ``export A=1``); a variable whose value is not known
  stays as written and is named in the command's ``unknown``;
- ``$(...)`` and backquotes are read as commands of their own (their value is unknown),
  and so are the scripts of ``sh -c``/``bash -c``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: words in front of a command that are syntax, not the command
_RESERVED = frozenset(
    {"{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time"}
)
#: operators that end a command, longest first
_ENDS = ("&&", "||", ";;", ";&", "|&", ";", "|", "&", "(", ")")
#: redirection operators, longest first (the io number in front is read separately)
_REDIRECTS = ("&>>", "<<<", "<<-", "&>", ">>", ">|", "<>", "<&", ">&", "<<", "<", ">")
#: a run of characters with no meaning to the lexer
_PLAIN = re.compile(r"[^\\\n \t\r#<>&|;()'\"$`]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)


@dataclass(frozen=True)
class Command:
    """One simple command: its words (quotes removed, known variables expanded), the
    variables it uses whose value is not known, the line it starts on (1-based), its
    source text, and the here-documents it reads."""

    words: tuple[str, ...]
    unknown: tuple[str, ...] = ()
    line: int = 1
    text: str = ""
    stdin: str = ""


class _Lexer:
    def __init__(self, script: str, env: dict[str, str | None]) -> None:
        self.s = script
        self.i = 0
        self.line = 1
        self.env = env
        self.out: list[Command] = []
        self.inner: list[tuple[str, int]] = []  # substitutions, read after
        #: here-documents opened on this line: (command index, delimiter, strip tabs)
        self.pending_heredocs: list[tuple[int, str, bool]] = []
        self._new_command()

    def _new_command(self) -> None:
        self.words: list[str] = []
        self.word: list[str] | None = None
        self.io_number = True  # the word so far is digits, unquoted
        self.target: str | None = None  # the redirection waiting for its target word
        self.unknown: list[str] = []
        self.start = self.last = self.i
        self.start_line = self.line
        self.heredocs: list[tuple[str, bool]] = []

    # -- words -------------------------------------------------------------------------
    def _add(self, text: str, *, literal: bool) -> None:
        if self.word is None:
            self.word = []
            self.io_number = True
        self.word.append(text)
        if literal or not text.isdigit():
            self.io_number = False

    def _end_word(self) -> None:
        if self.word is None:
            return
        text = "".join(self.word)
        self.word = None
        self.last = self.i
        if self.target is not None:
            if self.target in ("<<", "<<-"):
                self.heredocs.append((text, self.target == "<<-"))
            self.target = None
            return
        self.words.append(text)

    def _end_command(self) -> None:
        self._end_word()
        pending = self.heredocs
        words = list(self.words)
        while words and words[0] in _RESERVED:
            words.pop(0)
        if words:
            # assignments alone set the script's variables for the commands after them
            assigns = words[1:] if words[0] in ("export", "readonly", "local") else words
            if all(_ASSIGNMENT.match(w) for w in assigns) and (assigns or words[0] != "export"):
                for w in assigns:
                    m = _ASSIGNMENT.match(w)
                    assert m is not None
                    self.env[m.group(1)] = None if "$" in m.group(2) else m.group(2)
            text = " ".join(self.s[self.start : max(self.last, self.start)].split())
            self.out.append(
                Command(tuple(words), tuple(dict.fromkeys(self.unknown)), self.start_line, text)
            )
        index = len(self.out) - 1 if words else -1  # a body no command reads is dropped
        self.pending_heredocs += [(index, d, strip) for d, strip in pending]
        self._new_command()

    def _variable(self, name: str, op: str = "", word: str = "") -> str:
        value = self.env.get(name)
        if op.endswith(("-", "=")) and not value:
            return word if "$" not in word else self._unknown(name)
        if op.endswith("+"):
            return (word if value else "") if value is not None else self._unknown(name)
        if value is None:
            return self._unknown(name)
        return value

    def _unknown(self, name: str) -> str:
        self.unknown.append(name)
        return "${" + name + "}"

    # -- reading -----------------------------------------------------------------------
    def _closing(self, opener: str, closer: str) -> int:
        """Index of the ``closer`` that matches an ``opener`` just read (quotes skipped)."""
        depth, j, s = 1, self.i, self.s
        while j < len(s):
            c = s[j]
            if c == "\\":
                j += 2
                continue
            if c in "'\"":
                end = s.find(c, j + 1)
                j = len(s) if end < 0 else end + 1
                continue
            if c == opener:
                depth += 1
            elif c == closer:
                depth -= 1
                if depth == 0:
                    return j
            j += 1
        return len(s)

    def _dollar(self) -> None:
        """A ``$`` just read (at self.i - 1)."""
        s, i = self.s, self.i
        nxt = s[i : i + 1]
        if nxt == "(":
            arithmetic = s[i : i + 2] == "(("
            self.i += 1
            end = self._closing("(", ")")
            body = s[self.i : end]
            if not arithmetic:
                self.inner.append((body, self.line))
            self.line += body.count("\n")
            self.i = end + 1
            self._add("$(" + " ".join(body.split()) + ")", literal=True)
            self.unknown.append("$(" + " ".join(body.split())[:40] + ")")
        elif nxt == "{":
            self.i += 1
            end = self._closing("{", "}")
            body = s[self.i : end]
            self.i = end + 1
            m = re.match(r"^#?([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])(:?[-=+?])?(.*)$", body, re.S)
            if m is None or body.startswith("#"):  # ``${#X}``: a length
                self._add(self._unknown(body.lstrip("#")), literal=True)
            else:
                self._add(self._variable(m.group(1), m.group(2) or "", m.group(3)), literal=True)
        elif nxt == "'":
            self.i += 1
            end = s.find("'", self.i)
            end = len(s) if end < 0 else end
            text = s[self.i : end]
            self.i = end + 1
            self._add(text.encode().decode("unicode_escape", errors="replace"), literal=True)
        else:
            m = _NAME.match(s, i)
            if m is not None:
                self.i = m.end()
                self._add(self._variable(m.group(0)), literal=True)
            elif nxt and nxt in "0123456789@*#?$!-":
                self.i += 1
                self._add(self._unknown(nxt), literal=True)
            else:
                self._add("$", literal=True)

    def _double_quoted(self) -> None:
        s = self.s
        self._add("", literal=True)
        while self.i < len(s):
            c = s[self.i]
            self.i += 1
            if c == '"':
                return
            if c == "\\" and self.i < len(s) and s[self.i] in '$`"\\\n':
                if s[self.i] == "\n":
                    self.line += 1
                else:
                    self._add(s[self.i], literal=True)
                self.i += 1
            elif c == "$":
                self._dollar()
            elif c == "`":
                self._backquote()
            else:
                if c == "\n":
                    self.line += 1
                self._add(c, literal=True)

    def _backquote(self) -> None:
        end = self.s.find("`", self.i)
        end = len(self.s) if end < 0 else end
        body = self.s[self.i : end]
        self.inner.append((body, self.line))
        self.line += body.count("\n")
        self.i = end + 1
        self._add("$(" + " ".join(body.split()) + ")", literal=True)
        self.unknown.append("`" + " ".join(body.split())[:40] + "`")

    def _heredoc_bodies(self) -> None:
        """After a newline: the bodies of the here-documents the line opened."""
        pending, self.pending_heredocs = self.pending_heredocs, []
        s = self.s
        for index, delimiter, strip in pending:
            body: list[str] = []
            while self.i < len(s):
                end = s.find("\n", self.i)
                end = len(s) if end < 0 else end
                raw = s[self.i : end]
                self.i = end + 1
                self.line += 1
                if (raw.lstrip("\t") if strip else raw) == delimiter:
                    break
                body.append(raw)
            if 0 <= index < len(self.out):
                old = self.out[index]
                stdin = old.stdin + "\n".join(body) + "\n"
                self.out[index] = Command(old.words, old.unknown, old.line, old.text, stdin)
        self.start = self.i
        self.start_line = self.line

    def run(self) -> list[Command]:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "\\" and s[self.i + 1 : self.i + 2] == "\n":
                self.i += 2
                self.line += 1
                continue
            if c == "\n":
                self._end_command()
                self.i += 1
                self.line += 1
                self._heredoc_bodies()
                self.start, self.start_line = self.i, self.line
                continue
            if c in " \t\r":
                self._end_word()
                self.i += 1
                if self.word is None and not self.words:
                    self.start, self.start_line = self.i, self.line
                continue
            if c == "#" and self.word is None:
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
                continue
            plain = _PLAIN.match(s, self.i)
            if plain is not None and not (c == "#" and self.word is None):
                self.i = plain.end()
                self._add(plain.group(0), literal=False)
                continue
            redirect = next((op for op in _REDIRECTS if s.startswith(op, self.i)), None)
            if redirect is not None:
                if self.word is not None and self.io_number and redirect[0] != "&":
                    self.word = None  # ``2>``: the digits name the stream, not a word
                else:
                    self._end_word()
                self.target = redirect
                self.i += len(redirect)
                continue
            end = next((op for op in _ENDS if s.startswith(op, self.i)), None)
            if end is not None:
                self._end_command()
                self.i += len(end)
                self.start, self.start_line = self.i, self.line
                continue
            self.i += 1
            if c == "\\":
                if self.i < len(s):
                    self._add(s[self.i], literal=True)
                    self.i += 1
            elif c == "'":
                end_q = s.find("'", self.i)
                end_q = len(s) if end_q < 0 else end_q
                text = s[self.i : end_q]
                self.line += text.count("\n")
                self.i = end_q + 1
                self._add(text, literal=True)
            elif c == '"':
                self._double_quoted()
            elif c == "$":
                self._dollar()
            elif c == "`":
                self._backquote()
            else:
                self._add(c, literal=False)
        self._end_command()
        self._heredoc_bodies()
        return self.out


def _script_of(words: tuple[str, ...], stdin: str) -> str | None:
    """The script a shell command runs (``sh -c SCRIPT``, ``bash <<EOF``), if any."""
    if not words or Path(words[0]).name not in ("sh", "bash", "dash", "zsh"):
        return None
    for k, word in enumerate(words[1:], 1):
        if word.startswith("-") and not word.startswith("--") and "c" in word:
            return words[k + 1] if k + 1 < len(words) else None
        if not word.startswith("-"):
            return None  # a script file
    return stdin or None


def commands(script: str, env: Mapping[str, str] | None = None, *, _line: int = 1) -> list[Command]:
    """The simple commands of ``script`` in order (substitutions and ``sh -c`` scripts
    after the command that holds them), variables expanded from ``env``."""
    scope: dict[str, str | None] = dict(env or {})
    lexer = _Lexer(script, scope)
    lexer.line = lexer.start_line = _line
    found: list[Command] = []
    for cmd in lexer.run():
        found.append(cmd)
        inner = _script_of(cmd.words, cmd.stdin)
        if inner is not None:
            found += commands(
                inner, {k: v for k, v in scope.items() if v is not None}, _line=cmd.line
            )
    for body, line in lexer.inner:
        found += commands(body, {k: v for k, v in scope.items() if v is not None}, _line=line)
    return found
