"""Dockerfiles read as Docker reads them, without building.

:func:`parse` gives the steps of a Dockerfile: parser directives (``# escape=``,
``# syntax=``) honoured, continuation lines joined (the escape character, then only blanks,
ends a line that goes on; comment and empty lines inside a continuation are dropped, as
Docker drops them), ``--flag=value`` options split from the arguments, and the
here-documents of ``RUN``/``COPY``/``ADD`` (``RUN <<EOF``, ``<<-EOF``, quoted delimiters,
several on one step) read with their bodies. :func:`arguments` reads an instruction's
arguments in the exec form (a JSON array) or as words. :func:`expand` is Docker's
substitution (``$X``, ``${X}``, ``${X:-word}``, ``${X:+word}``) for ``ARG``/``ENV``/``FROM``
and :func:`parse_from` reads ``FROM [--platform=P] image [AS name]``. The commands of a
``RUN`` step are read by the shell lexer (:mod:`~agentenvs.envs.terminal.shellwords`), in
``needs.py``.

:func:`analyse_dockerfile` says what the runtimes need from a task's Dockerfile (base image,
environment) and whether the local runtime can reproduce its steps.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the terminal base image, passed to every build as the ``BASE_IMAGE`` build argument
BASE_IMAGE = "agentenvs/terminal:latest"
# the standard step of the bundled Dockerfiles: run files/setup.sh once, then delete it
_SETUP_RUN = re.compile(
    r"^(rm -f /app/\.keep && )?if \[ -f /app/setup\.sh \]; then cd /app && "
    r"(APP_DIR=/app )?bash /app/setup\.sh && rm -f /app/setup\.sh; fi$"
)
_BASE_REFS = {"${BASE_IMAGE}", "$BASE_IMAGE", BASE_IMAGE, "agentenvs/terminal"}
#: the PATH of the official base images (Debian/Ubuntu and python:*), for ``$PATH`` in ENV
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_VAR = re.compile(
    r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))"
)


def expand(value: str, env: Mapping[str, str]) -> str:
    """Docker's substitution in ENV/ARG/FROM: ``$X``, ``${X}``, ``${X:-word}``, ``${X:+word}``."""

    def one(m: re.Match[str]) -> str:
        have = env.get(m.group(1) or m.group(4) or "", "")
        op, word = m.group(2) or "", m.group(3) or ""
        if op.endswith("-"):
            return have or word
        if op.endswith("+"):
            return word if have else ""
        return have

    return _VAR.sub(one, value.replace("\\$", "\x00")).replace("\x00", "$")


@dataclass(frozen=True)
class Heredoc:
    """A here-document of a step: its delimiter, whether leading tabs are stripped
    (``<<-``), and its body."""

    delimiter: str
    body: str
    strip_tabs: bool = False


@dataclass(frozen=True)
class Step:
    """One instruction: the line it starts on (1-based), the instruction in capitals, its
    ``--flag=value`` options, its arguments after them (continuations joined, here-document
    bodies not included) and its here-documents."""

    line: int
    instruction: str
    flags: tuple[tuple[str, str], ...] = ()
    rest: str = ""
    heredocs: tuple[Heredoc, ...] = field(default=())

    @property
    def flag_map(self) -> dict[str, str]:
        return dict(self.flags)

    @property
    def arguments_text(self) -> str:
        """The arguments as written, flags included (``RUN --mount=... cmd``)."""
        flags = " ".join(f"--{k}={v}" if v else f"--{k}" for k, v in self.flags)
        return f"{flags} {self.rest}".strip()

    def script(self) -> str:
        """A ``RUN`` step's shell text: its command line, and for each here-document the
        body (the body alone when the line has no command: ``RUN <<EOF`` runs the body;
        else the body and its delimiter follow, as a shell reads ``cmd <<EOF``)."""
        if not self.heredocs:
            return self.rest
        if _heredoc_only(self.rest):
            return "\n".join(h.body for h in self.heredocs)
        parts = [self.rest]
        for h in self.heredocs:
            parts += [h.body, h.delimiter] if h.body else [h.delimiter]
        return "\n".join(parts)


#: the instructions Docker's parser knows (any other word starting a step is a parse error)
INSTRUCTIONS = frozenset(
    {
        "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK",
        "LABEL", "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME",
        "WORKDIR",
    }
)  # fmt: skip
#: the instructions whose arguments may open here-documents
HEREDOC_INSTRUCTIONS = frozenset({"RUN", "COPY", "ADD"})
_HEREDOC = re.compile(r"<<(-?)(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")
_DIRECTIVE = re.compile(r"^#\s*([A-Za-z]+)\s*=\s*(\S+)\s*$")


def _heredoc_only(rest: str) -> bool:
    """Whether the step's line is only here-document openers (``RUN <<EOF``)."""
    return not _HEREDOC.sub("", rest).strip()


def _openers(rest: str) -> list[re.Match[str]]:
    """The here-document openers of a line, outside its quotes."""
    spans = [m.span() for m in _QUOTED.finditer(rest)]
    return [m for m in _HEREDOC.finditer(rest) if not any(a <= m.start() < b for a, b in spans)]


def split_flags(rest: str) -> tuple[tuple[tuple[str, str], ...], str]:
    """``--name=value`` options in front of an instruction's arguments, and the rest."""
    flags: list[tuple[str, str]] = []
    rest = rest.lstrip()
    while rest.startswith("--"):
        word, _, rest = rest.partition(" ")
        key, _, value = word[2:].partition("=")
        flags.append((key, value))
        rest = rest.lstrip()
    return tuple(flags), rest


def parse(text: str) -> list[Step]:
    """The steps of a Dockerfile's text, as Docker's parser reads them."""
    lines = text.splitlines()
    escape = "\\"
    k = 0
    # parser directives: comment lines at the very top, before anything else
    while k < len(lines) and (m := _DIRECTIVE.match(lines[k].strip())):
        if m.group(1).lower() == "escape" and m.group(2) in ("`", "\\"):
            escape = m.group(2)
        k += 1
    continued = re.compile(re.escape(escape) + r"[ \t]*$")
    steps: list[Step] = []
    pending: list[str] = []
    first = 0
    while k < len(lines):
        number, raw = k + 1, lines[k]
        k += 1
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue  # Docker drops comment and empty lines, inside continuations too
        if not pending:
            first = number
        m = continued.search(raw)
        if m is not None:
            pending.append(raw[: m.start()].strip())
            continue
        pending.append(stripped)
        line = " ".join(p for p in pending if p)
        pending = []
        word, _, rest = line.partition(" ")
        instruction = word.upper()
        flags, rest = split_flags(rest)
        heredocs: list[Heredoc] = []
        if instruction in HEREDOC_INSTRUCTIONS:
            for opener in _openers(rest):
                strip, delimiter = opener.group(1) == "-", opener.group(3)
                body: list[str] = []
                while k < len(lines):
                    raw_body = lines[k]
                    k += 1
                    if (raw_body.lstrip("\t") if strip else raw_body).strip() == delimiter:
                        break
                    body.append(raw_body.lstrip("\t") if strip else raw_body)
                heredocs.append(Heredoc(delimiter, "\n".join(body), strip))
        steps.append(Step(first, instruction, flags, rest.strip(), tuple(heredocs)))
    if pending:
        word, _, rest = " ".join(p for p in pending if p).partition(" ")
        flags, rest = split_flags(rest)
        steps.append(Step(first, word.upper(), flags, rest.strip()))
    return steps


def read_steps(path: Path) -> list[Step]:
    """The steps of the Dockerfile at ``path`` (none when it cannot be read)."""
    try:
        return parse(path.read_text(errors="replace"))
    except OSError:
        return []


def dockerfile_steps(path: Path) -> list[tuple[int, str, str]]:
    """(line, INSTRUCTION, arguments) per step; a ``RUN`` step with here-documents gives
    its script (:meth:`Step.script`), flags in front."""
    out = []
    for step in read_steps(path):
        if step.instruction == "RUN" and step.heredocs:
            flags = Step(step.line, step.instruction, step.flags).arguments_text
            rest = f"{flags} {step.script()}".strip() if flags else step.script()
        else:
            rest = step.arguments_text
        out.append((step.line, step.instruction, rest))
    return out


def _dockerfile_steps(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per step (:func:`dockerfile_steps` without the lines)."""
    return [(word, rest) for _, word, rest in dockerfile_steps(path)]


def arguments(rest: str) -> list[str]:
    """An instruction's arguments: the exec form (a JSON array of strings), or words as
    Docker splits them (quotes removed)."""
    if rest.startswith("["):
        try:
            argv = json.loads(rest)
        except ValueError:
            argv = None
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            return argv
    try:
        return shlex.split(rest, posix=True)
    except ValueError:
        return rest.split()


def _env_items(args: str) -> list[tuple[str, str]]:
    """``ENV a=1 b="x y"`` or the legacy ``ENV a 1 2``."""
    first = args.split(None, 1)
    if first and "=" not in first[0]:
        return [(first[0], first[1] if len(first) > 1 else "")]
    items = []
    for item in shlex.split(args, posix=True):
        key, _, value = item.partition("=")
        items.append((key, value))
    return items


def parse_from(args: str, scope: Mapping[str, str]) -> tuple[str, str | None, str | None]:
    """(image, platform, stage name) of a ``FROM [--platform=P] image [AS name]``."""
    words = args.split()
    platform = None
    while words and words[0].startswith("--"):
        flag = words.pop(0)
        if flag.startswith("--platform="):
            platform = expand(flag.split("=", 1)[1], scope)
    image = expand(words[0], scope) if words else ""
    name = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
    return image, platform, name


def analyse_dockerfile(path: Path) -> dict[str, Any]:
    """What the runtimes need from a Dockerfile, and why the local one cannot, if it cannot.

    The last stage's base image (``FROM --platform=... image AS name`` and ``ARG``
    defaults understood) and its ``ENV`` with ``$VAR`` expanded as Docker does (the
    official bases' PATH for ``$PATH``); the local runtime also needs every step to be
    one it can reproduce (``COPY`` into /app, ``WORKDIR /app``, the standard setup step).
    """
    from agentenvs.envs.terminal.data import standin_base  # data imports this module

    copies: list[tuple[str, str]] = []
    env: dict[str, str] = {}
    # the runtimes pass BASE_IMAGE as a build argument (it wins over an ARG default)
    args: dict[str, str] = {"BASE_IMAGE": BASE_IMAGE}
    runs_setup = False
    problem: str | None = None
    base_image = ""
    platform: str | None = None
    stages: set[str] = set()
    workdir = "/"
    for word, rest in _dockerfile_steps(path):
        if word == "ARG":
            for item in rest.split():
                key, eq, value = item.partition("=")
                args.setdefault(key, expand(value.strip('"'), {**args, **env}) if eq else "")
            continue
        if word == "FROM":
            image, platform, name = parse_from(rest, args)
            if image not in stages:  # FROM an earlier stage keeps that stage's ENV
                env = {}
            base_image = image
            if name:
                stages.add(name)
            copies, runs_setup, workdir = [], False, "/"
            if (
                image not in _BASE_REFS
                and not image.startswith("agentenvs/terminal:")
                and standin_base(image) is None
            ):
                problem = (
                    f"{path.name}: base image {image!r} (the local runtime has {BASE_IMAGE} "
                    "and stands in for Debian/Ubuntu bases with Python only)"
                )
            else:
                problem = None
            continue
        if word == "ENV":
            # one ENV line sees the values from before it, as in Docker
            scope = {"PATH": DEFAULT_PATH, **args, **env}
            for key, value in _env_items(rest):
                env[key] = expand(value, scope)
            continue
        if word == "WORKDIR":
            workdir = expand(rest, {**args, **env})
        if problem is not None:
            continue
        if word in ("LABEL", "CMD", "ENTRYPOINT", "EXPOSE", "SHELL", "USER"):
            if word == "USER" and rest.strip() not in ("root", "0", "0:0"):
                problem = f"{path.name}: USER {rest} (the local runtime runs one user)"
            continue
        if word == "WORKDIR":
            if workdir.rstrip("/") != "/app":
                problem = f"{path.name}: WORKDIR {rest} (the local runtime works in /app)"
        elif word == "COPY":
            parts = shlex.split(rest)
            if len(parts) == 2 and not parts[1].startswith("/"):  # relative to WORKDIR
                parts[1] = posixpath.normpath(posixpath.join(workdir, parts[1]))
            if any(p.startswith("--") for p in parts) or len(parts) != 2:
                problem = f"{path.name}: COPY {rest} (only `COPY <src> /app/...` is understood)"
            elif not (parts[1] == "/app" or parts[1].startswith("/app/")):
                problem = f"{path.name}: COPY to {parts[1]} (outside /app)"
            else:
                copies.append((parts[0], parts[1]))
        elif word == "RUN" and _SETUP_RUN.match(" ".join(rest.split())):
            runs_setup = True
        else:
            problem = f"{path.name}: {word} {rest[:80]!r} (needs the docker runtime)"
    if problem is None and standin_base(base_image) and workdir.rstrip("/") != "/app":
        # a stood-in base's own work dir is /, where the local runtime cannot work
        problem = (
            f"{path.name}: base image {base_image!r} with WORKDIR {workdir} "
            "(the local runtime works in /app)"
        )
    return {
        "copies": tuple(copies),
        "env": tuple(env.items()),
        "runs_setup": runs_setup,
        "local_problem": problem,
        "base_image": base_image,
        "platform": platform,
        "workdir": workdir,
    }
