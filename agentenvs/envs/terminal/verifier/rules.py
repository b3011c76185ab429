"""The verdict of a safe grading, from the sessions the verifier's plugin reported.

The grader counts the task's tests itself, from its own copy of the test files (module-
level ``test*`` functions and ``test*`` methods of ``Test*`` classes, as pytest collects
them by default), before anything runs. A verdict of success then needs:

- at least one complete session (its start carried the grader's nonce, its finish came)
  and no session cut short (a pytest killed, a channel broken);
- every counted test reported, each run passed (or skipped, or an expected failure), and
  no test failed in any session, no collection error;
- each collected test file the one the task ships (the digest the plugin read);
- the hooks that report outcomes unchanged at the finish (``tampered``).

What the tests' output says, what a script wrote to stdout, and any summary on it count
for nothing here; the output is kept for the observation.
"""

from __future__ import annotations

import ast
import hashlib
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agentenvs.envs.terminal.verifier.channel import Session

PASSING = ("passed", "skipped")


def _is_test_file(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def count_tests(files: Mapping[str, bytes]) -> dict[str, set[str]]:
    """``{path: {test names}}`` of the test files among ``files`` (path -> source), from
    their syntax alone; a file that does not parse counts none (its collection error
    fails the run)."""
    found: dict[str, set[str]] = {}
    for path, source in files.items():
        if not _is_test_file(posixpath.basename(path)):
            continue
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        names: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name.startswith("test"):
                    names.add(node.name)
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                for sub in node.body:
                    if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef) and (
                        sub.name.startswith("test")
                    ):
                        names.add(f"{node.name}::{sub.name}")
        found[path] = names
    return found


def digests(files: Mapping[str, bytes]) -> dict[str, str]:
    return {path: hashlib.sha256(data).hexdigest() for path, data in files.items()}


def _base(nodeid: str) -> tuple[str, str]:
    """(file, test name without parameters) of a node id."""
    path, _, rest = nodeid.partition("::")
    return path, rest.split("[", 1)[0]


@dataclass
class Verdict:
    """What the sessions say: per-test results (name -> passed), whether every counted
    test passed, and the problems found (each makes the verdict a failure)."""

    results: dict[str, bool] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: problems that say a process changed what reports the verdict (findings)
    findings: list[str] = field(default_factory=list)
    exposed: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return (
            not self.problems
            and not self.findings
            and bool(self.results)
            and all(self.results.values())
        )


def judge(
    sessions: Iterable[Session],
    counted: Mapping[str, set[str]],
    shipped: Mapping[str, str],
    *,
    tests_dir: str = "/tests",
    refused: Iterable[str] = (),
) -> Verdict:
    """The verdict of ``sessions`` for a task whose test files (paths under ``tests_dir``,
    relative) hold ``counted`` tests and have the digests ``shipped``."""
    verdict = Verdict()
    outcomes: dict[str, list[bool]] = {}
    seen_files: set[str] = set()
    for refusal in refused:
        verdict.findings.append(
            f"a process that is not the verifier's pytest used its channel ({refusal})"
        )
    for session in sessions:
        if session.problem:
            verdict.problems.append(f"pytest session of pid {session.pid}: {session.problem}")
        if session.started is None:
            continue
        finish = session.finished
        collected = any(e.get("ev") == "collected" for e in session.events)
        if finish is None and not collected and not session.problem:
            # a pytest that ended before collecting anything (``--version``, ``--help``,
            # or killed that early) reported no outcome: it cannot make a pass either way
            continue
        if finish is None:
            verdict.problems.append(
                f"the pytest session of pid {session.pid} did not finish (killed or cut short)"
            )
        else:
            tampered = finish.get("tampered") or []
            if tampered:
                verdict.findings.append(
                    "code the tests imported changed pytest's reporting: "
                    + ", ".join(map(str, tampered))
                )
            verdict.exposed += [str(m) for m in finish.get("exposed") or []]
        for event in session.events:
            kind = event.get("ev")
            if kind == "collecterror":
                verdict.problems.append(f"collection error in {event.get('nodeid')}")
            elif kind == "collected":
                files = event.get("files") or {}
                for path, digest in files.items() if isinstance(files, dict) else ():
                    rel = _relative(str(path), tests_dir)
                    if rel is None:
                        verdict.findings.append(
                            f"a pytest session ran a test file that is not the task's: {path}"
                        )
                        continue
                    seen_files.add(rel)
                    if shipped.get(rel) != digest:
                        verdict.findings.append(f"the test file {rel} ran with other contents")
            elif kind == "report":
                nodeid = str(event.get("nodeid", ""))
                outcome = event.get("outcome")
                when = event.get("when")
                ok = outcome in PASSING
                if outcome == "passed" and bool(event.get("xfail")):
                    ok = False  # an unexpected pass (XPASS), failed as the official parser has it
                if when == "call" or not ok:
                    outcomes.setdefault(nodeid, []).append(ok)
                elif when == "setup" and outcome == "skipped":
                    outcomes.setdefault(nodeid, []).append(True)
    for nodeid, oks in outcomes.items():
        # by the test's name (as the official parser keys them); every run of it counts
        name = nodeid.split("::", 1)[-1] if "::" in nodeid else nodeid
        verdict.results[name] = verdict.results.get(name, True) and all(oks)
    reported: dict[str, set[str]] = {}
    for nodeid in outcomes:
        path, name = _base(nodeid)
        reported.setdefault(posixpath.basename(path), set()).add(name)
    missing = []
    for path, names in counted.items():
        run = reported.get(posixpath.basename(path), set())
        missing += [f"{path}::{n}" for n in sorted(names - run)]
    if missing:
        verdict.problems.append(
            f"{len(missing)} test(s) of the task were not reported: {', '.join(missing[:5])}"
        )
    if any(counted.values()) and not outcomes:
        verdict.problems.append("no test of the task ran under the verifier's pytest")
    verdict.exposed = sorted(set(verdict.exposed))
    return verdict


def _relative(path: str, tests_dir: str) -> str | None:
    root = tests_dir.rstrip("/") + "/"
    if not path.startswith(root):
        return None
    return path[len(root) :]


def task_test_files(tests_dir: Path) -> dict[str, bytes]:
    """The task's own test files: ``{path relative to the tests dir: bytes}`` (regular
    files only, read from the task folder on the host)."""
    found: dict[str, bytes] = {}
    for path in sorted(tests_dir.rglob("*.py")):
        if path.is_file() and not path.is_symlink():
            found[path.relative_to(tests_dir).as_posix()] = path.read_bytes()
    return found


def links_into(links: Mapping[str, str], root: str = "/tests", hops: int = 40) -> list[str]:
    """Findings for the symlinks of the end state that lead into ``root`` (the tests'
    files, expected outputs included, appear there only at grading): following each
    link, and links it leads to, as the kernel would."""
    found = []
    top = root.rstrip("/")
    for path in sorted(links):
        here, left = path, hops
        while here in links and left > 0:
            target = links[here]
            here = posixpath.normpath(
                target
                if target.startswith("/")
                else posixpath.join(posixpath.dirname(here), target)
            )
            left -= 1
            if here == top or here.startswith(top + "/"):
                found.append(f"{path} is a link into the tests' files ({here})")
                break
    return found
