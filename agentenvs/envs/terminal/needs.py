r"""What a task needs that this machine cannot give, predicted without building its image.

Used by ``TerminalBenchEnv.check_tasks`` on the docker runtime. The prediction follows
what the build and the tests would meet, in order:

- **Base images** (``images.plan_bases``), and the images of the compose file's other
  services (or their Dockerfiles' bases): each ``FROM`` is present in the engine, or
  (offline) stood in for by an image of the image map that is built here, or (online)
  known to the registry it would be pulled from (its manifest is asked for; an engine that
  pulls but gives its containers no network builds offline from the pulled base, so that
  base is pulled, once, to read what it has). A registry that does not answer, limits the rate or refuses the credentials
  is an infrastructure fault (a ``registry`` :class:`~agentenvs.core.errors.Fault` is
  raised); its answer that it has no such image is the task's need.
- **Build-time packages, offline**: the offline build serves ``apt-get install`` from the
  Debian packages installed in the base image (plus the tools the stand-ins replace) and
  ``pip install`` from the Python distributions of the base image and the wheelhouse
  (``agentenvs.envs.terminal.offline``); a package named in a ``RUN`` step that neither
  has is named.
- **Tests that need the network**, when the tests have none (offline, or
  ``network="none"``): a download (``curl``/``wget``/``git clone``) in the test scripts
  beyond what the stand-ins serve (the uv installer, loopback), a package that the tests
  install (``pip install``, ``uv add``, ``uvx --with``) that is neither in the image's
  reach nor in the wheelhouse, and a test module that calls a host (``requests``,
  ``urllib``, ``httpx`` ... with a non-loopback URL).
- **The Dockerfile's own reach** (:func:`scan_dockerfile`, on the steps that
  :mod:`~agentenvs.envs.terminal.dockerfile` parses): a ``COPY``/``ADD`` source outside
  the build context (``..`` past its root: the builder refuses it) or missing from it (an
  absolute source is read from the context's root), always (``agentenvs check-tasks``
  counts such a task invalid: :func:`unbuildable`, as it does a step that starts with
  an instruction Docker does not know); a step only BuildKit builds (a
  here-document, a ``RUN`` option, a ``COPY``/``ADD`` option other than ``--from`` and
  ``--chown``), always: the images are built by the engine's classic builder, which
  refuses them; offline, every ``RUN`` step's downloads (``curl``/``wget``/``git clone``
  of a non-loopback URL) and installs from an index nothing here serves (npm, yarn, pnpm,
  gem, cargo, go, conda, apk, yum/dnf, cpanm, composer, rustup), and ``ADD <URL>``; an
  image that ``COPY --from=`` (or ``RUN --mount=from=``) reads, unless it names a stage
  of the same Dockerfile (``FROM ... AS name``, or its index), is had as a base image is.
- **Solutions that need the network**, when the agent has none: the same reading of
  TB1 ``solution.sh`` (or ``solution.yaml``'s commands) and Harbor ``solution/solve.sh``;
  the reason names whose script and which line needs the network.

Scripts are read with a shell lexer (:mod:`~agentenvs.envs.terminal.shellwords`):
redirections (``2>/dev/null``, ``>/dev/null 2>&1``, ``&>``) and their targets are no
words, ``\`` newline joins lines, ``&& || ; |`` split commands, comments and quotes go
as the shell drops them, here-document bodies are data (unless ``sh``/``bash`` reads
them), ``sh -c`` scripts and ``$(...)`` are read too, and a ``RUN <<EOF`` step's
here-document is its script. ``$VAR``/``${VAR}`` take their value
from the Dockerfile's ``ARG``/``ENV`` (Docker's scoping: an ``ARG`` before the first
``FROM`` reaches a stage only when the stage declares it again) and from the script's
own assignments; a package named through an unknown variable is not counted and a
download whose URL is unknown is not a need: both are warnings.

:func:`network_warnings` lists, per task, each command of its solution and tests that
reaches past this machine whatever the image holds, as ``file:line: `command```
(``agentenvs check-tasks`` prints them under its table for the tasks it accepts; pip
and apt installs are left to the prediction, which knows what the image has).
"""

from __future__ import annotations

import functools
import posixpath
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.envs.terminal import images
from agentenvs.envs.terminal.data import TerminalTask
from agentenvs.envs.terminal.dockerfile import (
    INSTRUCTIONS,
    _env_items,
    arguments,
    expand,
    parse_from,
    read_steps,
)
from agentenvs.envs.terminal.shellwords import Command, commands

#: apt packages the offline stand-ins replace (``offline/shim.py`` PROVIDED_PACKAGES)
STAND_IN_PACKAGES = frozenset({"curl", "wget", "ca-certificates", "python3-pip", "pipx"})
_LOOPBACK = re.compile(r"^(?:localhost|127\.\d+\.\d+\.\d+|\[::1\]|0\.0\.0\.0)$")
_URL = re.compile(r"""\b(?:https?|git|ftp)://([A-Za-z0-9.\-\[\]:]+)[^\s'"`)]*""")
_UV_INSTALLER = re.compile(r"/uv/(?:[^/\s]+/)?install\.sh")
_NET_MODULES = re.compile(
    r"^\s*(?:import\s+(?:[\w.]+\s*,\s*)*|from\s+)"
    r"(requests|httpx|aiohttp|urllib\.request|urllib3|http\.client)\b",
    re.M,
)


def wheel_versions_of(wheels: Iterable[Path]) -> dict[str, frozenset[str]]:
    """Distribution → versions of a list of wheel files (pip's normalized names)."""
    found: dict[str, set[str]] = {}
    for path in wheels:
        parts = path.name.split("-")
        if len(parts) >= 2:
            found.setdefault(normalize(parts[0]), set()).add(parts[1])
    return {k: frozenset(v) for k, v in found.items()}


def wheel_fits(filename: str, python: str | None) -> bool:
    """Whether a wheel installs on CPython ``python`` ("3.13"; None: pure wheels only),
    from its file name's tags (the platform is this machine's: the wheelhouse is)."""
    parts = filename.removesuffix(".whl").split("-")
    if len(parts) < 5:
        return False
    pys, abi = parts[-3].split("."), parts[-2]
    if any(p in ("py3", "py2") or p.startswith("py3") for p in pys) and abi == "none":
        return True
    if python is None:
        return False
    minor = int(python.split(".")[1]) if "." in python else -1
    here = f"cp3{minor}"
    if here in pys:
        return True
    return abi == "abi3" and any(
        p.startswith("cp3") and p[3:].isdigit() and int(p[3:]) <= minor for p in pys
    )


def normalize(name: str) -> str:
    """A distribution's name as pip compares names."""
    return re.sub(r"[-_.]+", "-", name).lower()


#: the options of ``pip install`` that take a value (pip 26.3's parser; a test compares
#: this with the installed pip's parser, which is read first where it imports)
PIP_INSTALL_VALUE_OPTIONS = frozenset(
    {
        "-C", "-c", "-e", "-f", "-i", "-r", "-t",
        "--abi", "--all-releases", "--build-constraint", "--cache-dir", "--cert",
        "--client-cert", "--config-settings", "--constraint", "--default-timeout",
        "--editable", "--exists-action", "--extra-index-url", "--find-links", "--group",
        "--implementation", "--index-url", "--keyring-provider", "--local-log", "--log",
        "--log-file", "--no-binary", "--only-binary", "--only-final", "--platform",
        "--prefix", "--progress-bar", "--proxy", "--pypi-url", "--python",
        "--python-version", "--refresh-package", "--report", "--requirement",
        "--requirements-from-script", "--resume-retries", "--retries", "--root",
        "--root-user-action", "--source", "--source-dir", "--source-directory", "--src",
        "--target", "--timeout", "--trusted-host", "--upgrade-strategy",
        "--uploaded-prior-to", "--use-deprecated", "--use-feature",
    }
)  # fmt: skip

#: the options of ``uv pip install`` and ``uv add`` that take a value (uv's own beside
#: pip's spellings)
UV_INSTALL_VALUE_OPTIONS = frozenset(
    {
        "-C", "-P", "-c", "-e", "-f", "-g", "-i", "-m", "-p", "-r", "-t", "-w",
        "--allow-insecure-host", "--annotation-style", "--bounds", "--branch",
        "--build-constraints", "--cache-dir", "--color", "--config-file",
        "--config-setting", "--config-settings", "--config-settings-package",
        "--constraints", "--default-index", "--directory", "--editable", "--exclude-newer",
        "--exclude-newer-package", "--excludes", "--extra", "--extra-index-url",
        "--find-links", "--fork-strategy", "--group", "--index", "--index-strategy",
        "--index-url", "--keyring-provider", "--link-mode", "--marker", "--no-binary",
        "--no-build-isolation-package", "--no-sources-package", "--only-binary",
        "--optional", "--overrides", "--package", "--prefix", "--prerelease", "--project",
        "--python", "--python-platform", "--python-preference", "--python-version",
        "--refresh-package", "--reinstall-package", "--requirements", "--resolution",
        "--rev", "--script", "--tag", "--target", "--torch-backend", "--trusted-host",
        "--upgrade-package", "--with", "--with-editable", "--with-requirements",
    }
)  # fmt: skip

#: the options of ``apt-get``/``apt`` that take a value
APT_VALUE_OPTIONS = frozenset(
    {
        "-a", "-c", "-o", "-t", "--config-file", "--default-release", "--host-architecture",
        "--option", "--target-release",
    }
)  # fmt: skip


@functools.lru_cache(maxsize=1)
def pip_install_value_options() -> frozenset[str]:
    """The options of ``pip install`` that take a value, from the installed pip's own
    parser (:data:`PIP_INSTALL_VALUE_OPTIONS` where pip does not import or has moved)."""
    try:
        from pip._internal.commands import create_command

        parser = create_command("install").parser
        found = frozenset(
            name
            for option in parser._get_all_options()
            if option.takes_value()
            for name in (*option._short_opts, *option._long_opts)
        )
    except Exception:  # pip's internals are not an API: the table stands in
        return PIP_INSTALL_VALUE_OPTIONS
    return found or PIP_INSTALL_VALUE_OPTIONS


def _operands(args: list[str], valued: frozenset[str]) -> list[str]:
    """The words of ``args`` that are no option and no option's value, read as optparse
    and clap read them: ``--opt value``, ``--opt=value``, ``-xVALUE``, and everything
    after ``--`` (an abbreviated long option is read as a flag)."""
    found: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            found += args[i:]
            break
        if word.startswith("--"):
            if "=" not in word and word in valued:
                i += 1
        elif word.startswith("-") and len(word) > 1:
            # short flags bundle (``-qU``); the first that takes a value takes the rest
            for k in range(1, len(word)):
                if "-" + word[k] in valued:
                    i += k == len(word) - 1
                    break
        else:
            found.append(word)
    return found


def _requirement(word: str) -> str | None:
    """The distribution a pip requirement names (None: a path, URL or option)."""
    if word.startswith(("-", ".", "/", "~")) or "://" in word or word.endswith((".whl", ".txt")):
        return None
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)", word)
    return normalize(m.group(1)) if m else None


@functools.lru_cache(maxsize=32)
def _lexed(script: str, env: tuple[tuple[str, str], ...]) -> tuple[Command, ...]:
    return tuple(commands(script, dict(env)))


def _read(script: str, env: Mapping[str, str] | None = None) -> tuple[Command, ...]:
    """Simple commands of a shell text, as the shell splits them (:mod:`shellwords`); a
    script is read once for its packages, downloads and installs."""
    return _lexed(script, tuple(sorted((env or {}).items())))


def _commands(script: str, env: Mapping[str, str] | None = None) -> Iterable[list[str]]:
    for cmd in _read(script, env):
        yield list(cmd.words)


def _strip_prefix(cmd: list[str]) -> list[str]:
    """``sudo [-E -u user]``, ``env A=1``, ``python -m``, assignments and wrappers in front
    of a command dropped."""
    while cmd:
        head = cmd[0]
        if head == "sudo":
            cmd = cmd[1:]
            while cmd and cmd[0].startswith("-"):
                cmd = cmd[2:] if cmd[0] in ("-u", "-g", "-U", "-C", "-h") else cmd[1:]
        elif head in ("env", "exec", "time", "nohup", "command", "builtin") or re.match(
            r"^\w+=", head
        ):
            cmd = cmd[1:]
            while cmd and head == "env" and cmd[0].startswith("-"):
                cmd = cmd[1:]
        else:
            break
    if len(cmd) >= 3 and Path(cmd[0]).name.startswith("python") and cmd[1] == "-m":
        cmd = cmd[2:]
    return cmd


def apt_installs(script: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Debian packages that ``apt-get install``/``apt install`` lines of ``script`` name
    (a name whose variable is not known left out)."""
    found: list[str] = []
    for cmd in _commands(script, env):
        cmd = _strip_prefix(cmd)
        if not cmd or Path(cmd[0]).name not in ("apt-get", "apt"):
            continue
        words = _operands(cmd[1:], APT_VALUE_OPTIONS)
        if words and words[0] == "install":
            found += [re.split(r"[=:]", w, maxsplit=1)[0] for w in words[1:] if "$" not in w]
    return found


def pip_installs(script: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Distributions that ``pip install``, ``uv add``/``uv pip install`` and
    ``uvx --with`` of ``script`` name (paths, files and URLs left out)."""
    return [name for name, _ in pip_requirements(script, env)]


def pip_requirements(
    script: str, env: Mapping[str, str] | None = None
) -> list[tuple[str, str | None]]:
    """(distribution, the version an ``==`` pins or None) of what :func:`pip_installs`
    finds."""
    found: list[tuple[str, str | None]] = []
    for cmd in _commands(script, env):
        cmd = _strip_prefix(cmd)
        if not cmd:
            continue
        tool = Path(cmd[0]).name
        args = cmd[1:]
        if re.match(r"^pip3?(\.\d+)?$", tool) and args[:1] == ["install"]:
            args = _operands(args[1:], pip_install_value_options())
        elif tool == "uv" and args[:1] == ["add"]:
            args = _operands(args[1:], UV_INSTALL_VALUE_OPTIONS)
        elif tool == "uv" and args[:2] == ["pip", "install"]:
            args = _operands(args[2:], UV_INSTALL_VALUE_OPTIONS)
        elif tool == "uvx":
            args = [a for i, a in enumerate(args) if i and args[i - 1] in ("-w", "--with")]
            args += [a.split("=", 1)[1] for a in cmd[1:] if a.startswith("--with=")]
        else:
            continue
        for word in args:
            name = _requirement(word)
            if name is not None:
                pin = re.search(r"==\s*([^\s;,\[]+)$", word)
                # a pin whose variable is not known pins nothing known
                found.append((name, pin.group(1) if pin and "$" not in pin.group(1) else None))
    return found


def _fetcher(cmd: list[str]) -> bool:
    """Whether a (prefix-stripped) command downloads: curl, wget, and git's
    clone/fetch/pull/ls-remote/submodule."""
    tool = Path(cmd[0]).name if cmd else ""
    if tool == "git":
        args = [w for w in cmd[1:] if not w.startswith("-")]
        return bool(args) and args[0] in ("clone", "fetch", "pull", "ls-remote", "submodule")
    return tool in ("curl", "wget")


def _fetches(cmd: list[str]) -> list[str]:
    """The URLs a download command (:func:`_fetcher`) fetches."""
    if not _fetcher(cmd):
        return []
    return [m.group(0) for word in cmd[1:] if (m := _URL.search(word)) is not None]


def _remote(url: str) -> bool:
    """Whether ``url`` goes past this machine (and is not the stand-ins' uv installer)."""
    m = _URL.search(url)
    if m is None or _LOOPBACK.match(m.group(1).rsplit(":", 1)[0]):
        return False
    return not _UV_INSTALLER.search(m.group(0))


def downloads(script: str, env: Mapping[str, str] | None = None) -> list[str]:
    """URLs that ``curl``/``wget``/``git clone`` (fetch, pull...) lines of ``script``
    fetch from a host other than loopback, the uv installer (served by the stand-ins)
    left out."""
    urls: list[str] = []
    for cmd in _commands(script, env):
        urls += [u for u in _fetches(_strip_prefix(cmd)) if _remote(u)]
    return urls


def _other_install(cmd: list[str]) -> bool:
    """Whether a (prefix-stripped) command installs from a package index that nothing
    here serves offline: npm/yarn/pnpm, gem, cargo, go, conda, apk, yum/dnf, cpanm,
    composer, rustup."""
    if not cmd:
        return False
    tool, args = Path(cmd[0]).name, [w for w in cmd[1:] if not w.startswith("-")]
    first = args[0] if args else ""
    if tool in ("npm", "pnpm"):
        return first in ("install", "i", "ci", "add", "update")
    if tool == "yarn":
        return first in ("", "install", "add")
    if tool in ("gem", "cpanm", "apk", "rustup"):
        return first in ("install", "add", "toolchain", "target") or tool == "cpanm"
    if tool == "cargo":
        return first in ("install", "fetch")
    if tool == "go":
        return first in ("get", "install") or args[:2] == ["mod", "download"]
    if tool in ("conda", "mamba", "micromamba", "yum", "dnf", "composer"):
        return first in ("install", "create", "require", "update")
    return False


def unknown_installs(script: str, env: Mapping[str, str] | None = None) -> list[NetworkUse]:
    """The ``pip``/``uv``/``apt`` installs of ``script`` that name a package through a
    variable that is not known (what they install is not counted)."""
    found: list[NetworkUse] = []
    for cmd in _read(script, env):
        words = _strip_prefix(list(cmd.words))
        tool = Path(words[0]).name if words else ""
        args = [w for w in words[1:] if not w.startswith("-")]
        installs = (
            (tool in ("pip", "pip3", "apt-get", "apt") and args[:1] == ["install"])
            or (tool == "uv" and (args[:1] == ["add"] or args[:2] == ["pip", "install"]))
            or tool == "uvx"
        )
        if installs and any("${" in w or "$(" in w for w in args):
            found.append(NetworkUse(cmd.line, cmd.text, (), cmd.unknown))
    return found


@dataclass(frozen=True)
class NetworkUse:
    """A command of a script that reaches past this machine: its line, its text, and
    what it fetches (``urls``; empty for a package manager's install)."""

    line: int
    command: str
    urls: tuple[str, ...] = ()
    #: a variable whose value is not known makes where it goes unknown
    unknown: tuple[str, ...] = ()


def network_uses(script: str, env: Mapping[str, str] | None = None) -> list[NetworkUse]:
    """The commands of ``script`` that need the network whatever the image holds: a
    download from a host other than loopback (the uv installer left out), an install
    from an index nothing here serves (:func:`_other_install`), and a download whose URL
    is not known (a variable: noted, with the variable)."""
    found: list[NetworkUse] = []
    for cmd in _read(script, env):
        words = _strip_prefix(list(cmd.words))
        urls = _fetches(words)
        remote = tuple(u for u in urls if _remote(u))
        if remote or _other_install(words):
            found.append(NetworkUse(cmd.line, cmd.text, remote))
        elif not urls and _fetcher(words) and any(w.startswith(("${", "$(")) for w in words):
            # curl "$URL": where it goes is not known here
            found.append(NetworkUse(cmd.line, cmd.text, (), cmd.unknown))
    return found


def host_calls(source: str) -> list[str]:
    """Non-loopback URLs in a Python module that imports an HTTP client."""
    if not _NET_MODULES.search(source):
        return []
    return [
        m.group(0)
        for m in _URL.finditer(source)
        if not _LOOPBACK.match(m.group(1).rsplit(":", 1)[0])
    ]


def test_texts(task: TerminalTask) -> list[tuple[Path, str]]:
    """The test runner and the text files of ``tests/`` (up to 1 MB each)."""
    paths = [task.path / task.test_script]
    if task.tests_dir.is_dir():
        paths += sorted(p for p in task.tests_dir.rglob("*") if p.is_file())
    out = []
    for p in paths:
        try:
            if p.stat().st_size <= 1 << 20:
                out.append((p, p.read_text()))
        except (OSError, UnicodeDecodeError):
            continue
    return out


@dataclass
class Stage:
    """One stage of a Dockerfile: its base as written, its name, and its ``RUN`` steps
    (script text; the exec form's argv as a shell line) with the Dockerfile line and the
    variables (``ARG``/``ENV``) each one sees."""

    base: str
    name: str | None
    runs: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    envs: list[dict[str, str]] = field(default_factory=list)


@dataclass
class DockerfileScan:
    """What a Dockerfile's build reaches for: its stages, the URLs ``ADD`` fetches, the
    images ``COPY --from``/``RUN --mount=from=`` read (a stage of its own is no image),
    the sources ``COPY``/``ADD`` read that are outside or missing from the build context,
    and the steps whose meaning hangs on a variable that is not known."""

    stages: list[Stage] = field(default_factory=list)
    downloads: list[tuple[int, str]] = field(default_factory=list)
    images: list[tuple[int, str]] = field(default_factory=list)
    outside: list[tuple[int, str]] = field(default_factory=list)
    unknown: list[tuple[int, str]] = field(default_factory=list)
    #: (line, what) of the steps only BuildKit builds: here-documents, and the options
    #: of ``RUN``/``COPY``/``ADD`` other than ``--from``/``--chown``
    buildkit: list[tuple[int, str]] = field(default_factory=list)
    #: (line, word) of the steps that start with a word Docker's parser does not know (a
    #: here-document's body read as steps: ``RUN python3 << 'PY'``, a space after ``<<``)
    unknown_instructions: list[tuple[int, str]] = field(default_factory=list)


#: a variable in an instruction's argument, and the operator after it (``${X:-word}``)
_VAR_NAMES = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)(:?[-+])?")
#: the options the engine's classic builder reads (it refuses every other one)
CLASSIC_FLAGS = {"COPY": frozenset({"from", "chown"}), "ADD": frozenset({"chown"})}


def scan_dockerfile(
    path: Path, context: Path | None = None, build_args: Mapping[str, str] | None = None
) -> DockerfileScan:
    """Read a Dockerfile as its build would (``ARG`` defaults, build arguments, ``ENV``,
    multi-stage names); ``COPY`` sources are looked for in ``context`` (None: not)."""
    scan = DockerfileScan()
    if not path.is_file():
        return scan
    given = dict(build_args or {})
    globals_: dict[str, str] = dict(given)  # ARGs before the first FROM: for FROM lines
    scope: dict[str, str] = {}
    names: dict[str, dict[str, str]] = {}
    for step in read_steps(path):
        line, word, rest = step.line, step.instruction, step.rest
        flags = step.flag_map
        if word not in INSTRUCTIONS:
            scan.unknown_instructions.append((line, word))
            continue
        allowed = CLASSIC_FLAGS.get(word, frozenset())
        if word in ("RUN", "COPY", "ADD") and (step.heredocs or set(flags) - allowed):
            what = [f"--{k}" for k in flags if k not in allowed]
            what += [f"a here-document (<<{h.delimiter})" for h in step.heredocs]
            scan.buildkit.append((line, f"{word} {', '.join(what)}"))
        if word == "ARG":
            for item in arguments(rest):
                key, eq, value = item.partition("=")
                target = globals_ if not scan.stages else scope
                if key in given:
                    target[key] = given[key]
                elif eq:
                    target.setdefault(key, expand(value, {**globals_, **scope}))
                elif scan.stages and key in globals_:
                    scope[key] = globals_[key]
        elif word == "FROM":
            base, _, name = parse_from(step.arguments_text, globals_)
            scope = dict(names.get(base.lower(), {}))
            scan.stages.append(Stage(base, name))
            if name:
                names[name.lower()] = scope
        elif not scan.stages:
            continue
        elif word == "ENV":
            for key, value in _env_items(rest):
                scope[key] = expand(value, scope)
        elif word == "RUN":
            mount = re.search(r"(?:^|,)from=([^,]+)", flags.get("mount", ""))
            if mount and mount.group(1).lower() not in names and not mount.group(1).isdigit():
                scan.images.append((line, mount.group(1)))
            script = step.script()
            argv = arguments(script) if script.startswith("[") else None
            stage = scan.stages[-1]
            stage.runs.append(shlex.join(argv) if argv is not None else script)
            stage.lines.append(line)
            stage.envs.append(dict(scope))
        elif word in ("COPY", "ADD"):
            _scan_copy(scan, line, word, flags, rest, scope, names, context)
    return scan


def _scan_copy(
    scan: DockerfileScan,
    line: int,
    word: str,
    flags: Mapping[str, str],
    rest: str,
    scope: Mapping[str, str],
    stages: Mapping[str, Any],
    context: Path | None,
) -> None:
    source = flags.get("from")
    if source is not None:
        source = expand(source, scope)
        if source.lower() not in stages and not source.isdigit():
            scan.images.append((line, source))
        return
    args = arguments(rest)
    for src in args[:-1]:
        if src.startswith("<<"):
            continue  # a here-document
        # ``${X:-word}`` and ``${X:+word}`` have a value whether X is known or not
        unknown = [v for v, op in _VAR_NAMES.findall(src) if v not in scope and not op]
        if unknown:
            scan.unknown.append((line, f"{word} {src} (${unknown[0]} is not known)"))
            continue
        src = expand(src, scope)
        if word == "ADD" and ("://" in src or src.startswith("git@")):
            scan.downloads.append((line, src))
            continue
        if context is None:
            continue
        norm = posixpath.normpath(src)
        if norm == ".." or norm.startswith("../"):
            scan.outside.append((line, src))  # the builder refuses a path out of the context
            continue
        rel = norm.lstrip("/")
        if rel in ("", "."):
            continue  # the whole context
        if any(ch in rel for ch in "*?["):
            if not any(context.glob(rel)):
                scan.outside.append((line, src))
            continue
        if not (context / rel).exists():
            scan.outside.append((line, src))


def unbuildable(task: TerminalTask) -> str | None:
    """Why no machine builds the task's Dockerfile, as ``Dockerfile:line: ...`` (None: it
    may build): a step that starts with an instruction Docker's parser does not know, and
    each ``COPY``/``ADD`` source outside the build context or missing from it."""
    if task.dockerfile is None or not task.dockerfile.is_file():
        return None
    scan = scan_dockerfile(task.dockerfile, task.context, {})
    rel = _relative(task.dockerfile, task)
    said = [
        f"{rel}:{line}: unknown instruction {word!r} (Docker's parser refuses it)"
        for line, word in scan.unknown_instructions[:1]
    ]
    for line, src in scan.outside:
        norm = posixpath.normpath(src)
        where = "outside" if norm == ".." or norm.startswith("../") else "not in"
        said.append(f"{rel}:{line}: the source {src!r} is {where} the build context")
    return "; ".join(said) or None


def stage_runs(task: TerminalTask, build_args: dict[str, str]) -> list[tuple[str, list[str]]]:
    """(base image as written, RUN scripts) per stage of the task's Dockerfile."""
    return [(s.base, s.runs) for s in scan_dockerfile(task.dockerfile, None, build_args).stages]


class DockerNeeds:
    """Predicts the unmet needs of tasks on one docker runtime (base images' contents are
    read once each)."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self._contents: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._pulls: dict[str, str] = {}
        #: the major.minor of each read image's Python (None: it has none)
        self._pythons: dict[str, str | None] = {}

    def wheels(self) -> frozenset[str]:
        """Distributions the wheelhouse holds (normalized names)."""
        where = self.runtime.wheelhouse
        if where is None or not Path(where).is_dir():
            return frozenset()
        return frozenset(normalize(p.name.split("-", 1)[0]) for p in Path(where).glob("*.whl"))

    def _pulled(self, plan: images.BasePlan) -> str:
        """The local name of a base pulled for reading (a registry fault is raised)."""
        if plan.written not in self._pulls:
            self._pulls[plan.written] = self.runtime._pull_base(plan)
        return self._pulls[plan.written]

    def contents(self, image: str) -> tuple[frozenset[str], frozenset[str]]:
        """(installed Debian packages, Python distributions) of a local image, read by a
        throwaway container without network."""
        if image not in self._contents:
            script = (
                "dpkg-query -W -f='${Package} ${Status}\\n' 2>/dev/null | "
                "awk '/install ok installed/ {print $1}'; echo @@; "
                "for py in python3 python; do command -v $py >/dev/null 2>&1 && { $py -c "
                '\'import importlib.metadata as m, sys; print("@py%d.%d" % sys.version_info[:2]); '
                'print(chr(10).join(d.metadata["Name"] '
                'or "" for d in m.distributions()))\' 2>/dev/null; break; }; done; true'
            )
            out = self.runtime.client.containers.run(
                image,
                ["/bin/sh", "-c", script],
                entrypoint=[],
                network_mode="none",
                remove=True,
                stdout=True,
                stderr=False,
            )
            debs, _, dists = out.decode(errors="replace").partition("@@")
            words = dists.split()
            self._pythons[image] = next((w[3:] for w in words if w.startswith("@py")), None)
            self._contents[image] = (
                frozenset(w.split(":", 1)[0] for w in debs.split()),
                frozenset(normalize(w) for w in words if not w.startswith("@py")),
            )
        return self._contents[image]

    def _registry_has(self, plan: images.BasePlan) -> str | None:
        """Why ``plan``'s image cannot be pulled (None: its registry knows it); raises the
        registry's fault when the registry failed. A name pulled through the configured
        registry is asked of its own registry too where that one lacks it, as a pull does."""
        why = None
        for name in dict.fromkeys((plan.use, plan.written)):
            try:
                self.runtime.client.api.inspect_distribution(name)
                return None
            except Exception as exc:  # noqa: BLE001 - the engine's answer is read below
                fault = self.runtime._build_fault(exc, str(exc), online=True, image=name)
                if fault is not None:
                    raise fault from exc
                where = self.runtime._registry_name(name)
                said = " ".join(str(exc).split())[:200]
                why = f"base image {plan.written!r} cannot be pulled from {where}: {said}"
        return why

    def unmet(self, task: TerminalTask) -> str | None:
        """What ``task`` needs that this machine cannot give (None: nothing). A prebuilt
        ``docker_image`` beside a Dockerfile is judged as the image (pulled, or present
        offline), its Dockerfile unread, unless the runtime's ``force_build``."""
        runtime = self.runtime
        prebuilt = task.docker_image is not None and task.dockerfile.is_file()
        task = images.as_run(task, force_build=getattr(runtime, "force_build", False))
        prebuilt = prebuilt and not task.dockerfile.is_file()
        try:
            plans = runtime.plan(task)
        except images.UnprovidableError as exc:
            if prebuilt:  # the image the task names, not a base of its Dockerfile
                return f"{exc} ([environment] docker_image; force_build builds the Dockerfile)"
            return str(exc)
        for service in task.services:
            # a compose sidecar's image (or its Dockerfile's bases), had as a base image is
            try:
                service_plans = runtime.service_plan(task, service)
            except images.UnprovidableError as exc:
                return str(exc)
            for plan in service_plans:
                if plan.how == "pull":
                    why = self._registry_has(plan)
                    if why is not None:
                        if service.image:
                            why = why.replace("base image", "image", 1)
                        return f"the second container ({service.name}): {why}"
        for plan in plans:
            if plan.how == "pull":
                why = self._registry_has(plan)
                if why is not None:
                    return why
        offline = runtime.networkless
        wheels = self.wheels()
        build_wheels = runtime.build_wheels(task)
        needs: list[str] = []
        by_written = {p.written: p for p in plans}
        debs: set[str] = set()
        dists: set[str] = set()
        scan = scan_dockerfile(task.dockerfile, task.context, {"BASE_IMAGE": runtime.base_image})
        why = self._unbuildable(scan)
        if why is not None:
            return why
        if offline:
            needs += [f"the download {u} (ADD, Dockerfile line {n})" for n, u in scan.downloads]
        for stage in scan.stages:
            plan = by_written.get(stage.base)
            if offline:
                for line, run, env in zip(stage.lines, stage.runs, stage.envs, strict=True):
                    for use in network_uses(run, env):
                        needs += [f"the download {u} (Dockerfile line {line})" for u in use.urls]
                        if not use.urls and not use.unknown:
                            needs.append(
                                f"`{use.command}` (Dockerfile line {line}: "
                                "nothing serves it offline)"
                            )
            if plan is None or plan.how == "stage":
                continue
            read = None
            if plan.how != "pull":
                read = plan.use
            elif offline:
                # an engine that pulls but builds offline serves the RUN steps from the
                # pulled base: pulled here (once per image) to read what it has
                read = self._pulled(plan)
            # an online build fetches what it needs
            base_debs, base_dists = self.contents(read) if read else (frozenset(), frozenset())
            # binary wheels install only on the Python they were built for
            python = self._pythons.get(read) if read else None
            built_with = wheel_versions_of(w for w in build_wheels if wheel_fits(w.name, python))
            debs, dists = set(base_debs), set(base_dists)
            image = plan.written if plan.how != "mapped" else f"{plan.use}, for {plan.written}"
            for line, run, env in zip(stage.lines, stage.runs, stage.envs, strict=True):
                for p in apt_installs(run, env):
                    if offline and p not in STAND_IN_PACKAGES and p not in debs:
                        needs.append(
                            f"the Debian package {p!r} (not in {image}, Dockerfile line {line})"
                        )
                    debs.add(p)
                for name, pin in pip_requirements(run, env):
                    # the stand-in pip keeps what the image has (a pin it differs from is
                    # noted, not refused) and installs the rest from the build's wheels
                    have = built_with.get(name, frozenset())
                    if offline and name not in dists and (not have or (pin and pin not in have)):
                        why = f" (the wheelhouse has {', '.join(sorted(have))})" if have else ""
                        spec = f"{name}=={pin}" if pin and have else name
                        needs.append(
                            f"the Python package {spec!r} at build time{why} "
                            f"(Dockerfile line {line})"
                        )
                    dists.add(name)
        if not task.dockerfile.is_file() and plans and plans[0].how in ("local", "mapped"):
            base_debs, base_dists = self.contents(plans[0].use)
            debs, dists = set(base_debs), set(base_dists)

        _, agent_online, tests_online = network_plan(task, offline=offline, network=runtime.network)
        if not agent_online:
            needs += self._script_network(solution_texts(task), task, debs, dists | wheels)
        if not tests_online:
            needs += self._test_network(task, debs, dists | wheels)
        if not needs:
            return None
        unique = list(dict.fromkeys(needs))
        where = (
            "offline"
            if runtime.offline
            else "with no network in the containers"
            if offline
            else "without network"
        )
        return f"needs {where}: " + "; ".join(unique)

    def _unbuildable(self, scan: DockerfileScan) -> str | None:
        """Why the Dockerfile's own steps fail, network or not (None: they do not): a step
        only BuildKit builds (a here-document, ``RUN --mount``, ``COPY --chmod``...: the
        images are built by the engine's classic builder), a source outside the build
        context, or an image that ``COPY --from`` reads that is had neither as a base
        image is (present; online, known to its registry)."""
        runtime = self.runtime
        if scan.unknown_instructions:
            line, word = scan.unknown_instructions[0]
            return f"the Dockerfile does not parse: line {line}: unknown instruction {word!r}"
        if scan.buildkit:
            steps = "; ".join(f"Dockerfile line {line}: {what}" for line, what in scan.buildkit)
            return (
                f"the build needs BuildKit ({steps}), and task images are built here by "
                "the engine's classic builder"
            )
        if scan.outside:
            return "; ".join(
                f"the build reads {src!r}, which is not in its context (Dockerfile line {line})"
                for line, src in scan.outside
            )
        for line, image in scan.images:
            if runtime._present(image):
                continue
            if runtime.offline:
                return (
                    f"the image {image!r} that the build copies from (Dockerfile line {line}) "
                    "is not on this machine (offline)"
                )
            plan = images.BasePlan(image, images.via_registry(image, runtime.registry), "pull")
            why = self._registry_has(plan)
            if why is not None:
                return why.replace("base image", f"the image copied from (Dockerfile line {line})")
        return None

    def _test_network(
        self, task: TerminalTask, debs: set[str], reach: set[str] | frozenset[str]
    ) -> list[str]:
        needs: list[str] = []
        for path, text in test_texts(task):
            if path.suffix == ".py":
                rel = path.relative_to(task.path).as_posix()
                needs += [f"the host of {u} (called by {rel})" for u in host_calls(text)]
        scripts = [(p, t) for p, t in test_texts(task) if p.suffix != ".py"]
        return needs + self._script_network(scripts, task, debs, reach, when="test time")

    @staticmethod
    def _script_network(
        scripts: list[tuple[Path, str]],
        task: TerminalTask,
        debs: set[str],
        reach: set[str] | frozenset[str],
        when: str = "solution time",
    ) -> list[str]:
        """What shell scripts run without network cannot have: downloads, installs from
        indexes nothing here serves, packages neither the image nor the wheelhouse has."""
        needs: list[str] = []
        for path, text in scripts:
            rel = _relative(path, task)
            who = "the tests'" if when == "test time" else "the solution's"
            for use in network_uses(text):
                if use.unknown:
                    continue  # where it goes is not known: a warning, not a need
                if use.urls:
                    needs += [
                        f"the download {u} ({who} {rel} line {use.line} needs the network)"
                        for u in use.urls
                    ]
                else:
                    needs.append(f"`{use.command}` ({who} {rel} line {use.line} needs the network)")
            needs += [
                f"the Debian package {p!r} at {when} (in {rel}, not in the image)"
                for p in apt_installs(text)
                if p not in STAND_IN_PACKAGES and p not in debs
            ]
            needs += [
                f"the Python package {p!r} at {when} (in {rel}, not in the wheelhouse)"
                for p in pip_installs(text)
                if p not in reach
            ]
        return needs


def _relative(path: Path, task: TerminalTask) -> str:
    try:
        return path.relative_to(task.path).as_posix()
    except ValueError:
        return path.name


def solution_texts(task: TerminalTask) -> list[tuple[Path, str]]:
    """The oracle's shell scripts: TB1 ``solution.sh`` (or the commands of
    ``solution.yaml``), Harbor ``solution/solve.sh`` and the other ``.sh`` beside it."""
    out: list[tuple[Path, str]] = []
    if task.solution_path is not None and task.solution_path.is_file():
        paths = [task.solution_path]
        if task.solution_path.parent != task.path:
            paths += sorted(
                p for p in task.solution_path.parent.rglob("*.sh") if p != task.solution_path
            )
        for p in paths:
            try:
                if p.stat().st_size <= 1 << 20:
                    out.append((p, p.read_text()))
            except (OSError, UnicodeDecodeError):
                continue
    if task.solution_commands:
        out.append((task.path / "solution.yaml", "\n".join(task.solution_commands)))
    return out


def _names(unknown: Iterable[str]) -> str:
    return ", ".join(v if v.startswith(("$", "`")) else "$" + v for v in unknown)


def network_warnings(task: TerminalTask) -> list[str]:
    """Each command of the task's solution and tests that reaches past this machine
    whatever the image holds (:func:`network_uses`), each test module that calls a host,
    and, there and in the Dockerfile, each download, install or ``COPY`` whose target
    hangs on a variable that is not known, as ``file:line: command (why)``. The first
    are part of the task's refusal when it has no network; the unknown ones never are."""
    found: list[str] = []
    for path, text in solution_texts(task) + test_texts(task):
        rel = _relative(path, task)
        if path.suffix == ".py":
            found += [f"{rel}: calls {u}" for u in host_calls(text)]
            continue
        for use in network_uses(text):
            said = f"{rel}:{use.line}: `{use.command}`"
            if use.unknown:
                said += f" (fetches from {_names(use.unknown)}: not known)"
            found.append(said)
        found += [
            f"{rel}:{use.line}: `{use.command}` (installs {_names(use.unknown)}: not known)"
            for use in unknown_installs(text)
        ]
    rel = _relative(task.dockerfile, task)
    scan = scan_dockerfile(task.dockerfile, None, {})
    for stage in scan.stages:
        for line, run, env in zip(stage.lines, stage.runs, stage.envs, strict=True):
            found += [
                f"{rel}:{line}: `{use.command}` (fetches from {_names(use.unknown)}: not known)"
                for use in network_uses(run, env)
                if use.unknown
            ]
            found += [
                f"{rel}:{line}: `{use.command}` (installs {_names(use.unknown)}: not known)"
                for use in unknown_installs(run, env)
            ]
    found += [f"{rel}:{line}: {what}" for line, what in scan.unknown]
    return list(dict.fromkeys(found))


def unmet_on_docker(runtime: Any, tasks: Iterable[TerminalTask], *, build: bool) -> dict[str, str]:
    """{task id: unmet need} of ``tasks`` on a docker runtime: predicted, or with ``build``
    found by building each image (a build that fails is the task's need)."""
    from agentenvs.core.errors import SandboxError

    predict = DockerNeeds(runtime)
    found: dict[str, str] = {}
    for task in tasks:
        try:
            if build:
                runtime.image(task)
                why = None
            else:
                why = predict.unmet(task)
        except (images.UnprovidableError, SandboxError) as exc:
            why = str(exc)
        if why is not None:
            found[task.id] = why
    return found


NETWORKS = ("task", "tests-only", "none")
#: the engine's network for containers that may reach the internet
ONLINE_NETWORK = "bridge"


def network_plan(task: TerminalTask, *, offline: bool, network: str) -> tuple[str, bool, bool]:
    """(container network mode, agent has network, tests have network).

    The official harnesses give both phases the internet unless a Harbor task says
    otherwise; ``network="tests-only"`` keeps the agent off it, ``"none"`` (and any
    offline run) gives it to neither.
    """
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {NETWORKS}, got {network!r}")
    if offline or network == "none":
        return "none", False, False
    agent = task.agent_network and network == "task"
    tests = task.verifier_network
    return (ONLINE_NETWORK if agent or tests else "none"), agent, tests
