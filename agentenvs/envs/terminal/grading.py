"""Grading that the agent cannot reach: the freeze, the toolchain check, the summary check.

``grading="safe"`` (the default of ``TerminalBenchEnv``) grades a task's end state as its
tests see it, never the agent's processes or changes the agent made to the test toolchain:

1. **The freeze.** At submit or budget end every process of the agent's session is
   stopped (Docker: the engine kills the container, whose filesystem stays, and starts it
   again; local: every process of the sandbox's pid namespace is SIGKILLed until none is
   left, its files are copied out and unpacked into a new sandbox). Nothing the agent
   started survives into grading; how many were stopped is ``info["processes_stopped"]``.
2. **A new channel.** The tests run in a new session (a new exec, a new namespace) that no
   process of the agent ever held. Test files and the wheelhouse are put in after the
   freeze and their hashes are checked just before the tests run; reward files are read
   only after the tests' own processes are stopped too, from a ``/logs/verifier`` the
   grader emptied.
3. **The toolchain check** (:func:`toolchain_findings`). The runner is the image's own
   (its bash, coreutils, python, pytest): every change the agent made is listed (Docker:
   the engine's diff of the container against its image, which nothing in the container
   can forge; local: the files of the sandbox's writable dirs, since the rest is the
   host's, read-only) and checked against the places a runner loads from. Where the line
   is: packages the agent installs (new files in site-packages, new commands in bin dirs)
   are the task's end state and the tests may import or run them; a change to a file the
   image already had in a bin or lib dir, anything that shadows the image's own command
   on the tests' ``PATH``, the dynamic loader's configuration, Python start-up hooks
   (``.pth`` files with code, ``sitecustomize``/``usercustomize``, ``pytest11`` entry
   points), pytest or a package it imports replaced, pytest configuration or
   ``conftest.py`` above the tests' folder, and the offline stand-ins are over it. Such an
   episode is not graded: it scores 0, and what was found is ``info["grading_findings"]``.
4. **The summary check** (:func:`summary_findings`). The tests run programs of the agent
   (that is what they test), with the tests' rights, so such a program can write to the
   tests' output while they run. pytest's own report is always there and names every
   failure; a second summary, a test reported both passed and failed, or counts that
   disagree with pytest's final line is a finding, and the episode scores 0.

``grading="official"`` runs the tests as TB1 and Harbor do, in the agent's container
beside its processes, through the agent's shell's pipe: comparable with published
numbers, and open to every attack the battery in ``tests/envs/test_terminal_attacks.py``
lists (forged summaries, hijacked runners, rewritten tests and reward files).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

GRADINGS = ("safe", "official")
#: a task tag: its tests check processes the agent left running, which safe grading
#: stops first; such a task runs under ``grading="official"`` only
AGENT_PROCESSES_TAG = "agent-processes"

#: what ``changes`` name: A added, C changed, D deleted (the engine's diff kinds)
ADDED, CHANGED, DELETED = "A", "C", "D"
BIN_DIRS = ("/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin")
LIB_DIRS = (
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libx32",
    "/usr/local/lib",
)
LOADER_FILES = ("/etc/ld.so.preload", "/etc/ld.so.conf")
LOADER_DIRS = ("/etc/ld.so.conf.d",)
#: pytest and what it imports at start-up: replacing any of them replaces the runner
RUNNER_PACKAGES = frozenset(
    {
        "pytest",
        "_pytest",
        "py",
        "pluggy",
        "iniconfig",
        "packaging",
        "pygments",
        "exceptiongroup",
        "tomli",
        "colorama",
    }
)
STARTUP_HOOKS = frozenset({"sitecustomize", "usercustomize"})
#: files that make a directory pytest's rootdir or configuration
PYTEST_CONFIGS = frozenset(
    {
        "pytest.ini",
        ".pytest.ini",
        "pyproject.toml",
        "tox.ini",
        "setup.cfg",
        "setup.py",
        "conftest.py",
    }
)
_SITE = re.compile(r"/(?:site|dist)-packages(?:/|$)")
_STDLIB = re.compile(r"^/usr(?:/local)?/lib/python3(?:\.\d+)?(?:/|$)")
_USER_SITE = re.compile(r"^(?P<home>.*)/\.local/lib/python3(?:\.\d+)?/site-packages(?:/|$)")


@dataclass
class Freeze:
    """What stopping the agent's session found."""

    #: processes of the agent's that were alive and were stopped
    stopped: int = 0
    #: processes that could not be stopped (none, unless the kernel refused)
    survivors: int = 0


@dataclass
class Verdict:
    """The safe grader's account of one grading."""

    findings: list[str] = field(default_factory=list)
    stopped: int = 0


def _under(path: str, roots: Iterable[str]) -> str | None:
    for root in roots:
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return root
    return None


def _top_name(name: str) -> str:
    """The module a site-dir entry provides: ``pytest``, ``_pytest``, ``py.py`` -> ``py``."""
    for suffix in (".py", ".pyc", ".pth"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name.split(".", 1)[0] if name.endswith(".so") else name


def pth_runs_code(text: bytes) -> bool:
    """Whether a ``.pth`` file has a line that ``site`` executes (``import ...``)."""
    for raw in text.splitlines():
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(("import ", "import\t")):
            return True
    return False


def toolchain_findings(
    changes: Iterable[tuple[str, str]],
    *,
    read: Callable[[str], bytes | None],
    test_path: Sequence[str],
    image_commands: Mapping[str, frozenset[str]] | None,
    tests_dir: str = "/tests",
    workdir: str = "/app",
    protected: Sequence[str] = (),
    ignore: Sequence[str] = (),
    loader_cache_ok: Callable[[], bool] | None = None,
) -> list[str]:
    """What in ``changes`` (path, kind) touches the test toolchain; empty when nothing.

    ``read(path)`` gives a changed file's bytes (None: not a regular file);
    ``image_commands`` maps each dir of the tests' ``PATH`` to the names the image has
    there (None: unknown, then only changed or deleted files count); ``protected``: more
    dirs no change may touch (the offline stand-ins); ``ignore``: paths the grader itself
    wrote; ``loader_cache_ok()``: whether a changed ``/etc/ld.so.cache`` still resolves
    every library the image's resolves to the same file.
    """
    found: list[str] = []
    ancestors = set()
    parent = posixpath.dirname(tests_dir.rstrip("/"))
    while True:
        ancestors.add(parent)
        if parent == "/":
            break
        parent = posixpath.dirname(parent)
    path_dirs = [d.rstrip("/") or "/" for d in test_path if d.startswith("/")]
    what = {ADDED: "added", CHANGED: "changed", DELETED: "deleted"}
    for path, kind in sorted(set(changes)):
        if _under(path, ignore):
            continue
        verb = what.get(kind, kind)

        def note(why: str, path: str = path, verb: str = verb) -> None:
            found.append(f"{path} {verb}: {why}")

        name = posixpath.basename(path)
        directory = posixpath.dirname(path)
        if path in LOADER_FILES or _under(path, LOADER_DIRS):
            note("the dynamic loader's configuration")
            continue
        if path == "/etc/ld.so.cache":
            if kind != ADDED and (loader_cache_ok is None or not loader_cache_ok()):
                note("the dynamic loader's cache resolves a library of the image elsewhere")
            continue
        if _under(path, protected):
            note("the offline stand-ins the tests run")
            continue
        site = _SITE.search(path)
        user_site = _USER_SITE.match(path)
        if site or user_site:
            base = path[: (site.end() if site else user_site.end())].rstrip("/")
            rel = path[len(base) + 1 :]
            top = rel.split("/", 1)[0]
            if top.endswith(".dist-info") and rel.endswith("/entry_points.txt"):
                text = read(path) or b""
                if b"[pytest11]" in text:
                    note("a pytest plugin that loads itself into every test run")
                continue
            if "/" not in rel and name.endswith(".pth") and kind != DELETED:
                text = read(path)
                if text is None or pth_runs_code(text):
                    note("a .pth file that runs code in every Python start-up")
                continue
            if _top_name(top) in STARTUP_HOOKS:
                note("a Python start-up hook")
                continue
            if _top_name(top) in RUNNER_PACKAGES and (kind != ADDED or user_site):
                note("pytest or a package it imports (the test runner itself)")
                continue
            if user_site and "/" not in rel and kind == ADDED:
                continue  # the agent's own packages, in the user site
            continue
        if _STDLIB.match(path):
            note("the Python standard library the tests run on")
            continue
        if directory in ancestors and name in PYTEST_CONFIGS:
            note(f"pytest configuration above the tests' folder {tests_dir}")
            continue
        if directory == workdir.rstrip("/") and (
            _top_name(name) in RUNNER_PACKAGES | STARTUP_HOOKS
        ):
            note("shadows pytest or a start-up hook for a Python started in the work dir")
            continue
        bin_root = _under(path, BIN_DIRS)
        if bin_root is not None and kind in (CHANGED, DELETED) and directory == bin_root:
            note("a command of the image on the tests' PATH")
            continue
        if kind in (CHANGED, DELETED) and _under(path, LIB_DIRS) is not None:
            note("a library of the image")
            continue
        if kind == ADDED and directory in path_dirs and image_commands is not None:
            later = path_dirs[path_dirs.index(directory) + 1 :]
            if any(name in image_commands.get(d, frozenset()) for d in later):
                note("shadows a command of the image on the tests' PATH")
                continue
        if kind in (CHANGED, DELETED) and directory in path_dirs:
            note("a command on the tests' PATH")
    return found


# ---------------------------------------------------------------- the summary check
_FINAL = re.compile(r"^=+ (?P<body>.*?) in [\d.]+s(?: \([^)]*\))? =+$", re.MULTILINE)
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|deselected|warnings?)")
_STATUS = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b ?(\S*)", re.MULTILINE)


def summary_findings(output: str) -> list[str]:
    """What in a pytest run's output says that something besides pytest wrote its report.

    Each ``short test summary info`` section pytest prints is followed by its final counts
    line. A test reported both passed and failed (in one section or across several: a
    script may run pytest more than once), or a section listing more passed (or failed)
    tests than its final line counts, is a finding. Output without a summary is left to
    the parser (no summary is a failure anyway).
    """
    from agentenvs.envs.terminal.parser import PASSING, SUMMARY_BANNER

    sections = SUMMARY_BANNER.split(output)[1:]
    found: list[str] = []
    seen: dict[str, set[bool]] = {}
    for number, section in enumerate(sections, 1):
        finals = list(_FINAL.finditer(section))
        body = section[: finals[0].start()] if finals else section
        for status, name in _STATUS.findall(section):  # the parser reads them all
            if name:
                seen.setdefault(name.split("::", 1)[-1], set()).add(status in PASSING)
        counts = {"pass": 0, "fail": 0}
        for status, _ in _STATUS.findall(body):
            counts["pass" if status in PASSING else "fail"] += 1
        if finals and _STATUS.search(section, finals[0].end()):
            found.append(f"test status lines after pytest's final line (summary {number})")
        if not finals:
            continue
        tally = {"pass": 0, "fail": 0}
        for count, word in _COUNT.findall(finals[0].group("body")):
            if word in ("passed", "skipped", "xfailed"):
                tally["pass"] += int(count)
            elif word in ("failed", "xpassed") or word.startswith("error"):
                tally["fail"] += int(count)
        if counts["pass"] > tally["pass"] or counts["fail"] > tally["fail"]:
            found.append(
                f"test summary {number} lists {counts['pass']} passed and {counts['fail']} "
                f"failed, its final line counts {tally['pass']} and {tally['fail']}"
            )
    both = sorted(k for k, v in seen.items() if len(v) > 1)
    if both:
        found.append(f"tests reported both passed and failed: {', '.join(both[:5])}")
    return found


def tar_digests(archive: bytes, top: str) -> dict[str, str]:
    """sha256 of each regular file of a tar under ``top``, by path below it (symlinks and
    other entries by their kind and target, so a swapped entry differs too)."""
    import hashlib
    import io
    import tarfile

    found: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        for member in tar.getmembers():
            name = member.name.lstrip("./")
            if name != top and not name.startswith(top + "/"):
                continue
            rel = name[len(top) :].lstrip("/")
            if member.isfile():
                f = tar.extractfile(member)
                found[rel] = hashlib.sha256(f.read() if f is not None else b"").hexdigest()
            elif not member.isdir():
                found[rel] = f"{member.type!r}:{member.linkname}"
    return found
