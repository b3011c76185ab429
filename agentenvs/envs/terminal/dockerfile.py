"""Dockerfiles read as Docker reads them: steps, ``ARG``/``ENV`` substitution, ``FROM``.

``analyse_dockerfile`` says what the runtimes need from a task's Dockerfile (base image,
environment) and whether the local runtime can reproduce its steps.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping
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


def _dockerfile_steps(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per step, continuations joined, comments dropped."""
    steps: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text(errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # Docker drops comment lines inside continuations too
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = (pending + line).strip()
        pending = ""
        word, _, rest = line.partition(" ")
        steps.append((word.upper(), rest.strip()))
    if pending.strip():
        word, _, rest = pending.strip().partition(" ")
        steps.append((word.upper(), rest.strip()))
    return steps


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
