"""Packaging: a light import, registration without a prior import, tasks inside the wheel."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "docker", "ray", "vllm", "matplotlib", "pymysql", "scipy")


def run_python(code: str, **kwargs) -> str:  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, **kwargs
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_is_light() -> None:
    out = run_python(
        "import sys, json, agentenvs; "
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    assert json.loads(out) == []


def test_make_without_prior_import() -> None:
    out = run_python(
        "import gymnasium as gym; "
        "env = gym.make('agentenvs:agentenvs/FrozenLake-v0'); "
        "obs, info = env.reset(seed=0); print(type(obs).__name__, info['task_id'] is not None)"
    )
    assert out.split() == ["str", "True"]


@pytest.mark.slow
def test_wheel_carries_every_task(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-q", "-w", str(tmp_path / "dist"), str(ROOT)],
        check=True, capture_output=True, timeout=180,
    )
    (wheel,) = (tmp_path / "dist").glob("agentenvs-*.whl")
    shipped = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("agentenvs/_tasks/")}
    expected = {
        "agentenvs/_tasks/" + p.relative_to(ROOT / "tasks").as_posix()
        for p in (ROOT / "tasks").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert expected and expected <= shipped
    assert "agentenvs/py.typed" in zipfile.ZipFile(wheel).namelist()

    # a real, non-editable install into its own folder, imported ahead of the checkout
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
         str(wheel)],
        check=True, capture_output=True, timeout=180,
    )
    code = (
        "import agentenvs, gymnasium as gym\n"
        "from agentenvs.core.tasks import tasks_root\n"
        "root = tasks_root()\n"
        f"assert str(root).startswith({str(target)!r}), root\n"
        "for env_id in agentenvs.registered_ids():\n"
        "    env = gym.make(env_id)\n"
        "    for task_id in env.unwrapped.task_ids:\n"
        "        env.reset(seed=0, options={'task_id': task_id})\n"
        "    env.close()\n"
        "print('ok', root)\n"
    )
    out = run_python(code, cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert out.startswith("ok")
