"""No task data in a sandbox's view, wherever the package is installed.

The local sandbox shows the host's ``/usr`` read-only. A ``pip install`` into a plain
interpreter puts this package, its bundled tasks and every other distribution's data
(BFCL's possible answers, InterCode's gold queries) under ``/usr/local/lib/python3.X`` or
``/usr/lib/python3/dist-packages``. Here the package is installed that way for real: a
prefix is bound at ``/usr/local`` in a mount namespace of an outer ``bwrap`` (as root, a
plain mount namespace; otherwise inside a user namespace), holding

- the package with its bundled tasks (``agentenvs/_tasks``, as a wheel has them), its
  ``.dist-info`` whose RECORD names a data file under ``share/``,
- another distribution carrying a copy of the tasks as package data,
- a ``.pth`` pointing at an editable checkout (under ``/usr/local/src``) with its tasks,
- the data cache (``$AGENTENVS_DATA_DIR``) and a ``tasks_path`` folder of the user's.

Through ``gym.make("agentenvs/DeepCoderMT-v0")`` and ``env.step``, a program that
searches the whole visible file system for the task file and prints the expected output
must score 0 under both rule sets, on both backends (Docker containers get no host
path at all). The same program run outside the sandbox, in that namespace, finds the
answers: the attack works wherever the data is in view.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _services import require_bwrap, require_docker

REPO = Path(__file__).resolve().parents[2]
SITE = f"/usr/local/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
BUNDLED = REPO / "tasks" / "deepcoder"

#: finds the tests in any JSON (JSON-in-JSON too) of any visible data file, and prints
#: the output of the test whose input is this program's stdin, at this position among
#: its task's tests (the cases of one program share /work: the index and a count go
#: there); else raises, naming how many files it read and where it found tests
SEARCH = r"""
import io, json, os, sys
data = sys.stdin.read()
def pairs(obj, depth=0):
    if depth > 8:
        return
    if isinstance(obj, str):
        text = obj.strip()
        if text[:1] in "[{":
            try:
                yield from pairs(json.loads(text), depth + 1)
            except ValueError:
                pass
    elif isinstance(obj, dict):
        if isinstance(obj.get("input"), str) and isinstance(obj.get("output"), str):
            yield obj["input"], obj["output"]
        for value in obj.values():
            yield from pairs(value, depth + 1)
    elif isinstance(obj, list):
        for value in obj:
            yield from pairs(value, depth + 1)
def files():
    # iterative, depth-bounded, never following links: whatever else the host keeps
    # under the trees the sandbox shows (a very deep tree, an unreadable folder) is passed
    # over, never an error of the search; task data sits a few levels down
    stack = [("/", 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth < 32 and entry.path not in ("/proc", "/sys", "/dev"):
                        stack.append((entry.path, depth + 1))
                elif entry.is_file(follow_symlinks=False):
                    if entry.name.endswith((".jsonl", ".json", ".txt")):
                        yield entry.path
            except OSError:
                continue
def search():
    index, read, where = {}, 0, set()
    for path in files():
        try:
            if os.path.getsize(path) > 64 << 20:
                continue
            with io.open(path, "rb") as f:
                raw = f.read()
        except OSError:
            continue
        read += 1
        for line in raw.decode("utf-8", "replace").splitlines() or [""]:
            for k, (i, o) in enumerate(pairs(line)):
                index.setdefault(i, []).append([k, o])
                where.add(path)
    return index, read, sorted(where)
try:
    with io.open("/work/.index.json") as f:
        index, read, where, count = json.load(f)
except (OSError, ValueError):
    (index, read, where), count = search(), 0
try:
    with io.open("/work/.index.json", "w") as f:
        json.dump([index, read, where, count + 1], f)
except OSError:
    pass
if data in index:
    found = index[data]
    sys.stdout.write(next((o for k, o in found if k == count), found[0][1]))
else:
    raise RuntimeError(f"no task data among {read} files; tests found in {where}")
"""

#: run in the namespace where the package sits under /usr/local: the env on the bundled
#: tasks and on the user's copy, under both rules; the sandbox's view of the install
INNER = textwrap.dedent(
    """
    import json, os, sys
    import gymnasium as gym
    import agentenvs
    from agentenvs.sandbox.local import LocalSandbox
    site, tasks, rules_list, program = sys.argv[1], sys.argv[2:-2], sys.argv[-2], sys.argv[-1]
    out = {"package": agentenvs.__file__, "episodes": []}
    for tasks_path in tasks:
        for rules in rules_list.split(","):
            kw = {} if tasks_path == "-" else {"tasks_path": tasks_path}
            env = gym.make("agentenvs/DeepCoderMT-v0", sandbox="local", rules=rules,
                           timeout_per_test=120.0, public_tests=1, **kw)
            coder = env.unwrapped
            task_ids = [t for t in coder.task_ids if coder.task_set.tasks[t].func_name is None]
            for task_id in task_ids[:2]:
                env.reset(options={"task_id": task_id})
                obs, reward, *_ , info = env.step("```python\\n" + program + "\\n```")
                out["episodes"].append({"tasks": tasks_path, "rules": rules, "task": task_id,
                                        "reward": reward, "obs": obs[-600:]})
            env.close()
    probe = '''
    import os, sys
    seen = {}
    for p in sys.argv[1:]:
        try:
            seen[p] = sorted(os.listdir(p)) if os.path.isdir(p) else os.path.getsize(p)
        except OSError:
            seen[p] = None
    print(repr(seen))
    '''
    with LocalSandbox() as box:
        paths = [site, site + "/agentenvs", "/usr/local/share/agentenvs-demo",
                 "/usr/local/share/agentenvs-cache", "/usr/local/share/user-tasks",
                 "/usr/local/src/agentenvs-checkout"]
        run = box.run(["python3", "-c", probe, *paths], timeout=60)
        out["view"] = run.stdout + run.stderr
    print("RESULT " + json.dumps(out))
    """
)


def _copy_tasks(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("problems.jsonl", "wrong_solutions.jsonl"):
        shutil.copy2(BUNDLED / name, dest / name)


def _make_prefix(root: Path) -> Path:
    """A /usr/local tree: the package installed into site-packages as a wheel would put it,
    other installs' copies of the tasks, an editable pointer, a data cache, user tasks."""
    prefix = root / "prefix"
    site = prefix / SITE.removeprefix("/usr/local/")
    shutil.copytree(
        REPO / "agentenvs", site / "agentenvs", ignore=shutil.ignore_patterns("__pycache__")
    )
    _copy_tasks(site / "agentenvs" / "_tasks" / "deepcoder")
    info = site / "agentenvs-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agentenvs\nVersion: 0.1.0\n")
    (info / "RECORD").write_text(
        "agentenvs/__init__.py,,\n../../../share/agentenvs-demo/problems.jsonl,,\n"
    )
    _copy_tasks(prefix / "share" / "agentenvs-demo")
    _copy_tasks(site / "deepcoder_answers" / "data")  # another distribution's package data
    _copy_tasks(prefix / "src" / "agentenvs-checkout" / "tasks" / "deepcoder")
    (site / "agentenvs_checkout.pth").write_text("/usr/local/src/agentenvs-checkout\n")
    _copy_tasks(prefix / "share" / "agentenvs-cache" / "deepcoder")
    _copy_tasks(prefix / "share" / "user-tasks")
    for d, _, files in os.walk(root):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    return prefix


def _in_namespace(
    prefix: Path, argv: list[str], timeout: float, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """``argv`` run where ``prefix`` is ``/usr/local`` (the rest of the host as it is)."""
    from agentenvs.sandbox.local import find_bwrap

    bwrap = find_bwrap()
    assert bwrap is not None
    outer = [bwrap, "--dev-bind", "/", "/", "--bind", str(prefix), "/usr/local", "--"]
    if os.geteuid() != 0:  # an unprivileged user: a user namespace of its own first
        outer = [bwrap, "--unshare-user", *outer[1:]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENVS_TASKS")}
    env["PYTHONPATH"] = SITE  # the /usr/local install comes first, before any other
    env["AGENTENVS_DATA_DIR"] = "/usr/local/share/agentenvs-cache"
    return subprocess.run(
        [*outer, *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd="/",  # not a checkout: `python -c` puts the current dir first on sys.path
    )


@pytest.mark.bwrap
@pytest.mark.slow
def test_a_system_wide_install_shows_no_task_data(tmp_path: Path) -> None:
    require_bwrap()
    os.chmod(tmp_path, 0o755)
    prefix = _make_prefix(tmp_path)
    # the attack works where the data is in view: outside the sandbox, in that namespace
    task = json.loads((BUNDLED / "problems.jsonl").read_text().splitlines()[0])
    first = json.loads(task["tests"])[-1]
    direct = _in_namespace(prefix, [sys.executable, "-c", SEARCH], 600, stdin=first["input"])
    assert direct.returncode == 0 and direct.stdout == first["output"], direct.stderr[-2000:]

    # the user's tasks first: from then on no sandbox of the process shows them
    argv = [sys.executable, "-c", INNER, SITE, "/usr/local/share/user-tasks/problems.jsonl", "-"]
    out = _in_namespace(prefix, [*argv, "strict,official", SEARCH], 1800)
    lines = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, out.stdout[-3000:] + out.stderr[-3000:]
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    assert result["package"].startswith(SITE + "/agentenvs/")  # the /usr/local install ran
    assert len(result["episodes"]) == 8
    for episode in result["episodes"]:
        assert episode["reward"] == 0.0, episode
        if episode["rules"] == "strict":  # the program searched, and found nothing
            assert "no task data among" in episode["obs"] and "found in []" in episode["obs"]
    # what the sandbox shows of the install: empty dirs where installs and data were
    view = ast.literal_eval(result["view"].strip())
    assert view[SITE] == [] and view[SITE + "/agentenvs"] is None, view
    for path in list(view)[2:]:
        assert view[path] in ([], None), (path, view[path])


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("rules", ["strict", "official"])
def test_docker_containers_get_no_task_data(rules: str) -> None:
    """A container holds the image only: the search finds no test of any task in it."""
    require_docker()
    import gymnasium as gym

    env = gym.make(
        "agentenvs/DeepCoderMT-v0", sandbox="docker", rules=rules, timeout_per_test=120.0,
        public_tests=1,
    )  # fmt: skip
    try:
        coder: Any = env.unwrapped
        task_id = next(t for t in coder.task_ids if coder.task_set.tasks[t].func_name is None)
        env.reset(options={"task_id": task_id})
        obs, reward, *_ = env.step(f"```python\n{SEARCH}\n```")
        assert reward == 0.0
        if rules == "strict":
            assert "no task data among" in obs and "found in []" in obs, obs
    finally:
        env.close()
