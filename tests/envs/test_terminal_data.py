"""``agentenvs data fetch terminal-bench`` / ``terminal-bench-2``: the registered entries,
and the download path for real against a loopback ``git daemon`` serving a small
repository in each official layout (TB1 ``tasks/<task>/task.yaml``; Harbor task folders
at the top), fetched at its commit and loaded and run by the env."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _git_daemon import serve_git

from agentenvs.data import DATASETS, fetch, register
from agentenvs.data.registry import TERMINAL_BENCH_2_REVISION, TERMINAL_BENCH_REVISION
from agentenvs.envs.terminal.data import load_tasks_report

FIXTURES = Path(__file__).parent / "terminal_fixtures"
REAL = Path(__file__).parent / "terminal_real_fixtures"


def git(*args: str, cwd: Path) -> str:
    env = {
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@localhost",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@localhost",
        "HOME": str(cwd),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def publish(served: Path, name: str, layout: dict[str, Path]) -> str:
    """A bare repository ``name`` under ``served`` holding ``layout`` (repo path -> folder)."""
    src = served.parent / f"src-{name}"
    src.mkdir()
    git("init", "-q", "-b", "main", cwd=src)
    for dest, folder in layout.items():
        shutil.copytree(folder, src / dest)
    git("add", "-A", cwd=src)
    git("commit", "-q", "-m", "tasks", cwd=src)
    commit = git("rev-parse", "HEAD", cwd=src)
    git("clone", "-q", "--bare", str(src), str(served / f"{name}.git"), cwd=served.parent)
    return commit


@pytest.fixture()
def loopback_git(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    served = tmp_path / "served"
    served.mkdir()
    with serve_git(served) as url:
        yield url, served


def test_registered_entries_pin_the_official_commits() -> None:
    tb1, tb2 = DATASETS["terminal-bench"], DATASETS["terminal-bench-2"]
    assert tb1.source.revision == TERMINAL_BENCH_REVISION and tb1.splits == {"core": "tasks"}
    assert tb2.source.revision == TERMINAL_BENCH_2_REVISION and tb2.splits == {"all": "."}
    assert tb1.env_id == tb2.env_id == "agentenvs/TerminalBench-v0"


@pytest.mark.bwrap
def test_fetch_both_layouts_from_loopback_and_run_them(
    loopback_git: tuple[str, Path], tmp_path: Path
) -> None:
    base, served = loopback_git
    tb1_commit = publish(
        served,
        "terminal-bench",
        {
            "tasks/tb1-greeting": FIXTURES / "tb1-greeting",
            "tasks/tb1-venv-sum": REAL / "tb1-venv-sum",
        },
    )
    tb2_commit = publish(
        served,
        "terminal-bench-2",
        {
            "harbor-count": FIXTURES / "harbor-count",
            "harbor-multi-reward": REAL / "harbor-multi-reward",
        },
    )
    added = []
    try:
        for name, commit in (("terminal-bench", tb1_commit), ("terminal-bench-2", tb2_commit)):
            entry = DATASETS[name]
            source = dataclasses.replace(entry.source, url=f"{base}/{name}.git", commit=commit)
            register(dataclasses.replace(entry, name=f"{name}-loopback", source=source))
            added.append(f"{name}-loopback")
        root = tmp_path / "cache"
        tb1 = fetch("terminal-bench-loopback", root=root)
        tb2 = fetch("terminal-bench-2-loopback", root=root)
        assert fetch("terminal-bench-loopback", root=root).path == tb1.path  # cached
        tb1_path = tb1.tasks_path("core")
        tasks, bad = load_tasks_report(tb1_path)
        assert sorted(tasks) == ["tb1-greeting", "tb1-venv-sum"] and not bad
        assert {t.layout for t in tasks.values()} == {"tb1"}
        tasks, bad = load_tasks_report(tb2.tasks_path("all"))
        assert sorted(tasks) == ["harbor-count", "harbor-multi-reward"] and not bad
        assert {t.layout for t in tasks.values()} == {"harbor"}
    finally:
        for name in added:
            DATASETS.pop(name, None)

    import gymnasium as gym

    env = gym.make("agentenvs/TerminalBench-v0", tasks_path=tb1_path, command_timeout=30)
    try:
        env.reset(options={"task_id": "tb1-greeting"})
        env.step(env.unwrapped.oracle_action())
        _, reward, term, _, info = env.step("submit")
        assert term and reward == 1.0 and info["success"]
    finally:
        env.close()
