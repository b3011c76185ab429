"""Every code block of README.md and docs/*.md, run as a reader would run it.

Which fenced blocks run:

- ```` ```python ````: the whole block, saved as ``snippet.py`` in a fresh temporary
  directory and run there by the test's own interpreter (the venv's).
- ```` ```bash ````, ```` ```sh ````, ```` ```shell ````, ```` ```console ````: every command
  that starts with ``agentenvs `` or ``python `` (after a ``$ `` prompt in a console block;
  a trailing ``\\`` continues a command; ``#`` comments are dropped) runs, in order, in one
  ``bash -e`` in a fresh temporary directory, with the venv's ``bin/`` first on ``PATH``.
  Other lines (``make ...``, ``pip install ...``, other programs) are shown to the reader,
  not run; a block with no such command is not a test. In a console block, lines without
  a prompt are output.
- Any other block (```` ```text ````, output, no language) is not run.

An HTML comment on the line just before the fence says what a block needs, several
comma-separated:

- ``<!-- test: mysql -->``, ``<!-- test: docker -->``, ``<!-- test: bwrap -->``: the test
  carries that marker and skips with the reason when the service is missing (a failure
  when ``AGENTENVS_REQUIRE_SERVICES`` is set, see conftest.py). Snippets read the MySQL
  URL from ``$AGENTENVS_MYSQL_URL``, set here to the server the tests found when unset.
- ``<!-- test: slow -->``: marker ``slow`` (a run of more than a few seconds).
- ``<!-- test: long -->``: marker ``long`` (a run of more than about a minute here, such as
  a training step with a tiny model and a served one), which `make test` leaves out and
  `make test-all` runs.
- ``<!-- test: server -->`` on a shell block whose last command is a server
  (``agentenvs serve ...``): that command is started in the background and the test
  passes once the server accepts connections on its port, then stops it.
  ``<!-- test: with-server -->`` on a later Python block of the same file: that server
  is started first and the block runs against it. Port 8000 in both blocks is replaced by
  a free port, so that runs side by side do not collide.
- ``<!-- test: skip (why) -->``: not run; the test is skipped with that reason. The README
  has none: every README block runs.

Each test id is ``FILE:LINE`` of the opening fence.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _services import find_mysql, require_bwrap, require_docker, require_mysql

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
RUN_PREFIXES = ("agentenvs ", "python ")
SERVICES = ("mysql", "docker", "bwrap")
MARKERS = ("slow", "long")
FLAGS = {*SERVICES, *MARKERS, "server", "with-server"}
SNIPPET_TIMEOUT_S = 280
SERVER_PORT = "8000"

_FENCE = re.compile(r"^(?P<indent> {0,3}|\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_ANNOTATION = re.compile(r"^\s*<!--\s*test:\s*(?P<body>.*?)\s*-->\s*$")


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    flags: set[str] = field(default_factory=set)
    skip_reason: str | None = None
    bad_annotation: str | None = None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[str]:
        """The shell commands this block runs (see the module docstring)."""
        if self.lang not in SHELL_LANGS:
            return []
        commands: list[str] = []
        pending = ""
        for raw in self.code.splitlines():
            line = raw.rstrip()
            if not pending:
                if self.lang == "console":
                    if not line.lstrip().startswith("$ "):
                        continue
                    line = line.lstrip()[2:]
                line = line.lstrip()
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            command = _strip_comment(pending + line).strip()
            pending = ""
            if command.startswith(RUN_PREFIXES):
                commands.append(command)
        return commands

    @property
    def runnable(self) -> bool:
        return self.lang == "python" or bool(self.commands())


def _strip_comment(command: str) -> str:
    """``command`` without a trailing ``# comment`` (a ``#`` outside quotes after a space)."""
    quote = ""
    for i, ch in enumerate(command):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or command[i - 1].isspace()):
            return command[:i]
    return command


def parse_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, indent = match["fence"], len(match["indent"])
        lang = match["info"].strip().split(" ")[0].lower() if match["info"].strip() else ""
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines):
            line = lines[i]
            if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                break
            body.append(line[indent:] if line[:indent].strip() == "" else line)
            i += 1
        i += 1
        block = Block(path, start + 1, lang, "\n".join(body) + "\n")
        previous = start - 1
        while previous >= 0 and not lines[previous].strip():
            previous -= 1
        note = _ANNOTATION.match(lines[previous]) if previous >= 0 else None
        if note:
            _read_annotation(block, note["body"])
        blocks.append(block)
    return blocks


def _read_annotation(block: Block, body: str) -> None:
    skip = re.match(r"skip\s*\((?P<why>.+)\)\s*$", body)
    if skip:
        block.skip_reason = skip["why"].strip()
        return
    for word in filter(None, (w.strip() for w in body.split(","))):
        if word in FLAGS:
            block.flags.add(word)
        else:
            block.bad_annotation = f"unknown annotation {word!r} (known: {sorted(FLAGS)}, skip (why))"


ALL_BLOCKS = [b for path in DOC_FILES for b in parse_blocks(path)]
RUN_BLOCKS = [b for b in ALL_BLOCKS if b.runnable or b.skip_reason]


def _params() -> list:  # type: ignore[type-arg]
    params = []
    for block in RUN_BLOCKS:
        marks = [getattr(pytest.mark, flag) for flag in sorted(block.flags & {*SERVICES, *MARKERS})]
        if block.skip_reason:
            marks.append(pytest.mark.skip(reason=block.skip_reason))
        params.append(pytest.param(block, marks=marks, id=block.name))
    return params


# ---------------------------------------------------------------- services


def _require(flags: set[str]) -> None:
    """Skip with the reason when a service is missing (``_services``, as the markers do)."""
    if "mysql" in flags:
        require_mysql()
    if "docker" in flags:
        require_docker()
    if "bwrap" in flags:
        require_bwrap()


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    url, _ = find_mysql()
    if url is not None:
        env.setdefault("AGENTENVS_MYSQL_URL", url)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    return env


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _with_port(text: str, port: str | None) -> str:
    return re.sub(rf"\b{SERVER_PORT}\b", port, text) if port else text


def _shell_script(commands: list[str]) -> str:
    return "set -euo pipefail\n" + "".join(f"{c}\n" for c in commands)


#: a module missing, as Python says it or as the package's one-line refusal names it
_MISSING_MODULE = re.compile(
    r"ModuleNotFoundError: No module named '([\w.]+)'|'([\w.]+)' is needed here but is not installed"
)


def _run(argv: list[str], cwd: Path, what: str) -> None:
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=_environment(), capture_output=True, text=True,
            timeout=SNIPPET_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{what} ran past {SNIPPET_TIMEOUT_S} s\n{_tail(exc.stdout)}{_tail(exc.stderr)}")
    if done.returncode != 0:
        missing = ["".join(m) for m in _MISSING_MODULE.findall(done.stderr or "")]
        top = missing[-1].split(".")[0] if missing else ""
        if top and top != "agentenvs" and importlib.util.find_spec(top) is None:
            # an optional extra this install lacks (a bare `make install` without torch, say);
            # the conftest hook turns this skip into a failure where everything is required
            pytest.skip(f"{what}: could not import {top} (an extra that is not installed)")
        pytest.fail(
            f"{what} exited with {done.returncode}\n--- stdout\n{_tail(done.stdout)}"
            f"\n--- stderr\n{_tail(done.stderr)}"
        )


def _tail(text: str | bytes | None, limit: int = 6000) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    text = text or ""
    return text if len(text) <= limit else f"...{text[-limit:]}"


class _Server:
    """The last command of a ``server`` block, in the background until stopped."""

    def __init__(self, block: Block, cwd: Path, port: str) -> None:
        commands = [_with_port(c, port) for c in block.commands()]
        if not commands or f"--port {port}" not in commands[-1]:
            pytest.fail(f"{block.name}: a server block's last command must take --port {SERVER_PORT}")
        if commands[:-1]:
            _run(["bash", "-c", _shell_script(commands[:-1])], cwd, f"{block.name} (set-up)")
        self.name = block.name
        self.port = int(port)
        self.log = cwd / "server.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                ["bash", "-c", f"exec {commands[-1]}"], cwd=cwd, env=_environment(),
                stdout=out, stderr=subprocess.STDOUT,
            )

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"{self.name}: the server exited with {self.proc.returncode}\n"
                            f"{_tail(self.log.read_text())}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        pytest.fail(f"{self.name}: no server on port {self.port} after {timeout} s\n"
                    f"{_tail(self.log.read_text())}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _server_block_for(block: Block) -> Block:
    earlier = [b for b in ALL_BLOCKS
               if b.path == block.path and b.line < block.line and "server" in b.flags]
    if not earlier:
        pytest.fail(f"{block.name}: with-server, but no earlier block of the file is a server")
    return earlier[-1]


# ---------------------------------------------------------------- the tests


@pytest.mark.parametrize("block", _params())
def test_doc_block_runs(block: Block, tmp_path: Path) -> None:
    assert block.bad_annotation is None, f"{block.name}: {block.bad_annotation}"
    needs = set(block.flags)
    server_block = _server_block_for(block) if "with-server" in needs else None
    if server_block:
        needs |= server_block.flags
    _require(needs)
    port = _free_port() if ("server" in needs or server_block) else None
    if block.lang == "python":
        server = _Server(server_block, tmp_path, port) if server_block and port else None
        try:
            if server:
                server.wait_ready()
            (tmp_path / "snippet.py").write_text(_with_port(block.code, port))
            _run([sys.executable, "snippet.py"], tmp_path, block.name)
        finally:
            if server:
                server.stop()
    elif "server" in block.flags and port:
        server = _Server(block, tmp_path, port)
        try:
            server.wait_ready()
        finally:
            server.stop()
    else:
        _run(["bash", "-c", _shell_script(block.commands())], tmp_path, block.name)


def test_every_readme_block_runs() -> None:
    """The README is the front door: none of its blocks is skipped, every annotation is
    known, and each python or shell block has something to run or is only `make`/`pip`."""
    readme = [b for b in ALL_BLOCKS if b.path.name == "README.md" and b.path.parent == ROOT]
    assert readme, "no code blocks found in README.md"
    assert not [b.name for b in readme if b.skip_reason], "README blocks must all run"
    problems = [f"{b.name}: {b.bad_annotation}" for b in ALL_BLOCKS if b.bad_annotation]
    assert not problems, problems


def test_annotations_sit_on_blocks_that_run() -> None:
    stray = [b.name for b in ALL_BLOCKS if b.flags and not b.runnable]
    assert not stray, f"annotated blocks with nothing to run: {stray}"


_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def test_relative_links_resolve() -> None:
    """Every relative link of README.md and docs/*.md names a file that exists."""
    broken = []
    for path in DOC_FILES:
        in_fence = False
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _FENCE.match(line):
                in_fence = not in_fence
            if in_fence:
                continue
            for match in _LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                target = match["target"].split("#", 1)[0]
                if not target or "://" in target or target.startswith("mailto:"):
                    continue
                if not (path.parent / target).exists():
                    broken.append(f"{path.relative_to(ROOT)}:{n}: {match['target']}")
    assert not broken, broken
