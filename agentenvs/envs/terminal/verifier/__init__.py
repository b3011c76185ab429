"""Terminal-Bench's verifier: what runs the tests of a safe grading, apart from the agent.

The agent's end state is the task's files as its tests see them; nothing it left may
change how they are run or what their verdict says. So the verifier shares nothing
executable with the agent:

- **The runner is the verifier's.** After the freeze (every process of the agent's
  stopped), the grading session gets a tree the project made on the host
  (:mod:`~agentenvs.envs.terminal.verifier.tree`), read-only, at a path the agent never
  had, and the task's tests, read-only at ``/tests``. Every Python the tests start
  through ``PATH`` is an interpreter the agent could not change (the host's locally; the
  image's on Docker, checked against the image where it runs), isolated (``-I -S``), on
  the verifier's launcher: pytest and its plugins from the tree, plugin autoload off,
  no ``.pth`` code, no start-up hooks, no configuration from outside the tests. The
  bootstraps (uv, uvx, pip, curl, apt-get) are the tree's stand-ins: they make venvs
  afresh, unpack the project's wheels themselves, read no configuration file.
- **The environment is built from nothing** (:func:`environment`): a fixed ``PATH`` with
  the verifier's commands first, a fresh empty ``HOME``, the image's and the task's
  declared variables, nothing of the agent's shell.
- **The verdict has its own channel** (:mod:`~agentenvs.envs.terminal.verifier.channel`):
  the verifier's pytest plugin reports every outcome on a socket the grader holds, and
  the grader checks from outside that the process writing is the verifier's pytest.
  Output, summaries and files written by the tests' processes count for nothing; Harbor's
  reward files count only beside a report that agrees (:mod:`~.rules`).

With the runner out of reach, the image's files are the agent's to change: an honest
repair of a command in ``/usr/local/bin`` or of the loader's configuration is graded by
the tests like any other file. Code the tests import from the end state runs inside
pytest's process: the plugin checks that its reporting path is intact and names the
modules imported from outside the verifier (``info["grading_exposed"]``).
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path

from agentenvs.envs.terminal import offline
from agentenvs.envs.terminal.verifier.tree import MOUNT

__all__ = ["MOUNT", "Stage", "environment", "prepare_home"]


class Stage:
    """The host directories of one grading: the task's tests (shown read-only at
    ``/tests``) and the channel's socket (shown at ``<tree>/channel``)."""

    def __init__(self, pairs: list[tuple[Path, str]]) -> None:
        import os

        from agentenvs.sandbox._leftovers import owned_mkdtemp

        self.root = Path(owned_mkdtemp("agentenvs-grading-"))
        os.chmod(self.root, 0o755)
        self.tests = self.root / "tests"
        self.channel = self.root / "channel"
        self.tests.mkdir()
        self.channel.mkdir()
        for src, dest in pairs:
            rel = dest.lstrip("/").split("/", 1)
            target = self.tests / rel[1] if len(rel) > 1 else self.tests
            if src.is_dir():
                shutil.copytree(src, target, dirs_exist_ok=True, symlinks=False)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, target)
        for d, dirs, files in os.walk(self.root):
            for name in dirs:
                os.chmod(os.path.join(d, name), 0o755)
            for name in files:
                os.chmod(os.path.join(d, name), 0o755 if name.endswith(".sh") else 0o644)
        #: marks the venvs the verifier makes in this grading (never one found in place)
        self.mark = secrets.token_hex(8)
        #: the verifier's HOME inside the session: new, empty, named for this grading
        self.home = f"/tmp/.agentenvs-verifier-{self.mark}"

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def environment(
    stage: Stage,
    *,
    path: str,
    declared: Mapping[str, str],
    agent_home: str,
    layout: str,
    workdir: str,
) -> dict[str, str]:
    """The tests' environment, from nothing: the verifier's commands first on ``path``
    (the image's), a fresh ``HOME``, the image's and task's ``declared`` variables (its
    ``PYTHONPATH`` reaches the verifier's Python as a list of dirs after the standard
    library), and what the verifier itself needs."""
    env = {k: v for k, v in declared.items() if k not in ("PATH", "HOME")}
    env.update(
        {
            "PATH": f"{MOUNT}/bin:{path}",
            "HOME": stage.home,
            "LANG": env.get("LANG", "C.UTF-8"),
            "TERM": "dumb",
            "AGENTENVS_VERIFIER_MARK": stage.mark,
            "AGENTENVS_VERIFIER_INSTALLS": f"{stage.home}/site",
            "AGENTENVS_VERIFIER_PYTHONPATH": declared.get("PYTHONPATH", ""),
            "AGENTENVS_AGENT_HOME": agent_home,
            "AGENTENVS_OFFLINE_LOG": offline.LOG,
            "AGENTENVS_WHEELHOUSE": f"{MOUNT}/wheelhouse",
            "UV_OFFLINE": "1",
            # pip, run by a program of the tests, reads no configuration file at all
            "PIP_CONFIG_FILE": "/dev/null",
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": f"{MOUNT}/wheelhouse",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
    )
    if layout == "tb1":
        env["TEST_DIR"] = "/tests"
    env.setdefault("APP_DIR", workdir)
    return env


def prepare_home(stage: Stage) -> str:
    """A shell command that makes the verifier's HOME (with the uv installer's files
    already in place, pointing at the verifier's commands) and empties the verdict's dir."""
    home = stage.home
    return (
        f"rm -rf {home} && mkdir -p {home}/.local/bin {home}/.cargo {home}/site "
        f"&& ln -s {MOUNT}/bin/uv {home}/.local/bin/uv "
        f"&& ln -s {MOUNT}/bin/uvx {home}/.local/bin/uvx "
        f"&& printf 'export PATH=\"{MOUNT}/bin:{home}/.local/bin:$PATH\"\\n' > {home}/.local/bin/env "
        f"&& cp {home}/.local/bin/env {home}/.cargo/env "
        "&& { [ ! -L /logs ] || rm -f /logs; } "
        "&& { rm -rf /logs/verifier 2>/dev/null; mkdir -p /logs/verifier && chmod 0777 /logs/verifier; }"
    )
